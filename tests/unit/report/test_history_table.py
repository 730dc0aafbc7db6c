"""The history table: a queue run's ops/s says what it adds up."""

from __future__ import annotations

from io import StringIO
from typing import Any

from rich.console import Console

from kvbench.report.tables import history_table


def row(mode: str, rate: float | None) -> dict[str, Any]:
    return {
        "run_id": f"20261201-000000-{mode}",
        "started_at": "2026-12-01T00:00:00+00:00",
        "status": "ok",
        "mode": mode,
        "target": "redis-queue://127.0.0.1:6379/jobs",
        "window_s": 2.76,
        "throughput_per_s": rate,
        "label": None,
    }


def rendered(rows: list[dict[str, Any]]) -> str:
    out = StringIO()
    Console(file=out, width=200).print(history_table(rows))
    return out.getvalue()


def test_a_queue_runs_ops_per_s_is_named_the_sum_of_its_sides() -> None:
    """puts/s 18,147.2 + gets/s 19,317.3 (the summary's figures) = the history's 37,464."""
    text = rendered([row("queue", 18_147.2 + 19_317.3), row("closed", 103_583.0)])
    assert "37,464 (puts/s + gets/s)" in text
    assert "103,583" in text and "103,583 (" not in text


def test_a_run_without_a_rate_shows_none() -> None:
    assert "(puts/s + gets/s)" not in rendered([row("queue", None)])
