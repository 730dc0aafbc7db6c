"""bench/peers.py's method, without load: same keys on both sides, distinct seeds, rounds
alternated, the median of paired ratios, no ratio across different hit rates, figures that
recompute from the rounds it writes."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from tests.support.bench import bench_module

peers = bench_module("peers")
tools = bench_module("peer_tools")


def sample(tool: str, round_index: int, ops_per_s: float, hit_rate: float | None = 1.0) -> Any:
    return peers.Sample(
        tool=tool,
        round=round_index,
        ops_per_s=ops_per_s,
        tool_ops=int(ops_per_s),
        server_ops=int(ops_per_s) + 10,
        server_us_per_op=5.0 + round_index,
        hit_rate=hit_rate,
        client_us_per_op=8.0,
        client_cores=0.9,
        driver="compiled" if tool == "kvbench" else "",
    )


def not_run(port: int, seconds: int, cpus: Any) -> Any:
    raise AssertionError("no load in unit tests")


CELL = peers.Cell(
    "redis-p1-rb", "Redis, P1 (redis-benchmark)", "redis", 1,
    peers.Side("kvbench", peers.KVBENCH_KEYS, not_run),
    peers.Side("redis-benchmark", tools.RedisBenchmark.keys, not_run),
)  # fmt: skip


def result(ours: list[float], theirs: list[float], hits: tuple[float, float] = (1.0, 1.0)) -> Any:
    cell = CELL
    return peers.CellResult(
        cell,
        [sample("kvbench", i + 1, x, hits[0]) for i, x in enumerate(ours)],
        [sample(cell.peer.tool, i + 1, x, hits[1]) for i, x in enumerate(theirs)],
    )


def test_both_tools_get_100k_keys_of_one_length() -> None:
    ours, theirs = peers.KVBENCH_KEYS.names(), peers.MEMTIER_KEYS.names()
    assert len(ours) == len(set(ours)) == len(theirs) == len(set(theirs)) == 100_000
    assert {len(k) for k in ours} == {len(k) for k in theirs} == {14}
    kv = tools.kvbench_argv("memcached://h:1", peers.KVBENCH_KEYS, 1, 1)
    assert kv[kv.index("--key-size") + 1] == "14" and kv[kv.index("--keys") + 1] == "100000"
    mt = tools.memtier_argv(1, "memcache_text", peers.MEMTIER_KEYS, 1, 1)
    # memtier draws key numbers from [minimum, maximum], both ends included
    low = int(next(a for a in mt if a.startswith("--key-minimum=")).split("=")[1])
    high = int(next(a for a in mt if a.startswith("--key-maximum=")).split("=")[1])
    assert high - low + 1 == 100_000 and len(str(low)) == len(str(high)) == 6
    # redis-benchmark's -r keys are "key:" + 12 digits: the prefill writes exactly those
    assert tools.RedisBenchmark.keys.names()[:2] == [b"key:000000000000", b"key:000000000001"]


@pytest.mark.parametrize("threads", [1, 2])
def test_memtier_connections_draw_distinct_key_sequences(threads: int) -> None:
    argv = tools.memtier_argv(1, "redis", peers.MEMTIER_KEYS, threads, 16)
    assert "--distinct-client-seed" in argv
    assert f"--threads={threads}" in argv and f"--clients={50 // threads}" in argv
    assert "--key-pattern=R:R" in argv and "--data-size=100" in argv and "--pipeline=16" in argv


def test_ratio_is_the_median_of_paired_round_ratios() -> None:
    res = result(ours=[100, 200, 300], theirs=[100, 100, 200])
    assert res.paired == [1.0, 2.0, 1.5]
    assert res.ratio == 1.5  # the ratio of the medians would be 200 / 100 = 2.0


def test_no_ratio_when_the_hit_rates_differ() -> None:
    assert result([100], [100], hits=(1.0, 0.975)).ratio == 1.0  # 2.5 points apart
    res = result([100], [100], hits=(1.0, 0.965))  # 3.5 points
    assert res.ratio is None and not res.same_work
    assert "hit rates differ" in peers.table([res])


def test_rounds_alternate_which_tool_goes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []

    def fake_measure(cell: Any, side: Any, round_index: int, seconds: int, cpus: Any) -> Any:
        calls.append((side.tool, round_index))
        return sample(side.tool, round_index, 1000)

    monkeypatch.setattr(peers, "measure", fake_measure)
    res = peers.CellResult(CELL)
    peers.run_cell(res, 4, 1, tools.Cpus("0", "1"))
    rb = "redis-benchmark"
    assert calls == [
        ("kvbench", 1), (rb, 1), (rb, 2), ("kvbench", 2),
        ("kvbench", 3), (rb, 3), (rb, 4), ("kvbench", 4),
    ]  # fmt: skip
    assert [s.round for s in res.ours] == [s.round for s in res.theirs] == [1, 2, 3, 4]


def test_table_figures_recompute_from_the_rounds_written() -> None:
    res = result(ours=[120, 90, 150, 100, 130], theirs=[100, 100, 110, 95, 90])
    row = peers.table([res]).splitlines()[2].split(" | ")
    doc = res.as_json()
    by_round: dict[int, dict[str, float]] = {}
    for r in doc["rounds"]:
        by_round.setdefault(r["round"], {})[r["tool"]] = r["ops_per_s"]
    paired = [v["kvbench"] / v["redis-benchmark"] for v in by_round.values()]
    assert row[1] == f"{statistics.median(r['kvbench'] for r in by_round.values()):,.0f}"
    assert row[3] == f"{statistics.median(r['redis-benchmark'] for r in by_round.values()):,.0f}"
    assert row[4].startswith(f"{statistics.median(paired):.2f} ")
    assert doc["median_paired_ratio"] == pytest.approx(statistics.median(paired))
    servers = [r["server_us_per_op"] for r in doc["rounds"] if r["tool"] == "kvbench"]
    assert row[7].startswith(f"{statistics.median(servers):.2f} / ")


def test_kvbench_client_cpu_is_the_measured_windows() -> None:
    """workers[].cpu_s adds the warm-up's CPU; the window's is the intervals' sum."""
    doc = {
        "status": "ok",
        "totals": {"errors": 0, "ops": 60_000, "throughput_per_s": 30_000.0},
        "window_s": 2.0,
        "workers": [{"cpu_s": 2.9}],
        "intervals": [{"cpu_s": 0.5}, {"cpu_s": 0.7}],
        "environment": {"driver": "compiled"},
    }
    run = tools.kvbench_report(doc)
    assert run.client_cpu_s == pytest.approx(1.2) and run.client_cores == pytest.approx(0.6)
    assert (run.ops_per_s, run.ops, run.driver) == (30_000.0, 60_000, "compiled")
    with pytest.raises(tools.BenchError, match="3 errors"):
        tools.kvbench_report({**doc, "totals": {**doc["totals"], "errors": 3}})


def test_counters_from_memcached_and_redis_stats() -> None:
    mc = tools.counters_from(
        "memcached",
        {"rusage_user": "1.5", "rusage_system": "0.25", "cmd_get": "70", "cmd_set": "30",
         "get_hits": "60", "get_misses": "10", "curr_items": "5"},
    )  # fmt: skip
    assert mc == tools.Counters(1.75, 100, 60, 10, 5)
    redis = tools.counters_from(
        "redis",
        {"used_cpu_user": "2.0", "used_cpu_sys": "1.0", "cmdstat_get": "calls=7,usec=9",
         "cmdstat_set": "calls=3,usec=4", "cmdstat_info": "calls=99,usec=1",
         "keyspace_hits": "6", "keyspace_misses": "1", "db0": "keys=42,expires=0"},
    )  # fmt: skip
    assert redis == tools.Counters(3.0, 10, 6, 1, 42)  # INFO itself is not an op


def test_uniform_draws_touch_the_expected_distinct_keys() -> None:
    assert tools.expected_distinct(100_000, 10_000) == pytest.approx(9516, abs=1)


def test_only_selects_cells_by_name_or_glob() -> None:
    every = [CELL, peers.Cell("redis-p16-rb", "", "redis", 1, CELL.ours, CELL.peer)]
    assert [c.name for c in peers.selected(every, ["redis-p1-rb"])] == ["redis-p1-rb"]
    assert {c.name for c in peers.selected(every, ["redis-*-rb"])} == {
        "redis-p1-rb",
        "redis-p16-rb",
    }
    assert peers.selected(every, None) == every


def test_kvbench_args_reach_every_kvbench_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--kvbench-arg`` is added to each cell's kvbench run (after memtier's op order)."""
    seen: list[tuple[str, ...]] = []

    def fake_kvbench(url: str, keys: Any, processes: int, pipeline: int, *rest: Any) -> Any:
        seen.append(tuple(rest[-1]))
        return None

    monkeypatch.setattr(peers, "kvbench", fake_kvbench)
    monkeypatch.setattr(peers.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert peers.parse_args(["--kvbench-arg=--busy-poll", "--kvbench-arg=50us"]).kvbench_arg == [
        "--busy-poll",
        "50us",
    ]
    found, missing = peers.cells(("--busy-poll", "50us"))
    assert not missing
    for cell in found:
        cell.ours.run(1, 1, None)
    assert len(seen) == len(found) and all(s[-2:] == ("--busy-poll", "50us") for s in seen)
    assert seen[0][:2] == peers.IN_TURN


def test_the_cluster_cells_ask_memtier_for_its_cluster_mode() -> None:
    assert "--cluster-mode" in tools.memtier_argv(1, "redis", peers.MEMTIER_KEYS, 1, 16, True)
    assert "--cluster-mode" not in tools.memtier_argv(1, "redis", peers.MEMTIER_KEYS, 1, 16)
    assert tools.slot_bounds(3) == [0, 5461, 10922, 16384]
