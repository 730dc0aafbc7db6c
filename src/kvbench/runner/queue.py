"""The queue coordinator: producers and consumers in processes of their own, one run.

The same skeleton as a load run's coordinator: processes started by the local launcher
and talked to through a ``WorkerPool`` (runner/pool.py), the same process entry and
messages. Phases: preflight (server version, the queue's backlog) -> spawn and connect ->
start at one instant -> consumers start (at once, or when the producers report
--consumers-start-after messages stored) -> producers finish -> consumers stop when every
acknowledged message was received, or when the queue stayed empty for the grace period
(the rest is lost), or at the --duration limit -> accounting. Receipts arrive with the
50 ms progress reports and are folded into a ``DeliveryLedger`` as they come.

A write-only run (no consumers) ends when the producers are done, its messages left in
the queue; a drain (no producers) ends when every consumer's reads came back empty for
--grace (a second empty read after that pause confirms the queue empty). A preset's
phases (write, drain, mixed) share one ``QueueCarry``: the run tag, the ledger and what
every producer so far acknowledged, so a message stored in one phase and never read in a
later one is lost.

Producers and consumers may run in different processes: their clocks agree because
CLOCK_MONOTONIC is one clock for every process of a Linux host. Runs across hosts are
not supported (end-to-end latency would mix two clocks).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kvbench.config.queue import QueueConfig
from kvbench.engine.queue_worker import QueueInterval, QueueProgress, QueueSummary, QueueWorkerSpec
from kvbench.errors import RunAborted, TargetUnreachable, WorkerFailed
from kvbench.metrics.backlog import backlog_at, backlog_peak
from kvbench.metrics.delivery import Acknowledged, DeliveryLedger
from kvbench.metrics.histogram import Histogram
from kvbench.metrics.snapshot import IntervalSnapshot, merge_snapshots
from kvbench.results.model import RunResult, TargetRecord, WorkerRecord
from kvbench.results.queue import QueueInterval as QueueRecord
from kvbench.results.queue import QueueSection
from kvbench.runner import interrupts, probe
from kvbench.runner import messages as m
from kvbench.runner.coordinator import fresh_result
from kvbench.runner.held_signals import held_signals
from kvbench.runner.local import LocalLauncher
from kvbench.runner.pool import WorkerPool
from kvbench.runner.queue_probe import server_backlog
from kvbench.units import share_out

# The gap between "everyone is ready" and the common start (as for runs): time for Start
# to reach every process.
START_DELAY_NS = 200_000_000
# How long the coordinator waits for messages before looking at the clock again.
POLL_S = 0.01
# After Stop, how long (beyond the request timeout) a worker may take to report.
REPORT_GRACE_NS = 5_000_000_000
# The backlog-over-time series in the result: one point per this much time.
BACKLOG_STEP_NS = 100_000_000
# The server's backlog is asked for again no sooner than this (or --timeout, if longer)
# after an ask went unanswered (``QueueRun._backlog``).
BACKLOG_AGAIN_NS = 2_000_000_000
# How long spawned processes may take to import, connect and say Ready.
READY_TIMEOUT_NS = 60_000_000_000


@dataclass(frozen=True)
class QueueCarry:
    """What one queue run hands the next phase of the same experiment.

    Attributes:
        run_tag: the tag every phase's messages carry (a drain reads the write's).
        ledger: the receipts so far; the next phase's producers are planned after the
            ones in it (their ids follow on).
        acknowledged: what each producer so far sent and had stored, in id order.
    """

    run_tag: int
    ledger: DeliveryLedger
    acknowledged: tuple[Acknowledged, ...]


def data_dir_bytes(path: str) -> int | None:
    """The bytes of the files under ``path`` (memcacheq's Berkeley DB home: its logs
    grow by gigabytes); None when it cannot be read."""
    total = 0
    try:
        for root, _dirs, files in os.walk(path, onerror=_raise):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_size
                except FileNotFoundError:  # a log removed while we walked
                    continue
    except OSError:
        return None
    return total


def _raise(error: OSError) -> None:
    raise error


@dataclass
class _Worker:
    """What the coordinator knows of one producer or consumer process."""

    spec: QueueWorkerSpec
    host: tuple[str, int] | None = None  # host and pid, once it said Ready
    progress: QueueProgress | None = None
    counts: list[tuple[int, int]] = field(default_factory=list)  # (taken_ns, stored/received)
    intervals: dict[int, QueueInterval] = field(default_factory=dict)
    summary: QueueSummary | None = None
    failure: str | None = None

    @property
    def over(self) -> bool:
        return self.summary is not None or self.failure is not None

    @property
    def producing(self) -> bool:
        return self.spec.role == "producer"


class QueueCoordinator:
    """Runs one queue measurement described by ``config``.

    Args:
        config: the validated queue config.
        on_interval: called with each interval merged across workers, in order.
        on_event: called with one-line notes ("consumers started after 5,000 stored").
        carry: an earlier phase's tag, ledger and acknowledgements (``carry()`` of its
            coordinator): this run continues them. None: a run of its own.
    """

    def __init__(
        self,
        config: QueueConfig,
        on_interval: Callable[[IntervalSnapshot, QueueRecord], None] | None = None,
        on_event: Callable[[str], None] | None = None,
        carry: QueueCarry | None = None,
    ) -> None:
        self.config = config
        self._on_interval = on_interval or (lambda snapshot, record: None)
        self._on_event = on_event or (lambda text: None)
        self._quotas = share_out(config.messages, config.producers)
        if carry is None:
            self.run_tag = int.from_bytes(os.urandom(4), "big")
            self._ledger = DeliveryLedger(())
            self._carried: tuple[Acknowledged, ...] = ()
        else:
            self.run_tag, self._ledger, self._carried = (
                carry.run_tag,
                carry.ledger,
                carry.acknowledged,
            )
        self._carried_received = self._ledger.received_total
        self._backlog_base = _backlog_base(config, carry)
        self._own = self._ledger.extend(self._quotas)  # this run's producer ids
        self._acknowledged: list[Acknowledged] = []
        self._workers: list[_Worker] = []
        self._pool = WorkerPool(LocalLauncher())
        self._snapshots: list[IntervalSnapshot] = []
        self._records: list[QueueRecord] = []
        self._server: dict[str, Any] = {"intervals": []}
        self._start_ns = 0
        self._consume_start_ns: int | None = None
        self._producers_done_ns: int | None = None
        self._stopped_consumers = False
        self._stopped_all = False
        self._stop_reason = ""
        self._drained = True
        self._interrupted = False
        self._backlog_asks = probe.Unanswered(max(config.timeout_ns, BACKLOG_AGAIN_NS))

    def run(self) -> RunResult:
        """Run the whole queue measurement.

        Raises:
            TargetUnreachable: preflight or a worker could not reach the server.
            RunAborted: workers failed before the run started.
        """
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        target = self.config.target
        targets: list[TargetRecord] = [
            {"url": target.url, "protocol": target.protocol, "server_version": None}
        ]
        try:
            interrupts.arm()  # a signal that came before (since ``disarm``) stops it here
            stats = probe.fetch_stats(target, self.config.timeout_ns / 1e9)
            targets[0]["server_version"] = probe.server_version(stats)
            self._server["before"] = server_backlog(self.config)
            self._spawn()
            self._await_ready()
            self._start_ns = time.monotonic_ns() + START_DELAY_NS
            if self.config.consumers_start_after == 0:  # they start with the producers
                self._consume_start_ns = self._start_ns
            self._pool.broadcast(m.Start(self._start_ns))
            self._collect()
        except KeyboardInterrupt:  # probing, starting: what ran is kept, as in _collect
            self._interrupted = True
            self._stop_all("interrupted")
            self._on_event("interrupted: stopping producers and consumers, keeping the counts")
            if self._start_ns:  # they were started: their last reports
                self._collect()
        finally:
            self._pool.stop()
        interrupts.disarm()  # the result is built and kept whole from here
        if "before" in self._server:  # (not when interrupted while probing: no span)
            self._server["after"] = self._backlog()
        if self.config.data_dir is not None:
            path = self.config.data_dir
            self._server["data_dir"] = {"path": path, "bytes": data_dir_bytes(path)}
        return self._result(started_at, targets)

    def carry(self) -> QueueCarry:
        """What the next phase continues: this run's tag, its ledger, every producer's
        acknowledgements so far (call after ``run``)."""
        return QueueCarry(self.run_tag, self._ledger, (*self._carried, *self._acknowledged))

    # -- processes ---------------------------------------------------------------------

    def _spawn(self) -> None:
        config = self.config
        roles = [("producer", i, quota) for i, quota in zip(self._own, self._quotas, strict=True)]
        roles += [("consumer", i, 0) for i in range(config.consumers)]
        specs = [
            QueueWorkerSpec(config, role, index, quota, self.run_tag, number)
            for number, (role, index, quota) in enumerate(roles)
        ]
        self._workers = [_Worker(spec) for spec in specs]
        self._pool.start(specs)

    def _await_ready(self) -> None:
        deadline = time.monotonic_ns() + READY_TIMEOUT_NS
        ready: set[int] = set()
        while len(ready) < len(self._workers):
            if time.monotonic_ns() > deadline:
                raise WorkerFailed("preflight", "workers did not start within 60 s")
            for number, message in self._receive():
                if isinstance(message, m.Ready):
                    ready.add(number)
                    self._workers[number].host = (message.host, message.pid)
                elif isinstance(message, m.Failed) and message.kind == "unreachable":
                    raise TargetUnreachable(message.message)
            failed = [w for w in self._workers if w.failure is not None]
            if failed:
                raise WorkerFailed("preflight", (failed[0].failure or "").strip().splitlines()[-1])

    # -- the run -----------------------------------------------------------------------

    def _collect(self) -> None:
        """Handle reports and decide the phases until every worker is done."""
        config = self.config
        deadline = self._start_ns + config.duration_ns if config.duration_ns is not None else None
        report_deadline: int | None = None
        while not all(w.over for w in self._workers):
            try:
                self._receive()
            except KeyboardInterrupt:
                self._interrupted = True
                self._stop_all("interrupted")
                self._on_event("interrupted: stopping producers and consumers, keeping the counts")
            now = time.monotonic_ns()
            if deadline is not None and now >= deadline and not self._stopped_all:
                self._drained = False
                self._stop_all("--duration limit reached")
                self._on_event("duration limit reached: stopping producers and consumers")
            self._decide(now)
            if self._stopped_all and report_deadline is None:
                # A request may time out a timeout after Stop, and its late answer is
                # waited for one more (engine/queue_link.py, Consumer).
                report_deadline = now + 2 * config.timeout_ns + REPORT_GRACE_NS
            if report_deadline is not None and now > report_deadline:
                for worker in self._workers:
                    if not worker.over:
                        worker.failure = "stopped reporting after Stop"
        self._emit_intervals(final=True)

    def _decide(self, now: int) -> None:
        """Start consumers, note the producers' end, stop consumers: from the counts."""
        stored = sum(w.progress.stored for w in self._workers if w.producing and w.progress)
        producers = [w for w in self._workers if w.producing]
        if self._producers_done_ns is None and all(
            w.over or (w.progress is not None and w.progress.finished) for w in producers
        ):
            self._producers_done_ns = now
        if self._consume_start_ns is None and (
            stored >= self.config.consumers_start_after or self._producers_done_ns is not None
        ):
            self._consume_start_ns = now
            for number, worker in enumerate(self._workers):
                if not worker.producing:
                    self._pool.send(number, m.Consume())
            if self.config.consumers:
                self._on_event(f"consumers started: {stored:,} messages stored")
        if self._stopped_consumers or self._producers_done_ns is None:
            return
        grace_s = f"{self.config.grace_ns / 1e9:g}s"
        if self.config.consumers == 0:
            self._stopped_consumers = True
            self._drained = False
            self._stop_reason = self._stop_reason or (
                f"write only: the {stored:,} messages stored stay in the queue"
            )
        elif self.config.producers and self._ledger.unique_of(self._own) >= stored:
            self._stop_consumers("every acknowledged message was received")
        elif self._queue_empty_confirmed():
            self._stop_consumers(
                f"drained: the queue was empty, and again {grace_s} later"
                if self.config.producers == 0
                else f"the queue stayed empty for {grace_s} after the producers finished"
            )
        elif all(w.over for w in self._workers if not w.producing):
            self._stop_consumers("every consumer failed")

    def _queue_empty_confirmed(self) -> bool:
        """Every running consumer's reads came back empty, none with a message, from its
        first empty read (or the producers' end) to one at least --grace later."""
        assert self._producers_done_ns is not None
        consumers = [w for w in self._workers if not w.producing and not w.over]
        if not consumers or self._consume_start_ns is None:
            return False
        for worker in consumers:
            progress = worker.progress
            if progress is None or progress.empty_since_ns is None:
                return False
            first = max(progress.empty_since_ns, self._producers_done_ns)
            last = progress.last_empty_ns
            if last is None or last - first < self.config.grace_ns:
                return False
        return True

    def _stop_consumers(self, reason: str) -> None:
        self._stopped_consumers = True
        self._stop_reason = self._stop_reason or reason
        for number, worker in enumerate(self._workers):
            if not worker.producing:
                self._pool.send(number, m.Stop())

    def _stop_all(self, reason: str) -> None:
        self._stopped_all = True
        self._stop_reason = self._stop_reason or reason
        self._stopped_consumers = True
        self._pool.broadcast(m.Stop())

    # -- messages ----------------------------------------------------------------------

    def _receive(self) -> list[tuple[int, m.Message]]:
        """Wait up to POLL_S for messages and handle them (a dead worker is a Failed one).

        Ctrl-C (and SIGTERM, SIGHUP) is held until every message read is handled
        (runner/held_signals.py): a report is folded in whole, never half, and none read
        from a pipe is dropped; the signal comes out of here right after.
        """
        with held_signals():
            received = self._pool.receive(POLL_S)
            for number, message in received:
                self._handle(self._workers[number], message)
        return received

    def _handle(self, worker: _Worker, message: m.Message) -> None:
        if isinstance(message, m.Report):
            report = message.report
            if isinstance(report, QueueProgress):
                worker.progress = report
                if worker.producing:
                    worker.counts.append((report.taken_ns, report.stored))
                else:
                    worker.counts.append((report.taken_ns, report.received))
                    if report.seqs:
                        self._ledger.add(worker.spec.index, report.producers, report.seqs)
            else:
                worker.intervals[report.snapshot.index] = report
                self._emit_intervals()
        elif isinstance(message, m.Done):
            assert isinstance(message.summary, QueueSummary)
            worker.summary = message.summary
            self._emit_intervals()
        elif isinstance(message, m.Failed):
            worker.failure = worker.failure or message.message

    # -- intervals ---------------------------------------------------------------------

    def _emit_intervals(self, final: bool = False) -> None:
        """Merge and hand on each interval once every worker still running has reported it."""
        while True:
            index = len(self._records)
            parts = [w.intervals[index] for w in self._workers if index in w.intervals]
            waiting = [w for w in self._workers if not w.over and index not in w.intervals]
            if not parts or (waiting and not final):
                return
            snapshot, record = self._merge(index, parts)
            self._snapshots.append(snapshot)
            self._records.append(record)
            self._on_interval(snapshot, record)

    def _merge(
        self, index: int, parts: list[QueueInterval]
    ) -> tuple[IntervalSnapshot, QueueRecord]:
        e2e = [p.e2e for p in parts if p.e2e is not None]
        stored = received = 0
        for worker in self._workers:
            latest = _latest(worker, index)
            if latest is not None:
                stored += latest.stored_total
                received += latest.received_total
        sample = self._backlog()
        if sample is not None:
            self._server["intervals"].append({"index": index, **sample})
        return merge_snapshots(p.snapshot for p in parts), QueueRecord(
            index=index,
            e2e=Histogram.merged(e2e) if e2e else None,
            stored_total=stored,
            received_total=received,
            server_backlog=sample["backlog"] if sample is not None else None,
            backlog_base=self._backlog_base,
        )

    def _backlog(self) -> dict[str, Any] | None:
        """The server's backlog (``server_backlog``), or None: none is asked for within
        --timeout (at least ``BACKLOG_AGAIN_NS``) of an ask that went unanswered
        (``probe.Unanswered``; was: 2 s per interval against a stalled server, and 9 s
        more after a Ctrl-C)."""
        return self._backlog_asks.ask(lambda: server_backlog(self.config))

    # -- result ------------------------------------------------------------------------

    def _result(self, started_at: str, targets: list[TargetRecord]) -> RunResult:
        """The run (mode ``queue``) with its queue section.

        Raises:
            RunAborted: every worker failed.
        """
        failed = [w for w in self._workers if w.failure is not None]
        if failed and not any(w.summary for w in self._workers):
            raise RunAborted("run", failed[0].failure or "every worker failed")
        if self._interrupted:
            status = "interrupted"
        elif failed:
            status = "partial"
        else:
            status = "ok"
        queue = self._section(drained=self._drained and not self._interrupted and not failed)
        end_ns = max(queue.produce_end_ns, queue.consume_end_ns, self._start_ns)
        return fresh_result(
            started_at=started_at,
            status=status,
            mode="queue",
            config=self.config.to_dict() | {"run_tag": self.run_tag},
            targets=targets,
            window_start_ns=self._start_ns,
            window_end_ns=end_ns,
            intervals=self._snapshots,
            workers=[_worker_row(w) for w in self._workers],
            errors=_errors(self._workers),
            server=self._server,
            queue=queue,
        )

    def _section(self, drained: bool) -> QueueSection:
        """Delivery, windows, consumers and the backlog, from what the workers reported."""
        producers = [w for w in self._workers if w.producing]
        consumers = [w for w in self._workers if not w.producing]
        self._acknowledged = [_acknowledged(w) for w in producers]
        delivery = self._ledger.finish([*self._carried, *self._acknowledged])
        out_of_order = delivery.out_of_order_by_consumer
        summaries = [w.summary for w in consumers if w.summary is not None]
        consume_starts = [s.consume_start_ns for s in summaries if s.consume_start_ns is not None]
        stored_series = [w.counts for w in producers]
        received_series = [w.counts for w in consumers]
        base = self._backlog_base
        peak: int | None = None
        peak_ns: int | None = None
        points: list[tuple[float, int]] = []
        if base is not None:  # else the client cannot know it: the server's count says
            peak, peak_ns = backlog_peak(stored_series, received_series, base)
            end_ns = max([self._start_ns, *(t for w in self._workers for t, _ in w.counts[-1:])])
            grid = list(range(self._start_ns, end_ns + BACKLOG_STEP_NS, BACKLOG_STEP_NS))
            series = backlog_at(stored_series, received_series, grid, base)
            points = [((t - self._start_ns) / 1e9, b) for t, b in zip(grid, series, strict=True)]
        return QueueSection(
            produce_end_ns=max((w.summary.last_ack_ns for w in producers if w.summary), default=0),
            consume_start_ns=min(consume_starts) if consume_starts else self._consume_start_ns,
            consume_end_ns=max((s.last_receive_ns for s in summaries), default=0),
            intervals=self._records,
            delivery=delivery,
            foreign=sum(s.foreign for s in summaries),
            empties=sum(s.empties for s in summaries),
            unknown_fate=sum(s.unknown_fate for s in summaries),
            late_received=sum(s.late_received for s in summaries),
            consumers=[
                {
                    "consumer": w.spec.index,
                    "received": w.summary.received if w.summary else None,
                    "foreign": w.summary.foreign if w.summary else None,
                    "empties": w.summary.empties if w.summary else None,
                    "out_of_order": out_of_order.get(w.spec.index, 0),
                }
                for w in consumers
            ],
            backlog_peak=peak,
            backlog_peak_ns=peak_ns,
            backlog_series=points,
            drained=drained,
            stop_reason=self._stop_reason,
            carried_producers=len(self._carried),
            carried_received=self._carried_received,
        )


def _backlog_base(config: QueueConfig, carry: QueueCarry | None) -> int | None:
    """The backlog this run starts from, as the client knows it: what earlier phases
    acknowledged and were not yet received (0 for a run of its own); None for a drain of
    its own (``--producers 0``): it reads messages no producer of it stored, so only the
    server can count them."""
    if carry is None:
        return None if config.producers == 0 else 0
    produced = sum(ack.sent - len(set(ack.unacknowledged)) for ack in carry.acknowledged)
    return max(0, produced - carry.ledger.unique_total)


def _latest(worker: _Worker, index: int) -> QueueInterval | None:
    """The worker's interval ``index``, or its last one before that (it finished early)."""
    if index in worker.intervals:
        return worker.intervals[index]
    earlier = [i for i in worker.intervals if i < index]
    return worker.intervals[max(earlier)] if earlier else None


def _acknowledged(worker: _Worker) -> Acknowledged:
    if worker.summary is not None:
        return Acknowledged(worker.summary.sent, worker.summary.unacknowledged)
    # A producer that died: what it reported last. Replies come in order, so its stored
    # messages are (but for error replies) the first ones; the rest are unknown.
    if worker.progress is None:
        return Acknowledged(0)
    sent, stored = worker.progress.sent, worker.progress.stored
    return Acknowledged(sent, tuple(range(stored, sent)))


def _worker_row(worker: _Worker) -> WorkerRecord:
    summary = worker.summary
    row: WorkerRecord = {"role": worker.spec.role, "index": worker.spec.index}
    if worker.host is not None:
        row["host"], row["pid"] = worker.host
    row["ops"] = sum(i.snapshot.ops() for i in worker.intervals.values())
    row["status"] = "failed" if worker.failure else (summary.status if summary else "unknown")
    row["cpu_s"] = round(summary.cpu_s, 3) if summary else None
    row["peak_rss_bytes"] = summary.peak_rss_bytes if summary else None
    row["active_s"] = round(summary.active_s, 3) if summary else None
    if summary and summary.cpu_wait_s is not None:
        row["cpu_wait_s"] = round(summary.cpu_wait_s, 3)
    row["errors"] = summary.errors if summary else {}
    return row


def _errors(workers: list[_Worker]) -> list[str]:
    lines = []
    for w in workers:
        name = f"{w.spec.role} {w.spec.index}"
        if w.failure:
            lines.append(f"{name}: {w.failure.strip().splitlines()[-1]}")
        elif w.summary and w.summary.last_error:
            total = sum(w.summary.errors.values())
            lines.append(f"{name}: {w.summary.last_error} ({total} problem(s))")
    return lines
