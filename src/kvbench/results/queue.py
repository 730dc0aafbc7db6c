"""QueueRunResult: one queue run as it is reported and stored.

Everything the queue report shows is computed from this. For the history it becomes a
``RunResult`` with mode ``queue`` (``to_run_result``): its intervals carry the put/get
counts and request latencies; the queue figures (end-to-end latency, delivery, backlog)
travel in the stored result document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvbench.metrics.delivery import DeliveryReport
from kvbench.metrics.histogram import Histogram
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.model import RunResult


@dataclass(frozen=True, slots=True)
class QueueIntervalRecord:
    """One interval merged across producers and consumers.

    Attributes:
        snapshot: put/get outcomes and request latencies (op names ``put`` and ``get``).
        e2e: end-to-end latency of the messages received in the interval, or None.
        stored_total, received_total: messages acknowledged / received by the interval's
            end, cumulative.
        server_backlog: the queue's length by the server's own count, when it could say.
    """

    snapshot: IntervalSnapshot
    e2e: Histogram | None
    stored_total: int
    received_total: int
    server_backlog: int | None = None

    @property
    def backlog(self) -> int:
        """Acknowledged but not yet received, at the interval's end (client's view)."""
        return max(0, self.stored_total - self.received_total)


@dataclass(slots=True)
class QueueRunResult:
    """A finished (or stopped) queue run.

    Attributes:
        run_id, started_at, status, kvbench_version, config, targets: as in ``RunResult``
            (status: ``ok``, ``interrupted`` or ``partial``).
        start_ns: the common start instant (monotonic clock).
        produce_end_ns: the last put acknowledgement.
        consume_start_ns: when consumers started dequeuing.
        consume_end_ns: the last message received.
        intervals: merged intervals, in order.
        delivery: lost / duplicated / out-of-order accounting.
        foreign: messages dequeued that were not this run's.
        empties: dequeues that found the queue empty.
        consumers: per consumer: ``consumer``, ``received``, ``foreign``, ``empties``,
            ``out_of_order``.
        backlog_peak, backlog_peak_ns: the largest backlog at any instant a worker
            reported (metrics/backlog.py), and that instant.
        backlog_series: (seconds from the start, backlog) every 100 ms.
        drained: the run went on until every message was received or the queue stayed
            empty for the grace period; False when a limit or Ctrl-C ended it first.
        stop_reason: why the consumers stopped.
        server: the server's backlog before, per interval and after.
        workers: per process: role, index, host, pid, ops, cpu_s, active_s, status,
            errors.
        errors: one line per problem.
        environment: host, CPU, Python, event loop.
    """

    run_id: str
    started_at: str
    status: str
    kvbench_version: str
    config: dict[str, Any]
    targets: list[dict[str, Any]]
    start_ns: int
    produce_end_ns: int
    consume_start_ns: int | None
    consume_end_ns: int
    intervals: list[QueueIntervalRecord]
    delivery: DeliveryReport
    foreign: int = 0
    empties: int = 0
    consumers: list[dict[str, Any]] = field(default_factory=list)
    backlog_peak: int = 0
    backlog_peak_ns: int | None = None
    backlog_series: list[tuple[float, int]] = field(default_factory=list)
    drained: bool = True
    stop_reason: str = ""
    server: dict[str, Any] = field(default_factory=dict)
    workers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def end_ns(self) -> int:
        """The end of the run: the later of the last acknowledgement and last receipt."""
        return max(self.produce_end_ns, self.consume_end_ns, self.start_ns)

    @property
    def produce_window_s(self) -> float:
        """From the common start to the last put acknowledgement."""
        return max(0, self.produce_end_ns - self.start_ns) / 1e9

    @property
    def consume_window_s(self) -> float:
        """From the consumers' start to the last message received."""
        if self.consume_start_ns is None:
            return 0.0
        return max(0, self.consume_end_ns - self.consume_start_ns) / 1e9

    def to_run_result(self) -> RunResult:
        """This run in the shape of the history's runs (mode ``queue``)."""
        return RunResult(
            run_id=self.run_id,
            started_at=self.started_at,
            status=self.status,
            mode="queue",
            kvbench_version=self.kvbench_version,
            config=self.config,
            targets=self.targets,
            window_start_ns=self.start_ns,
            window_end_ns=self.end_ns,
            intervals=[record.snapshot for record in self.intervals],
            workers=self.workers,
            errors=self.errors,
            environment=self.environment,
            server=self.server,
            rounds=[
                {
                    "round": 0,
                    "window_start_ns": self.start_ns,
                    "window_end_ns": self.end_ns,
                    "status": self.status,
                }
            ],
        )
