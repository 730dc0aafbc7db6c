"""Chart series the HTML report draws beyond the result document (pure, from a stored run).

The latency percentile spectrum is read from the merged histograms (never from averaged
percentiles) and stops where the samples stop supporting it (``summary.min_samples``);
server stats over time are rates from counter deltas between consecutive samples.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict

from kvbench.metrics.histogram import Histogram
from kvbench.metrics.snapshot import IntervalSnapshot, merge_snapshots
from kvbench.report.latency import min_samples
from kvbench.results.model import RunResult
from kvbench.results.queue import QueueInterval

# The spectrum's x axis counts "nines": x = -log10(1 - p/100), so p90 is 1, p99 is 2 and
# p99.999 is 5 (HdrHistogram's percentile distribution plot). Steps of 0.05 give 101 points.
SPECTRUM_MAX_NINES = 5.0
SPECTRUM_STEP_NINES = 0.05
ALL_OPS = "all ops"

# Server counters summed into "server ops/s" (memcached counts each key of a multi-get).
_MEMCACHED_OPS = (
    "cmd_get",
    "cmd_set",
    "delete_hits",
    "delete_misses",
    "incr_hits",
    "incr_misses",
)
_REDIS_OPS = ("total_commands_processed",)
_CPU = {"memcache": ("rusage_user", "rusage_system"), "redis": ("used_cpu_user", "used_cpu_sys")}
_CONNECTIONS = {"memcache": "curr_connections", "redis": "connected_clients"}


class SpectrumSeries(TypedDict):
    """One op's percentile spectrum (or every op's: ``ALL_OPS``)."""

    op: str
    kind: str  # latency, or service (open loop)
    points: list[list[float]]  # [percentile, latency_us]


class ServerPoint(TypedDict):
    """The server's figures at one interval sample (``server_series``)."""

    round: int
    t_s: float  # from the start of its round's window
    ops_per_s: float | None  # None: the first sample of a round, or no counters
    cpu_cores: float | None
    connections: int | None


def spectrum_percentiles() -> list[float]:
    """The percentiles of the spectrum: 0, ..., 90, ..., 99, ..., 99.999 (even in nines)."""
    steps = round(SPECTRUM_MAX_NINES / SPECTRUM_STEP_NINES)
    return [round(100 * (1 - 10 ** (-i * SPECTRUM_STEP_NINES)), 6) for i in range(steps + 1)]


def spectrum(hist: Histogram | None) -> list[list[float]]:
    """``[percentile, latency_us]`` points of one histogram, as far as its samples go."""
    if hist is None or hist.total_count == 0:
        return []
    wanted = [p for p in spectrum_percentiles() if hist.total_count >= min_samples(p)]
    values = hist.percentiles(wanted)
    # (never above the max: each point the figure the tables print, latency.percentile_ns)
    return [[p, min(values[p], hist.max_ns) / 1000] for p in wanted]


def _series(kind: str, hists: dict[str, Histogram]) -> list[SpectrumSeries]:
    rows: list[SpectrumSeries] = [
        {"op": op, "kind": kind, "points": spectrum(hist)} for op, hist in sorted(hists.items())
    ]
    if len(hists) > 1:
        merged = Histogram.merged(hists.values())
        rows.append({"op": ALL_OPS, "kind": kind, "points": spectrum(merged)})
    return [row for row in rows if row["points"]]


def run_spectrum(run: RunResult) -> list[SpectrumSeries]:
    """Spectrum series of a run: per op and for all ops merged; service time when open loop.

    Returns:
        ``[{op, kind: "latency"|"service", points: [[percentile, us], ...]}]``.
    """
    total = run.total()
    if total is None:
        return []
    return _series("latency", total.latency) + _series("service", total.service)


def _number(stats: dict[str, Any], name: str) -> float | None:
    try:
        return float(stats[name])
    except (KeyError, TypeError, ValueError):
        return None


def _sum(stats: dict[str, Any], names: Iterable[str]) -> float | None:
    values = [_number(stats, n) for n in names]
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _family(stats: dict[str, Any]) -> str:
    return "redis" if "total_commands_processed" in stats else "memcache"


def _rate(now: float | None, before: float | None, seconds: float) -> float | None:
    if now is None or before is None or seconds <= 0:
        return None
    return round(max(0.0, now - before) / seconds, 3)


def server_series(run: RunResult, every: int = 1) -> list[ServerPoint]:
    """The server's figures at every ``every``-th interval sample, per round.

    Rates are counter deltas since the previous kept sample of the same round, divided by
    the time between the samples, so the first sample of a round has none. The last sample
    of a round has no connection count: it is taken once every worker has reported the last
    interval, by when they may have closed their connections (the chart would show the
    load leaving as a drop to the probe's one).

    Returns:
        ``[{round, t_s, ops_per_s, cpu_cores, connections}]``; ``t_s`` is from the start of
        the sample's round's window, as the document's intervals.
    """
    samples = [s for s in run.server.get("intervals", []) if s.get("stats")]
    last_of_round = {int(s.get("round", 0)): i for i, s in enumerate(samples)}
    rows: list[ServerPoint] = []
    previous: dict[int, dict[str, Any]] = {}
    seen: dict[int, int] = {}
    for number, sample in enumerate(samples):
        round_index = int(sample.get("round", 0))
        position = seen.get(round_index, 0)
        seen[round_index] = position + 1
        if (position + 1) % every:
            continue
        stats = sample["stats"]
        family = _family(stats)
        ops_names = _REDIS_OPS if family == "redis" else _MEMCACHED_OPS
        before = previous.get(round_index)
        seconds = (sample["taken_ns"] - before["taken_ns"]) / 1e9 if before else 0.0
        old = before["stats"] if before else {}
        start_ns = (
            run.rounds[round_index]["window_start_ns"]
            if round_index < len(run.rounds)
            else run.window_start_ns
        )
        connections = (
            None if number == last_of_round[round_index] else _number(stats, _CONNECTIONS[family])
        )
        rows.append(
            {
                "round": round_index,
                "t_s": round((sample["taken_ns"] - start_ns) / 1e9, 3),
                "ops_per_s": _rate(_sum(stats, ops_names), _sum(old, ops_names), seconds),
                "cpu_cores": _rate(_sum(stats, _CPU[family]), _sum(old, _CPU[family]), seconds),
                "connections": None if connections is None else int(connections),
            }
        )
        previous[round_index] = sample
    return rows


def coarsen(intervals: list[IntervalSnapshot], every: int) -> list[IntervalSnapshot]:
    """Merge each run of ``every`` consecutive intervals of a round into one (exactly)."""
    if every <= 1:
        return intervals
    out: list[IntervalSnapshot] = []
    group: list[IntervalSnapshot] = []
    for snap in intervals:
        if group and (snap.round != group[0].round or len(group) == every):
            out.append(merge_snapshots(group))
            group = []
        group.append(snap)
    if group:
        out.append(merge_snapshots(group))
    return out


def coarsen_queue(records: list[QueueInterval], every: int) -> list[QueueInterval]:
    """A queue run's intervals merged as ``coarsen`` merges its snapshots (a queue run has
    one round): each group's end-to-end histograms merged, its last counts kept, under
    its first index (the merged snapshot's)."""
    if every <= 1:
        return records
    out = []
    for start in range(0, len(records), every):
        group = records[start : start + every]
        parts = [r.e2e for r in group if r.e2e is not None]
        last = group[-1]
        out.append(
            QueueInterval(
                group[0].index,
                Histogram.merged(parts) if parts else None,
                last.stored_total,
                last.received_total,
                last.server_backlog,
                last.backlog_base,
            )
        )
    return out
