"""A connection sending a replay's lane: what it takes, chunk after chunk, is what the
lane counts as handed out (a timed replay's schedule counts from it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvbench.config import load_config
from kvbench.config.replay import ReplayConfig
from kvbench.engine.pacing import TraceSchedule
from kvbench.engine.setup import codec_factory_for
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.protocols.base import CodecOptions
from kvbench.workload.trace_source import ReplayFeed
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


@pytest.mark.parametrize("speed", [None, 4.0])
def test_the_lane_counts_every_request_its_connection_took(
    tmp_path: Path, speed: float | None
) -> None:
    """Writes of alternating TTLs cut the lane into chunks of one or two rows, so every
    send crosses chunks: the lane's count (``taken + pos``) stays the connection's."""
    rows = [
        (i // 50, f"k:{i}", 5, 10 if i % 2 else 0, 1, "set" if i % 2 else "get", 60 * (i % 4))
        for i in range(200)
    ]
    path = write_trace(tmp_path / "t.csv", rows)
    config = load_config(None, {"target.urls": (["memcached://127.0.0.1:1"], "T")}, 1)
    worker = Worker(WorkerSpec(config, 0, 1, 1, None), lambda snap: None)
    feed = ReplayFeed(ReplayConfig(str(path), speed=speed), "memcache-text", 0, 1, 1, seed=1)
    lane = feed.lanes[0]
    conn = worker.make_connection(
        codec_factory_for(worker.target, CodecOptions()), None, 1000, worker.shards[0]
    )
    conn.source = lane
    sink = Sink()
    conn.connection_made(sink)  # type: ignore[arg-type]
    worker.issuing = True
    sent = 0
    if speed is None:
        for n in (1, 3, 7, 2, 50, 200):
            conn.issue(n)
            sent = conn.inflight
            assert lane.taken + lane.pos == sent
        assert sent == 200
    else:
        conn.closed_loop = False
        schedule = TraceSchedule(lane, 0)
        for now in range(0, 1_100_000_000, 7_000_000):
            due = schedule.due_by(now)
            if due > sent:
                conn.issue_scheduled(schedule.intended_range(sent, due), now)
                sent = due
            assert lane.taken + lane.pos == sent
        assert sent == 200
    assert sink.written.count(b"set ") == 100 and sink.written.count(b"get ") == 100
    assert b" 0 60 10\r\n" in sink.written and b" 0 180 10\r\n" in sink.written
