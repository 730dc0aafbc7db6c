"""A trace's own profile: its op mix, request rate over time and size distributions.

Built as the trace is read (``TraceProfile.add`` per block of rows), merged across the
processes of a run (``merge``: counter addition, so the order does not matter), sent and
stored as plain JSON data (``to_dict``/``from_dict``). ``summary`` computes the figures a
report shows. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvbench.workload.trace import TRACE_OPS, WRITE_OPS, TraceRows

# The rate series of a long trace is cut into at most this many buckets for reports
# (a one-week trace has 604,800 seconds).
MAX_RATE_POINTS = 600
SIZE_PERCENTILES = (50.0, 90.0, 99.0, 99.9)
# TTLs listed by frequency in the summary.
TOP_TTLS = 5


@dataclass(slots=True)
class TraceProfile:
    """Counts over the rows a replay read (its slice of the trace).

    Attributes:
        rows: rows counted.
        ops: rows per trace op name.
        per_second: rows per whole second of trace time (the timestamp's floor).
        key_sizes: rows per key size (the trace's ``key_size``).
        value_sizes: writes per value size (reads record no value: their sizes are 0).
        ttls_s: writes per TTL.
    """

    rows: int = 0
    ops: Counter[str] = field(default_factory=Counter)
    per_second: Counter[int] = field(default_factory=Counter)
    key_sizes: Counter[int] = field(default_factory=Counter)
    value_sizes: Counter[int] = field(default_factory=Counter)
    ttls_s: Counter[int] = field(default_factory=Counter)

    def add(self, rows: TraceRows) -> None:
        """Count one block of rows."""
        if not len(rows):
            return
        self.rows += len(rows)
        for index, n in Counter(rows.ops).items():
            self.ops[TRACE_OPS[index]] += n
        times = rows.times_s
        seconds: list[int] = times if isinstance(times[0], int) else list(map(int, times))  # type: ignore[assignment]
        self.per_second.update(seconds)
        self.key_sizes.update(rows.key_sizes)
        ops = np.array(rows.ops, dtype=np.int8)
        writes = np.isin(ops, _WRITE_CODES)
        if writes.any():
            self.value_sizes.update(np.array(rows.value_sizes)[writes].tolist())
            self.ttls_s.update(np.array(rows.ttls_s)[writes].tolist())

    def merge(self, other: TraceProfile) -> None:
        """Add ``other``'s counts to this profile."""
        self.rows += other.rows
        self.ops.update(other.ops)
        self.per_second.update(other.per_second)
        self.key_sizes.update(other.key_sizes)
        self.value_sizes.update(other.value_sizes)
        self.ttls_s.update(other.ttls_s)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (counter keys as strings, as JSON needs)."""
        return {
            "rows": self.rows,
            "ops": dict(self.ops),
            "per_second": _pairs(self.per_second),
            "key_sizes": _pairs(self.key_sizes),
            "value_sizes": _pairs(self.value_sizes),
            "ttls_s": _pairs(self.ttls_s),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceProfile:
        """The inverse of ``to_dict``."""
        return cls(
            rows=int(data["rows"]),
            ops=Counter({str(k): int(v) for k, v in data["ops"].items()}),
            per_second=_counter(data["per_second"]),
            key_sizes=_counter(data["key_sizes"]),
            value_sizes=_counter(data["value_sizes"]),
            ttls_s=_counter(data["ttls_s"]),
        )

    def summary(self) -> dict[str, Any]:
        """The figures of the profile: op mix, rate over time, size percentiles, TTLs.

        ``rate`` gives the request rate per second of trace time over buckets of
        ``bucket_s`` seconds (1 unless the slice is longer than ``MAX_RATE_POINTS`` s),
        as ``[[t_s, rows_per_s], ...]`` with ``t_s`` from the slice's first second.
        """
        return {
            "rows": self.rows,
            "ops": {name: self.ops[name] for name in TRACE_OPS if self.ops[name]},
            "rate": rate_series(self.per_second),
            "key_size_bytes": size_summary(self.key_sizes),
            "value_size_bytes": size_summary(self.value_sizes),
            "ttls_s": [[ttl, n] for ttl, n in self.ttls_s.most_common(TOP_TTLS)],
        }


_WRITE_CODES = np.array(sorted(WRITE_OPS), dtype=np.int8)


def _pairs(counter: Counter[int]) -> list[list[int]]:
    return [[k, v] for k, v in sorted(counter.items())]


def _counter(pairs: list[list[int]]) -> Counter[int]:
    return Counter({int(k): int(v) for k, v in pairs})


def rate_series(per_second: Counter[int]) -> dict[str, Any]:
    """Rows per second of trace time, in buckets: ``{bucket_s, first_s, points, mean, peak}``.

    Seconds without rows count as 0 (a gap in the trace is a rate of 0, not a missing
    point). ``mean`` is over the whole span, ``peak`` the busiest bucket's rate.
    """
    if not per_second:
        return {"bucket_s": 1, "first_s": 0, "points": [], "mean_per_s": 0.0, "peak_per_s": 0.0}
    first, last = min(per_second), max(per_second)
    span = last - first + 1
    bucket = -(-span // MAX_RATE_POINTS)
    sums = np.zeros(-(-span // bucket), dtype=np.int64)
    seconds = np.fromiter(per_second.keys(), dtype=np.int64, count=len(per_second))
    counts = np.fromiter(per_second.values(), dtype=np.int64, count=len(per_second))
    np.add.at(sums, (seconds - first) // bucket, counts)
    # The last bucket may be shorter than the others: its rate is over its own length.
    widths = np.full(len(sums), bucket, dtype=np.int64)
    widths[-1] = span - bucket * (len(sums) - 1)
    rates = sums / widths
    return {
        "bucket_s": int(bucket),
        "first_s": int(first),
        "points": [[i * int(bucket), float(r)] for i, r in enumerate(rates.tolist())],
        "mean_per_s": float(sums.sum() / span),
        "peak_per_s": float(rates.max()),
    }


def size_summary(sizes: Counter[int]) -> dict[str, float]:
    """Percentiles (nearest rank), min, max and mean of a size distribution; {} if empty."""
    if not sizes:
        return {}
    values = np.array(sorted(sizes), dtype=np.int64)
    counts = np.array([sizes[v] for v in values.tolist()], dtype=np.int64)
    cumulative = np.cumsum(counts)
    total = int(cumulative[-1])
    out: dict[str, float] = {"count": float(total), "min": float(values[0])}
    for p in SIZE_PERCENTILES:
        rank = max(1, int(np.ceil(p / 100 * total)))
        out[_name(p)] = float(values[int(np.searchsorted(cumulative, rank))])
    out["max"] = float(values[-1])
    out["mean"] = float((values * counts).sum() / total)
    return out


def _name(p: float) -> str:
    """``p50``, ``p99_9``: percentile names as the result document spells them."""
    text = f"{p:g}".replace(".", "_")
    return f"p{text}"
