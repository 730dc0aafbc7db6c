"""bench/connections.py's figures from result documents (no load here)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.bench import bench_module

connections = bench_module("connections")


def document(**changes: Any) -> dict[str, Any]:
    """A 3-interval run of 50 connections: 100 ops a second, each interval's ``total``
    the count so far (as the result document has it)."""
    doc: dict[str, Any] = {
        "status": "ok",
        "status_reasons": [],
        "connections": {"asked": 50, "live_min": 50, "connects": 50},
        "totals": {"ops": 300, "errors": 0, "throughput_per_s": 100.0},
        "intervals": [
            {"ops": 100, "total": 100, "cpu_s": 0.001},
            {"ops": 100, "total": 200, "cpu_s": 0.001},
            {"ops": 100, "total": 300, "cpu_s": 0.001},
        ],
        "workers": [{"peak_rss_bytes": 47_000_000}],
    }
    doc.update(changes)
    return doc


def test_cpu_per_op_is_the_windows_cpu_over_its_ops() -> None:
    """3 ms of CPU over 300 ops: 10 us each (summing the intervals' running totals, 600
    ops, made it 5)."""
    run = connections.run_of(document(), 50, 1)
    assert run.ops == 300 and run.us_per_op == pytest.approx(10.0)
    assert run.live_min == 50 and run.peak_rss_bytes == 47_000_000


def test_a_run_with_fewer_live_than_asked_stops_the_bench() -> None:
    doc = document(connections={"asked": 50, "live_min": 49, "connects": 51})
    with pytest.raises(connections.BenchError, match="49 of 50 live"):
        connections.run_of(doc, 50, 1)
