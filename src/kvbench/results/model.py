"""RunResult: one run as it is stored — metadata plus merged interval snapshots.

Every kind of run is one: a load run (mode ``closed`` or ``open``), a sweep's level, a
compared target, a queue run (mode ``queue``, with its ``queue`` section:
results/queue.py), and a replay (with its ``trace`` section: results/trace.py). Everything a report shows is computed from this (reports never read
live objects).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from kvbench.metrics.snapshot import IntervalSnapshot, merge_snapshots
from kvbench.results.queue import QueueSection
from kvbench.results.trace import TraceSection

SCHEMA_VERSION = 1


class TargetRecord(TypedDict):
    """A target as the run met it (its server's version from the preflight, if it said)."""

    url: str
    protocol: str
    server_version: str | None


class RoundRecord(TypedDict):
    """One round's measured window on the monotonic clock and its process status."""

    round: int
    window_start_ns: int
    window_end_ns: int
    status: str


class WorkerRecord(TypedDict, total=False):
    """One worker process as the document and the history store it (JSON-shaped).

    Every kind of run has ``index``, ``ops`` and ``status``; the rest is its kind's: a
    load run's workers (runner/coordinator.py) their host, successes, CPU, share and
    driver; a queue run's (runner/queue.py) their role, active time and problems by kind;
    a put-get-batches run's (runner/batches.py) each batch's seconds.
    """

    role: str  # a queue run's: producer or consumer
    index: int
    host: str
    pid: int
    address: str  # a cluster's: the worker's address on its link to the coordinator
    clock_offset_ms: float  # a cluster's: its clock's offset from the coordinator's
    ops: int
    succeeded: int
    cpu_s: float | None
    status: str
    active_s: float | None
    cpu_wait_s: float  # where its kernel says how long its loop waited for a CPU
    errors: dict[str, int]
    driver: str  # engine/fastpath.py: compiled, or python and why
    peak_rss_bytes: int | None  # its peak resident memory (ru_maxrss); None: not told
    mismatch_keys: list[str]  # --verify: example keys whose value did not check
    began_ns: int  # a cluster's: when it began, on the coordinator's clock
    start_skew_ms: float  # a cluster's: how long after the earliest worker it began
    share: float  # of the run's ops
    set_s: float  # put-get-batches: how long its batch of sets took
    get_s: float


@dataclass(slots=True)
class RunResult:
    """A finished (or interrupted) run.

    Attributes:
        run_id: short unique id (``20261129-203000-1a2b``).
        started_at: ISO 8601 UTC wall-clock time the run started.
        status: what happened to its processes: ``ok``, ``interrupted`` (Ctrl-C: partial),
            ``partial`` (a worker failed). The run's status is results/status.py's.
        mode: ``closed``, ``open`` or ``queue``.
        kvbench_version: the tool's version.
        config: the run's config as a dict (seed included, credentials masked).
        targets: ``{url, protocol, server_version}`` per target.
        window_start_ns, window_end_ns: the measured window on the monotonic clock.
        intervals: measure-phase snapshots merged across workers, in order.
        phases: merged ``preload`` / ``warmup`` / ``drain`` snapshots, when they happened.
        workers: per worker: index, host, pid, ops, cpu_s, status.
        errors: one line per problem the run met (worker failures, protocol errors).
        environment: host, CPU, kernel, Python, event loop.
        server: server-side stats (before/after) when sampled.
        rounds: per round: ``round``, ``window_start_ns``, ``window_end_ns``, ``status``.
        queue: a queue run's section (delivery, end-to-end latency, backlog), else None.
        trace: a replay's section (the trace's profile, what was sent), else None.
        label: what tells it from its siblings: a sweep's level (``connections 64``), a
            preset's step; empty for a run of its own.
    """

    run_id: str
    started_at: str
    status: str
    mode: str
    kvbench_version: str
    config: dict[str, Any]
    targets: list[TargetRecord]
    window_start_ns: int
    window_end_ns: int
    intervals: list[IntervalSnapshot]
    phases: dict[str, IntervalSnapshot] = field(default_factory=dict)
    workers: list[WorkerRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    rounds: list[RoundRecord] = field(default_factory=list)
    queue: QueueSection | None = None
    label: str = ""
    trace: TraceSection | None = None

    @property
    def window_s(self) -> float:
        """The measured windows' wall-clock length in seconds, summed over rounds."""
        if self.rounds:
            return float(
                sum(max(0, r["window_end_ns"] - r["window_start_ns"]) for r in self.rounds) / 1e9
            )
        return max(0, self.window_end_ns - self.window_start_ns) / 1e9

    def round_window_s(self, index: int) -> float:
        """One round's window length in seconds."""
        r = self.rounds[index]
        return float(max(0, r["window_end_ns"] - r["window_start_ns"]) / 1e9)

    def total(self) -> IntervalSnapshot | None:
        """Every measure interval merged into one (None if nothing was measured)."""
        if not self.intervals:
            return None
        return merge_snapshots(self.intervals)


def _summed(counts: list[dict[str, int]]) -> dict[str, int]:
    """Counts by name, added up."""
    total: dict[str, int] = {}
    for part in counts:
        for name, n in part.items():
            total[name] = total.get(name, 0) + n
    return total


def combine_rounds(results: list[RunResult]) -> RunResult:
    """Several one-round results of the same target as one multi-round result.

    Used by comparisons, whose rounds are separate runs interleaved with other targets.
    Each round keeps its own server samples: its interval samples are tagged with its
    round, and its before/after samples stay a pair in ``server.rounds`` (other targets'
    traffic falls between the rounds, never inside one, so the target's own traffic is
    the sum of the pairs' deltas). The server's settings are the first round's.

    Raises:
        ValueError: no results.
    """
    if not results:
        raise ValueError("combine_rounds needs at least one result")
    first = results[0]
    intervals: list[IntervalSnapshot] = []
    phases: dict[str, list[IntervalSnapshot]] = {}
    rounds: list[RoundRecord] = []
    for index, result in enumerate(results):
        intervals.extend(replace(s, round=index) for s in result.intervals)
        for name, snap in result.phases.items():
            phases.setdefault(name, []).append(snap)
        record: RoundRecord = (
            result.rounds[0]
            if result.rounds
            else {
                "window_start_ns": result.window_start_ns,
                "window_end_ns": result.window_end_ns,
                "status": result.status,
                "round": index,
            }
        )
        rounds.append({**record, "round": index})
    statuses = {r.status for r in results}
    status = (
        "ok" if statuses == {"ok"} else ("interrupted" if "interrupted" in statuses else "partial")
    )
    return replace(
        first,
        status=status,
        intervals=intervals,
        phases={name: merge_snapshots(snaps) for name, snaps in phases.items()},
        rounds=rounds,
        window_start_ns=rounds[0]["window_start_ns"],
        window_end_ns=rounds[-1]["window_end_ns"],
        errors=[e for r in results for e in r.errors],
        server={
            "settings": first.server.get("settings"),
            "intervals": [
                {**sample, "round": index}
                for index, r in enumerate(results)
                for sample in r.server.get("intervals", [])
            ],
            "rounds": [
                {"round": index, "before": r.server.get("before"), "after": r.server.get("after")}
                for index, r in enumerate(results)
            ],
            "sample_errors": [e for r in results for e in r.server.get("sample_errors", [])][:5],
            "side_requests": _summed([r.server.get("side_requests") or {} for r in results]),
        },
        config={**first.config, "load": {**first.config.get("load", {}), "rounds": len(results)}},
    )
