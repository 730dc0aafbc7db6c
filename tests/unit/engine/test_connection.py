"""The connection driver against a scripted in-memory transport (no sockets).

Every test runs on both drivers: the Python one and the compiled pump (engine/_pump.c).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kvbench.config import load_config
from kvbench.engine import fastpath
from kvbench.engine.connection import Connection, PumpReader
from kvbench.engine.open_loop import OpenLoopDispatcher
from kvbench.engine.pacing import Schedule
from kvbench.engine.py_pump import PyPump
from kvbench.engine.setup import codec_factory_for
from kvbench.engine.shards import source_for
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.snapshot import IntervalSnapshot

NEVER = 2**63 - 1
DROPPED = int(Outcome.DROPPED)


class ScriptedTransport(asyncio.Transport):
    """Collects writes; records aborts and the protocol it was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.aborted = False

    def write(self, data: Any) -> None:
        self.written += data

    def abort(self) -> None:
        self.aborted = True

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def take_requests(self) -> list[bytes]:
        """The request lines written so far (``get k`` / ``set k ...``), consumed."""
        lines = bytes(self.written).split(b"\r\n")
        self.written.clear()
        requests, skip = [], False
        for line in lines:
            if skip:
                skip = False
                continue
            if line:
                requests.append(line)
                skip = line.startswith(b"set ")
        return requests


def text_reply(request: bytes) -> bytes:
    return b"STORED\r\n" if request.startswith(b"set ") else b"END\r\n"


def cut(worker: Worker) -> IntervalSnapshot:
    """The interval so far, with the replies the pump accounted moved in first."""
    fastpath.drain(worker.tally, worker.recorder)
    return worker.recorder.cut("measure", 0, 0, 1)


def make(
    driver: str,
    pipeline: int = 4,
    ratio: str = "1:1",
    budget: int | None = None,
    open_loop: bool = False,
) -> tuple[Worker, Connection, ScriptedTransport]:
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "load.pipeline": (str(pipeline), "-P"),
            "workload.ratio": (ratio, "--ratio"),
            "workload.seed": (3, "--seed"),
        },
        1,
    )
    worker = Worker(WorkerSpec(config, 0, 1, 1, budget), lambda snap: None)
    worker.issuing = True
    worker.budget = budget
    worker.next_cut_ns = NEVER
    if driver == "compiled":
        worker.pumps = fastpath.PumpFactory(worker.tally, 0, open_loop=open_loop)
    conn = worker.make_connection(
        codec_factory_for(config.targets[0]), None, pipeline, worker.shards[0]
    )
    conn.closed_loop = not open_loop  # as Worker._open_loop sets it
    worker.connections = [conn]
    transport = ScriptedTransport()
    conn.connection_made(transport)
    assert isinstance(conn.pump, PyPump) == (driver == "python")
    return worker, conn, transport


def test_pipeline_is_kept_full_and_replies_are_counted_in_order(driver: str) -> None:
    worker, conn, transport = make(driver, pipeline=4)
    requests = transport.take_requests()
    assert len(requests) == 4 and conn.inflight == 4
    conn.data_received(b"".join(text_reply(r) for r in requests[:3]))
    assert conn.inflight == 4  # three answered, three more sent
    assert len(transport.take_requests()) == 3
    snap = cut(worker)
    expected_sets = sum(r.startswith(b"set ") for r in requests[:3])
    assert snap.counts.get("set", {}).get("stored", 0) == expected_sets
    assert snap.counts.get("get", {}).get("miss", 0) == 3 - expected_sets
    assert sum(h.total_count for h in snap.latency.values()) == 3


def test_a_reply_split_across_reads_is_counted_once(driver: str) -> None:
    worker, conn, transport = make(driver, pipeline=1, ratio="0:1")
    transport.take_requests()
    conn.data_received(b"EN")
    assert conn.inflight == 1
    conn.data_received(b"D\r\n")
    assert cut(worker).counts == {"get": {"miss": 1}}


def test_budget_is_never_exceeded(driver: str) -> None:
    worker, _conn, transport = make(driver, pipeline=8, budget=5)
    assert len(transport.take_requests()) == 5
    assert worker.budget == 0


def test_connection_loss_counts_inflight_as_conn_error(driver: str) -> None:
    worker, conn, _transport = make(driver, pipeline=3, ratio="0:1")
    conn.connection_lost(ConnectionResetError())
    assert conn.inflight == 0
    assert cut(worker).counts == {"get": {"conn_error": 3}}


def test_garbage_is_a_protocol_error_that_fails_inflight_and_aborts(driver: str) -> None:
    worker, conn, transport = make(driver, pipeline=2, ratio="0:1")
    conn.data_received(b"END\r\nWHAT IS THIS\r\n")
    assert transport.aborted
    # The reply read with the garbage is attributed to no request: both end as protocol
    # errors (not conn_error), and nothing new is sent after garbage.
    assert cut(worker).counts == {"get": {"protocol_error": 2}}
    assert worker.errors == {"protocol_error": 1}


def test_past_the_first_reads_the_transport_hands_reads_to_the_pump_until_it_goes(
    driver: str,
) -> None:
    """Once the first read has shown the server did not refuse the connection, the
    transport reads into a ``PumpReader`` whose ``data_received`` is the pump's own; a stop
    still reaches the connection (garbage: a protocol error, aborted), and a new transport
    reads through the connection again."""
    worker, conn, transport = make(driver, pipeline=2, ratio="0:1")
    pump = conn.pump
    assert not hasattr(transport, "protocol")
    conn.data_received(b"END\r\n")
    reader = transport.protocol
    assert isinstance(reader, PumpReader) and reader.data_received == pump.data_received
    assert pump.on_stopped == conn._stopped
    transport.take_requests()
    reader.data_received(b"END\r\nWHAT IS THIS\r\n")  # the pump's own, as the loop calls it
    assert transport.aborted and worker.errors == {"protocol_error": 1}
    counts = cut(worker).counts  # the first read's reply counts; none of the second's
    assert counts["get"] == {"miss": 1, "protocol_error": 2}
    reader.connection_lost(None)  # the reader's events are the connection's
    assert pump.on_stopped is None and not conn.connected
    fresh = ScriptedTransport()
    conn.connection_made(fresh)
    assert conn.pump is not pump and conn.inflight == 2
    assert not hasattr(fresh, "protocol")  # its first read goes through the connection
    conn.data_received(b"END\r\n")
    assert isinstance(fresh.protocol, PumpReader)
    assert fresh.protocol.data_received == conn.pump.data_received
    assert conn.inflight == 2


def test_timeout_counts_old_requests_at_the_timeout_and_drops_the_connection(driver: str) -> None:
    worker, conn, transport = make(driver, pipeline=2, ratio="0:1")
    sent = conn.oldest_sent_ns()
    assert sent is not None
    conn.check_timeout(sent + 999, timeout_ns=1000)
    assert not transport.aborted
    conn.check_timeout(sent + 1000, timeout_ns=1000)
    assert transport.aborted
    snap = cut(worker)
    assert snap.counts == {"get": {"timeout": 2}}
    assert snap.latency["get"].max_ns == pytest.approx(1000, rel=0.001)


def test_nothing_is_sent_once_issuing_stops(driver: str) -> None:
    worker, conn, transport = make(driver, pipeline=2, ratio="0:1")
    transport.take_requests()
    worker.issuing = False
    conn.data_received(b"END\r\nEND\r\n")
    assert transport.take_requests() == []
    assert conn.inflight == 0


def test_more_replies_than_requests_is_a_protocol_error_not_a_corrupt_record(driver: str) -> None:
    worker, conn, transport = make(driver, pipeline=1, ratio="0:1")
    if driver == "compiled":  # the pump parses for itself: a reply nobody asked for
        transport.take_requests()
        worker.issuing = False
        conn.data_received(b"END\r\nEND\r\n")
        assert transport.aborted and worker.errors == {"protocol_error": 1}
        assert worker.last_error == "a reply arrived with no request pending"
        # Which of the two answered the request is not known: neither is attributed.
        assert cut(worker).counts == {"get": {"protocol_error": 1}}
        return
    transport.take_requests()

    def three_misses(codes: list[int], sizes: list[int]) -> int:
        codes.extend([2, 2, 2])
        sizes.extend([5, 5, 5])
        return 3

    conn._codec.read_kinds = three_misses  # type: ignore[method-assign]
    conn.data_received(b"")
    assert transport.aborted and worker.errors == {"protocol_error": 1}
    snap = cut(worker)  # the fold still lines up; no reply of the read is attributed
    assert snap.counts == {"get": {"protocol_error": 1}}
    assert not any(name.startswith("bytes_in.") for name in snap.stats), snap.stats


def test_a_refill_that_raises_sends_what_was_taken_and_keeps_the_fifo_aligned(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests taken from the chunk before a failed refill go out and stay in flight, each
    with its send time (the Python driver lost them from the write and the send times)."""
    worker, conn, transport = make(driver, pipeline=4, ratio="0:1")
    transport.take_requests()
    left = conn.cursor.size - 4  # in the chunk (the cursor's, or the stream took it)

    def next_chunk() -> None:
        raise MemoryError("the workload could not draw its next chunk")

    monkeypatch.setattr(conn.cursor.source, "next_chunk", next_chunk)
    with pytest.raises(MemoryError, match="next chunk"):
        conn.issue(left + 10)
    assert len(transport.take_requests()) == left
    assert conn.inflight == 4 + left
    worker.issuing = False
    conn.data_received(b"END\r\n" * (4 + left))  # every one answered
    snap = cut(worker)
    assert snap.counts == {"get": {"miss": 4 + left}}
    assert snap.latency["get"].total_count == 4 + left
    assert conn.inflight == 0 and not transport.aborted


# -- the open loop: the dispatcher's scheduled sends ---------------------------------------


def test_an_open_loop_connection_sends_nothing_off_schedule_when_it_connects(driver: str) -> None:
    """A (re)connected open-loop connection waits for the dispatcher: filling its pipeline
    would send requests with no intended time (the Python driver did, after a reconnect)."""
    worker, conn, transport = make(driver, pipeline=4, ratio="0:1", open_loop=True)
    conn.fill()
    assert transport.take_requests() == [] and conn.inflight == 0
    assert worker.recorder.stats.get("sent", 0) == 0


def test_scheduled_sends_are_measured_from_their_intended_time(driver: str) -> None:
    """Both drivers: one write per schedule slice, late sends counted, the lag of every
    send recorded, latency from the intended time and service time from the send; a reply
    sends nothing."""
    worker, conn, transport = make(driver, pipeline=4, ratio="0:1", open_loop=True)
    now = time.monotonic_ns()
    conn.issue_scheduled([now - 50_000_000, now + 10**9], now)
    assert len(transport.take_requests()) == 2 and conn.inflight == 2
    conn.data_received(b"END\r\nEND\r\n")
    assert transport.take_requests() == [] and conn.inflight == 0
    snap = cut(worker)
    assert snap.counts == {"get": {"miss": 2, "late": 1}}
    assert snap.stats["sent"] == 2
    assert snap.lag is not None and snap.lag.total_count == 2
    assert snap.lag.max_ns >= 50_000_000
    latency, service = snap.latency["get"], snap.service["get"]
    assert latency.total_count == service.total_count == 2
    assert latency.max_ns >= 50_000_000 > service.max_ns


def test_an_open_loop_timeout_counts_from_the_intended_time(driver: str) -> None:
    worker, conn, transport = make(driver, pipeline=4, ratio="0:1", open_loop=True)
    now = time.monotonic_ns()
    conn.issue_scheduled([now - 20_000_000], now)
    sent = conn.oldest_sent_ns()
    assert sent is not None
    conn.check_timeout(sent + 1_000_000, timeout_ns=1_000_000)
    assert transport.aborted
    snap = cut(worker)
    assert snap.counts == {"get": {"timeout": 1, "late": 1}}
    assert snap.latency["get"].max_ns >= 21_000_000  # the timeout plus the 20 ms behind
    assert snap.service["get"].max_ns == pytest.approx(1_000_000, rel=0.001)


def test_dropped_requests_are_the_next_ones_in_the_sequence(driver: str) -> None:
    """Both drivers: the dispatcher's drops take the requests that would have gone next
    (the compiled pumps' stream holds the rest of the source's chunk: the drops skipped a
    later chunk's requests and the stream sent the dropped ones)."""
    worker, conn, transport = make(driver, pipeline=64, ratio="1:1", open_loop=True)
    twin = source_for(conn.shard.plan, conn.shard.target).next_chunk()  # what it draws
    start, ops, keys = 0, list(twin.ops), list(twin.keys)
    dispatcher = OpenLoopDispatcher(  # as Worker._open_loop wires it, at 1,000/s
        worker,
        worker.tally,
        worker.recorder,
        worker.connections,
        worker.shards,
        Schedule(1000, 0),
        10**9,
    )
    now = time.monotonic_ns()
    conn.issue_scheduled([now] * 3, now)
    dispatcher._drop(dispatcher.routes[0], 5)
    conn.issue_scheduled([now] * 2, now)
    sent = [request.split(b" ")[1] for request in transport.take_requests()]
    assert sent == keys[start : start + 3] + keys[start + 8 : start + 10]
    dropped = {op: row[DROPPED] for op, row in enumerate(worker.recorder.counts) if row[DROPPED]}
    expected = ops[start + 3 : start + 8]
    assert dropped == {op: expected.count(op) for op in set(expected)}
