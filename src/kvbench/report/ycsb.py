"""YCSB's report figures for a run, beside kvbench's own (the ycsb-* presets).

YCSB prints ``[SECTION], Metric, value`` lines (site.ycsb.measurements.Measurements and
its exporters): ``[OVERALL] RunTime(ms)`` and ``Throughput(ops/sec)``, then per op its
``Operations``, ``AverageLatency(us)``, ``MinLatency(us)``, ``MaxLatency(us)``,
``95thPercentileLatency(us)``, ``99thPercentileLatency(us)`` and a count per return
code. Here they are computed from the run's measured window: kvbench's get is YCSB's
READ, a set its UPDATE (INSERT under the ``latest`` key pattern, where every set inserts),
an rmw its READ-MODIFY-WRITE; a miss is ``Return=NOT_FOUND``, any error
``Return=ERROR``. Latencies are kvbench's (from the intended send time in an open loop).
One difference stays: YCSB also counts an RMW's read and write in READ and UPDATE; an
rmw here is one op. Pure: reads a stored run.
"""

from __future__ import annotations

from typing import Any

from kvbench.report.latency import percentile_ns
from kvbench.results.model import RunResult

# kvbench op -> YCSB's operation name
SECTIONS = {"get": "READ", "set": "UPDATE", "rmw": "READ-MODIFY-WRITE", "delete": "DELETE"}
# YCSB's percentiles in its default (hdrhistogram) exporter's names.
PERCENTILES = ((95.0, "95thPercentileLatency(us)"), (99.0, "99thPercentileLatency(us)"))

Figure = tuple[str, str, float | int]


def ycsb_figures(run: RunResult) -> list[Figure]:
    """The run's figures as YCSB names them, in YCSB's order."""
    total = run.total()
    window_s = run.window_s
    inserts = run.config.get("workload", {}).get("key_pattern") == "latest"
    names = sorted(total.counts) if total else []
    # Operations that got their answer (a miss is NOT_FOUND, an answer): YCSB counts its
    # failed operations in its throughput too, kvbench never counts an error as throughput
    # (its per-section Operations and Return=ERROR still show them).
    done = sum(total.succeeded(name) for name in names) if total else 0
    figures: list[Figure] = [
        ("OVERALL", "RunTime(ms)", round(window_s * 1000)),
        ("OVERALL", "Throughput(ops/sec)", round(done / window_s, 1) if window_s else 0.0),
    ]
    for name in names:
        section = "INSERT" if inserts and name == "set" else SECTIONS.get(name, name.upper())
        figures += _op_figures(section, total, name)
    return figures


def _op_figures(section: str, total: Any, name: str) -> list[Figure]:
    count = total.ops(name)
    histogram = total.latency.get(name)
    out: list[Figure] = [(section, "Operations", count)]
    if histogram is not None and histogram.total_count:
        out += [
            (section, "AverageLatency(us)", round(histogram.mean_ns() / 1000, 3)),
            (section, "MinLatency(us)", round(histogram.min_ns / 1000)),
            (section, "MaxLatency(us)", round(histogram.max_ns / 1000)),
        ]
        out += [  # (never above the max, as kvbench's own percentiles)
            (section, label, round(percentile_ns(histogram, p) / 1000)) for p, label in PERCENTILES
        ]
    outcomes = total.counts.get(name, {})
    errors = total.errors(name)
    misses = outcomes.get("miss", 0)
    ok = total.succeeded(name) - misses
    for code, n in (("OK", ok), ("NOT_FOUND", misses), ("ERROR", errors)):
        if n:
            out.append((section, f"Return={code}", n))
    return out


def ycsb_lines(figures: list[Figure]) -> list[str]:
    """YCSB's text form: ``[SECTION], Metric, value``."""
    return [f"[{section}], {metric}, {value}" for section, metric, value in figures]


def ycsb_document(figures: list[Figure]) -> dict[str, dict[str, float | int]]:
    """The same for JSON: ``{"OVERALL": {"RunTime(ms)": ...}, "READ": {...}}``."""
    out: dict[str, dict[str, float | int]] = {}
    for section, metric, value in figures:
        out.setdefault(section, {})[metric] = value
    return out
