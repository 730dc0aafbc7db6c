"""A put/get batch run's figures (runner/batches.py), from the stored run alone.

Interval 0 is the set batch and interval 1 the get batch, each from its first request
sent to its last reply received across every client; the window is the whole run. So
each rate is that batch's successful replies over that wall-clock, printed beside seconds
to 4 significant digits so it can be recomputed from the line. Beside it, the original's
figure: the original divided the ops by the per-thread times summed, which is the mean
client's rate, not the system's; it is shown, labelled, so the two can be told apart. A
level's status (results/status.py) is in its figures, so a failed level shows as one.
"""

from __future__ import annotations

import math
from typing import TypedDict

from rich.table import Table

from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.reconcile import counter_deltas
from kvbench.report.tables import figures_table
from kvbench.results.model import RunResult
from kvbench.results.status import run_status
from kvbench.units import format_rate

_BATCHES = (("set", "stored"), ("get", "hit"))
# Server counters each batch must move by exactly clients x keys (get_misses by 0).
SERVER_COUNTERS = ("cmd_set", "get_hits", "get_misses")


class Batch(TypedDict):
    """One batch (the sets, or the gets): its replies, wall-clock and rates."""

    ok: int
    misses: int
    mismatches: int
    errors: int
    seconds: float
    from_s: float  # when it began and ended, from the window's start (the first set)
    to_s: float
    per_s: float
    original_per_s: float  # the original's formula: ops / summed per-client seconds
    servers: list[int]  # replies per server


class WholeRun(TypedDict):
    """Both batches: replies, the window, the rate."""

    ok: int
    seconds: float
    per_s: float


class BatchFigures(TypedDict):
    """A level of put-get-batches (``batch_figures``), as its document lists it."""

    clients: int
    keys: int | None
    status: str
    set: Batch
    get: Batch
    whole: WholeRun
    server_deltas: dict[str, int | None]  # SERVER_COUNTERS (None: not answered)


def batch_figures(run: RunResult) -> BatchFigures:
    """Per batch: replies, wall-clock, rate, the original's rate; the whole run; shares."""
    # The run has one interval per batch (runner/batches.py), an empty one for a batch
    # that never began.
    sets, gets = (
        _batch(run, snap, name, success)
        for snap, (name, success) in zip(run.intervals, _BATCHES, strict=True)
    )
    done = sets["ok"] + gets["ok"]
    whole = run.window_s
    return {
        "clients": len(run.workers),
        "keys": run.config.get("workload", {}).get("keys"),
        "status": run_status(run).name,
        "set": sets,
        "get": gets,
        "whole": {
            "ok": done,
            "seconds": round(whole, 6),
            "per_s": round(done / whole, 1) if whole else 0.0,
        },
        "server_deltas": counter_deltas(run.server, SERVER_COUNTERS),
    }


def _batch(run: RunResult, snap: IntervalSnapshot, name: str, success: str) -> Batch:
    counts = snap.counts.get(name, {})
    ok = int(counts.get(success, 0))
    seconds = max(0, snap.end_ns - snap.start_ns) / 1e9
    summed = sum(w.get("set_s", 0.0) if name == "set" else w.get("get_s", 0.0) for w in run.workers)
    return {
        "ok": ok,
        "misses": int(counts.get("miss", 0)),
        "mismatches": int(counts.get("mismatch", 0)),
        "errors": sum(int(n) for k, n in counts.items() if k not in (success, "miss", "mismatch")),
        "seconds": round(seconds, 6),
        # When the batch began and ended, from the window's start (the first set).
        "from_s": round((snap.start_ns - run.window_start_ns) / 1e9, 6),
        "to_s": round((snap.end_ns - run.window_start_ns) / 1e9, 6),
        "per_s": round(ok / seconds, 1) if seconds else 0.0,
        "original_per_s": round(ok / summed, 1) if summed else 0.0,
        "servers": [
            int(snap.stats.get(f"server{i}_completed", 0)) for i in range(len(run.targets))
        ],
    }


def _seconds(value: float) -> str:
    """Seconds to 4 significant digits (``0.07326``, ``1.234``, ``12.35``): a rate beside
    them recomputes to its own printed precision (milliseconds did not: 0.073 s)."""
    if value <= 0:
        return "0.000"
    return f"{value:.{max(0, 3 - math.floor(math.log10(value)))}f}"


def _rate_of(batch: Batch | WholeRun) -> str:
    """``27.3k (2,000 in 0.07326s)``."""
    return f"{format_rate(batch['per_s'])} ({batch['ok']:,} in {_seconds(batch['seconds'])}s)"


def batch_line(figures: BatchFigures) -> str:
    """One line in the original's units beside kvbench's wall-clock figures."""
    sets, gets, whole = figures["set"], figures["get"], figures["whole"]
    deltas = figures["server_deltas"]
    # A target with no counters at all (a proxy: nutcracker answers no stats) is said once,
    # under the table (batches_table), not as a row of '?' on every level's line.
    counters = (
        "; servers: "
        + ", ".join(
            f"{name} {'+' if value is not None else ''}{value if value is not None else '?'}"
            for name, value in deltas.items()
        )
        if has_counters(figures)
        else ""
    )
    return (
        f"{figures['clients']} client(s) x {figures['keys']} keys: "
        f"puts/s {_rate_of(sets)}, gets/s {_rate_of(gets)}, ops/s {_rate_of(whole)}; "
        f"the original's formula (ops / summed per-client seconds): puts/s "
        f"{format_rate(sets['original_per_s'])}, gets/s {format_rate(gets['original_per_s'])}; "
        f"misses {gets['misses']}, mismatches {gets['mismatches']}{counters}"
    )


def has_counters(figures: BatchFigures) -> bool:
    """Whether the servers answered any of ``SERVER_COUNTERS`` for this level."""
    return any(value is not None for value in figures.get("server_deltas", {}).values())


def batches_table(rows: list[BatchFigures], urls: list[str]) -> Table:
    """Every level: the batches' wall-clock rates, the original's, each server's replies."""
    table = figures_table(
        "put-get batches: wall-clock from first request sent to last reply",
        (
            "clients",
            "status",
            "puts/s",
            "set s",
            "gets/s",
            "get s",
            "ops/s",
            "whole s",
            "orig. puts/s",
            "orig. gets/s",
            "misses",
            "bad",
            "errors",
            "per server",
        ),
        caption="replies per server: "
        + " / ".join(urls)
        + (
            ""
            if any(has_counters(f) for f in rows)
            else "\nno server counters to compare: the target answers no stats (a proxy such "
            "as nutcracker has none)"
        ),
    )
    for f in rows:
        sets, gets, whole = f["set"], f["get"], f["whole"]
        servers = [a + b for a, b in zip(sets["servers"], gets["servers"], strict=True)]
        table.add_row(
            str(f["clients"]),
            f["status"],
            format_rate(sets["per_s"]),
            _seconds(sets["seconds"]),
            format_rate(gets["per_s"]),
            _seconds(gets["seconds"]),
            format_rate(whole["per_s"]),
            _seconds(whole["seconds"]),
            format_rate(sets["original_per_s"]),
            format_rate(gets["original_per_s"]),
            str(gets["misses"]),
            str(gets["mismatches"]),
            str(sets["errors"] + gets["errors"]),
            " / ".join(f"{n:,}" for n in servers),
        )
    return table
