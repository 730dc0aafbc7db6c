"""The latency heatmap the HTML report draws (rpc-perf's "waterfall"): per op, time on x,
latency bands on y (log scale), colour = the share of the interval's requests in the band.

Pure, from the interval histograms a run stores: each interval's HdrHistogram buckets are
counted into bands of ``BANDS_PER_DECADE`` per decade, exactly (a bucket, at most 0.1%
wide, counts in the band holding its lowest value), so a column's counts add up to its
requests with a latency and its shares to 1. A long run has adjacent intervals merged
(histograms merged, never averaged) to at most ``MAX_COLUMNS`` columns.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Collection
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kvbench.metrics.histogram import COUNTS_LEN, Histogram, value_from_index
from kvbench.report.over_time import Timeline, markers, op_latency
from kvbench.report.series import coarsen
from kvbench.results.model import RunResult

BANDS_PER_DECADE: Final = 10
# Band 0 is everything below 1 us; band k >= 1 starts at 10 ** (2.9 + k / 10) ns, rounded,
# so band 1 starts at 1 us and the last ends beyond the histograms' 60 s.
_FIRST_DECADE_NS: Final = 3
EDGES_NS: Final = np.array(
    [0]
    + [
        round(10 ** (_FIRST_DECADE_NS + k / BANDS_PER_DECADE))
        for k in range(0, 8 * BANDS_PER_DECADE + 2)
    ],
    dtype=np.int64,
)
# Columns drawn per heatmap: more than an 1184 px column has pixels for gains nothing.
MAX_COLUMNS: Final = 300
# Interval markers named in a column's marker; the rest are counted.
_SAID: Final = 3


@functools.cache
def _band_of_index() -> npt.NDArray[np.int64]:
    """Per histogram bucket: the band holding its lowest value."""
    lowest = np.array([value_from_index(i) for i in range(COUNTS_LEN)], dtype=np.int64)
    bands: npt.NDArray[np.int64] = np.searchsorted(EDGES_NS, lowest, side="right") - 1
    return bands


def band_counts(hist: Histogram) -> dict[int, int]:
    """Band index -> how many of the histogram's values fall in it (non-empty bands)."""
    nonzero = np.flatnonzero(hist.counts)
    summed = np.zeros(len(EDGES_NS), dtype=np.int64)
    np.add.at(summed, _band_of_index()[nonzero], hist.counts[nonzero])  # integers: exact
    return {b: n for b, n in enumerate(summed.tolist()) if n}


def band_edges_us(first: int, last: int) -> list[float]:
    """The bounds of bands ``first``..``last`` in microseconds (one more than bands)."""
    return [int(v) / 1000 for v in EDGES_NS[first : last + 2]]


def run_heatmap(
    run: RunResult, fired: Collection[str], every: int = 1, max_columns: int = MAX_COLUMNS
) -> dict[str, Any]:
    """The heatmap data of a run, as the page embeds it.

    Args:
        fired: the ids of the run's verdicts (its document's ``verdicts``), for markers.
        every: adjacent intervals already merged for the page's other charts; more are
            merged when that leaves over ``max_columns`` columns (a page of several runs
            shares ``MAX_COLUMNS``; at least 60 each).

    Returns:
        ``{merged, first_band, edges_us, span_s, rounds_s (where rounds 2, 3, ... begin),
        ops: [{op, columns: [{t0, t1, n, ops,
        p50_us, p99_us, max_us, bands: [[band, count], ...]}]}], markers: [{t0, t1, kind,
        text}]}``; ``n`` is the column's requests with a latency (its bands' counts add
        up to it), ``ops`` its requests (every outcome, as the summary counts them).
    """
    merged = max(every, math.ceil(len(run.intervals) / max(60, max_columns)), 1)
    line = Timeline(run)
    snaps = coarsen(run.intervals, merged)
    names = sorted({op for s in run.intervals for op in s.latency if s.latency[op].total_count})
    ops: list[dict[str, Any]] = []
    used: set[int] = set()
    for op in names:
        columns = []
        for snap in snaps:
            t0, t1 = line.seconds(snap)
            hist = snap.latency.get(op)
            bands = band_counts(hist) if hist is not None else {}
            used.update(bands)
            figures = op_latency(snap, op)
            columns.append(
                {
                    "t0": t0,
                    "t1": t1,
                    "n": figures.latencies,
                    "ops": figures.ops,
                    "p50_us": figures.p50_us,
                    "p99_us": figures.p99_us,
                    "max_us": figures.max_us,
                    "bands": [[b, n] for b, n in sorted(bands.items())],
                }
            )
        ops.append({"op": op, "columns": columns})
    first, last = (min(used), max(used)) if used else (1, 1)
    return {
        "merged": merged,
        "first_band": first,
        "edges_us": band_edges_us(first, last),
        "span_s": max((c["t1"] for o in ops for c in o["columns"]), default=0.0),
        "rounds_s": line.round_starts_s(),
        "ops": ops,
        "markers": _column_markers(run, fired, [line.seconds(s) for s in snaps]),
    }


def _column_markers(
    run: RunResult, fired: Collection[str], columns: list[tuple[float, float]]
) -> list[dict[str, Any]]:
    """The intervals' markers, one per column and kind (the column's bounds; the texts of
    its first intervals, and how many more), so an hour of errors is not 3,600 marks."""
    line = Timeline(run)
    starts = [t0 for t0, _ in columns]
    texts: dict[tuple[int, str], list[str]] = {}
    for position, found in sorted(markers(run, fired).items()):
        t0, _ = line.seconds(run.intervals[position])
        column = max(0, bisect.bisect_right(starts, t0) - 1)
        for m in found:
            texts.setdefault((column, m.kind), []).append(m.text)
    out = []
    for (column, kind), said in sorted(texts.items()):
        more = f"; and {len(said) - _SAID:,} more intervals" if len(said) > _SAID else ""
        t0, t1 = columns[column]
        out.append({"t0": t0, "t1": t1, "kind": kind, "text": "; ".join(said[:_SAID]) + more})
    return out
