"""The compiled event loop's ``Poller`` (engine/_pump_loop.c) over real sockets.

Over socket pairs and loopback TCP, no server: a read reaches the reader, or the compiled
pump in C (its requests written by the poller, never by the pump's ``write``, the pump's
own closed loop sending the next ones); a send the socket cannot take whole is finished
in order when it can; a connection's end (the peer's close, a reset) is closed here and
reported once with its errno; a closed or stale handle does nothing. ``make sanitize``
runs these under AddressSanitizer.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

from kvbench.engine import fastpath
from kvbench.protocols.base import Op
from tests.support import pump_oracle

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

pytestmark = pytest.mark.unit

TEXT, FAMILIES = fastpath.PROTOCOLS["memcache-text"]


def poll_until(poller: _pump.Poller, condition: Callable[[], bool], what: str) -> None:
    """Poll until ``condition`` holds (a generous deadline: a loaded machine)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"waited 10 s for {what}"
        poller.poll()


def recv_exactly(sock: socket.socket, n: int, poller: _pump.Poller | None = None) -> bytes:
    sock.setblocking(False)
    data = b""
    deadline = time.monotonic() + 10
    while len(data) < n:
        assert time.monotonic() < deadline, f"read {len(data)} of {n} bytes"
        if poller is not None:
            poller.poll()
        try:
            data += sock.recv(n - len(data))
        except BlockingIOError:
            time.sleep(0.001)
    return data


class Ends:
    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def __call__(self, handle: int, err: int) -> None:
        self.seen.append((handle, err))


def owned_pair(
    poller: _pump.Poller, reader: Callable[[bytes], object]
) -> tuple[int, socket.socket]:
    """A socket pair: one end the poller's (its handle), the other the test's."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    return poller.add(ours.detach(), reader), theirs


def gets(n: int) -> Callable[[], tuple[list[int], list[bytes], list[bytes], int] | None]:
    """A stream's refill: one chunk of ``n`` gets of k0, k1, ..."""
    chunks = [([int(Op.GET)] * n, [b"k%d" % i for i in range(n)], [b""] * n, 0)]
    return lambda: chunks.pop() if chunks else None


def test_reads_go_to_the_reader_and_writes_to_the_socket() -> None:
    poller = _pump.Poller(Ends())
    reads: list[bytes] = []
    handle, theirs = owned_pair(poller, reads.append)
    with theirs:
        theirs.sendall(b"hello")
        poll_until(poller, lambda: reads == [b"hello"], "the read")
        poller.write(handle, b"world")
        assert recv_exactly(theirs, 5) == b"world"
        assert poller.live == 1
    poller.shutdown()


def test_a_pump_reads_and_sends_in_c_never_through_its_write() -> None:
    poller = _pump.Poller(Ends())
    handle, theirs = owned_pair(poller, lambda data: pytest.fail(f"reader got {data!r}"))
    tally = _pump.Tally()
    tally.issuing = True
    writes: list[bytes] = []
    pump = _pump.Pump(tally, _pump.Stream(gets(4), TEXT), writes.append, TEXT, FAMILIES, 1 << 20)
    poller.set_pump(handle, pump)
    with theirs:
        assert pump.issue(2) == 0
        assert recv_exactly(theirs, 16) == b"get k0\r\nget k1\r\n"
        theirs.sendall(b"END\r\nEN")  # a reply and a half: the half is kept
        assert recv_exactly(theirs, 8, poller) == b"get k2\r\n"  # one answered: one sent
        theirs.sendall(b"D\r\n")
        assert recv_exactly(theirs, 8, poller) == b"get k3\r\n"
        assert pump.inflight == 2
    assert writes == []
    ops, codes, _ = tally.take()
    assert list(memoryview(codes).cast("q")) == [2, 2]  # two misses
    assert len(ops) == 16
    poller.shutdown()


def test_overdue_names_the_pumps_whose_oldest_request_was_sent_by_then_and_every_reader() -> None:
    poller = _pump.Poller(Ends())
    idle, idle_peer = owned_pair(poller, lambda data: None)  # a pump with nothing in flight
    busy, busy_peer = owned_pair(poller, lambda data: None)
    reader, reader_peer = owned_pair(poller, lambda data: None)  # Python reads it
    closed, closed_peer = owned_pair(poller, lambda data: None)
    tally = _pump.Tally()
    tally.issuing = True
    pumps = [
        _pump.Pump(tally, _pump.Stream(gets(4), TEXT), None, TEXT, FAMILIES, 1 << 20)
        for _ in range(2)
    ]
    poller.set_pump(idle, pumps[0])
    poller.set_pump(busy, pumps[1])
    poller.close(closed)
    with idle_peer, busy_peer, reader_peer, closed_peer:
        before = time.monotonic_ns()  # the pumps' clock (clock.py: CLOCK_MONOTONIC)
        assert pumps[1].issue(2) == 0
        recv_exactly(busy_peer, 16)
        sent = pumps[1].oldest_sent_ns()
        assert sent is not None and sent >= before
        assert poller.overdue(sent - 1) == [reader]  # sent after that: not late yet
        assert poller.overdue(sent) == [busy, reader]
        busy_peer.sendall(b"END\r\nEND\r\n")  # both answered: the next two sent later
        poll_until(poller, lambda: pumps[1].oldest_sent_ns() != sent, "the replies")
        assert poller.overdue(sent) == [reader]
    poller.shutdown()
    with pytest.raises(ValueError):
        poller.overdue(0)


def test_a_pump_status_goes_to_its_on_stopped() -> None:
    poller = _pump.Poller(Ends())
    handle, theirs = owned_pair(poller, lambda data: None)
    tally = _pump.Tally()
    tally.issuing = True
    stopped: list[int] = []
    pump = _pump.Pump(tally, _pump.Stream(gets(1), TEXT), None, TEXT, FAMILIES, 1 << 20)
    pump.on_stopped = stopped.append
    poller.set_pump(handle, pump)
    with theirs:
        pump.issue(1)
        recv_exactly(theirs, 8)
        theirs.sendall(b"NONSENSE\r\n")
        poll_until(poller, lambda: stopped == [2], "the protocol error")
        assert "NONSENSE" in str(pump.error)
    poller.shutdown()


def test_a_send_the_socket_cannot_take_is_finished_in_order() -> None:
    poller = _pump.Poller(Ends())
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ours.setblocking(False)
    handle = poller.add(ours.detach(), lambda data: None)
    payload = bytes(range(256)) * 4096  # 1 MiB: far more than the buffers hold
    with theirs:
        poller.write(handle, payload[:1000])
        poller.write(handle, payload[1000:])  # behind a tail: queued after it
        assert recv_exactly(theirs, len(payload), poller) == payload
    poller.shutdown()


def test_the_peers_close_ends_the_connection_once() -> None:
    ends = Ends()
    poller = _pump.Poller(ends)
    reads: list[bytes] = []
    handle, theirs = owned_pair(poller, reads.append)
    theirs.sendall(b"last words")
    theirs.close()
    poll_until(poller, lambda: ends.seen != [], "the end")
    assert reads == [b"last words"]  # read before the end is told
    assert ends.seen == [(handle, 0)]
    assert poller.live == 0
    poller.poll()
    poller.write(handle, b"x")  # a stale handle: nothing
    poller.set_pump(handle, None)
    poller.close(handle)
    assert ends.seen == [(handle, 0)]
    poller.shutdown()


def test_a_reset_ends_the_connection_with_its_errno() -> None:
    ends = Ends()
    poller = _pump.Poller(ends)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        ours = socket.create_connection(listener.getsockname())
        theirs, _ = listener.accept()
    ours.setblocking(False)
    handle = poller.add(ours.detach(), lambda data: None)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    theirs.close()  # linger 0: a reset
    poll_until(poller, lambda: ends.seen != [], "the end")
    assert ends.seen == [(handle, errno.ECONNRESET)]
    poller.shutdown()


def test_closing_here_tells_no_one_and_frees_the_slot_for_a_new_handle() -> None:
    ends = Ends()
    poller = _pump.Poller(ends)
    handle, theirs = owned_pair(poller, lambda data: None)
    poller.close(handle)
    with theirs:
        assert theirs.recv(1) == b""  # closed: the peer reads its end
    again, other = owned_pair(poller, lambda data: None)
    assert again != handle  # the same slot, another generation
    poller.close(handle)  # the old handle names nothing now
    assert poller.live == 1
    poller.poll()
    assert ends.seen == []
    other.close()
    poller.shutdown()


def test_a_callback_that_raises_stops_the_poll_and_is_raised() -> None:
    poller = _pump.Poller(Ends())

    def reader(data: bytes) -> None:
        raise ValueError("from the reader")

    _, theirs = owned_pair(poller, reader)
    with theirs:
        theirs.sendall(b"x")
        with pytest.raises(ValueError, match="from the reader"):
            poll_until(poller, lambda: False, "the exception")
    poller.shutdown()


def test_poll_refuses_to_be_called_from_its_own_callback() -> None:
    poller = _pump.Poller(Ends())
    _, theirs = owned_pair(poller, lambda data: poller.poll())
    with theirs:
        theirs.sendall(b"x")
        with pytest.raises(RuntimeError, match="reentrant"):
            poll_until(poller, lambda: False, "the refusal")
    poller.shutdown()


def test_a_pump_sends_on_one_connection_only() -> None:
    poller = _pump.Poller(Ends())
    first, a = owned_pair(poller, lambda data: None)
    second, b = owned_pair(poller, lambda data: None)
    pump = _pump.Pump(_pump.Tally(), _pump.Stream(gets(1), TEXT), None, TEXT, FAMILIES, 1 << 20)
    poller.set_pump(first, pump)
    with pytest.raises(RuntimeError, match="another connection"):
        poller.set_pump(second, pump)
    with pytest.raises(TypeError, match="must be a Pump"):
        poller.set_pump(second, object())
    a.close()
    b.close()
    poller.shutdown()


def test_shutdown_closes_every_socket() -> None:
    poller = _pump.Poller(Ends())
    _, theirs = owned_pair(poller, lambda data: None)
    epfd = poller.fileno()
    poller.shutdown()
    with theirs:
        assert theirs.recv(1) == b""
    with pytest.raises(ValueError, match="closed"):
        poller.poll()
    with pytest.raises(OSError):
        os.fstat(epfd)


def wake_pair() -> tuple[int, int]:
    """A pipe: its read end the poller's wake fd (as the event loop's selector's is)."""
    r, w = os.pipe()
    return r, w


def test_wait_serves_the_connections_in_c_until_the_wake_fd_is_readable() -> None:
    """Replies answered and requests sent again, batch after batch, in one wait: no
    return to Python until the wake fd says the event loop has something to do."""
    poller = _pump.Poller(Ends())
    handle, theirs = owned_pair(poller, lambda data: pytest.fail(f"reader got {data!r}"))
    wake, wake_w = wake_pair()
    poller.wake_on(wake)
    tally = _pump.Tally()
    tally.issuing = True
    pump = _pump.Pump(tally, _pump.Stream(gets(64), TEXT), None, TEXT, FAMILIES, 1 << 20)
    poller.set_pump(handle, pump)
    answers = 40

    def peer() -> None:  # answers each get as it comes, 40 in all, then wakes the loop
        theirs.setblocking(True)
        pending = b""
        for _ in range(answers):
            while b"\r\n" not in pending:
                pending += theirs.recv(4096)
            pending = pending[pending.index(b"\r\n") + 2 :]
            theirs.sendall(b"END\r\n")
        os.write(wake_w, b"!")

    with theirs:
        assert pump.issue(1) == 0
        thread = threading.Thread(target=peer)
        thread.start()
        events = poller.wait(60_000)
        thread.join(30)
        _, codes, _ = tally.take()
        assert len(codes) // 8 == answers  # every answer taken inside the one wait
        assert events > 1  # (more than one epoll_wait's worth: it waited on in C)
    poller.shutdown()
    os.close(wake)
    os.close(wake_w)


def test_wait_returns_after_a_call_into_python() -> None:
    """A reader's call (as a refill's, a cut's, an end's) ends the wait after its batch:
    what the callback scheduled is the event loop's to run."""
    poller = _pump.Poller(Ends())
    reads: list[bytes] = []
    _, theirs = owned_pair(poller, reads.append)
    wake, wake_w = wake_pair()
    poller.wake_on(wake)
    # Should the wait not end, this ends it after 30 s, and the count says so.
    backstop = threading.Timer(30, os.write, (wake_w, b"!"))
    backstop.start()
    with theirs:
        theirs.sendall(b"x")
        assert poller.wait(60_000) == 1  # the read alone, not the backstop's wake
        assert reads == [b"x"]
    backstop.cancel()
    poller.shutdown()
    os.close(wake)
    os.close(wake_w)


def test_wait_times_out_and_zero_does_not_wait() -> None:
    poller = _pump.Poller(Ends())
    assert poller.wait(0) == 0
    assert poller.wait(5) == 0  # nothing ready: back at the timeout
    with pytest.raises(ValueError, match="timeout_ms"):
        poller.wait(-2)
    wake, wake_w = wake_pair()
    poller.wake_on(wake)
    os.write(wake_w, b"!")
    assert poller.wait(-1) == 1  # no limit, but the wake fd is readable
    poller.wake_on(-1)  # no longer watched
    assert poller.wait(0) == 0
    poller.shutdown()
    with pytest.raises(ValueError, match="closed"):
        poller.wait(0)
    os.close(wake)
    os.close(wake_w)


def test_a_callback_that_raises_in_a_wait_is_raised() -> None:
    poller = _pump.Poller(Ends())

    def reader(data: bytes) -> None:
        raise ValueError("from the reader")

    _, theirs = owned_pair(poller, reader)
    with theirs:
        theirs.sendall(b"x")
        with pytest.raises(ValueError, match="from the reader"):
            poller.wait(60_000)
    poller.shutdown()


# -- ticks: the loop's hiccups, measured in C ----------------------------------------------


def wait_readable(poller: _pump.Poller) -> None:
    """Block until the poller's epoll fd is readable (a tick due), as the event loop does."""
    import select

    ready, _, _ = select.select([poller.fileno()], [], [], 10)
    assert ready, "the poller's fd was not readable within 10 s"


def test_ticks_record_how_late_each_poll_woke_and_sample_the_requests_in_flight() -> None:
    poller = _pump.Poller()
    tally = _pump.Tally(fold=True)
    poller.start_ticks(tally, 1_000_000, 3)
    polls = 0
    while poller.ticks < 9:  # (each tick read by a poll that found the timer expired)
        assert polls < 10_000
        wait_readable(poller)
        assert poller.poll() >= 0
        polls += 1
    _, _, _, hiccups, inflight_sum, samples = tally.take_folded()
    assert hiccups is not None
    _, _, total, low, _, _, out_of_range = hiccups
    assert total == poller.ticks == 9 and low >= 0 and out_of_range == 0
    assert samples == 3 and inflight_sum == 0  # every 3rd tick; nothing in flight
    assert tally.take_folded()[3] is None  # (taken: the next interval starts empty)
    poller.stop_ticks()
    assert poller.ticks == 9
    poller.shutdown()


def test_a_stalled_loop_is_one_hiccup_as_long_as_the_stall() -> None:
    """The loop does not poll for 20 ms: the poll after finds some 20 expiries, and
    records one hiccup, at least as late as the first expiry it missed (1 ms in)."""
    poller = _pump.Poller()
    tally = _pump.Tally()  # (ticks go to any tally, folding or not)
    poller.start_ticks(tally, 1_000_000, 10)
    start = time.monotonic_ns()
    time.sleep(0.02)  # the stall measured (not a wait for anything)
    stalled = time.monotonic_ns() - start
    poller.poll()
    hiccups = tally.take_folded()[3]
    assert hiccups is not None and poller.ticks == 1
    _, _, total, _, high, _, _ = hiccups
    assert total == 1 and high >= stalled - 1_000_000
    poller.shutdown()
    assert poller.ticks == 1


def test_ticks_refuse_what_is_not_a_tally_or_a_period() -> None:
    poller = _pump.Poller()
    with pytest.raises(TypeError, match="Tally"):
        poller.start_ticks(object(), 1_000_000, 10)
    with pytest.raises(ValueError, match="positive"):
        poller.start_ticks(_pump.Tally(), 0, 10)
    poller.stop_ticks()  # (none: nothing)
    poller.shutdown()
    with pytest.raises(ValueError, match="closed"):
        poller.start_ticks(_pump.Tally(), 1_000_000, 10)


def test_a_busy_poll_finds_what_arrives_and_keeps_to_the_wait_limit() -> None:
    """With ``busy_poll_ns`` the wait polls before it sleeps: a read that is there is
    served as before, and with nothing ready it still returns at its timeout."""
    poller = _pump.Poller(Ends())
    assert poller.busy_poll_ns == 0
    poller.busy_poll_ns = 50_000_000  # longer than the wait: the wait's limit bounds it
    reads: list[bytes] = []
    _, theirs = owned_pair(poller, reads.append)
    with theirs:
        assert poller.wait(5) == 0  # nothing ready: back (polled 5 ms, not 50)
        theirs.sendall(b"x")
        assert poller.wait(60_000) == 1 and reads == [b"x"]
    poller.shutdown()
