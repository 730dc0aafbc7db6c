"""A connection sending a replay's lane, on the Python driver and on a compiled pump with
a stream of its own: what it takes, chunk after chunk, is what the lane counts as handed
out (a timed replay's schedule counts from it), and a lane that ends before the others
goes quiet while they send on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvbench.config import load_config
from kvbench.config.replay import ReplayConfig
from kvbench.engine import fastpath
from kvbench.engine.pacing import TraceSchedule
from kvbench.engine.py_pump import PyPump
from kvbench.engine.setup import codec_factory_for
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.protocols.base import CodecOptions, Op
from kvbench.workload.chunk import Cursor
from kvbench.workload.trace import BLOCK_BYTES, TraceReader
from kvbench.workload.trace_source import ReplayFeed
from tests.support import pump_oracle
from tests.support.traces import write_trace


class Sink:
    """A transport that keeps what is written."""

    def __init__(self) -> None:
        self.written = bytearray()

    def write(self, data: Any) -> None:
        self.written += data

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def set_protocol(self, protocol: Any) -> None:
        self.protocol = protocol


def lane_connections(
    path: Path,
    speed: float | None,
    compiled: bool,
    lanes: int = 1,
    pipeline: int = 1000,
    block: int = BLOCK_BYTES,
) -> tuple[Worker, ReplayFeed, list[Any], list[Sink]]:
    """A worker's connections, each sending its lane of ``path``, on the Python driver or
    on compiled pumps (each with a stream of its own), their transports ``Sink``s."""
    if compiled:
        pump_oracle.require_compiled()
    config = load_config(None, {"target.urls": (["memcached://127.0.0.1:1"], "T")}, 1)
    worker = Worker(WorkerSpec(config, 0, 1, lanes, None), lambda snap: None)
    reader = TraceReader(path, block)
    feed = ReplayFeed(ReplayConfig(str(path), speed=speed), "memcache-text", 0, 1, lanes, 1, reader)
    feed.prepare()
    worker.feed = feed
    worker.tally = fastpath.new_tally(None, compiled)
    if compiled:
        worker.pumps = fastpath.PumpFactory(worker.tally, 0, open_loop=speed is not None)
    sinks = []
    for lane in feed.lanes:
        conn = worker.make_connection(
            codec_factory_for(worker.target, CodecOptions()), None, pipeline, worker.shards[0]
        )
        conn.cursor = Cursor(lane)
        sinks.append(Sink())
        conn.connection_made(sinks[-1])  # type: ignore[arg-type]
        worker.connections.append(conn)
    worker.issuing = True
    return worker, feed, worker.connections, sinks


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
@pytest.mark.parametrize("speed", [None, 4.0])
def test_the_lane_counts_every_request_its_connection_took(
    tmp_path: Path, speed: float | None, compiled: bool
) -> None:
    """Writes of alternating TTLs cut the lane into chunks of one or two rows, so every
    send crosses chunks: the lane's count (``taken`` + the cursor's ``pos``) stays the
    connection's, and
    what a compiled pump's stream took and has not sent is still the lane's to send."""
    rows = [
        (i // 50, f"k:{i}", 5, 10 if i % 2 else 0, 1, "set" if i % 2 else "get", 60 * (i % 4))
        for i in range(200)
    ]
    path = write_trace(tmp_path / "t.csv", rows)
    _, feed, (conn,), (sink,) = lane_connections(path, speed, compiled)
    lane = feed.lanes[0]
    if compiled:
        assert not isinstance(conn.pump, PyPump)
    sent = 0
    if speed is None:
        for n in (1, 3, 7, 2, 50, 200):
            conn.issue(n)
            sent = conn.inflight
            # the stream takes a chunk whole: the lane counts what it has not sent
            assert compiled or lane.taken + conn.cursor.pos == sent
            assert sent + feed.remaining() == 200
        assert sent == 200 and feed.exhausted()
    else:
        conn.to_open_loop()
        schedule = TraceSchedule(lane, 0)
        for now in range(0, 1_100_000_000, 7_000_000):
            due = schedule.due_by(now)
            if due > sent:
                conn.issue_scheduled(schedule.intended_range(sent, due), now)
                sent = due
            assert conn.inflight == sent and schedule.finished() == (sent == 200)
        assert sent == 200 and schedule.finished()
    assert sink.written.count(b"set ") == 100 and sink.written.count(b"get ") == 100
    assert b" 0 60 10\r\n" in sink.written and b" 0 180 10\r\n" in sink.written


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_a_lane_that_ends_first_goes_quiet_and_the_others_send_every_row(
    tmp_path: Path, compiled: bool
) -> None:
    """Two clients, two lanes, 300 rows and 100: the short lane's connection (its pump)
    sends nothing more once its rows are sent, without error, while the other sends on;
    the replay ends with every row answered."""
    long, short = "c0", "c1"
    rows = [(0, f"k:{i}", 5, 0, long if i % 4 else short, "get", 0) for i in range(400)]
    path = write_trace(tmp_path / "t.csv", rows)
    worker, feed, conns, sinks = lane_connections(path, None, compiled, 2, 8, block=256)
    short_lane = next(lane for lane in feed.lanes if lane.pending() == 100)
    for conn in conns:
        conn.fill()
    rounds = 0
    while rounds < 1000:  # the server: every get a miss
        busy = [conn for conn in conns if conn.inflight]
        if not busy:
            break
        for conn in busy:
            conn.data_received(b"END\r\n" * conn.inflight)
        rounds += 1
    assert rounds > 300 // 8  # the long lane sent long after the short one ended
    assert feed.exhausted() and all(conn.inflight == 0 for conn in conns)
    assert sum(sink.written.count(b"get ") for sink in sinks) == 400
    assert sinks[short_lane.index].written.count(b"get ") == 100
    # the replies, in the recorder (Python driver) or the tally (the pumps')
    replies = len(worker.recorder.reply_ops) + (worker.tally.pending if compiled else 0)
    assert replies == 400


def test_a_chunk_reached_by_skipping_sends_with_its_own_ttl(tmp_path: Path) -> None:
    """The open loop's drops take rows off a lane unsent (engine/open_loop.py ``_skip``)
    and may move it to its next chunk; the Python driver then sends that chunk's writes
    with the chunk's TTL, not the one before's, and so does a reconnected connection
    (its fresh codec has no TTL of its own)."""
    rows = [(0, k, 1, 3, 1, "set", 50 if k == "a" else 70) for k in "abcd"]
    path = write_trace(tmp_path / "t.csv", rows)
    _worker, _feed, (conn,), (sink,) = lane_connections(path, None, compiled=False)
    conn.issue(1)  # a, in its chunk of TTL 50
    assert sink.written.startswith(b"set a 0 50 3\r\n")
    # a drop: b, of the next chunk (b, c, d: TTL 70), taken unsent
    assert conn.cursor.skip(1) == [int(Op.SET)]
    conn.issue(1)
    assert b"set c 0 70 3\r\n" in sink.written
    fresh = Sink()
    conn.connection_made(fresh)  # type: ignore[arg-type]
    conn.issue(1)
    assert fresh.written.startswith(b"set d 0 70 3\r\n")
