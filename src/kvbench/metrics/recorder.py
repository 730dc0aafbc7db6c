"""Recorder: one worker's counters and latency buffers, cut into interval snapshots.

The engine writes to the recorder's lists directly on the hot path (``latency_ns[op]`` is
an ``array('q')`` to append to, ``counts[op][outcome]`` an int to bump); latencies are
folded into histograms in bulk when an interval is cut. Cutting resets everything *in
place*, so references the engine holds stay valid. Not thread-safe: one per event loop.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from kvbench.metrics.histogram import Histogram
from kvbench.metrics.outcome import N_OUTCOMES, OUTCOME_NAMES
from kvbench.metrics.snapshot import IntervalSnapshot


class Recorder:
    """Per-worker measurements for the current interval.

    Args:
        op_names: names of the ops, indexed by the engine's op numbers.
    """

    def __init__(self, op_names: Sequence[str]) -> None:
        self.op_names = tuple(op_names)
        n_ops = len(self.op_names)
        self.latency_ns: list[array[int]] = [array("q") for _ in range(n_ops)]
        self.service_ns: list[array[int]] = [array("q") for _ in range(n_ops)]
        self.counts: list[list[int]] = [[0] * N_OUTCOMES for _ in range(n_ops)]
        self.keys: list[int] = [0] * n_ops
        self.keys_hit: list[int] = [0] * n_ops
        self.stats: dict[str, float] = {}

    def add_stat(self, name: str, value: float) -> None:
        """Add to a worker figure of this interval (reconnects, bytes, cpu)."""
        self.stats[name] = self.stats.get(name, 0) + value

    def cut(self, phase: str, index: int, start_ns: int, end_ns: int) -> IntervalSnapshot:
        """Fold the buffers into histograms, return the interval's snapshot, reset in place."""
        counts: dict[str, dict[str, int]] = {}
        latency: dict[str, Histogram] = {}
        service: dict[str, Histogram] = {}
        keys: dict[str, int] = {}
        keys_hit: dict[str, int] = {}
        for op, name in enumerate(self.op_names):
            row = self.counts[op]
            nonzero = {OUTCOME_NAMES[i]: n for i, n in enumerate(row) if n}
            if nonzero:
                counts[name] = nonzero
                for i in range(N_OUTCOMES):
                    row[i] = 0
            latency_values = self.latency_ns[op]
            if latency_values:
                hist = Histogram()
                hist.record_many(latency_values)
                latency[name] = hist
                del latency_values[:]
            service_values = self.service_ns[op]
            if service_values:
                hist = Histogram()
                hist.record_many(service_values)
                service[name] = hist
                del service_values[:]
            if self.keys[op]:
                keys[name] = self.keys[op]
                keys_hit[name] = self.keys_hit[op]
                self.keys[op] = 0
                self.keys_hit[op] = 0
        stats, self.stats = self.stats, {}
        return IntervalSnapshot(
            phase=phase,
            index=index,
            start_ns=start_ns,
            end_ns=end_ns,
            counts=counts,
            latency=latency,
            service=service,
            keys=keys,
            keys_hit=keys_hit,
            stats=stats,
        )
