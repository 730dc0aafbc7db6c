"""The running figures ``--prometheus`` serves, as Prometheus metric families.

``LiveFigures`` is fed the merged measure intervals the live view gets, as they arrive,
and is a ``prometheus_client`` collector: every scrape reads the run so far (counters)
and the latest interval (gauges). Each figure is one ``report.summary`` computes for the
interval (``interval_row``, ``latency_summary``) or a sum of the intervals' counters, so a
scrape says what the live line and the final document say. No I/O here: cli/prometheus.py
serves it over HTTP. Needs the optional ``prometheus-client`` (``kvbench[prometheus]``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from kvbench.metrics.outcome import NOTE_OUTCOMES, OUTCOME_NAMES, REDIRECT_OUTCOMES
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.latency import latency_summary
from kvbench.report.summary import interval_row

# The latency quantiles served, by their label and their name in ``latency_summary``.
QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"), ("0.999", "p99_9"))
PREFIX = "kvbench"


@dataclass(slots=True)
class _State:
    """What a scrape reads; changed only under the lock."""

    runs: int = 0
    intervals: int = 0
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)
    errors: int = 0
    row: dict[str, Any] | None = None
    latency: dict[str, dict[str, float | None]] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)
    connections_asked: int | None = None


class LiveFigures(Collector):
    """The figures of the running command: counters over every measured interval so far,
    gauges of the latest one.

    In ``kvbench sweep`` and ``compare`` the counters add up over every level, target and
    round (counters never go back); ``start_run`` says which run the gauges are from.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = _State()
        self._origins: dict[tuple[int, int], int] = {}

    def start_run(self, target: str, mode: str, connections_asked: int) -> None:
        """A run (a level, a compared target) starts: its target, closed or open loop, and
        the connections it asks for."""
        with self._lock:
            self._state.runs += 1
            self._state.info = {"target": target, "mode": mode}
            self._state.connections_asked = connections_asked
            self._state.row = None
            self._state.latency = {}

    def interval(self, snap: IntervalSnapshot) -> None:
        """Take one merged measure interval (the coordinator's ``on_interval``)."""
        with self._lock:
            state = self._state
            origin = self._origins.setdefault((state.runs, snap.round), snap.start_ns)
        row = interval_row(snap, origin)
        latency = {op: latency_summary(hist) for op, hist in snap.latency.items()}
        with self._lock:
            for op, outcomes in snap.counts.items():
                for outcome, n in outcomes.items():
                    key = (op, outcome)
                    state.outcomes[key] = state.outcomes.get(key, 0) + n
            state.errors += row["errors"]
            state.intervals += 1
            state.row = row
            state.latency = latency

    def collect(self) -> Iterator[Any]:
        """The metric families of one scrape (called by prometheus_client's registry)."""
        with self._lock:
            state = self._state
            outcomes = dict(state.outcomes)
            row = state.row
            latency = dict(state.latency)
            info, asked = dict(state.info), state.connections_asked
            counters = (state.runs, state.intervals, state.errors)
        yield from _counters(outcomes, *counters)
        if info:
            yield InfoMetricFamily(f"{PREFIX}_run", "The run the gauges are from.", value=info)
        if asked is not None:
            connections = GaugeMetricFamily(
                f"{PREFIX}_connections",
                "Connections: live (the fewest open in the latest interval) and asked.",
                labels=["state"],
            )
            connections.add_metric(["asked"], asked)
            if row is not None and row.get("connections_live") is not None:
                connections.add_metric(["live"], row["connections_live"])
            yield connections
        if row is not None:
            yield from _interval_gauges(row, latency)


_NOTES = frozenset(OUTCOME_NAMES[int(o)] for o in NOTE_OUTCOMES | REDIRECT_OUTCOMES)


def _counters(
    outcomes: dict[tuple[str, str], int], runs: int, intervals: int, errors: int
) -> Iterator[Any]:
    ops = CounterMetricFamily(
        f"{PREFIX}_ops",
        "Ops that ended in the measured windows so far, by op and outcome.",
        labels=["op", "outcome"],
    )
    notes = CounterMetricFamily(
        f"{PREFIX}_ops_noted",
        "Notes on ops counted under their outcome (late, mismatch) and redirects followed.",
        labels=["op", "note"],
    )
    for (op, outcome), n in sorted(outcomes.items()):
        # a note or a redirect is not an end: summing ops by op must give the ops
        (notes if outcome in _NOTES else ops).add_metric([op, outcome], n)
    yield ops
    yield notes
    yield CounterMetricFamily(
        f"{PREFIX}_errors",
        "Errors so far: error replies, timeouts, connection errors, drops, failed connects.",
        value=errors,
    )
    yield CounterMetricFamily(f"{PREFIX}_intervals", "Measured intervals so far.", value=intervals)
    yield CounterMetricFamily(f"{PREFIX}_runs", "Runs started (levels, targets).", value=runs)


def _interval_gauges(
    row: dict[str, Any], latency: dict[str, dict[str, float | None]]
) -> Iterator[Any]:
    """The latest interval: rates, errors, offered rate and latency quantiles."""
    throughput = GaugeMetricFamily(
        f"{PREFIX}_throughput_ops_per_second",
        "Successful ops per second in the latest interval (achieved), by op; op=all: every op.",
        labels=["op"],
    )
    throughput.add_metric(["all"], row["per_s"])
    for op, values in sorted(row["ops"].items()):
        throughput.add_metric([op], values["per_s"])
    yield throughput
    yield GaugeMetricFamily(
        f"{PREFIX}_errors_per_second",
        "Errors per second in the latest interval.",
        value=row["errors_per_s"],
    )
    if row.get("offered_per_s") is not None:
        yield GaugeMetricFamily(
            f"{PREFIX}_offered_ops_per_second",
            "Open loop: requests per second the schedule offered in the latest interval.",
            value=row["offered_per_s"],
        )
    quantiles = GaugeMetricFamily(
        f"{PREFIX}_latency_seconds",
        "Latency quantiles of the latest interval by op (left out with too few samples).",
        labels=["op", "quantile"],
    )
    for op, summary in sorted(latency.items()):
        for label, name in QUANTILES:
            value = summary.get(name)
            if value is not None:
                quantiles.add_metric([op, label], value / 1e6)
    yield quantiles
    yield GaugeMetricFamily(
        f"{PREFIX}_interval_end_seconds",
        "When the latest interval ended, in seconds from its round's start.",
        value=row["t_s"],
    )
