from __future__ import annotations

import pickle

from kvbench.metrics import Histogram, IntervalSnapshot, Outcome, Recorder, merge_snapshots
from kvbench.protocols.base import ReplyKind


def test_outcome_numbers_equal_reply_kinds() -> None:
    for kind in ReplyKind:
        assert Outcome[kind.name] == kind.value


def test_cut_folds_latencies_and_resets_in_place() -> None:
    recorder = Recorder(["get", "set"])
    latency, counts = recorder.latency_ns, recorder.counts
    latency[0].extend([1000, 2000, 3000])
    counts[0][Outcome.HIT] += 2
    counts[0][Outcome.MISS] += 1
    snap = recorder.cut("measure", 0, 10, 20)
    assert snap.counts == {"get": {"hit": 2, "miss": 1}}
    assert snap.latency["get"].total_count == 3
    assert "set" not in snap.latency
    assert recorder.latency_ns is latency and not latency[0]
    assert recorder.counts is counts and sum(counts[0]) == 0
    assert recorder.cut("measure", 1, 20, 30).counts == {}


def _snap(index: int, hits: int, values: list[int], start: int, end: int) -> IntervalSnapshot:
    hist = Histogram()
    for v in values:
        hist.record(v)
    return IntervalSnapshot(
        "measure",
        index,
        start,
        end,
        {"get": {"hit": hits, "timeout": 1}},
        {"get": hist},
        stats={"cpu_ns": 5},
    )


def test_merge_adds_counts_and_histograms_exactly() -> None:
    a = _snap(0, 3, [100, 200], 0, 10)
    b = _snap(0, 4, [300], 5, 12)
    merged = merge_snapshots([a, b])
    assert merged.counts == {"get": {"hit": 7, "timeout": 2}}
    assert merged.latency["get"].total_count == 3
    assert (merged.start_ns, merged.end_ns, merged.workers) == (0, 12, 2)
    assert merged.stats == {"cpu_ns": 10}
    assert merged.ops() == 9 and merged.errors() == 2
    # the inputs are left alone
    assert a.latency["get"].total_count == 2


def test_snapshots_pickle_small() -> None:
    snap = _snap(0, 1, list(range(1000, 100_000, 100)), 0, 1)
    data = pickle.dumps(snap)
    assert len(data) < 30_000
    assert pickle.loads(data).latency["get"] == snap.latency["get"]
