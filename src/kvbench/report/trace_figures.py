"""A replay's own figures: the trace's profile, and what was sent against it.

Computed from the run alone (its ``trace`` section and its intervals), as every figure:
the profile's op mix, rate per second of trace time and size percentiles
(``profile_summary``); the feed's counts; and against them, the requests the run
recorded by op (every sent request is counted once: answered, failed, timed out or
dropped, counted apart), the trace's offered rate at the replay's speed, and each interval's offered and
achieved rates (the run's ``intervals``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NotRequired, TypedDict

import numpy as np

from kvbench.metrics.outcome import NOTE_OUTCOMES, OUTCOME_NAMES, REDIRECT_OUTCOMES, Outcome
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.model import RunResult

# The rate series of a long trace is cut into at most this many buckets for reports
# (a one-week trace has 604,800 seconds).
MAX_RATE_POINTS = 600
SIZE_PERCENTILES = (50.0, 90.0, 99.0, 99.9)
# TTLs listed by frequency in the summary.
TOP_TTLS = 5
# Counted besides a request's outcome (late, mismatch, a redirect followed), or never
# sent (dropped).
_NOT_SENT = frozenset(
    OUTCOME_NAMES[int(o)] for o in NOTE_OUTCOMES | REDIRECT_OUTCOMES | {Outcome.DROPPED}
)


class RateSeries(TypedDict):
    """Rows per second of trace time, in buckets (``rate_series``)."""

    bucket_s: int
    first_s: int
    span_s: float  # whole seconds, or to the ms for fractional times (``exact_span``)
    points: list[list[float]]  # [t_s, rows_per_s]
    mean_per_s: float
    peak_per_s: float


class ProfileFigures(TypedDict):
    """A trace profile's figures (``profile_summary``)."""

    rows: int
    ops: dict[str, int]
    rate: RateSeries
    key_size_bytes: dict[str, float]  # ``size_summary``; {} if none
    value_size_bytes: dict[str, float]
    ttls_s: list[list[int]]  # [ttl, stores], the most common first


class TraceSlice(TypedDict):
    """The slice of the trace asked for (None: none)."""

    from_s: float | None
    to_s: float | None
    limit: int | None


class TraceSent(TypedDict):
    """The feed's counts and what the run sent against them."""

    lines_read: int
    rows: int
    requests: int  # queued to be sent
    keys_clamped: int
    ttls_clamped: int
    skipped: dict[str, int]  # by reason
    sent_as: dict[str, str]  # trace op -> the op sent
    by_op: dict[str, int]
    total: int
    in_drain: int  # of ``total``: answered or abandoned in the drain, not in the figures
    dropped: int
    offered_per_s: float | None
    trace_span_s: float
    replay_span_s: float | None
    # A replayed MONITOR capture's (results/trace.py): its clients, a connection each, the
    # SELECTs put in, a cut-off last line left out, the commands its scripts ran by name.
    clients: NotRequired[int]
    selects_inserted: NotRequired[int]
    truncated_lines: NotRequired[int]
    by_script: NotRequired[dict[str, int]]


class TraceFigures(TypedDict):
    """The ``trace`` section of a replay's summary and document."""

    path: str
    speed: float | str  # ``max``: as fast as the server answered
    slice: TraceSlice
    profile: ProfileFigures
    sent: TraceSent


def trace_figures(run: RunResult, total: IntervalSnapshot | None) -> TraceFigures | None:
    """The ``trace`` section of a replay's summary and document (None for other runs).

    Args:
        total: the run's measure intervals merged (its ``total()``).
    """
    section = run.trace
    if section is None:
        return None
    profile = profile_summary(section.profile)
    counts = section.counts
    counted = total.counts if total else {}
    # A replay has no warm-up and, run to its end, no drain: its window lasts until the
    # last reply. Stopped (Ctrl-C), the requests in flight are answered or abandoned in
    # the drain: they were sent all the same (was: "sent 292 of 300 queued" for a replay
    # whose 300 requests were all written, 8 of them answered in the drain).
    drained = run.phases["drain"].counts if "drain" in run.phases else {}
    in_window, in_drain = _sent(counted), _sent(drained)
    sent_by_op = {
        name: in_window.get(name, 0) + in_drain.get(name, 0)
        for name in sorted(in_window.keys() | in_drain.keys())
    }
    dropped = sum(row.get("dropped", 0) for row in counted.values())
    rate = profile["rate"]
    speed = section.speed
    span_s = rate["span_s"]
    replay_span_s = None if speed is None else span_s / speed
    sent: TraceSent = {
        "lines_read": counts["lines_read"],
        "rows": counts["rows"],
        "requests": counts["requests"],
        "keys_clamped": counts["keys_clamped"],
        "ttls_clamped": counts["ttls_clamped"],
        "skipped": counts["skipped"],
        "sent_as": dict(section.sent_as),
        "by_op": sent_by_op,
        "total": sum(sent_by_op.values()),
        "in_drain": sum(in_drain.values()),
        "dropped": dropped,
        # At --speed S the requests queued to be sent go out over 1/S of the span
        # (rows skipped are not offered: the intervals' ``offered`` counts the same).
        "offered_per_s": counts["requests"] / replay_span_s if replay_span_s else None,
        "trace_span_s": span_s,
        "replay_span_s": replay_span_s,
    }
    for key in ("clients", "selects_inserted", "truncated_lines"):  # a MONITOR capture's
        if key in counts:
            sent[key] = int(counts[key])
    if "by_script" in counts:
        sent["by_script"] = dict(counts["by_script"])
    return {
        "path": section.path,
        "speed": "max" if speed is None else speed,
        "slice": {"from_s": section.from_s, "to_s": section.to_s, "limit": section.limit},
        "profile": profile,
        "sent": sent,
    }


def _sent(counts: dict[str, dict[str, int]]) -> dict[str, int]:
    """Requests sent per op (its outcomes but the notes and those never sent), ops that
    sent none left out."""
    sent = {
        name: sum(n for outcome, n in row.items() if outcome not in _NOT_SENT)
        for name, row in counts.items()
    }
    return {name: n for name, n in sent.items() if n}


def profile_summary(profile: dict[str, Any]) -> ProfileFigures:
    """The figures of a trace profile (results/trace.py's data): op mix, rate over time,
    size percentiles, the most common TTLs.

    ``rate`` gives the request rate per second of trace time over buckets of
    ``bucket_s`` seconds (1 unless the slice is longer than ``MAX_RATE_POINTS`` s), as
    ``[[t_s, rows_per_s], ...]`` with ``t_s`` from the slice's first second. A trace of
    fractional times spans from its first row's time to its last's, not over the whole
    seconds they fall in (10 s of rows from 0.37 s on touch 11 of them): its span and
    mean rate are over that (``exact_span``).
    """
    ttls = _counter(profile["ttls_s"])
    return {
        "rows": int(profile["rows"]),
        "ops": {name: n for name, n in profile["ops"].items() if n},
        "rate": exact_span(rate_series(_counter(profile["per_second"])), profile),
        "key_size_bytes": size_summary(_counter(profile["key_sizes"])),
        "value_size_bytes": size_summary(_counter(profile["value_sizes"])),
        "ttls_s": [[ttl, n] for ttl, n in ttls.most_common(TOP_TTLS)],
    }


def _counter(pairs: list[list[int]]) -> Counter[int]:
    return Counter({int(k): int(v) for k, v in pairs})


def rate_series(per_second: Counter[int]) -> RateSeries:
    """Rows per second of trace time, in buckets: ``{bucket_s, first_s, span_s, points,
    mean, peak}`` (``span_s``: whole seconds from the first row's to the last row's).

    Seconds without rows count as 0 (a gap in the trace is a rate of 0, not a missing
    point). ``mean`` is over the whole span, ``peak`` the busiest bucket's rate.
    """
    if not per_second:
        return {
            "bucket_s": 1,
            "first_s": 0,
            "span_s": 0,
            "points": [],
            "mean_per_s": 0.0,
            "peak_per_s": 0.0,
        }
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
        "span_s": int(span),
        "points": [[i * int(bucket), float(r)] for i, r in enumerate(rates.tolist())],
        "mean_per_s": float(sums.sum() / span),
        "peak_per_s": float(rates.max()),
    }


def exact_span(rate: RateSeries, profile: dict[str, Any]) -> RateSeries:
    """``rate`` (``rate_series``) with the span and mean of a trace of fractional times
    from its first row's time to its last's (seconds, to the ms); whole-second traces,
    a trace whose rows share one time and runs stored without the times: as it is."""
    first, last = profile.get("first_time_s"), profile.get("last_time_s")
    if profile.get("whole_seconds", True) or first is None or last is None or last <= first:
        return rate
    span = round(last - first, 3)
    if span <= 0:
        return rate
    mean = int(profile["rows"]) / span
    # The whole-second buckets at either end hold rows of part of a second each, over a
    # whole second: a trace of under a second (or two) had a "peak" below its mean.
    return {**rate, "span_s": span, "mean_per_s": mean, "peak_per_s": max(rate["peak_per_s"], mean)}


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
