"""YCSB's figures for a fixed run, and read-modify-writes in reconciliation."""

from __future__ import annotations

from typing import Any

import pytest

from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.report.reconcile import reconcile
from kvbench.report.ycsb import ycsb_document, ycsb_figures, ycsb_lines
from tests.support.runs import make_run

S = 10**9


def test_figures_are_yscbs_names_for_the_windows_counts_and_latencies() -> None:
    run = make_run("r", [{"get": (1000, 5_000_000), "set": (500, 2_000_000)}])
    figures = ycsb_document(ycsb_figures(run))
    assert figures["OVERALL"] == {"RunTime(ms)": 1000, "Throughput(ops/sec)": 1500.0}
    read = figures["READ"]
    assert read["Operations"] == 1000 and read["Return=OK"] == 1000
    assert read["MinLatency(us)"] == 100 and read["MaxLatency(us)"] == 5000
    assert read["99thPercentileLatency(us)"] == 5000  # 2% of samples at 5 ms
    assert read["95thPercentileLatency(us)"] == 100
    assert read["AverageLatency(us)"] == pytest.approx(198.0, abs=0.1)  # 98% 100 us, 2% 5 ms
    assert figures["UPDATE"]["Operations"] == 500
    lines = ycsb_lines(ycsb_figures(run))
    assert lines[:3] == [
        "[OVERALL], RunTime(ms), 1000",
        "[OVERALL], Throughput(ops/sec), 1500.0",
        "[READ], Operations, 1000",
    ]


def test_sets_are_inserts_under_latest_and_rmw_its_own_section() -> None:
    config: dict[str, Any] = {"load": {}, "workload": {"key_pattern": "latest", "seed": 1}}
    run = make_run(
        "r", [{"get": (100, 1000), "set": (100, 1000), "rmw": (50, 1000)}], config=config
    )
    sections = {section for section, _, _ in ycsb_figures(run)}
    assert sections == {"OVERALL", "READ", "INSERT", "READ-MODIFY-WRITE"}


def test_misses_are_not_found() -> None:
    run = make_run("r", [{"get": (10, 1000)}])
    run.intervals[0].counts["get"] = {"hit": 6, "miss": 4}
    read = ycsb_document(ycsb_figures(run))["READ"]
    assert (read["Return=OK"], read["Return=NOT_FOUND"]) == (6, 4)


def test_errors_are_operations_but_never_throughput() -> None:
    run = make_run("r", [{"get": (10, 1000)}])
    run.intervals[0].counts["get"] = {"hit": 6, "miss": 2, "error_reply": 2}
    figures = ycsb_document(ycsb_figures(run))
    assert figures["READ"]["Operations"] == 10 and figures["READ"]["Return=ERROR"] == 2
    assert figures["OVERALL"]["Throughput(ops/sec)"] == 8.0  # hits and misses over 1 s


def sample(**stats: Any) -> dict[str, Any]:
    return {"taken_ns": 0, "stats": {k: str(v) for k, v in stats.items()}}


def test_an_rmw_counts_one_get_and_one_set_on_the_server() -> None:
    snap = IntervalSnapshot(
        "measure", 0, 0, S, {"get": {"hit": 5}, "rmw": {"hit": 3, "miss": 1}}, {"get": Histogram()}
    )
    server = {
        "before": sample(cmd_get=0, cmd_set=0, get_hits=0, get_misses=0),
        "after": sample(cmd_get=9, cmd_set=4, get_hits=8, get_misses=1),
    }
    rows = {r.name: r for r in reconcile("memcache", snap, server)}
    assert (rows["get (keys)"].client, rows["get (keys)"].server) == (9, 9)
    # the sets were all rmw: named by the server's counter and the rmw all the same
    assert (rows["set + rmw"].client, rows["set + rmw"].server) == (4, 4)
    assert rows["get hits"].client == 8 and rows["get misses"].client == 1
    redis = {
        "before": sample(cmdstat_get="calls=0", cmdstat_set="calls=0"),
        "after": sample(cmdstat_get="calls=9", cmdstat_set="calls=4"),
    }
    assert all(r.matches for r in reconcile("redis", snap, redis))
    # rmw alone: one row per counter, each with its own name (not "rmw" twice)
    only = IntervalSnapshot("measure", 0, 0, S, {"rmw": {"hit": 4}}, {})
    redis["after"] = sample(cmdstat_get="calls=4", cmdstat_set="calls=4")
    names = [r.name for r in reconcile("redis", only, redis)]
    assert names == ["get + rmw", "set + rmw"]
