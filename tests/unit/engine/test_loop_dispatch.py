"""The open loop's schedule run by the compiled event loop's ``Poller`` (engine/_pump_loop.c,
engine/loop_dispatch.py), held to the Python dispatcher (engine/open_loop.py).

Over socket pairs, no server: for a seed, each connection is handed the same intended
times by the poller as by the Python dispatcher (uniform and Poisson, across the feeds'
boundaries); a connection that is down is skipped; a backlog beyond max_lag is dropped by
the Python dispatcher's own code, and the poller sends on from after it; the schedule is
serviced before the sockets of a poll, and between them once it is due; a failure stops
it and reaches ``on_stop``. ``make sanitize`` runs these under AddressSanitizer.
"""

from __future__ import annotations

import asyncio
import socket
import time
from array import array
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from kvbench.config import load_config
from kvbench.engine import fastpath
from kvbench.engine.open_loop import OpenLoopDispatcher
from kvbench.engine.pacing import Schedule
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.metrics.outcome import Outcome
from kvbench.protocols.base import Op
from tests.support import pump_oracle

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]
from kvbench.engine.loop_dispatch import LoopDispatcher

pytestmark = pytest.mark.unit

TEXT, FAMILIES = fastpath.PROTOCOLS["memcache-text"]
S = 1_000_000_000
MS = 1_000_000


def gets(n: int) -> Callable[[], tuple[list[int], list[bytes], list[bytes], int] | None]:
    """A stream's refill: gets of k0, k1, ..., ``n`` at a time, for ever."""

    def refill() -> tuple[list[int], list[bytes], list[bytes], int]:
        return [int(Op.GET)] * n, [b"k%d" % i for i in range(n)], [b""] * n, 0

    return refill


class Lanes:
    """``count`` connections whose sockets the poller owns, each with an open loop's pump."""

    def __init__(self, poller: _pump.Poller, tally: _pump.Tally, count: int, pipeline: int):
        self.theirs: list[socket.socket] = []
        self.conns: list[Any] = []
        stream = _pump.Stream(gets(1024), TEXT)
        for _ in range(count):
            ours, theirs = socket.socketpair()
            ours.setblocking(False)
            theirs.setblocking(False)
            handle = poller.add(ours.detach(), lambda data: None)
            pump = _pump.Pump(tally, stream, pytest.fail, TEXT, FAMILIES, 1 << 20, open_loop=True)
            poller.set_pump(handle, pump)
            self.theirs.append(theirs)
            self.conns.append(
                SimpleNamespace(pump=pump, connected=True, transport_open=True, pipeline=pipeline)
            )

    def close(self) -> None:
        for sock in self.theirs:
            sock.close()

    def intended(self) -> list[list[int]]:
        """Each connection's requests' intended times, in order (all sent in one write:
        one send time, the oldest's, less how far behind each was sent)."""
        out = []
        for conn in self.conns:
            sent = conn.pump.oldest_sent_ns()
            if sent is None:
                out.append([])
                continue
            _, late_by = conn.pump.expire(sent, 0)
            out.append([sent - behind for behind in memoryview(late_by).cast("q")])
        return out


class Reference:
    """A connection of the Python dispatcher: what it was handed."""

    connected = True

    def __init__(self, pipeline: int) -> None:
        self.pipeline = pipeline
        self.inflight = 0
        self.intended: list[int] = []

    def issue_scheduled(self, intended_ns: list[int], now: int) -> None:
        self.intended += intended_ns
        self.inflight += len(intended_ns)


def host() -> Any:
    return SimpleNamespace(maybe_finished=lambda: None, pumps=None)


def driver(poller: _pump.Poller) -> Any:
    """A LoopDriver's part the dispatcher uses (the test watches the poller itself)."""
    return SimpleNamespace(poller=poller, start=lambda: None, closed=False)


async def run_until(dispatcher: LoopDispatcher, poller: _pump.Poller, stop: Callable[[], bool]):
    """Run the dispatcher with the poller on this loop until ``stop()`` (10 s at most)."""
    loop = asyncio.get_running_loop()
    loop.add_reader(poller.fileno(), poller.poll)
    task = asyncio.create_task(dispatcher.run())
    try:
        deadline = time.monotonic() + 10
        while not stop():
            assert time.monotonic() < deadline, "waited 10 s"
            await asyncio.sleep(0.001)
        await asyncio.wait_for(task, 10)
    finally:
        loop.remove_reader(poller.fileno())
        task.cancel()


@pytest.mark.parametrize("arrival", ["uniform", "poisson"])
def test_each_connection_gets_the_python_dispatchers_intended_times(arrival: str) -> None:
    """10,000 requests all due at once (a budget ends the phase), over 3 connections of
    pipeline 4,000: the poller hands each the same times, in the same order, as the Python
    dispatcher hands its connections, through feeds of 4,096 times."""
    start = time.monotonic_ns() - S // 2
    budget, pipeline = 10_000, 4_000

    reference_tally = _pump.Tally()
    reference_tally.budget = budget
    refs = [Reference(pipeline) for _ in range(3)]
    python = OpenLoopDispatcher(
        host(), reference_tally, None, refs, [], Schedule(50_000, start, arrival, 3), 10 * S
    )  # type: ignore[arg-type]
    python.dispatch(time.monotonic_ns())
    assert reference_tally.budget == 0

    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    tally.budget = budget
    lanes = Lanes(poller, tally, 3, pipeline)
    schedule = Schedule(50_000, start, arrival, 3)
    dispatcher = LoopDispatcher(
        host(), tally, None, lanes.conns, [], schedule, 10 * S, driver(poller)
    )  # type: ignore[arg-type]
    try:
        asyncio.run(run_until(dispatcher, poller, lambda: tally.budget == 0))
        assert lanes.intended() == [ref.intended for ref in refs]
        assert [len(ref.intended) for ref in refs] == [4000, 4000, 2000]
        assert dispatcher.next_index == budget and not poller.scheduling
        _, lag, _, sent = tally.take_open()
        assert sent == budget and len(lag) == 8 * budget
    finally:
        lanes.close()
        poller.shutdown()


def test_a_connection_that_is_down_is_skipped_until_it_is_back() -> None:
    start = time.monotonic_ns() - S // 10
    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    tally.budget = 30
    lanes = Lanes(poller, tally, 3, 10)
    lanes.conns[1].connected = False
    dispatcher = LoopDispatcher(
        host(), tally, None, lanes.conns, [], Schedule(1000, start), 10 * S, driver(poller)
    )  # type: ignore[arg-type]

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.add_reader(poller.fileno(), poller.poll)
        task = asyncio.create_task(dispatcher.run())
        try:
            deadline = time.monotonic() + 10
            while tally.budget > 10:  # 20 sent: both connections up are full
                assert time.monotonic() < deadline
                await asyncio.sleep(0.001)
            assert [c.pump.inflight for c in lanes.conns] == [10, 0, 10]
            lanes.conns[1].connected = True
            dispatcher.lane_changed(lanes.conns[1])
            await asyncio.wait_for(task, 10)
        finally:
            loop.remove_reader(poller.fileno())
            task.cancel()

    try:
        asyncio.run(scenario())
        assert [c.pump.inflight for c in lanes.conns] == [10, 10, 10]
        assert all(c.on_lane is None for c in lanes.conns)  # let go at the end
    finally:
        lanes.close()
        poller.shutdown()


def _worker() -> Worker:
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1", "memcached://127.0.0.2:1"], "T"),
            "load.rate": ("1000", "--rate"),
            "workload.seed": (5, "--seed"),
        },
        1,
    )
    return Worker(WorkerSpec(config, 0, 1, 2, None), lambda snap: None)


def test_a_backlog_beyond_max_lag_is_dropped_as_the_python_dispatcher_drops_it() -> None:
    """The poller asks Python (``on_behind``): the same requests are dropped, counted by op
    and taken from the servers' sources as the Python dispatcher does, and the first one
    sent is the first one within max_lag."""
    now = time.monotonic_ns()
    start = now - 2 * S  # at 1000/s: ~2,000 due, the first ~1,900 beyond 100 ms
    python_worker, loop_worker = _worker(), _worker()
    python = OpenLoopDispatcher(
        python_worker,
        python_worker.tally,
        python_worker.recorder,
        [],
        python_worker.shards,
        Schedule(1000, start),
        100 * MS,
    )
    route = python.routes[0]
    stop = python._drop_behind(route, now, python._due(route, now))
    dropped = route.next_index

    poller = _pump.Poller()
    tally = loop_worker.tally
    tally.issuing = True
    lanes = Lanes(poller, tally, 1, 1_000_000)
    dispatcher = LoopDispatcher(
        loop_worker,
        tally,  # type: ignore[arg-type]
        loop_worker.recorder,
        lanes.conns,
        loop_worker.shards,
        Schedule(1000, start),
        100 * MS,
        driver(poller),
    )
    assert dispatcher._behind(now, 0) == (dropped, stop)
    assert 1800 < dropped < 2000 and not stop
    counts = [row[int(Outcome.DROPPED)] for row in loop_worker.recorder.counts]
    assert counts == [row[int(Outcome.DROPPED)] for row in python_worker.recorder.counts]
    assert [s.cursor.pos for s in loop_worker.shards] == [
        s.cursor.pos for s in python_worker.shards
    ]
    lanes.close()
    poller.shutdown()


def test_the_poller_sends_on_from_after_what_on_behind_dropped() -> None:
    start = time.monotonic_ns() - S
    schedule = Schedule(1000, start)
    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    tally.budget = 5
    lanes = Lanes(poller, tally, 1, 100)
    stopped: list[BaseException | None] = []
    behind: list[int] = []

    def on_behind(now: int, next_index: int) -> tuple[int, bool]:
        behind.append(next_index)
        return 7, False  # (the budget is the test's: nothing takes it here)

    def feed(first: int, count: int) -> bytes:
        return array("q", schedule.intended_range(first, first + count)).tobytes()

    poller.schedule(tally, 1, feed, on_behind, stopped.append, 10 * MS, 100_000, MS)
    poller.set_lane(0, lanes.conns[0].pump, 100)
    try:
        deadline = time.monotonic() + 10
        while not stopped:
            assert time.monotonic() < deadline
            poller.poll()
        assert stopped == [None] and behind == [0]
        assert lanes.intended() == [schedule.intended_range(7, 12)]
        assert poller.scheduled == 12
    finally:
        lanes.close()
        poller.shutdown()


def test_the_schedule_goes_before_the_sockets_and_between_them_once_due() -> None:
    """A poll with two readable sockets: the due send goes before either is read; then the
    first reader holds the poll until the next send is due, and it goes before the
    second socket is read."""
    now = time.monotonic_ns()
    schedule = Schedule(1000, now - 5 * MS)  # one due every ms; ~6 due now
    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    lanes = Lanes(poller, tally, 1, 1000)
    seen: list[int] = []

    def reader(data: bytes) -> None:
        seen.append(poller.scheduled)
        if len(seen) == 1:  # hold the poll until the next request is due (and a period)
            until = schedule.intended_ns(poller.scheduled) + 200_000
            while time.monotonic_ns() < until:
                pass

    pairs = [socket.socketpair() for _ in range(2)]
    for ours, _ in pairs:
        ours.setblocking(False)
        poller.add(ours.detach(), reader)

    def feed(first: int, count: int) -> bytes:
        return array("q", schedule.intended_range(first, first + count)).tobytes()

    poller.schedule(tally, 1, feed, lambda now, i: (0, False), lambda exc: None, S, 100_000, MS)
    poller.set_lane(0, lanes.conns[0].pump, 1000)
    try:
        for _, theirs in pairs:
            theirs.sendall(b"x")
        deadline = time.monotonic() + 10
        while len(seen) < 2:
            assert time.monotonic() < deadline
            poller.poll()
        assert seen[0] >= 6 and seen[1] > seen[0]
    finally:
        for _, theirs in pairs:
            theirs.close()
        lanes.close()
        poller.shutdown()


def test_a_feed_that_raises_stops_the_schedule_and_reaches_on_stop() -> None:
    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    stopped: list[BaseException | None] = []

    def feed(first: int, count: int) -> bytes:
        raise RuntimeError("no times")

    poller.schedule(tally, 0, feed, lambda now, i: (0, False), stopped.append, S, 100_000, MS)
    deadline = time.monotonic() + 10
    while not stopped:
        assert time.monotonic() < deadline
        poller.poll()
    assert isinstance(stopped[0], RuntimeError) and str(stopped[0]) == "no times"
    assert not poller.scheduling
    poller.poll()  # the stopped timer is not reported again and again
    with pytest.raises(RuntimeError, match="a schedule already"):
        poller.schedule(tally, 0, feed, lambda now, i: (0, False), stopped.append, S, 1, 1)
    poller.unschedule()
    poller.shutdown()


def test_a_lane_must_be_a_pump_and_in_the_schedule() -> None:
    poller = _pump.Poller()
    tally = _pump.Tally()
    with pytest.raises(IndexError):
        poller.set_lane(0, None, 1)
    poller.schedule(tally, 1, lambda f, c: b"", lambda n, i: (0, False), print, S, 1, 1)
    with pytest.raises(TypeError, match="must be a Pump"):
        poller.set_lane(0, object(), 1)  # type: ignore[arg-type]
    with pytest.raises(IndexError):
        poller.set_lane(1, None, 1)
    poller.shutdown()
    assert not poller.scheduling
