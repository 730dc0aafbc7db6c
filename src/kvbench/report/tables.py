"""The rich tables the commands print besides a run's summary: the history, the presets,
a sweep's levels, a comparison at each level, the live view's latest intervals, and a
queue experiment's phases.

Pure: rows in, a ``rich.table.Table`` out; the figures come from the summary, the level
rows (report/levels.py) or the store's listing, never computed here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.table import Table

from kvbench.report.levels import LevelRow, TargetColumn
from kvbench.report.stats import MIN_CI_SAMPLES
from kvbench.report.terminal import fmt_us
from kvbench.results.status import OK
from kvbench.units import format_rate


def history_table(rows: Iterable[dict[str, Any]]) -> Table:
    """Stored runs, newest first (``Store.list_runs``): a sweep's levels and a preset's
    steps are told apart by their label."""
    table = Table("run", "started", "status", "label", "target", "window", "ops/s")
    for row in rows:
        rate = row["throughput_per_s"]
        table.add_row(
            row["run_id"],
            row["started_at"],
            row["status"],
            row.get("label") or "",
            row["target"],
            f"{row['window_s']:.2f}s",
            "" if rate is None else f"{rate:,.0f}",
        )
    return table


def presets_table(rows: Iterable[tuple[str, str, str, str]]) -> Table:
    """(name, shape, targets (``1``, ``2``, ``1+``), title) per preset."""
    table = Table("preset", "shape", "targets", "what")
    for name, shape, targets, title in rows:
        table.add_row(name, shape, targets, title)
    return table


def level_table(rows: Sequence[LevelRow], axis: str) -> Table:
    """A sweep: per level its status, throughput with its CI, p50, p99, errors, SLO."""
    table = Table(title=f"sweep over {axis}", title_justify="left")
    for name in (axis, "status", "ops/s", "95% CI", "p50", "p99", "errors", "SLO"):
        table.add_column(name, justify="right")
    for row in rows:
        t = row.throughput
        ci = ""
        if t and t.ci95:
            low = "0 (clamped)" if t.clamped else format_rate(t.ci95[0])
            ci = f"{low}..{format_rate(t.ci95[1])}"
        elif t and t.n > 1:
            ci = f"needs {MIN_CI_SAMPLES} rounds"
        table.add_row(
            f"{row.level:g}",
            row.status if not row.reason else f"{row.status}: {row.reason}",
            format_rate(t.mean) if t else "",
            ci,
            fmt_us(row.latency_us.get("p50")),
            fmt_us(row.latency_us.get("p99")),
            f"{row.errors:,}",
            {True: "met", False: "missed", None: ""}[row.slo_met],
        )
    return table


def compared_levels_table(
    axis: str, levels: Sequence[tuple[float, list[TargetColumn], dict[str, Any]]]
) -> Table:
    """Two targets compared at each level: (level, their columns, the comparison row)."""
    a_url = levels[0][1][0].url if levels else "?"
    b_url = levels[0][1][1].url if levels else "?"
    table = Table(title=f"A = {a_url}, B = {b_url}", title_justify="left")
    for column in (axis, "A ops/s", "B ops/s", "B/A", "95% CI", "B/A p99", "A p99", "B p99"):
        table.add_column(column, justify="right")
    table.add_column("status", justify="right")
    for level, columns, row in levels:
        ci = row["throughput_ratio_ci95"]
        table.add_row(
            f"{level:g}",
            format_rate(columns[0].model.throughput_per_s),
            format_rate(columns[1].model.throughput_per_s),
            f"{row['throughput_ratio']:.0%}" if row["throughput_ratio"] is not None else "",
            f"{ci[0]:.0%}..{ci[1]:.0%}" if ci else "",
            f"{row['p99_ratio']:.2f}x" if row["p99_ratio"] else "",
            fmt_us(columns[0].model.latency_us.get("p99")),
            fmt_us(columns[1].model.latency_us.get("p99")),
            _statuses(columns),
        )
    return table


def _statuses(columns: Sequence[TargetColumn]) -> str:
    """``ok``, or which target was not (with the first reason its status gives)."""
    bad = [
        f"{'AB'[i]}: {c.model.status.name}"
        + (f" ({c.model.status.reasons[0]})" if c.model.status.reasons else "")
        for i, c in enumerate(columns)
        if c.model.status.name != OK
    ]
    return "; ".join(bad) or OK


def live_table(rows: Sequence[dict[str, Any]]) -> Table:
    """The live view's latest intervals (the summary's interval rows): rates, errors, CPU,
    and per op its rate, p50 and p99."""
    table = Table(box=None, pad_edge=False)
    for name in ("round", "t", "ops/s", "total", "avg/s", "offered/s", "errors", "cpu"):
        table.add_column(name, justify="right")
    ops = sorted({op for row in rows for op in row["ops"]})
    for op in ops:
        table.add_column(f"{op} /s", justify="right")
        table.add_column(f"{op} p50", justify="right")
        table.add_column(f"{op} p99", justify="right")
    for row in rows:
        cells = [
            str(row["round"] + 1),
            f"{row['t_s']:.1f}s",
            format_rate(row["per_s"]),
            f"{row['total']:,}" if "total" in row else "",
            format_rate(row["avg_per_s"]) if "avg_per_s" in row else "",
            "" if row.get("offered_per_s") is None else format_rate(row["offered_per_s"]),
            f"{row['errors']:,}",
            f"{row['cpu_s'] / row['length_s']:.0%}" if row["length_s"] else "",
        ]
        for op in ops:
            vals = row["ops"].get(op)
            if vals is None:
                cells += ["", "", ""]
            else:
                cells += [
                    format_rate(vals["per_s"]),
                    fmt_us(vals["p50_us"]),
                    fmt_us(vals["p99_us"]),
                ]
        table.add_row(*cells)
    return table


def queue_phases_table(title: str, phases: Sequence[tuple[str, dict[str, Any]]]) -> Table:
    """A queue experiment's phases (a label and each run's result document): the
    original's figures in its units (puts, puts/s, gets, gets/s over the phase's
    duration) beside kvbench's own (the one ledger's lost and duplicated so far, the
    end-to-end p99, the status)."""
    table = Table(title=title, title_justify="left")
    for name in ("phase", "puts", "puts/s", "gets", "gets/s", "duration"):
        table.add_column(name, justify="left" if name == "phase" else "right")
    for name in ("lost so far", "duplicated so far", "e2e p99", "status"):
        table.add_column(name, justify="right")
    for label, doc in phases:
        queue = doc["queue"]
        phase = queue["phase"]
        table.add_row(
            label,
            f"{phase['puts']:,}",
            format_rate(phase["puts_per_s"]),
            f"{phase['gets']:,}",
            format_rate(phase["gets_per_s"]),
            f"{phase['duration_s']:.3f}s",
            f"{queue['lost']:,}",
            f"{queue['duplicated']:,}",
            fmt_us(queue["e2e_latency_us"]["p99"]),
            doc["status"],
        )
    return table
