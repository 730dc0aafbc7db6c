"""A worker's end of drain with thousands of connections: asked on every reply whether any
connection has a request in flight, it walks them once over the drain, not once a reply."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from kvbench.engine.worker import Worker
from kvbench.metrics.snapshot import IntervalSnapshot
from tests.unit.engine.test_connection import cut, make


class Counted:
    """A connection whose ``inflight`` counts how often it is read."""

    reads = 0

    def __init__(self, inflight: int) -> None:
        self._inflight = inflight

    @property
    def inflight(self) -> int:
        Counted.reads += 1
        return self._inflight


def test_the_drain_walks_the_connections_once_not_once_per_reply() -> None:
    n = 2_000
    conns = [Counted(1) for _ in range(n)]
    worker = SimpleNamespace(connections=conns, _idle_upto=0)
    Counted.reads = 0
    answers = []
    for conn in conns:  # each reply empties one connection, in order, and asks
        conn._inflight = 0
        answers.append(Worker._all_idle(worker))
    assert answers == [False] * (n - 1) + [True]
    assert Counted.reads <= 3 * n  # a scan from the start on each reply: n * n / 2


def test_a_request_sent_behind_the_scan_is_still_waited_for() -> None:
    """A cluster's redirect sends on a connection the scan has passed: not finished."""
    conns = [Counted(0) for _ in range(10)]
    worker = SimpleNamespace(connections=conns, _idle_upto=0)
    conns[9]._inflight = 1
    assert not Worker._all_idle(worker)
    assert worker._idle_upto == 9
    conns[2]._inflight = 1  # sent behind the scan
    conns[9]._inflight = 0
    assert not Worker._all_idle(worker)
    conns[2]._inflight = 0
    assert Worker._all_idle(worker)


def test_requests_in_flight_when_a_drain_is_cut_short_are_in_the_last_snapshot(
    driver: str,
) -> None:
    """Ctrl-C (or a spool that broke) in the drain ends the run with requests in flight:
    each is counted, as conn_error, in the drain's snapshot. Before, they were counted
    when the connection's close reported its end, after that last snapshot: lost, while
    the server may have counted them (its sets then outnumbered the client's)."""
    worker, conn, transport = make(driver, pipeline=3, ratio="1:0")  # sets only
    snapshots: list[IntervalSnapshot] = []
    worker._emit = snapshots.append

    async def scenario() -> None:
        worker._finished = asyncio.Event()
        worker.phase, worker.issuing = "drain", False
        assert conn.inflight == 3
        worker.stop()  # the second Ctrl-C's Stop, or a spool failure, in the drain
        assert worker._finished.is_set() and conn.inflight == 0 and transport.aborted
        conn.connection_lost(None)  # the close's report, a turn later: nothing more

    asyncio.run(scenario())
    [last] = snapshots
    assert (last.phase, last.counts) == ("drain", {"set": {"conn_error": 3}})
    assert cut(worker).counts == {}  # nothing left behind it


def test_a_cut_that_raises_on_a_read_ends_the_run_failed_not_silently(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pump's read past the interval's boundary cuts it; an exception there went only
    into the event loop's log (the pump dropped its read, the run went on with its counts
    short and its status ok: a BufferError of the recorder's buffers in a Dask worker was
    one). Now the run ends there, failed, the error named."""
    worker, conn, transport = make(driver, pipeline=2, ratio="0:1")
    requests = transport.take_requests()

    def broken_cut(*args: object) -> IntervalSnapshot:
        raise BufferError("cannot resize an array that is exporting buffers")

    async def scenario() -> None:
        worker._finished = asyncio.Event()
        worker.phase, worker._measure_end_ns = "measure", 10**18
        worker.next_cut_ns = 0  # the boundary has passed: the next read cuts
        monkeypatch.setattr(worker.recorder, "cut", broken_cut)
        conn.data_received(b"END\r\n" * len(requests))  # does not raise
        assert worker._finished.is_set() and worker.phase == "done" and not worker.issuing

    asyncio.run(scenario())
    summary = worker.summary_fields()
    assert summary["status"] == "failed" and summary["errors"] == {"bug": 1}
    assert summary["last_error"] == (
        "an interval could not be cut: BufferError: cannot resize an array that is "
        "exporting buffers"
    )


def _cut_by_a_read(worker: Worker, conn: Any, replies: int) -> None:
    """A read past the interval's boundary (one interval's worth: the next is 1 s on)."""
    worker.phase, worker._measure_end_ns = "measure", 10**18
    worker.next_cut_ns = time.monotonic_ns() - 1
    conn.data_received(b"END\r\n" * replies)


def test_while_the_run_is_on_a_cut_is_sent_after_the_loops_next_poll_in_order(driver: str) -> None:
    """The cut is made at the boundary, from the read that passed it; the snapshot is
    pickled and written after the loop's next poll, so the poller sends what fell due in
    between (sent from the cut, it held the compiled loop 1.55-2.2 ms once a second on
    average)."""
    worker, conn, transport = make(driver, pipeline=2, ratio="0:1")
    sent: list[IntervalSnapshot] = []
    worker._emit = sent.append

    async def scenario() -> None:
        worker._finished = asyncio.Event()
        worker._running = True
        _cut_by_a_read(worker, conn, len(transport.take_requests()))
        assert sent == [] and [s.index for s in worker._outbox] == [0]  # cut, not sent
        conn.fill()
        _cut_by_a_read(worker, conn, len(transport.take_requests()))  # before that turn
        await asyncio.sleep(0)  # the turn the cuts were made in: the loop polls first
        assert sent == []
        await asyncio.sleep(0)  # after the poll
        assert [s.index for s in sent] == [0, 1] and worker._outbox == []
        # a read past the boundary cuts first: its replies are the next interval's
        assert [s.ops() for s in sent] == [0, 2]

    asyncio.run(scenario())


def test_a_snapshot_that_cannot_be_sent_ends_the_run_failed(driver: str) -> None:
    worker, conn, transport = make(driver, pipeline=2, ratio="0:1")

    def broken_pipe(snapshot: IntervalSnapshot) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    worker._emit = broken_pipe

    async def scenario() -> None:
        worker._finished = asyncio.Event()
        worker._running = True
        _cut_by_a_read(worker, conn, len(transport.take_requests()))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert worker._finished.is_set() and worker.phase == "done" and not worker._outbox

    asyncio.run(scenario())
    summary = worker.summary_fields()
    assert summary["status"] == "failed"
    assert summary["last_error"] == (
        "an interval could not be sent: BrokenPipeError: [Errno 32] Broken pipe"
    )


def test_a_last_snapshot_that_cannot_be_sent_at_the_runs_end_fails_the_run(
    driver: str,
) -> None:
    """The run's last snapshots are sent after its phase is done (``run``'s end): one that
    cannot be sent is not dropped in silence, the summary says the run failed."""
    worker, _conn, _transport = make(driver, pipeline=2, ratio="0:1")

    def unpicklable(snapshot: IntervalSnapshot) -> None:
        raise TypeError("cannot pickle 'generator' object")

    worker._emit = unpicklable
    worker._outbox.append(cut(worker))
    worker.phase = "done"
    worker._send_posted()
    summary = worker.summary_fields()
    assert summary["status"] == "failed" and summary["errors"] == {"bug": 1}
    assert summary["last_error"] == (
        "an interval could not be sent: TypeError: cannot pickle 'generator' object"
    )
    assert worker._outbox == []
