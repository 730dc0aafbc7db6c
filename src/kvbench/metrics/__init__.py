"""Measurements: outcome counters, HDR-compatible histograms, interval snapshots.

Imports only the standard library, numpy and ``kvbench.errors``.
"""

from kvbench.metrics.histogram import Histogram
from kvbench.metrics.outcome import ERROR_OUTCOMES, OUTCOME_NAMES, Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.metrics.snapshot import IntervalSnapshot, merge_snapshots

__all__ = [
    "ERROR_OUTCOMES",
    "OUTCOME_NAMES",
    "Histogram",
    "IntervalSnapshot",
    "Outcome",
    "Recorder",
    "merge_snapshots",
]
