"""A queue worker: one producer or one consumer, on the current event loop.

It connects, waits for the common start instant, then produces its quota (a producer) or
dequeues until told to stop (a consumer). Every ``PROGRESS_NS`` it emits a
``QueueProgress`` (counters, and the consumer's new receipts); at every interval boundary
on the common grid a ``QueueInterval`` (snapshot of put/get outcomes and latencies, the
end-to-end latency histogram). Transport failures are counted and the connection is
reopened (engine/reconnect.py, as for a load run's connections); nothing here raises
during a run.
"""

from __future__ import annotations

import asyncio
import gc
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kvbench.config.queue import QueueConfig
from kvbench.engine.clock import NEVER, cpu_wait_ns
from kvbench.engine.link import STOP_DRAIN_S
from kvbench.engine.queue_link import QUEUE_OPS, Consumer, Producer, QueueCommands, QueueLink
from kvbench.engine.reconnect import LinkKeeper, open_links
from kvbench.metrics.histogram import Histogram
from kvbench.metrics.recorder import Recorder
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.workload.queue import MessageFormat

_now = time.monotonic_ns
# Progress reports (counters, receipts) go to the coordinator this often: it starts the
# consumers (--consumers-start-after) and decides the end of the run from them.
PROGRESS_NS = 50_000_000


@dataclass(frozen=True, slots=True)
class QueueWorkerSpec:
    """What one queue worker process does.

    Attributes:
        config: the queue run's config.
        role: ``producer`` or ``consumer``.
        index: the producer's or consumer's id (0-based, per role).
        quota: a producer's share of the messages (0 for a consumer).
        run_tag: the run's tag, written into every message.
        worker_index: its process's number among all of the run's (producers first).
    """

    config: QueueConfig
    role: str
    index: int
    quota: int
    run_tag: int
    worker_index: int = 0

    @property
    def process_name(self) -> str:
        return f"kvbench-{self.role}-{self.index}"


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """A worker's counters now, and a consumer's receipts since its previous report.

    Attributes:
        taken_ns: when (monotonic clock).
        sent, stored: a producer's messages sent and acknowledged so far.
        received, foreign: a consumer's messages of this run / of others so far.
        empty_since_ns: a consumer: since when every answer said "empty" (None: the last
            answer brought a message, or it has not asked yet).
        last_empty_ns: a consumer: when the latest of those empty answers came.
        finished: the worker is done.
        producers, seqs: a consumer's new receipts, in order.
    """

    taken_ns: int
    sent: int = 0
    stored: int = 0
    received: int = 0
    foreign: int = 0
    empty_since_ns: int | None = None
    last_empty_ns: int | None = None
    finished: bool = False
    producers: array[int] = field(default_factory=lambda: array("I"))
    seqs: array[int] = field(default_factory=lambda: array("Q"))


@dataclass(frozen=True, slots=True)
class QueueInterval:
    """One interval of one worker.

    Attributes:
        snapshot: put/get outcomes and request latencies (the op names are ``put``/``get``).
        e2e: end-to-end latency of the messages received (consumers), or None.
        stored_total, received_total: cumulative at the interval's end.
    """

    snapshot: IntervalSnapshot
    e2e: Histogram | None
    stored_total: int
    received_total: int


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """What a worker reports when it is done.

    Attributes:
        status: ``ok`` or ``interrupted`` (stopped before its work was done).
        sent, stored, unacknowledged: a producer's messages sent, acknowledged, and the
            seqs of those not acknowledged.
        first_send_ns, last_ack_ns: a producer's first write and last acknowledgement.
        consume_start_ns, last_receive_ns: a consumer's start and its last message.
        received, foreign, empties: a consumer's messages and empty answers.
        unknown_fate: a consumer's gets that may have dequeued a message and were never
            answered (engine/queue_link.py, ``Consumer``); late_received: messages that
            came in answers to gets that had timed out.
        cpu_s, active_s: CPU time used and wall-clock time from start to finish.
        cpu_wait_s: how long its loop's thread waited, runnable, for a CPU meanwhile
            (engine/clock.py; None where the kernel does not say).
        errors: problem kind -> count; last_error: the latest one's text.
        peak_rss_bytes: the process's peak resident memory, set as it sends this
            (runner/process.py).
    """

    status: str
    sent: int = 0
    stored: int = 0
    unacknowledged: tuple[int, ...] = ()
    first_send_ns: int | None = None
    last_ack_ns: int = 0
    consume_start_ns: int | None = None
    last_receive_ns: int = 0
    received: int = 0
    foreign: int = 0
    empties: int = 0
    unknown_fate: int = 0
    late_received: int = 0
    cpu_s: float = 0.0
    active_s: float = 0.0
    cpu_wait_s: float | None = None
    errors: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None
    peak_rss_bytes: int | None = None


QueueReport = QueueProgress | QueueInterval


class QueueWorker(LinkKeeper):
    """Runs one producer or consumer on the current event loop; its link's host, keeping
    it as every worker does (``LinkKeeper``: engine/reconnect.py).

    Args:
        spec: what to do.
        emit: called with every progress report and interval as it is made.
    """

    def __init__(self, spec: QueueWorkerSpec, emit: Callable[[QueueReport], None]) -> None:
        config = spec.config
        self.spec = spec
        self._emit = emit
        super().__init__(Recorder(QUEUE_OPS), config.connect_timeout_ns)
        commands = QueueCommands(config)
        self.link: QueueLink
        if spec.role == "producer":
            message_format = MessageFormat(spec.run_tag, spec.index, config.message_size_bytes)
            self.link = Producer(
                self,
                commands,
                self.recorder,
                config.pipeline,
                message_format=message_format,
                quota=spec.quota,
            )
        else:
            poll_ns = 0 if config.block_ns is not None else config.poll_interval_ns
            self.link = Consumer(
                self,
                commands,
                self.recorder,
                config.pipeline,
                run_tag=spec.run_tag,
                poll_interval_ns=poll_ns,
            )
        self._stop_requested = False
        self._finished: asyncio.Event | None = None
        self._abandoning = False  # stopped, and its wait for replies over (``_end_stopped``)
        self._consume_start_ns: int | None = None
        self._start_ns = 0
        self._next_cut_ns = NEVER
        self._index = 0
        self._cpu_mark_ns = 0

    # -- preflight ---------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the connection and run its setup.

        Raises:
            TargetUnreachable: it could not be opened or set up.
        """
        await open_links([self.link], self.spec.config.connect_timeout_ns)

    # -- the run -----------------------------------------------------------------------

    async def run(self, start_ns: int) -> QueueSummary:
        """Start at ``start_ns``; a consumer dequeues from then on unless it waits for
        ``--consumers-start-after`` (then ``begin_consuming`` starts it).

        Returns when a producer has sent its quota and had every put answered, or when
        ``stop`` was called and the requests in flight were answered.
        """
        self._finished = asyncio.Event()
        await asyncio.sleep(max(0, start_ns - _now()) / 1e9)
        self._start_ns = start_ns
        self._next_cut_ns = start_ns + self.spec.config.interval_ns
        self._cpu_mark_ns = time.process_time_ns()
        cpu_start_ns, wait_start_ns = self._cpu_mark_ns, cpu_wait_ns()
        self._running = True
        self.restart_live_min()
        if not self.link.connected:  # lost between Ready and Start
            self.reopen(self.link)
        gc.collect()
        gc.freeze()
        gc.disable()
        ticker = asyncio.create_task(self._tick())
        try:
            if isinstance(self.link, Producer):
                self._emit(self._progress(_now()))  # the count starts at 0 now
                self.link.issuing = True
                self.link.fill()
                self.maybe_finished()
            elif self.spec.config.consumers_start_after == 0:
                self.begin_consuming()
            await self._finished.wait()
        finally:
            gc.enable()
            gc.unfreeze()
            ticker.cancel()
            self._running = False
        end_ns = _now()
        if self._abandoning:
            # In the same turn as the cut: their conn_error counts are in it, and the
            # link counts as live to the end (its close is reported a turn later), as a
            # load worker's do (was: "only 0 of the 2 connections were live").
            self.link.abandon()
        self._cut(end_ns)
        self._emit(self._progress(end_ns, finished=True))
        self.link.close()
        wait_end_ns = cpu_wait_ns()
        waited = (
            (wait_end_ns - wait_start_ns) / 1e9
            if wait_end_ns is not None and wait_start_ns is not None
            else None
        )
        return self._summary(
            (time.process_time_ns() - cpu_start_ns) / 1e9, (end_ns - start_ns) / 1e9, waited
        )

    def begin_consuming(self) -> None:
        """A consumer starts dequeuing now (--consumers-start-after)."""
        if not isinstance(self.link, Consumer) or self._consume_start_ns is not None:
            return
        if self._finished is None or self._finished.is_set():
            return
        self._consume_start_ns = _now()
        self._emit(self._progress(self._consume_start_ns))  # the count starts at 0 now
        self.link.issuing = True
        self.link.fill()

    def stop(self) -> None:
        """Stop issuing now; the requests in flight are still answered and counted, for
        at most ``STOP_DRAIN_S``: then they are abandoned (a get's message of unknown
        fate, a put neither stored nor refused)."""
        if self._finished is None or self._finished.is_set():
            return
        self._stop_requested = True
        link = self.link
        if isinstance(link, Producer) and link.next_seq < link.quota:
            self._interrupted = True
        if isinstance(link, Consumer):
            link.stop_issuing()
        link.issuing = False
        self.maybe_finished()
        if not self._finished.is_set():
            asyncio.get_running_loop().call_later(STOP_DRAIN_S, self._end_stopped)

    def _end_stopped(self) -> None:
        """A stopped run's wait for its replies is over (was: --timeout, 60 s against a
        stalled server, and late answers to timed-out gets after that)."""
        if self._finished is None or self._finished.is_set():
            return
        self._abandoning = True  # (``run`` abandons them, just before its last cut)
        self._finished.set()

    def maybe_finished(self) -> None:
        """End the run once nothing is left to send and nothing is in flight."""
        if self._finished is None or self._finished.is_set():
            return
        link = self.link
        if link.awaiting:  # late answers to timed-out gets are waited for too (bounded)
            return
        if self._stop_requested or (isinstance(link, Producer) and link.next_seq >= link.quota):
            link.issuing = False
            self._finished.set()

    # -- reports -----------------------------------------------------------------------

    async def _tick(self) -> None:
        """Progress every PROGRESS_NS, intervals on the grid, timeouts checked."""
        config = self.spec.config
        next_progress_ns = _now() + PROGRESS_NS
        while True:
            wake_ns = min(self._next_cut_ns, next_progress_ns)
            await asyncio.sleep(max(0, wake_ns - _now()) / 1e9)
            now = _now()
            self.link.check_timeout(now, config.timeout_ns)
            while now >= self._next_cut_ns:
                self._cut(self._next_cut_ns)
                self._next_cut_ns += config.interval_ns
            if now >= next_progress_ns:
                self._emit(self._progress(now))
                next_progress_ns = now + PROGRESS_NS

    def _progress(self, now: int, finished: bool = False) -> QueueProgress:
        link = self.link
        if isinstance(link, Producer):
            return QueueProgress(now, sent=link.next_seq, stored=link.stored, finished=finished)
        assert isinstance(link, Consumer)
        producers, seqs = link.take_receipts()
        return QueueProgress(
            now,
            received=link.received,
            foreign=link.foreign,
            empty_since_ns=link.empty_since_ns,
            last_empty_ns=link.last_empty_ns if link.empty_since_ns is not None else None,
            finished=finished,
            producers=producers,
            seqs=seqs,
        )

    def _cut(self, end_ns: int) -> None:
        cpu = time.process_time_ns()
        self.recorder.add_stat("cpu_ns", cpu - self._cpu_mark_ns)
        self.recorder.add_stat("connections_live_min", self.take_live_min())
        self._cpu_mark_ns = cpu
        start_ns = self._start_ns + self._index * self.spec.config.interval_ns
        snapshot = self.recorder.cut("measure", self._index, start_ns, end_ns)
        e2e: Histogram | None = None
        link = self.link
        if isinstance(link, Consumer):
            if link.e2e_ns:
                # Received after it was sent on the same clock, so never negative; the
                # clamp only guards the histogram against a forged header.
                values = np.array(link.e2e_ns, dtype=np.int64)
                del link.e2e_ns[:]
                e2e = Histogram()
                e2e.record_many(np.maximum(values, 0, out=values))
            self._emit(QueueInterval(snapshot, e2e, 0, link.received))
        else:
            assert isinstance(link, Producer)
            self._emit(QueueInterval(snapshot, None, link.stored, 0))
        self._index += 1

    def _summary(self, cpu_s: float, active_s: float, cpu_wait_s: float | None) -> QueueSummary:
        link = self.link
        common = {
            "cpu_s": cpu_s,
            "active_s": active_s,
            "cpu_wait_s": cpu_wait_s,
            **self.summary_fields(),
        }
        if isinstance(link, Producer):
            return QueueSummary(
                sent=link.next_seq,
                stored=link.stored,
                unacknowledged=tuple(link.unacknowledged),
                first_send_ns=link.first_send_ns,
                last_ack_ns=link.last_ack_ns,
                **common,
            )
        assert isinstance(link, Consumer)
        return QueueSummary(  # a consumer is never interrupted: stopping is how it ends
            consume_start_ns=self._consume_start_ns,
            last_receive_ns=link.last_receive_ns,
            received=link.received,
            foreign=link.foreign,
            empties=link.empties,
            unknown_fate=link.unknown_fate,
            late_received=link.late_received,
            **common,
        )

    # -- link events: counted and reopened by LinkKeeper --------------------------------

    def _wants_links(self) -> bool:
        """Not stopping, and (a producer) with messages left to send."""
        link = self.link
        exhausted = isinstance(link, Producer) and link.next_seq >= link.quota
        return not self._stop_requested and not exhausted
