"""The running figures ``--prometheus`` serves, as Prometheus metric families.

``LiveFigures`` is fed the merged measure intervals the live view gets, as they arrive,
and is a ``prometheus_client`` collector: every scrape reads the run so far (counters and
the latency histogram) and the latest interval (gauges). Each figure is one
``report.summary`` computes for the interval (``interval_row``) or a sum of the intervals'
counters and histograms, so a scrape says what the live line and the final document say.
Latency is a Prometheus histogram (cumulative ``_bucket``, ``_sum``, ``_count``) per op
and outcome (a get's hits apart from its misses: the recorder keeps a histogram per op and
outcome, merged into the op's), not the quantiles of the latest interval: a scrape every 15 s sees every request, and
``histogram_quantile`` combines instances and ranges as a quantile gauge cannot. Every
series carries the run's ``target``. No I/O here: cli/prometheus.py serves it over HTTP.
Needs the optional ``prometheus-client`` (``kvbench[prometheus]``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
)
from prometheus_client.registry import Collector

from kvbench.metrics.histogram import Histogram, counts_index_for
from kvbench.metrics.outcome import NOTE_OUTCOMES, OUTCOME_NAMES, REDIRECT_OUTCOMES
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.rows import IntervalRow
from kvbench.report.summary import interval_row

# The latency histogram's upper bounds (seconds): 1-2-5 steps from 10 us to 10 s, the
# span of a cache's replies from loopback to a stalled server, 19 buckets and +Inf.
BUCKETS_S = (
    0.00001, 0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005,
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
)  # fmt: skip
PREFIX = "kvbench"


def bucket_counts(hist: Histogram) -> list[tuple[str, float]]:
    """Cumulative counts of ``hist`` at each bound of ``BUCKETS_S``, then ``+Inf``.

    A bound counts the HDR buckets that end at or below it: a value within 0.1% above a
    bound (the histogram's resolution) may fall in the next bound's count, never a value
    below it in a later one.
    """
    cumulative = np.cumsum(hist.counts)
    rows: list[tuple[str, float]] = []
    for bound in BUCKETS_S:
        ns = round(bound * 1e9)
        index = min(counts_index_for(ns + 1) - 1, len(cumulative) - 1)
        rows.append((f"{bound:g}", float(cumulative[index])))
    rows.append(("+Inf", float(hist.total_count)))
    return rows


@dataclass(slots=True)
class _State:
    """What a scrape reads; changed only under the lock. Counters and histograms are kept
    per target (a sweep or comparison runs several), gauges for the run in progress."""

    runs: dict[str, int] = field(default_factory=dict)
    intervals: dict[str, int] = field(default_factory=dict)
    outcomes: dict[tuple[str, str, str], int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    latency: dict[tuple[str, str, str], Histogram] = field(default_factory=dict)
    row: IntervalRow | None = None
    info: dict[str, str] = field(default_factory=dict)
    connections_asked: int | None = None

    @property
    def target(self) -> str:
        return self.info.get("target", "")


class LiveFigures(Collector):
    """The figures of the running command: counters and latency histograms over every
    measured interval so far, gauges of the latest one.

    In ``kvbench sweep`` and ``compare`` the counters and histograms add up over every
    level and round of a target (counters never go back); ``start_run`` says which run the
    gauges are from.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = _State()
        self._origins: dict[tuple[int, int], int] = {}
        self._started = 0

    def start_run(self, target: str, mode: str, connections_asked: int) -> None:
        """A run (a level, a compared target) starts: its target, closed or open loop, and
        the connections it asks for."""
        with self._lock:
            state = self._state
            self._started += 1
            state.runs[target] = state.runs.get(target, 0) + 1
            state.info = {"target": target, "mode": mode}
            state.connections_asked = connections_asked
            state.row = None

    def interval(self, snap: IntervalSnapshot) -> None:
        """Take one merged measure interval (the coordinator's ``on_interval``)."""
        with self._lock:
            state = self._state
            origin = self._origins.setdefault((self._started, snap.round), snap.start_ns)
        row = interval_row(snap, origin)
        with self._lock:
            target = state.target
            for op, outcomes in snap.counts.items():
                for outcome, n in outcomes.items():
                    key = (target, op, outcome)
                    state.outcomes[key] = state.outcomes.get(key, 0) + n
            for op, hist in snap.latency.items():
                # by outcome where the workers kept it (every run's do); else as one
                for outcome, part in snap.latency_by_outcome.get(op, {"": hist}).items():
                    state.latency.setdefault((target, op, outcome), Histogram()).merge(part)
            state.errors[target] = state.errors.get(target, 0) + row["errors"]
            state.intervals[target] = state.intervals.get(target, 0) + 1
            state.row = row

    def collect(self) -> Iterator[Any]:
        """The metric families of one scrape (called by prometheus_client's registry)."""
        with self._lock:
            state = self._state
            outcomes = dict(state.outcomes)
            latency = {key: (bucket_counts(h), h.sum_ns / 1e9) for key, h in state.latency.items()}
            row = state.row
            info, asked = dict(state.info), state.connections_asked
            per_target = (dict(state.runs), dict(state.intervals), dict(state.errors))
        yield from _counters(outcomes, *per_target)
        yield _histogram(latency)
        if not info:
            return
        target = info["target"]
        yield InfoMetricFamily(f"{PREFIX}_run", "The run the gauges are from.", value=info)
        if asked is not None:
            connections = GaugeMetricFamily(
                f"{PREFIX}_connections",
                "Connections: live (the fewest open in the latest interval) and asked.",
                labels=["target", "state"],
            )
            connections.add_metric([target, "asked"], asked)
            if row is not None and (live := row.get("connections_live")) is not None:
                connections.add_metric([target, "live"], live)
            yield connections
        if row is not None:
            yield from _interval_gauges(target, row)


_NOTES = frozenset(OUTCOME_NAMES[int(o)] for o in NOTE_OUTCOMES | REDIRECT_OUTCOMES)


def _counters(
    outcomes: dict[tuple[str, str, str], int],
    runs: dict[str, int],
    intervals: dict[str, int],
    errors: dict[str, int],
) -> Iterator[Any]:
    ops = CounterMetricFamily(
        f"{PREFIX}_ops",
        "Ops that ended in the measured windows so far, by op and outcome.",
        labels=["target", "op", "outcome"],
    )
    notes = CounterMetricFamily(
        f"{PREFIX}_ops_noted",
        "Notes on ops counted under their outcome (late, mismatch) and redirects followed.",
        labels=["target", "op", "note"],
    )
    for (target, op, outcome), n in sorted(outcomes.items()):
        # a note or a redirect is not an end: summing ops by op must give the ops
        (notes if outcome in _NOTES else ops).add_metric([target, op, outcome], n)
    yield ops
    yield notes
    for name, doc, values in (
        (
            "errors",
            "Errors so far: error replies, timeouts, connection errors, drops, failed connects.",
            errors,
        ),
        ("intervals", "Measured intervals so far.", intervals),
        ("runs", "Runs started (levels, targets, rounds).", runs),
    ):
        family = CounterMetricFamily(f"{PREFIX}_{name}", doc, labels=["target"])
        for target, n in sorted(values.items()):
            family.add_metric([target], n)
        yield family


def _histogram(
    latency: dict[tuple[str, str, str], tuple[list[tuple[str, float]], float]],
) -> Any:
    """Latency by target, op and outcome, cumulative over the measured windows so far."""
    family = HistogramMetricFamily(
        f"{PREFIX}_latency_seconds",
        "Latency of the ops that ended in the measured windows so far, by op and outcome "
        "(from the intended send time in open loop; a timeout at the timeout).",
        labels=["target", "op", "outcome"],
    )
    for (target, op, outcome), (buckets, sum_s) in sorted(latency.items()):
        family.add_metric([target, op, outcome], buckets, sum_value=sum_s)
    return family


def _interval_gauges(target: str, row: IntervalRow) -> Iterator[Any]:
    """The latest interval: rates, errors and the offered rate."""
    throughput = GaugeMetricFamily(
        f"{PREFIX}_throughput_ops_per_second",
        "Successful ops per second in the latest interval (achieved), by op; op=all: every op.",
        labels=["target", "op"],
    )
    throughput.add_metric([target, "all"], row["per_s"])
    for op, values in sorted(row["ops"].items()):
        throughput.add_metric([target, op], values["per_s"])
    yield throughput
    gauges = [
        ("errors_per_second", "Errors per second in the latest interval.", row["errors_per_s"]),
        (
            "interval_end_seconds",
            "When the latest interval ended, in seconds from its round's start.",
            row["t_s"],
        ),
    ]
    if (offered := row.get("offered_per_s")) is not None:
        gauges.append(
            (
                "offered_ops_per_second",
                "Open loop: requests per second the schedule offered in the latest interval.",
                offered,
            )
        )
    for name, doc, value in gauges:
        gauge = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=["target"])
        gauge.add_metric([target], value)
        yield gauge
