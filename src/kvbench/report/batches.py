"""A put/get batch run's figures (runner/batches.py), from the stored run alone.

Interval 0 is the set batch and interval 1 the get batch, each from its first request
sent to its last reply received across every client; the window is the whole run. So
each rate is that batch's replies over that wall-clock. Beside it, the original's figure:
the original divided the ops by the per-thread times summed, which is the mean client's
rate, not the system's; it is shown, labelled, so the two can be told apart.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from kvbench.results.model import RunResult

_BATCHES = (("set", "stored"), ("get", "hit"))
# Server counters each batch must move by exactly clients x keys (get_misses by 0).
SERVER_COUNTERS = ("cmd_set", "get_hits", "get_misses")


def _counter(sample: dict[str, Any] | None, name: str) -> int | None:
    if not sample:
        return None
    value = sample.get("stats", {}).get(name)
    return int(float(value)) if value is not None else None


def server_deltas(run: RunResult) -> dict[str, int | None]:
    """``cmd_set``, ``get_hits``, ``get_misses`` after minus before, summed over servers."""
    deltas: dict[str, int | None] = {}
    for name in SERVER_COUNTERS:
        before = _counter(run.server.get("before"), name)
        after = _counter(run.server.get("after"), name)
        deltas[name] = after - before if before is not None and after is not None else None
    return deltas


def batch_figures(run: RunResult) -> dict[str, Any]:
    """Per batch: replies, wall-clock, rate, the original's rate; the whole run; shares."""
    figures: dict[str, Any] = {
        "clients": len(run.workers),
        "keys": run.config.get("workload", {}).get("keys"),
    }
    done = 0
    for snap, (name, success) in zip(run.intervals, _BATCHES, strict=False):
        counts = snap.counts.get(name, {})
        ok = int(counts.get(success, 0))
        seconds = max(0, snap.end_ns - snap.start_ns) / 1e9
        summed = sum(float(w.get(f"{name}_s", 0.0)) for w in run.workers)
        figures[name] = {
            "ok": ok,
            "misses": int(counts.get("miss", 0)),
            "mismatches": int(counts.get("mismatch", 0)),
            "errors": sum(
                int(n) for k, n in counts.items() if k not in (success, "miss", "mismatch")
            ),
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
        done += ok
    whole = run.window_s
    figures["whole"] = {
        "ok": done,
        "seconds": round(whole, 6),
        "per_s": round(done / whole, 1) if whole else 0.0,
    }
    figures["server_deltas"] = server_deltas(run)
    return figures


def _rate(value: float) -> str:
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def batch_line(figures: dict[str, Any]) -> str:
    """One line in the original's units beside kvbench's wall-clock figures."""
    sets, gets, whole = figures["set"], figures["get"], figures["whole"]
    deltas = figures["server_deltas"]
    counters = ", ".join(
        f"{name} {'+' if value is not None else ''}{value if value is not None else '?'}"
        for name, value in deltas.items()
    )
    return (
        f"{figures['clients']} client(s) x {figures['keys']} keys: "
        f"puts/s {_rate(sets['per_s'])} ({sets['ok']:,} in {sets['seconds']:.3f}s), "
        f"gets/s {_rate(gets['per_s'])} ({gets['ok']:,} in {gets['seconds']:.3f}s), "
        f"ops/s {_rate(whole['per_s'])} ({whole['ok']:,} in {whole['seconds']:.3f}s); "
        f"the original's formula (ops / summed per-client seconds): puts/s "
        f"{_rate(sets['original_per_s'])}, gets/s {_rate(gets['original_per_s'])}; "
        f"misses {gets['misses']}, mismatches {gets['mismatches']}; servers: {counters}"
    )


def batches_table(rows: list[dict[str, Any]], urls: list[str]) -> Table:
    """Every level: the batches' wall-clock rates, the original's, each server's replies."""
    table = Table(
        title="put-get batches: wall-clock from first request sent to last reply",
        caption="replies per server: " + " / ".join(urls),
    )
    for column in (
        "clients",
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
    ):
        table.add_column(column, justify="right", no_wrap=True)
    for f in rows:
        sets, gets, whole = f["set"], f["get"], f["whole"]
        servers = [a + b for a, b in zip(sets["servers"], gets["servers"], strict=True)]
        table.add_row(
            str(f["clients"]),
            _rate(sets["per_s"]),
            f"{sets['seconds']:.3f}",
            _rate(gets["per_s"]),
            f"{gets['seconds']:.3f}",
            _rate(whole["per_s"]),
            f"{whole['seconds']:.3f}",
            _rate(sets["original_per_s"]),
            _rate(gets["original_per_s"]),
            str(gets["misses"]),
            str(gets["mismatches"]),
            str(sets["errors"] + gets["errors"]),
            " / ".join(f"{n:,}" for n in servers),
        )
    return table
