"""The backlog of a queue run over time, from the workers' cumulative counts.

Producers report how many messages the server had acknowledged, consumers how many they
had received, each every 50 ms at its own instants. Subtracting the latest reports of
both sides mixes instants (a late consumer report inflates the backlog by its rate times
its staleness), so each worker's count is interpolated linearly between its reports and
the backlog is evaluated at common instants. Pure: numpy, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

# A series: (time_ns, cumulative count) reports of one worker, in time order.
Series = Sequence[tuple[int, int]]


def _count_at(series: Series, times_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """The worker's count at each time: 0 before its first report, its last after its last."""
    if not series:
        return np.zeros(times_ns.size)
    t = np.array([s[0] for s in series], dtype=np.float64)
    n = np.array([s[1] for s in series], dtype=np.float64)
    return np.interp(times_ns.astype(np.float64), t, n, left=0.0, right=float(n[-1]))


def backlog_at(
    producers: Sequence[Series],
    consumers: Sequence[Series],
    times_ns: Sequence[int],
    base: int = 0,
) -> list[int]:
    """``base`` (acknowledged before, not yet received) plus acknowledged minus received
    at each of ``times_ns`` (never below 0)."""
    times = np.asarray(times_ns, dtype=np.int64)
    stored = sum((_count_at(s, times) for s in producers), np.zeros(times.size))
    received = sum((_count_at(s, times) for s in consumers), np.zeros(times.size))
    backlog = np.maximum(np.rint(base + stored - received), 0)
    return [int(v) for v in backlog]


def backlog_peak(
    producers: Sequence[Series], consumers: Sequence[Series], base: int = 0
) -> tuple[int, int | None]:
    """The largest backlog at any report instant, and that instant (None: no reports)."""
    times = sorted({t for series in (*producers, *consumers) for t, _ in series})
    if not times:
        return base, None
    values = backlog_at(producers, consumers, times, base)
    index = int(np.argmax(values))
    return values[index], times[index]
