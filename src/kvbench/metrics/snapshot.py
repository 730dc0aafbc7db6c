"""IntervalSnapshot: what one worker saw in one interval; immutable and mergeable.

Snapshots are deltas (what happened in the interval), so merging workers or intervals is
counter addition and ``Histogram.merge``: associative and commutative. They pickle small
(histograms travel in their sparse form) and go from worker to coordinator as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kvbench.metrics.histogram import Histogram
from kvbench.metrics.outcome import ERROR_OUTCOMES, FINAL_OUTCOMES, SUCCESS_OUTCOMES, Outcome

_ERROR_NAMES = frozenset(o.name.lower() for o in ERROR_OUTCOMES)
# Outcomes that mean a reply arrived: the op completed (an error reply is a completion).
_REPLY_NAMES = frozenset(o.name.lower() for o in Outcome if o <= Outcome.ERROR_REPLY)
_SUCCESS_NAMES = frozenset(o.name.lower() for o in SUCCESS_OUTCOMES)
_FINAL_NAMES = frozenset(o.name.lower() for o in FINAL_OUTCOMES)


@dataclass(frozen=True, slots=True)
class IntervalSnapshot:
    """Counters and histograms for one interval of one worker (or of several, merged).

    Attributes:
        phase: ``warmup``, ``measure`` or ``drain``.
        index: the interval's number within its phase.
        start_ns, end_ns: the interval's bounds on the system-wide monotonic clock.
        counts: op name -> outcome name -> number of ops.
        latency: op name -> latency histogram (ns): reply time - send time (closed loop) or
            - intended send time (open loop).
        service: op name -> service-time histogram (open loop only).
        latency_by_outcome: op name -> outcome name -> its latency histogram (the op's
            is their merge; what ``--prometheus`` serves per op and outcome). Not stored:
            a run loaded from the history has none.
        keys: op name -> keys requested (multi-get counts each key).
        keys_hit: op name -> values returned.
        stats: worker figures: ``cpu_ns``, ``reconnects``, ``bytes_in``, ``bytes_out`` ...
        workers: how many worker snapshots were merged into this one.
        lag: open loop: how far behind its intended time each request was sent (ns).
        round: the round (0-based) the interval belongs to.
        hiccup: how late the worker's 1 ms hiccup timer fired (event-loop stalls, ns).
    """

    phase: str
    index: int
    start_ns: int
    end_ns: int
    counts: dict[str, dict[str, int]]
    latency: dict[str, Histogram]
    service: dict[str, Histogram] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)
    keys_hit: dict[str, int] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)
    workers: int = 1
    lag: Histogram | None = None
    round: int = 0
    hiccup: Histogram | None = None
    latency_by_outcome: dict[str, dict[str, Histogram]] = field(default_factory=dict)

    def ops(self, op: str | None = None) -> int:
        """Completed-or-failed ops (every final outcome), for one op or all."""
        return self._sum(op, _FINAL_NAMES)

    def completed(self, op: str | None = None) -> int:
        """Ops answered by the server, error replies included (replies, as Little's law needs)."""
        return self._sum(op, _REPLY_NAMES)

    def succeeded(self, op: str | None = None) -> int:
        """Ops answered with a reply that is not an error: throughput counts these."""
        return self._sum(op, _SUCCESS_NAMES)

    def _sum(self, op: str | None, outcomes: frozenset[str]) -> int:
        names = [op] if op is not None else list(self.counts)
        return sum(
            n
            for name in names
            for outcome, n in self.counts.get(name, {}).items()
            if outcome in outcomes
        )

    def errors(self, op: str | None = None) -> int:
        """Ops that ended in an error outcome (error reply, timeout, conn error, dropped)."""
        return self._sum(op, _ERROR_NAMES)

    def count(self, op: str, outcome: Outcome) -> int:
        return self.counts.get(op, {}).get(outcome.name.lower(), 0)

    def counted(self, outcome: Outcome) -> int:
        """Requests of every op counted under ``outcome`` (a note such as ``LATE`` too)."""
        return sum(self.count(op, outcome) for op in self.counts)


def _add_counts(into: dict[str, int], other: dict[str, int]) -> None:
    for key, value in other.items():
        into[key] = into.get(key, 0) + value


def _gather(into: dict[str, list[Histogram]], other: dict[str, Histogram]) -> None:
    for op, hist in other.items():
        into.setdefault(op, []).append(hist)


def _merged(parts: dict[str, list[Histogram]]) -> dict[str, Histogram]:
    """Each name's histograms summed, in one ``Histogram.merged``: the workers' arrive
    sparse and their sum stays so (the coordinator keeps every interval's)."""
    return {name: Histogram.merged(hists) for name, hists in parts.items()}


def merge_snapshots(snapshots: Iterable[IntervalSnapshot]) -> IntervalSnapshot:
    """Merge snapshots (of several workers, or of several intervals) into one.

    The result's phase and index are the first snapshot's; its bounds span all of them.

    Raises:
        ValueError: no snapshots given.
    """
    items = list(snapshots)
    if not items:
        raise ValueError("merge_snapshots needs at least one snapshot")
    counts: dict[str, dict[str, int]] = {}
    latency: dict[str, list[Histogram]] = {}
    by_outcome: dict[str, dict[str, list[Histogram]]] = {}
    service: dict[str, list[Histogram]] = {}
    keys: dict[str, int] = {}
    keys_hit: dict[str, int] = {}
    stats: dict[str, float] = {}
    lags = [s.lag for s in items if s.lag is not None]
    hiccups = [s.hiccup for s in items if s.hiccup is not None]
    for snap in items:
        for op, outcomes in snap.counts.items():
            _add_counts(counts.setdefault(op, {}), outcomes)
        _gather(latency, snap.latency)
        for op, hists in snap.latency_by_outcome.items():
            _gather(by_outcome.setdefault(op, {}), hists)
        _gather(service, snap.service)
        _add_counts(keys, snap.keys)
        _add_counts(keys_hit, snap.keys_hit)
        for name, value in snap.stats.items():
            stats[name] = stats.get(name, 0) + value
    return IntervalSnapshot(
        phase=items[0].phase,
        index=items[0].index,
        start_ns=min(s.start_ns for s in items),
        end_ns=max(s.end_ns for s in items),
        counts=counts,
        latency=_merged(latency),
        service=_merged(service),
        keys=keys,
        keys_hit=keys_hit,
        stats=stats,
        workers=sum(s.workers for s in items),
        lag=Histogram.merged(lags) if lags else None,
        round=items[0].round,
        hiccup=Histogram.merged(hiccups) if hiccups else None,
        latency_by_outcome={op: _merged(hists) for op, hists in by_outcome.items()},
    )
