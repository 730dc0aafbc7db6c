from __future__ import annotations

import pickle

from kvbench.metrics import Histogram, IntervalSnapshot, Outcome, Recorder, merge_snapshots
from kvbench.protocols.base import ReplyKind


def test_outcome_numbers_equal_reply_kinds() -> None:
    for kind in ReplyKind:
        assert Outcome[kind.name] == kind.value


def test_cut_folds_bulk_replies_and_engine_outcomes_and_resets_in_place() -> None:
    recorder = Recorder(["get", "set", "mget"], keys_per_op=[1, 1, 4])
    hit, miss, stored = int(Outcome.HIT), int(Outcome.MISS), int(Outcome.STORED)
    recorder.reply_ops.extend([0, 0, 1, 0, 2])
    recorder.reply_codes.extend([hit | 1 << 8, miss, stored, hit | 1 << 8, hit | 3 << 8])
    recorder.reply_latency_ns.extend([1000, 2000, 3000, 4000, 5000])
    latency, counts = recorder.latency_ns, recorder.counts
    latency[1].append(9_000_000)  # a timed-out set, at the timeout
    counts[1][Outcome.TIMEOUT] += 1
    snap = recorder.cut("measure", 0, 10, 20)
    assert snap.counts == {
        "get": {"hit": 2, "miss": 1},
        "set": {"stored": 1, "timeout": 1},
        "mget": {"hit": 1},
    }
    assert snap.latency["get"].total_count == 3
    assert snap.latency["get"].max_ns == 4000
    assert snap.latency["set"].total_count == 2
    assert snap.latency["set"].max_ns == 9_000_000
    assert (snap.keys["mget"], snap.keys_hit["mget"]) == (4, 3)
    assert (snap.keys["get"], snap.keys_hit["get"]) == (3, 2)
    assert recorder.latency_ns is latency and not latency[1]
    assert recorder.counts is counts and sum(counts[1]) == 0
    assert not recorder.reply_ops and not recorder.reply_codes and not recorder.reply_latency_ns
    recorder.reply_ops.append(0)  # the buffers are still usable after the fold
    recorder.reply_codes.append(miss)
    recorder.reply_latency_ns.append(7)
    assert recorder.cut("measure", 1, 20, 30).counts == {"get": {"miss": 1}}
    assert recorder.cut("measure", 2, 30, 40).counts == {}


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


def test_folding_as_the_interval_runs_gives_the_snapshot_of_one_fold_at_the_cut() -> None:
    hit, miss, stored = int(Outcome.HIT), int(Outcome.MISS), int(Outcome.STORED)
    replies = [(0, hit | 1 << 8, 1000), (1, stored, 2500), (0, miss, 700), (2, hit | 2 << 8, 9000)]
    once, often = (Recorder(["get", "set", "mget"], keys_per_op=[1, 1, 4]) for _ in range(2))
    for op, code, ns in replies * 50:
        for recorder in (once, often):
            recorder.reply_ops.append(op)
            recorder.reply_codes.append(code)
            recorder.reply_latency_ns.append(ns)
        if ns == 700:  # every fourth reply
            often.fold()
    a, b = once.cut("measure", 0, 0, 1), often.cut("measure", 0, 0, 1)
    assert a.counts == b.counts and a.keys == b.keys and a.keys_hit == b.keys_hit
    for op in a.latency:
        assert a.latency[op].encode_base64() == b.latency[op].encode_base64()
    assert often.cut("measure", 1, 1, 2).counts == {}  # nothing carried into the next interval


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


def test_latency_is_kept_by_op_and_outcome_and_the_ops_histogram_is_their_merge() -> None:
    """What --prometheus serves per op and outcome: a get's hits and misses apart, a
    timed-out set under timeout; each op's histogram is exactly the merge of its outcomes'."""
    recorder = Recorder(["get", "set"])
    hit, miss, stored = int(Outcome.HIT), int(Outcome.MISS), int(Outcome.STORED)
    recorder.reply_ops.extend([0, 0, 1, 0])
    recorder.reply_codes.extend([hit | 1 << 8, miss, stored, hit | 1 << 8])
    recorder.reply_latency_ns.extend([1000, 2000, 3000, 4000])
    recorder.fold()
    recorder.reply_ops.append(0)  # a second fold adds to the same histograms
    recorder.reply_codes.append(miss)
    recorder.reply_latency_ns.append(5000)
    recorder.latency_ns[1].append(9_000_000)
    recorder.counts[1][Outcome.TIMEOUT] += 1
    snap = recorder.cut("measure", 0, 0, 10)
    by = snap.latency_by_outcome
    assert {op: {o: h.total_count for o, h in hists.items()} for op, hists in by.items()} == {
        "get": {"hit": 2, "miss": 2},
        "set": {"stored": 1, "timeout": 1},
    }
    assert (by["get"]["hit"].min_ns, by["get"]["hit"].max_ns) == (1000, 4000)
    assert (by["get"]["miss"].min_ns, by["get"]["miss"].max_ns) == (2000, 5000)
    assert by["set"]["timeout"].max_ns == 9_000_000
    for op in ("get", "set"):
        assert snap.latency[op] == Histogram.merged(by[op].values())
    merged = merge_snapshots([snap, snap])
    assert merged.latency_by_outcome["get"]["miss"].total_count == 4
    assert snap.latency_by_outcome["get"]["miss"].total_count == 2  # merging copied
