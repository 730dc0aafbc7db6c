from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kvbench.config.replay import ReplayConfig, replay_config
from kvbench.errors import ConfigError
from kvbench.protocols.base import Op
from kvbench.report.trace_figures import profile_summary
from kvbench.results.trace import merge_profiles
from kvbench.workload.chunk import Cursor
from kvbench.workload.trace import TRACE_OPS, TraceReader
from kvbench.workload.trace_ops import SKIPPED, KeyFitter, OpMapping, ValueBlob, fit_key
from kvbench.workload.trace_profile import TraceProfile
from kvbench.workload.trace_source import _IS_STORE, ReplayFeed
from tests.support.traces import mixed_rows, write_trace


def drain(feed: ReplayFeed) -> list[list[tuple[int, bytes, object, int]]]:
    """Every lane's requests (op, key, value, ttl), in the order the lane hands them out."""
    if not feed.done:
        feed.prepare()
    out: list[list[tuple[int, bytes, object, int]]] = [[] for _ in feed.lanes]
    while True:
        progressed = False
        for lane in feed.lanes:
            chunk = lane.next_chunk()
            if chunk is not None:
                progressed = True
                for i in range(chunk.size):
                    value = chunk.values[i]
                    out[lane.index].append(
                        (chunk.ops[i], chunk.keys[i], value and bytes(value), chunk.ttl_s)
                    )
        if not progressed and feed.done and feed.remaining() == 0:
            return out


def feed_for(
    path: Path, protocol: str = "memcache-text", lanes: int = 4, block: int = 2048, **kw: object
) -> ReplayFeed:
    config = ReplayConfig(str(path), **kw)  # type: ignore[arg-type]
    feed = ReplayFeed(config, protocol, 0, 1, lanes, seed=1, reader=TraceReader(path, block))
    feed.prepare()
    return feed


def test_each_client_keeps_its_order_on_one_lane(tmp_path: Path) -> None:
    clients = [(i * 7919) % 9 for i in range(5000)]
    rows = [
        (i // 1000, f"c{c}-{i}", len(f"c{c}-{i}"), 0, c, "get", 0) for i, c in enumerate(clients)
    ]
    feed = feed_for(write_trace(tmp_path / "t.csv", rows))
    lanes = [[k.decode() for _, k, _, _ in lane] for lane in drain(feed)]
    assert sum(map(len, lanes)) == 5000 == feed.counts.rows == feed.counts.requests
    for client in range(9):
        mine = [r[1] for r in rows if r[4] == client]
        home = next(lane for lane in lanes if mine[0] in lane)
        assert [k for k in home if k.startswith(f"c{client}-")] == mine  # in trace order
        others = [lane for lane in lanes if lane is not home]
        assert not any(k.startswith(f"c{client}-") for lane in others for k in lane)


def test_the_lanes_carry_about_as_many_rows_each(tmp_path: Path) -> None:
    """A client's first row gives it the lane with the fewest rows so far: 200 clients of
    10 to 70 rows each over 8 lanes come within 8% of the mean (6% here; crc32 of the
    client ids, the rule before, left the busiest lane 15% over it, and the replay's end
    to the few lanes that still had rows)."""
    rows = [
        (i // 1000, f"k{i}", 6, 0, f"client-{c}", "get", 0)
        for i, c in enumerate(
            c for round_ in range(70) for c in range(200) if round_ < c % 7 * 10 + 10
        )
    ]
    lanes = drain(feed_for(write_trace(tmp_path / "t.csv", rows), lanes=8))
    sizes = [len(lane) for lane in lanes]
    assert sum(sizes) == len(rows)
    assert max(sizes) / (len(rows) / 8) < 1.08


def test_ops_sizes_and_ttls_are_sent_as_the_trace_says(tmp_path: Path) -> None:
    rows = [
        (0, "short", 9, 0, 1, "get", 0),
        (0, "k", 1, 30, 1, "set", 60),
        (0, "k", 1, 5, 1, "add", 60),
        (0, "k", 1, 0, 1, "incr", 0),
        (0, "k", 1, 0, 1, "delete", 0),
    ]
    lane = drain(feed_for(write_trace(tmp_path / "t.csv", rows), lanes=1))[0]
    assert [op for op, _, _, _ in lane] == [Op.GET, Op.SET, Op.ADD, Op.INCR, Op.DELETE]
    assert len(lane[0][1]) == 9 and lane[0][1].startswith(b"short")
    assert [len(v) if v else None for _, _, v, _ in lane] == [None, 30, 5, None, None]
    assert lane[2][2] == b"12345"  # short values are digits: incr works on them
    assert {ttl for op, _, _, ttl in lane if op in (Op.SET, Op.ADD)} == {60}


def test_writes_of_another_ttl_start_a_new_chunk(tmp_path: Path) -> None:
    rows = [(0, f"k{i}", 2, 10, 1, "set", 60 if i % 3 else 120) for i in range(9)]
    rows[4] = (0, "g", 1, 0, 1, "get", 0)
    feed = feed_for(write_trace(tmp_path / "t.csv", rows), lanes=1)
    lane = feed.lanes[0]
    seen = []
    while (chunk := lane.next_chunk()) is not None:
        seen += [(key, chunk.ttl_s) for key in chunk.keys]
    expected = [(f"k{i}".encode(), 60 if i % 3 else 120) for i in range(9)]
    expected[4] = (b"g", 120)  # a read rides with the writes before it
    assert seen == expected


def test_redis_skips_what_it_cannot_send_and_counts_why(tmp_path: Path) -> None:
    rows = mixed_rows(2000, ops=TRACE_OPS)
    trace_ops = Counter(r[5] for r in rows)
    feed = feed_for(write_trace(tmp_path / "t.csv", rows), protocol="resp2")
    sent = Counter(op for lane in drain(feed) for op, _, _, _ in lane)
    assert feed.counts.skipped == {
        "cas has no resp2 form": trace_ops["cas"],
        "prepend has no resp2 form": trace_ops["prepend"],
    }
    assert sent[Op.GET] == trace_ops["get"] + trace_ops["gets"]  # gets reads with GET
    assert feed.counts.requests == 2000 - trace_ops["cas"] - trace_ops["prepend"]
    assert feed.profile.ops == trace_ops  # the profile is the trace's, skipped rows too


def test_op_mapping_per_protocol() -> None:
    text = OpMapping("memcache-text")
    assert SKIPPED not in text.codes
    assert text.sent_as["gets"] == "gets" and text.sent_as["cas"] == "cas"
    resp = OpMapping("resp2")
    assert resp.sent_as["gets"] == "get" and resp.sent_as["add"] == "add"
    assert set(resp.reasons) == {"cas", "prepend"}
    assert set(OpMapping("http-memc").reasons) == {"cas"}


@pytest.mark.parametrize(("key", "size"), [(b"abc", 3), (b"abc", 10), (b"ns:u:" + b"x" * 40, 12)])
def test_keys_are_fitted_to_their_size(key: bytes, size: int) -> None:
    fitted = fit_key(key, size)
    assert len(fitted) == size and fitted == fit_key(key, size)
    assert fitted.isascii() and b" " not in fitted
    if len(key) > size:
        assert fitted.startswith(key[:4])


def test_fitted_keys_of_distinct_keys_stay_distinct() -> None:
    keys = [b"k%d" % i for i in range(20000)]
    fitted = KeyFitter().fit(keys, [40] * len(keys))
    assert len(set(fitted)) == len(keys)
    cut = KeyFitter().fit([b"namespace:" + k * 5 for k in keys], [24] * len(keys))
    assert len(set(cut)) == len(keys)
    fitter = KeyFitter()
    (long,) = fitter.fit([b"k" * 300], [300])
    assert len(long) == 250 and long.startswith(b"k" * 200) and fitter.clamped == 1
    # counted per row, however often the key recurs (the rows printed beside it are rows)
    fitter.fit([b"k" * 300, b"short", b"k" * 300], [300, 5, 300])
    assert fitter.clamped == 3


def test_a_ttl_memcached_would_read_as_a_date_is_sent_as_30_days(tmp_path: Path) -> None:
    """memcached takes an exptime over 30 days as a Unix time (an item set with it expires
    at once): such writes go at 30 days, counted; Redis takes them as they are."""
    month = 30 * 24 * 3600
    rows = [
        (0, "a", 1, 5, 1, "set", month + 1),
        (0, "b", 1, 5, 1, "set", month),
        (0, "a", 1, 0, 1, "get", 0),
    ]
    for protocol, expected, clamped in (("memcache-text", month, 1), ("resp2", month + 1, 0)):
        feed = feed_for(write_trace(tmp_path / f"{protocol}.csv", rows), protocol)
        lanes = drain(feed)
        sets = [(key, ttl) for lane in lanes for (op, key, _v, ttl) in lane if op == Op.SET]
        assert sorted(sets) == [(b"a", expected), (b"b", month)]
        assert feed.counts.ttls_clamped == clamped


def test_values_are_bounds_in_one_blob_that_only_grows_at_its_end() -> None:
    values = ValueBlob(np.random.default_rng(1), random_bytes=1000)
    sizes = [5, 19, 20, 500, 1000]
    starts = values.starts(sizes)
    before = values.blob()
    out = [before[s : s + n] for s, n in zip(starts, sizes, strict=True)]
    assert [len(v) for v in out] == sizes
    assert out[1].isdigit() and out[0] == out[1][:5]  # short values are digits: incr works
    assert len({v[:8] for v in out[2:]}) == 3  # other sizes start at other places
    (big,) = values.starts([5000])  # larger than the blob: it grows at its end
    after = values.blob()
    assert after.startswith(before) and len(after[big : big + 5000]) == 5000
    assert values.starts(sizes) == starts  # the same bytes for the same size, still


def test_slice_from_to_and_limit(tmp_path: Path) -> None:
    rows = mixed_rows(1000, seconds=10)
    path = write_trace(tmp_path / "t.csv", rows)
    feed = feed_for(path, from_s=3.0, to_s=6.0)
    got = sum(len(lane) for lane in drain(feed))
    assert got == sum(1 for r in rows if 3 <= int(r[0]) < 6) == feed.counts.rows
    feed = feed_for(path, from_s=3.0, limit=17)
    assert sum(len(lane) for lane in drain(feed)) == 17


def test_workers_split_the_clients_and_add_up_to_the_trace(tmp_path: Path) -> None:
    rows = mixed_rows(3000, clients=11)
    path = write_trace(tmp_path / "t.csv", rows)
    parts = []
    total = 0
    key_sets = []
    for worker in range(3):
        config = ReplayConfig(str(path), limit=2500)
        feed = ReplayFeed(config, "memcache-text", worker, 3, 2, seed=1)
        lanes = drain(feed)
        total += feed.counts.requests
        parts.append(feed.profile.to_dict())
        key_sets.append({k for lane in lanes for _, k, _, _ in lane})
    profile = merge_profiles(parts)
    assert total == 2500 == profile["rows"]
    assert profile["ops"] == Counter(r[5] for r in rows[:2500])
    whole = ReplayFeed(ReplayConfig(str(path), limit=2500), "memcache-text", 0, 1, 2, seed=1)
    drain(whole)
    assert profile == merge_profiles([whole.profile.to_dict()])


def test_timed_offsets_spread_each_second_and_follow_the_speed(tmp_path: Path) -> None:
    rows = [(10 + i // 4, f"k{i}", 3, 0, 1, "get", 0) for i in range(12)]
    feed = feed_for(write_trace(tmp_path / "t.csv", rows), lanes=1, speed=2.0)
    lane = feed.lanes[0]
    offsets = []
    while (chunk := lane.next_chunk()) is not None:
        assert chunk.offsets_ns is not None
        offsets += chunk.offsets_ns.tolist()
    # second 10: 0, .25, .5, .75 s of trace time; at speed 2 half of that.
    assert offsets == [round(s * 1e9 / 2) for s in np.arange(0, 3, 0.25)]


def test_a_bad_row_fails_the_prepare_before_anything_is_queued(tmp_path: Path) -> None:
    rows = [(i // 100, f"k{i}", 5, 0, i % 3, "get", 0) for i in range(3000)]
    path = write_trace(tmp_path / "t.csv", rows)
    lines = path.read_bytes().split(b"\n")
    lines[2500] = b"25,k2500,5,0,1,fetch,0"
    path.write_bytes(b"\n".join(lines))
    feed = ReplayFeed(
        ReplayConfig(str(path)), "memcache-text", 0, 1, 2, seed=1, reader=TraceReader(path, 1024)
    )
    with pytest.raises(ConfigError, match="unknown operation 'fetch'") as failed:
        feed.prepare()
    assert failed.value.path == f"{path}:2501"
    assert not feed.done


def test_a_lane_held_by_a_pump_hands_out_the_same_requests_packed(tmp_path: Path) -> None:
    """A compiled pump's lane gives its segments as packed columns (engine/_pump.c):
    the same ops, keys, values and TTLs as the lists the Python driver gets."""
    rows = mixed_rows(3000, ops=TRACE_OPS)
    path = write_trace(tmp_path / "t.csv", rows)
    as_lists = drain(feed_for(path, lanes=3))
    feed = feed_for(path, lanes=3)
    packed: list[list[tuple[int, bytes, object, int]]] = [[] for _ in feed.lanes]
    for lane in feed.lanes:
        assert lane.pack()
        while (chunk := lane.next_chunk()) is not None:
            assert chunk.packed is not None and not chunk.keys
            ops, keys, key_starts, key_ends, values, starts, ends = chunk.packed
            assert len(ops) == len(key_ends) == len(starts) == len(ends) == chunk.size
            for i, op in enumerate(ops):
                key = bytes(keys[key_starts[i] : key_ends[i]])
                stored = _IS_STORE[op]
                value = values[starts[i] : ends[i]] if stored else None
                packed[lane.index].append((op, key, value, chunk.ttl_s))
    assert packed == as_lists


def test_profile_summary_figures() -> None:
    profile = TraceProfile()
    profile.key_sizes.update({10: 90, 20: 10})
    profile.value_sizes.update({100: 1})
    profile.per_second.update({5: 10, 7: 30})
    summary = profile_summary(profile.to_dict())
    assert summary["key_size_bytes"]["p50"] == 10 and summary["key_size_bytes"]["p99"] == 20
    assert summary["key_size_bytes"]["mean"] == 11
    rate = summary["rate"]
    assert rate["points"] == [[0, 10.0], [1, 0.0], [2, 30.0]]
    assert rate["mean_per_s"] == pytest.approx(40 / 3) and rate["peak_per_s"] == 30
    data = profile.to_dict()
    assert merge_profiles([data]) == data


def test_replay_flags_are_checked() -> None:
    config = replay_config("t.csv", speed="2x", from_text="1h", to_text="7200", limit="10k")
    assert (config.speed, config.from_s, config.to_s, config.limit) == (2.0, 3600, 7200, 10000)
    assert replay_config("t.csv", speed="max").speed is None
    with pytest.raises(ConfigError, match="--speed"):
        replay_config("t.csv", speed="0")
    with pytest.raises(ConfigError, match="--to: must be after --from"):
        replay_config("t.csv", from_text="10", to_text="5")


def test_trace_schedule_answers_from_the_lane(tmp_path: Path) -> None:
    from kvbench.engine.pacing import NEVER, TraceSchedule

    rows = [(i // 4, f"k{i}", 3, 0, 1, "get", 0) for i in range(40)]
    feed = feed_for(write_trace(tmp_path / "t.csv", rows), lanes=1, block=64, speed=1.0)
    lane = feed.lanes[0]
    schedule = TraceSchedule(lane, start_ns=1_000)
    assert schedule.due_by(999) == 0
    assert schedule.due_by(1_000) == 1  # row 0 at offset 0
    assert schedule.due_by(1_000 + 1_000_000_000) == 5  # second 0 and the first of 1
    assert schedule.intended_range(0, 3) == [1_000, 1_000 + 250_000_000, 1_000 + 500_000_000]
    cursor = Cursor(lane)
    assert cursor.advance()
    cursor.pos = sent = cursor.size
    assert cursor.advance()
    assert schedule.intended_ns(sent) == 1_000 + sent * 250_000_000
    assert schedule.due_by(1_000 + 10**12) == 40
    # Ranges within the current segment and across the waiting ones, to the lane's end.
    assert len(lane._waiting) >= 2  # (the ranges below span segments)
    for first in range(sent, 40):
        for stop in (first + 1, min(first + 7, 40), 40):
            expected = [1_000 + i * 250_000_000 for i in range(first, stop)]
            assert schedule.intended_range(first, stop) == expected
    assert schedule.intended_ns(40) == NEVER
    with pytest.raises(ValueError, match="not all in the lane"):
        schedule.intended_range(38, 41)


def test_the_rate_series_span_is_the_traces_seconds_whatever_the_buckets() -> None:
    """601 s of trace cut into 2 s buckets: the span is 601 s (not 301 x 2), so the
    printed mean recomputes as rows / span."""
    from kvbench.report.trace_figures import rate_series

    per_second = Counter({t: 10 for t in range(1000, 1601)})
    rate = rate_series(per_second)
    assert rate["bucket_s"] == 2 and len(rate["points"]) == 301
    assert rate["span_s"] == 601
    assert rate["mean_per_s"] == 6010 / 601


@pytest.mark.parametrize(
    ("ttls", "runs"),
    [
        ([-1, -1], [(0, 2)]),
        ([-1, 5, -1, 5], [(0, 4)]),
        ([5, 7, 7, -1, 5], [(0, 1), (1, 4), (4, 5)]),
        ([-1, 5, -1, 7, -1], [(0, 3), (3, 5)]),
    ],
)
def test_a_lane_chunk_is_cut_where_a_writes_ttl_changes(
    ttls: list[int], runs: list[tuple[int, int]]
) -> None:
    """Cut once when spooled (reads join the run they are in): refilling a chunk of
    interleaved TTLs copied the rest of it at every cut before."""
    from kvbench.workload.trace_source import _ttl_runs

    assert list(_ttl_runs(ttls)) == runs
