"""The chunk contract (workload/chunk.py): every source hands out ``Chunk`` values, each
once, and keeps no read position; a ``Cursor`` is the consumer's, so two consumers of one
source never see the same request, and a rekeyed shard's cursor starts a fresh chunk."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import pytest

from kvbench.config import load_config
from kvbench.config.model import WorkloadConfig
from kvbench.config.replay import ReplayConfig
from kvbench.engine.shards import build_shards
from kvbench.protocols.base import Op
from kvbench.workload.chunk import Chunk, Cursor
from kvbench.workload.monitor_feed import MonitorFeed, scan_capture
from kvbench.workload.plan import CHUNK, FixedSource, RequestSource, compile_plan
from kvbench.workload.trace import TraceReader
from kvbench.workload.trace_source import ReplayFeed
from tests.support.traces import write_trace


def take(cursor: Cursor, n: int) -> list[object]:
    """The keys of the cursor's next ``n`` requests, as a consumer reads them."""
    keys: list[object] = []
    while len(keys) < n:
        if cursor.pos == cursor.size and not cursor.advance():
            break
        stop = min(cursor.size, cursor.pos + n - len(keys))
        keys += cursor.chunk.keys[cursor.pos : stop]
        cursor.pos = stop
    return keys


def sequential(keys: int = 100_000) -> RequestSource:
    """A source whose every request has a key of its own (a walk shorter than the keys)."""
    config = WorkloadConfig(keys=keys, key_pattern="sequential", key_prefix="k", seed=4)
    return RequestSource(compile_plan(config, 0, 1))


def test_every_source_hands_out_frozen_chunks(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", [(0, f"k{i}", 2, 3, 1, "set", 60) for i in range(5)])
    feed = ReplayFeed(ReplayConfig(str(trace)), "memcache-text", 0, 1, 1, 1, TraceReader(trace))
    feed.prepare()
    capture = tmp_path / "monitor.txt"
    capture.write_text('1.0 [0 127.0.0.1:1] "GET" "k"\n')
    config = ReplayConfig(str(capture), format="monitor")
    scan = scan_capture(config)
    monitor = MonitorFeed(replace(config, commands=tuple(scan.names), clients=1), 0, 1, 1, 1)
    monitor.prepare()
    sources = [
        sequential(),
        FixedSource([int(Op.SET)], [b"k"], [b"v"]),
        feed.lanes[0],
        monitor.lanes[0],
    ]
    for source in sources:
        chunk = source.next_chunk()
        assert isinstance(chunk, Chunk) and chunk.size > 0
        assert len(chunk.record_ops) == len(chunk.keys) == len(chunk.values) == chunk.size
        with pytest.raises(dataclasses.FrozenInstanceError):
            chunk.ttl_s = 5  # type: ignore[misc]
        for name in ("pos", "size", "ops", "keys", "refill"):
            assert not hasattr(source, name), name  # no read position shared by convention
    assert feed.lanes[0].next_chunk() is None and monitor.lanes[0].next_chunk() is None


def test_two_consumers_of_one_source_never_see_the_same_request() -> None:
    source, twin = sequential(), sequential()
    a, b = Cursor(source), Cursor(source)
    seen_a, seen_b = take(a, 10), take(b, 10)
    for n in (100, 1500, 7, CHUNK):
        seen_a += take(a, n)
        seen_b += take(b, n + 3)
    assert not set(seen_a) & set(seen_b)
    # Each consumer reads chunks of the source's sequence: a the first, b the second.
    drawn = [key for _ in range(8) for key in twin.next_chunk().keys]
    assert all(key in drawn for key in seen_a + seen_b)
    assert seen_a[:10] == drawn[:10] and seen_b[:10] == drawn[CHUNK : CHUNK + 10]


def test_a_shared_cursor_hands_each_request_to_one_of_its_consumers() -> None:
    """The preload's sets: one chunk of them all, read by every connection of a server
    through one cursor: each key once, in order, whoever takes it."""
    keys: list[bytes | tuple[bytes, ...]] = [b"k%d" % i for i in range(100)]
    cursor = Cursor(FixedSource([int(Op.SET)] * 100, keys, [b"v"] * 100))
    taken = [take(cursor, 7) for _ in range(20)]
    assert [key for batch in taken for key in batch] == keys
    assert Cursor(FixedSource([int(Op.SET)] * 100, keys, [b"v"] * 100)).skip(3) == [1, 1, 1]


def test_a_rekeyed_shard_reads_a_fresh_chunk_of_its_new_keys() -> None:
    """A Redis Cluster MOVED rekeys a master's source: its connections' cursor drops the
    rest of its chunk (old keys), and the next request starts a chunk of the new keys."""
    config = load_config(None, {"target.urls": (["memcached://127.0.0.1:1"], "T")}, 1)
    shard = build_shards(config, 0, 1)[0]
    cursor = shard.cursor
    assert take(cursor, 10) and cursor.pos == 10
    few = shard.plan.key_table[:3]
    shard.rekey(replace(shard.plan, key_table=few, config=replace(shard.plan.config, keys=3)))
    assert (cursor.pos, cursor.size) == (0, 0)
    assert set(take(cursor, CHUNK)) <= set(few)
    assert shard.plan.key_table == few


def test_a_cursor_past_its_sources_last_request_says_so() -> None:
    cursor = Cursor(FixedSource([int(Op.GET)] * 2, [b"a", b"b"], [None, None]))
    assert cursor.skip(2) == [int(Op.GET)] * 2
    with pytest.raises(RuntimeError, match="not in its source"):
        cursor.skip(1)
