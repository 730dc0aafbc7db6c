"""Reading kvbench's Prometheus histogram as PromQL would: ``histogram_quantile``."""

from __future__ import annotations

import bisect
from typing import Any

from kvbench.report.prometheus import BUCKETS_S


def histogram_of(
    families: dict[str, list[Any]],
    op: str,
    target: str | None = None,
    outcome: str | None = None,
) -> dict[str, Any]:
    """``{"buckets": [(le, cumulative count)...], "sum": s, "count": n}`` of one op's
    ``kvbench_latency_seconds`` in a parsed scrape (le as a float, +Inf last): of one
    ``outcome``, or summed over them (PromQL's ``sum by (le, op)``)."""
    buckets: dict[float, float] = {}
    found: dict[str, Any] = {}
    for sample in families["kvbench_latency_seconds"]:
        if sample.labels["op"] != op or (target and sample.labels["target"] != target):
            continue
        if outcome is not None and sample.labels["outcome"] != outcome:
            continue
        if sample.name.endswith("_bucket"):
            le = float(sample.labels["le"])
            buckets[le] = buckets.get(le, 0.0) + sample.value
        elif sample.name.endswith("_sum"):
            found["sum"] = found.get("sum", 0.0) + sample.value
        elif sample.name.endswith("_count"):
            found["count"] = found.get("count", 0.0) + sample.value
    return {"buckets": sorted(buckets.items()), **found}


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """PromQL's ``histogram_quantile``: the bucket holding rank q x count, interpolated
    linearly from its lower bound (0 for the first); the highest finite bound when the
    rank falls in +Inf."""
    total = buckets[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def bucket_of(seconds: float) -> int:
    """The index of the histogram bucket a value falls in (bound included)."""
    return bisect.bisect_left(BUCKETS_S, seconds)
