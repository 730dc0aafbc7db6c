"""A Redis Cluster run's report: redirects per kind, interval and master; each master's
reconciliation with its own commandstats (calls and rejected_calls)."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

from rich.console import Console

from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.metrics.snapshot import merge_snapshots
from kvbench.report.json_report import document
from kvbench.report.reconcile import reconcile_nodes
from kvbench.report.summary import summarize
from kvbench.report.terminal import live_line, print_summary
from kvbench.results.model import RunResult

S = 1_000_000_000
URLS = ["redis+cluster://10.0.0.1:7000", "redis+cluster://10.0.0.2:7000"]


def snap(phase: str, index: int, gets: int, stats: dict[str, float]) -> IntervalSnapshot:
    hist = Histogram()
    hist.record(100_000, gets)
    return IntervalSnapshot(
        phase, index, index * S, (index + 1) * S, {"get": {"miss": gets}}, {"get": hist},
        stats=stats,
    )  # fmt: skip


def node_stats(get_calls: int, rejected: int) -> dict[str, str]:
    return {
        "cmdstat_get": f"calls={get_calls},usec=1,usec_per_call=0.1,rejected_calls={rejected},"
        "failed_calls=0"
    }


def sample(taken_ns: int, nodes: list[tuple[int, int]]) -> dict[str, Any]:
    per_node = [
        {"url": url, "taken_ns": taken_ns, "stats": node_stats(*counts)}
        for url, counts in zip(URLS, nodes, strict=True)
    ]
    total = sum(calls for calls, _ in nodes)
    return {"taken_ns": taken_ns, "stats": {"cmdstat_get": f"calls={total}"}, "targets": per_node}


def cluster_run(after: list[tuple[int, int]]) -> RunResult:
    # Interval 0: 60 replies at node 0, 40 at node 1, nothing moved. Interval 1: node 0
    # sent 5 requests to node 1 (3 MOVED, 2 ASK); they completed there.
    intervals = [
        snap("measure", 0, 100, {
            "server0_completed": 60, "server1_completed": 40, "server0_redirected": 0,
            "server1_redirected": 0, "redirect_moved": 0, "redirect_ask": 0,
            "slot_map_refreshes": 0,
        }),
        snap("measure", 1, 100, {
            "server0_completed": 55, "server1_completed": 45, "server0_redirected": 5,
            "server1_redirected": 0, "redirect_moved": 3, "redirect_ask": 2,
            "slot_map_refreshes": 1,
        }),
    ]  # fmt: skip
    preload = snap("preload", 0, 10, {"server0_completed": 6, "server1_completed": 4})
    return RunResult(
        run_id="r",
        started_at="2026-12-01T10:00:00+00:00",
        status="ok",
        mode="closed",
        kvbench_version="0.1.0",
        config={
            "targets": [{"url": u, "cluster": True} for u in URLS],
            "workload": {"placement": "ketama"},  # the default, stored with every run
        },
        targets=[{"url": u, "protocol": "resp2", "server_version": "7.0.15"} for u in URLS],
        window_start_ns=0,
        window_end_ns=2 * S,
        intervals=intervals,
        phases={"preload": preload},
        server={"before": sample(0, [(0, 0), (0, 0)]), "after": sample(3 * S, after)},
    )


def test_cluster_figures_in_the_summary_document_and_terminal() -> None:
    model = summarize(cluster_run(after=[(121, 5), (89, 0)]))
    assert model.cluster is not None
    assert (model.cluster["moved"], model.cluster["ask"]) == (3, 2)
    assert model.cluster["redirected_by_master"] == [5, 0]
    assert model.cluster["redirected_share"] == 5 / 200
    assert [s["redirected"] for s in model.servers] == [5, 0]
    assert [s["placement"] for s in model.servers] == ["slots", "slots"]  # not ketama
    assert [r.get("redirects") for r in model.intervals] == [
        {"moved": 0, "ask": 0},
        {"moved": 3, "ask": 2},
    ]
    verdict = next(v for v in model.verdicts if v.id == "cluster.redirects")
    # Redirects are counted, not requests (a request redirected twice counts twice).
    assert verdict.level == "info" and verdict.message.startswith(
        "5 redirects (as many as 2.50% of the requests completed; MOVED 3, ASK 2)"
    )
    assert "requests were redirected" not in verdict.message
    assert document(model)["cluster"] == model.cluster
    out = io.StringIO()
    print_summary(Console(file=out, width=200, color_system=None), model)
    text = out.getvalue()
    assert "servers (Redis Cluster slots):" in text
    assert "redirects: MOVED 3  ASK 2  (slot map asked again 1 time)" in text
    assert "moved 3 ask 2" in live_line(model.intervals[1])
    assert "moved" not in live_line(model.intervals[0])


def test_each_master_is_reconciled_with_its_own_calls_and_rejected_calls() -> None:
    run = cluster_run(after=[(121, 5), (89, 0)])  # node 0: 60+55+6, node 1: 40+45+4
    merged = _everything(run)
    rows = reconcile_nodes(merged, run.server, URLS)
    assert [(r.name, r.client, r.server, r.matches) for r in rows] == [
        ("10.0.0.1:7000", 121, 121, True),
        ("10.0.0.1:7000 redirected", 5, 5, True),
        ("10.0.0.2:7000", 89, 89, True),
    ]
    off = reconcile_nodes(merged, cluster_run(after=[(121, 3), (95, 0)]).server, URLS)
    assert [(r.name, r.matches) for r in off] == [
        ("10.0.0.1:7000", True),
        ("10.0.0.1:7000 redirected", False),  # the node refused 3, the client saw 5
        ("10.0.0.2:7000", False),  # 6 more calls than the client sent: another client
    ]


def test_a_run_without_samples_of_every_master_is_not_reconciled_per_master() -> None:
    run = cluster_run(after=[(121, 5), (89, 0)])
    after = dict(run.server["after"])
    after["targets"] = after["targets"][:1]
    assert reconcile_nodes(_everything(run), {**run.server, "after": after}, URLS) == []


def test_a_run_of_no_cluster_has_no_cluster_figures() -> None:
    run = cluster_run(after=[(121, 5), (89, 0)])
    plain = replace(run, config={"targets": [{"url": u} for u in URLS]})
    model = summarize(plain)
    assert model.cluster is None and "redirected" not in model.servers[0]
    assert model.servers[0]["placement"] == "ketama"
    assert not any(v.id == "cluster.redirects" for v in model.verdicts)


def _everything(run: RunResult) -> IntervalSnapshot:
    return merge_snapshots(run.intervals + list(run.phases.values()))


def test_at_a_narrow_terminal_a_server_and_its_figures_stay_on_one_line() -> None:
    """The servers' shares and the counters' reconciliation wrap between items, never
    inside one: a server's URL, its completions and its share; a counter's name, its two
    counts and the verdict (at 80 columns a break between words put "set" on one line and
    its counts on the next)."""
    model = summarize(cluster_run(after=[(121, 5), (89, 0)]))
    for width in (50, 80, 120):
        out = io.StringIO()
        print_summary(Console(file=out, width=width, color_system=None, force_terminal=True), model)
        lines = out.getvalue().splitlines()
        assert all(len(line) <= width for line in lines), width
        items = [
            *(f"{s['url']} {s['completed']:,} ({s['share']:.0%})" for s in model.servers),
            *(f"{r.name} {r.client:,}/{r.server:,} ok" for r in model.reconciliation),
            "(slot map asked again 1 time)",
        ]
        for item in items:
            assert any(item in line for line in lines), (width, item)
