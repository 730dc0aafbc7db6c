"""The rich tables the commands print besides a run's summary: the history, the presets,
a sweep's levels, a comparison at each level, the live view's latest intervals, and a
queue experiment's phases.

Pure: rows in, a ``rich.table.Table`` out; the figures come from the summary, the level
rows (report/levels.py) or the store's listing, never computed here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.table import Table

from kvbench.report.fit import FittedTable
from kvbench.report.levels import LevelRow, ShareOfSecond
from kvbench.report.rows import IntervalRow
from kvbench.report.stats import MIN_CI_SAMPLES
from kvbench.report.summary import ReportModel
from kvbench.report.terminal import fmt_us, interval_ops, whole_rate
from kvbench.report.terminal import unit_rates as unit_rates_of
from kvbench.results.status import OK
from kvbench.results.store import HistoryRow
from kvbench.units import format_rate


def history_table(rows: Iterable[HistoryRow], wide: bool = False) -> Table:
    """Stored runs, newest first (``Store.list_runs``): a sweep's levels and a preset's
    steps are told apart by their label. At a narrow width the columns that do not fit
    are left out, by priority, never cut: at 80 columns the run id, the one thing to copy
    for ``kvbench show``, read "20261205-01…", and the start and target were cut too."""
    table = FittedTable(
        "run", "started", "status", "label", "target", "window", "ops/s",
        priority=("run", "status", "ops/s", "window", "target", "label", "started"),
        wide=wide,
        see="--wide",
    )  # fmt: skip
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


def level_table(rows: Sequence[LevelRow], axis: str, wide: bool = False) -> Table:
    """A sweep: per level its status, throughput with its CI, p50, p99, errors, SLO, and
    under --verify its bad values (get hits that were not the value stored). Why a level
    is not ``ok`` is said under the table (``level_reasons``): in its cell, a reason of a
    hundred characters folded into a column of seven lines at 100 columns."""
    verified = any(row.bad_values is not None for row in rows)
    names = (axis, "status", "ops/s", "95% CI", "p50", "p99", "errors", "SLO")
    table = figures_table(
        f"sweep over {axis}",
        names + ("bad values",) * verified,
        wide=wide,
        priority=(axis, "status", "ops/s", "p50", "p99", "errors", "bad values", "SLO"),
    )
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
            row.status,
            format_rate(t.mean) if t else "",
            ci,
            fmt_us(row.latency_us.get("p50")),
            fmt_us(row.latency_us.get("p99")),
            f"{row.errors:,}",
            {True: "met", False: "missed", None: ""}[row.slo_met],
            *([f"{row.bad_values:,}" if row.bad_values is not None else ""] if verified else []),
        )
    return table


def level_reasons(rows: Sequence[LevelRow], axis: str) -> list[str]:
    """A line per level that has a reason for its status, under the sweep's table:
    ``connections 4: failed - memcached://... was down when the window ended: ...``."""
    return [f"{axis} {row.level:g}: {row.status} - {row.reason}" for row in rows if row.reason]


def figures_table(
    title: str,
    names: Sequence[str],
    caption: str | None = None,
    wide: bool = False,
    priority: Sequence[str] = (),
) -> Table:
    """A table of figures that never folds or cuts one ("309…") when the terminal is
    narrow: it shows the columns that fit, by ``priority`` (else the first named first),
    and says which it left out (``FittedTable``; ``wide``: every column, the terminal
    wraps)."""
    table = FittedTable(
        priority=priority,
        title=title,
        title_justify="left",
        caption=caption,
        wide=wide,
        see="--wide, or the JSON (--json)",
    )
    for name in names:
        table.add_column(name, justify="right")
    return table


def compared_rounds_table(axis: str, levels: Sequence[tuple[float, ShareOfSecond]]) -> Table:
    """Two targets at each level, as the original reported them: every round's ops/s,
    their mean, min and max, failed requests (``report.levels.share_of_second`` rows)."""
    first = levels[0][1]["first"]["url"] if levels else "?"
    second = levels[0][1]["second"]["url"] if levels else "?"
    table = figures_table(
        f"A = {first}\nB = {second}",
        (axis, "", "rounds: ops/s", "mean", "min", "max", "failed"),
    )
    for level, row in levels:
        for name, side in (("A", row["first"]), ("B", row["second"])):
            rounds = " ".join(
                f"{rate:,}" if ok else f"({rate:,})"
                for rate, ok in zip(side["rounds_per_s"], side["rounds_ok"], strict=True)
            )
            table.add_row(
                f"{level:g}" if name == "A" else "",
                name,
                rounds,
                *(
                    "" if side[k] is None else f"{side[k]:,}"
                    for k in ("mean_per_s", "min_per_s", "max_per_s")
                ),
                f"{side['failed_requests']:,}",
            )
    return table


def share_table(axis: str, levels: Sequence[tuple[float, ShareOfSecond]]) -> Table:
    """A as a % of B at each level (from the printed means), the 95% CI of A/B from the
    paired rounds (the document has its point estimate too), each side's p99, the status."""
    table = figures_table(
        "A as % of B (mean A / mean B); paired-ratio CI: 95% CI of A/B over paired rounds",
        (axis, "A % of B", "paired-ratio CI", "A p99", "B p99", "status"),
    )
    for level, row in levels:
        ci = row["paired_ratio_ci95"]
        pct = row["first_pct_of_second"]
        table.add_row(
            f"{level:g}",
            "" if pct is None else f"{pct:.1f}%",
            f"{ci[0]:.1%}..{ci[1]:.1%}"
            if ci
            else (
                f"needs {MIN_CI_SAMPLES} rounds" if row["rounds_paired"] < MIN_CI_SAMPLES else ""
            ),
            fmt_us(row["first"]["p99_us"]),
            fmt_us(row["second"]["p99_us"]),
            _side_statuses(row),
        )
    return table


def _side_statuses(row: ShareOfSecond) -> str:
    bad = [
        f"{name}: {side['status']}"
        for name, side in (("A", row["first"]), ("B", row["second"]))
        if side["status"] != OK
    ]
    return "; ".join(bad) or OK


# The live table's columns, the most wanted first; every op's rate, p50 and p99 go
# together, or all collapse into the total columns when they do not fit.
_LIVE_PRIORITY = ("level", "t", "round", "ops/s", "total", "errors")
PER_OP_COLUMNS = "per-op /s, p50, p99"


def live_table(rows: Sequence[IntervalRow], unit_rates: bool = False, wide: bool = False) -> Table:
    """The live view's latest intervals (the summary's interval rows): a sweep's level,
    rates (an open loop's offered rate and late sends too), errors, CPU, and per op its
    rate, p50 and p99; ``unit_rates``: the interval's and the run's ops and the rate per
    second, minute and hour instead of per op.

    Rates are whole ops per second, exact (``10,843``, not ``10.8k``), so the seconds add
    up to the ``total``; no figure is cut: the columns that do not fit are left out
    (``FittedTable``), the per-op ones all together, unless ``wide``."""
    levels = any("level" in row for row in rows)
    # open loop: what the schedule offered, and the requests sent behind their slots
    offered = any(row.get("offered_per_s") is not None for row in rows)
    names = ("level",) * levels + ("round", "t", "ops/s", "total", "avg/s") + (
        "offered/s", "late") * offered + ("errors", "cpu")  # fmt: skip
    if unit_rates:
        names = ("level",) * levels + ("round", "t", "ops", "total", "per s", "per min",
                 "per hour", "errors")  # fmt: skip
    ops = [] if unit_rates else sorted({op for row in rows for op in row["ops"]})
    per_op = [f"{op} {kind}" for op in ops for kind in ("/s", "p50", "p99")]
    table = FittedTable(
        box=None,
        pad_edge=False,
        priority=(*_LIVE_PRIORITY, (PER_OP_COLUMNS, per_op)),
        wide=wide,
        see="--wide",
    )
    for name in (*names, *per_op):
        table.add_column(name, justify="right")
    if unit_rates:
        for row in rows:
            per_s, per_min, per_h = unit_rates_of(row)
            table.add_row(
                *([row.get("level", "")] if levels else []),
                str(row["round"] + 1),
                f"{row['t_s']:.1f}s",
                *(f"{n:,}" for n in (interval_ops(row), row["total"], per_s, per_min, per_h)),
                f"{row['errors']:,}",
            )
        return table
    for row in rows:
        cells = [
            *([row.get("level", "")] if levels else []),
            str(row["round"] + 1),
            f"{row['t_s']:.1f}s",
            whole_rate(row["per_s"]),
            f"{row['total']:,}" if "total" in row else "",
            whole_rate(row["avg_per_s"]) if "avg_per_s" in row else "",
            *(
                [
                    "" if (rate := row.get("offered_per_s")) is None else whole_rate(rate),
                    "" if (late := row.get("late")) is None else f"{late:,}",
                ]
                if offered
                else []
            ),
            f"{row['errors']:,}",
            f"{row['cpu_s'] / row['length_s']:.0%}" if row["length_s"] else "",
        ]
        for op in ops:
            vals = row["ops"].get(op)
            if vals is None:
                cells += ["", "", ""]
            else:
                cells += [whole_rate(vals["per_s"]), fmt_us(vals["p50_us"]), fmt_us(vals["p99_us"])]
        table.add_row(*cells)
    return table


def queue_phases_table(
    title: str, phases: Sequence[tuple[str, ReportModel]], wide: bool = False
) -> Table:
    """A queue experiment's phases (a label and each run's summary): the
    original's figures in its units (puts, puts/s, gets, gets/s over the phase's
    duration) beside kvbench's own (the one ledger's lost and duplicated so far, the
    end-to-end p99, the status)."""
    table = FittedTable(
        title=title, title_justify="left", wide=wide, see="--wide, or the JSON (--json)"
    )
    for name in ("phase", "puts", "puts/s", "gets", "gets/s", "duration"):
        table.add_column(name, justify="left" if name == "phase" else "right")
    for name in ("lost so far", "duplicated so far", "e2e p99", "status"):
        table.add_column(name, justify="right")
    for label, model in phases:
        queue = model.queue
        assert queue is not None, "a queue experiment's phases are queue runs"
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
            model.status.name,
        )
    return table
