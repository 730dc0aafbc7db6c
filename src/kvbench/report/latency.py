"""Latency percentiles as every report gives them, and when a percentile is not given.

Pure. A percentile with too few samples behind it is None ("n/a"), never a number the
data cannot support.
"""

from __future__ import annotations

from kvbench.metrics.histogram import Histogram

# Percentiles reported everywhere, with their JSON names.
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p90", 90.0),
    ("p99", 99.0),
    ("p99_9", 99.9),
    ("p99_99", 99.99),
)
# A percentile q is printed only with at least 10 / (1 - q) samples behind it: ten samples
# beyond it (p99.9 needs 10,000), else it is one or two outliers, not a distribution.
TAIL_SAMPLES = 10


def min_samples(percentile: float) -> int:
    """Samples needed before ``percentile`` is reported: 10 / (1 - p/100), at least 1."""
    if percentile >= 100:
        return 1
    return max(1, round(TAIL_SAMPLES / (1 - percentile / 100)))


def percentile_ns(hist: Histogram, p: float) -> float:
    """``hist``'s ``p`` percentile, never above its max: a bucket's top may lie above every
    value recorded in it (seen: p50 60.03s, max 60.00s). Every figure printed of a
    percentile is this one (a verdict's said 25.44ms where the summary said 25.43ms)."""
    return min(hist.value_at_percentile(p), hist.max_ns)


def latency_summary(hist: Histogram | None) -> dict[str, float | None]:
    """Percentiles, max, mean and stddev in microseconds; None where samples are too few."""
    if hist is None or hist.total_count == 0:
        empty: dict[str, float | None] = {name: None for name, _ in PERCENTILES}
        return empty | {"max": None, "mean": None, "stddev": None}
    values = hist.percentiles([p for _, p in PERCENTILES])
    out: dict[str, float | None] = {}
    for name, p in PERCENTILES:
        value = min(values[p], hist.max_ns)  # (as ``percentile_ns``)
        out[name] = value / 1000 if hist.total_count >= min_samples(p) else None
    out["max"] = hist.max_ns / 1000
    out["mean"] = hist.mean_ns() / 1000
    out["stddev"] = hist.stddev_ns() / 1000
    return out
