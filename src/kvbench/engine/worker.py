"""Worker: one event loop's connections, request source and recorder, run through phases.

A worker connects (preflight), optionally preloads its share of the keyspace, then runs
warm-up, measure and drain on the system-wide monotonic clock, cutting an interval
snapshot at every boundary and handing it to ``emit``. It never raises for transport
failures during a run: they are counted and the connection is reopened.

A replay (``config.replay``) gives each connection its own request source, a lane of the
trace's rows (workload/trace_source.py), read into the lanes while connecting: sent as fast as the server answers (closed loop),
or at the trace's times through the open-loop dispatcher, one ``TraceSchedule`` per
connection. The run ends when the trace (or its slice) is sent and answered.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kvbench.config.model import RunConfig, TargetConfig
from kvbench.config.replay import MONITOR_FORMAT
from kvbench.engine.clock import NEVER, cpu_wait_ns
from kvbench.engine.codec_choice import connection_codec_factories, connection_ttls
from kvbench.engine.connection import Connection
from kvbench.engine.fastpath import (
    VERIFY_DERIVED,
    PumpFactory,
    drain,
    driver_name,
    folding,
    loop_reason,
    new_tally,
    pump_verify,
    python_reason,
)
from kvbench.engine.link import STOP_DRAIN_S, Link, SetupWriter
from kvbench.engine.loop import LoopDriver
from kvbench.engine.loop_dispatch import LoopDispatcher
from kvbench.engine.open_loop import OpenLoopDispatcher
from kvbench.engine.pacing import Schedule, TraceSchedule
from kvbench.engine.py_pump import PumpMaker, PyPumps, PyTally
from kvbench.engine.reconnect import LinkKeeper, connects_in_flight, interleaved, open_links
from kvbench.engine.redirect import ClusterConnection, ClusterRouter
from kvbench.engine.setup import setup_for
from kvbench.engine.shards import Shard, build_shards, cluster_shards
from kvbench.engine.spec import WorkerSpec as WorkerSpec  # (re-exported: built here before)
from kvbench.engine.spec import WorkerSummary as WorkerSummary
from kvbench.engine.verify import Verifier
from kvbench.metrics.recorder import Recorder
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.units import share_out
from kvbench.workload.chunk import ChunkSource, Cursor
from kvbench.workload.monitor_feed import MonitorFeed
from kvbench.workload.plan import RequestSource, WorkloadPlan, own_key_plans
from kvbench.workload.trace_source import ReplayFeed
from kvbench.workload.trace_spool import SpoolUnreadable
from kvbench.workload.verify import first_version, value_check

if TYPE_CHECKING:
    from kvbench.engine._pump import Tally

_now = time.monotonic_ns
T = TypeVar("T")
PRELOAD_PIPELINE = 64
# The hiccup task sleeps this long and records how late it wakes (jHiccup's idea): a
# busy or blocked event loop delays every reply it reads by as much. On the compiled
# event loop the poller ticks at this period instead, in C (engine/loop.py start_ticks).
HICCUP_PERIOD_NS = 1_000_000
# In-flight requests are sampled for Little's law this often (in hiccup periods).
INFLIGHT_SAMPLE_EVERY = 10
# The timeout watchdog asks every connection for its oldest request every
# TIMEOUT_SCAN_NS (a quarter of the timeout when that is shorter), or, with many
# connections, every TIMEOUT_SCAN_PER_CONNECTION_NS per connection: at 10,000
# connections a scan every 100 ms was 10^5 Python calls a second, one scan a second is
# 10^4. On the compiled loop the poller scans its pumps in C and names the few that may
# be late (LoopDriver.overdue): at 10,000 connections the Python scan had stalled the loop
# 10 ms a second. A timed-out request counts at the timeout whenever a scan finds it: a
# later scan only reopens its connection later.
TIMEOUT_SCAN_NS = 100_000_000
TIMEOUT_SCAN_PER_CONNECTION_NS = 100_000
# Replies are folded into the interval's histograms this often (in hiccup periods, so
# about every 10 ms). One fold per 1 s interval of ~750k replies stalled the loop for
# 17-39 ms and showed up as a 39 ms max in a 4 s Redis run (pipeline 16); folding as the
# interval runs kept that run's max at 4.5 ms.
FOLD_EVERY = 10
# What a run that could not send an interval's snapshot says (``Worker._send_posted``).
_UNSENT = "an interval could not be sent"


def driver_reasons(config: RunConfig) -> tuple[str | None, str | None]:
    """Why a run's connections take the Python driver, and why its compiled pumps keep
    the transports (None, None: the compiled loop, on a ``PollerLoop``)."""
    python = python_reason(config)
    return python, loop_reason(config) if python is None else None


class _OnTally(Generic[T]):
    """A worker attribute kept on its tally, the send state the compiled pumps share."""

    def __init__(self, convert: Callable[[Any], T]) -> None:
        self._convert = convert
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, worker: Any, owner: type | None = None) -> T:
        return self._convert(getattr(worker.tally, self._name))

    def __set__(self, worker: Any, value: T) -> None:
        setattr(worker.tally, self._name, value)


class Worker(LinkKeeper):
    """Runs one worker's share of the load on the current event loop; its connections'
    host (``DriverHost``: engine/connection.py), keeping them as every worker does
    (``LinkKeeper``: engine/reconnect.py).

    Args:
        spec: this worker's assignment.
        emit: called with each interval snapshot as soon as it is cut.
    """

    def __init__(self, spec: WorkerSpec, emit: Callable[[IntervalSnapshot], None]) -> None:
        config = spec.config
        self.spec = spec
        self._emit = emit
        self._outbox: list[IntervalSnapshot] = []  # cut, not yet sent (``_post``)
        if spec.slot_map is not None:
            self.shards, placement, whole = cluster_shards(
                config, spec.worker_index, spec.n_workers, spec.slot_map
            )
        else:
            self.shards = build_shards(config, spec.worker_index, spec.n_workers)
        self.target: TargetConfig = self.shards[0].target
        self.plan: WorkloadPlan = self.shards[0].plan
        # Op numbers index the fixed ops' names, then the commands' (workload/commands.py):
        # a MONITOR capture's replay records its commands by the names its scan found.
        names, keys = self.plan.op_names(), self.plan.keys_per_op()
        # (how many codes from COMMAND_BASE on are commands', each sent as Op.COMMAND:
        # --command's entries, which include its names' codes; a capture's names)
        self._command_codes = len(config.workload.commands)
        if config.replay is not None and config.replay.format == MONITOR_FORMAT:
            names += config.replay.commands
            keys += (1,) * len(config.replay.commands)
            self._command_codes = len(config.replay.commands)
        recorder = Recorder(names, keys)
        super().__init__(recorder, config.load.connect_timeout_ns, config.load.server_gone_ns)
        if len(self.shards) > 1 or spec.slot_map is not None:
            self.server_index = {shard.target.url: shard.index for shard in self.shards}
        self.verifier = (
            Verifier(self.recorder, value_check(config.workload))
            if config.workload.verify
            else None
        )
        self.connections: list[Connection] = []
        # Why connections run the Python driver (None: they run the compiled pumps), and
        # why the compiled pumps do not run on the compiled event loop (None: they do, and
        # the connections' sockets are the loop's: engine/loop.py).
        self.python_reason, self.loop_reason = driver_reasons(config)
        self.loop = (
            LoopDriver(self._loop_broke, config.load.busy_poll_ns)
            if self.python_reason is None and self.loop_reason is None
            else None
        )
        # Send state shared with the pumps: see the properties below.
        self.tally: Tally | PyTally = new_tally(self.cut, self.python_reason is None)
        # Each connection's pump: Python ones until the run starts (the preload's), then
        # compiled ones where the run can use them.
        self.pumps: PumpMaker = PyPumps()
        self.phase = "idle"
        self._index = 0
        self._interval_start_ns = 0
        self._measure_start_ns = 0
        self._began_ns = 0
        self._measure_end_ns = NEVER
        self._cpu_mark_ns = time.process_time_ns()
        self._wait_mark_ns = cpu_wait_ns()
        self._finished: asyncio.Event | None = None
        self._idle_upto = 0  # connections[:this] were found idle while nothing was sent
        self._preload_stopped = False  # an interrupt ended the preload: no more shards
        self.dispatcher: OpenLoopDispatcher | None = None
        self._prepared = False  # prepare() ran: the run's setup, before its start instant
        # A Redis Cluster run: where each slot is served now, and redirects followed.
        self.router = (
            ClusterRouter(self, placement, whole, config.load.timeout_ns / 1e9)
            if spec.slot_map is not None
            else None
        )
        # A replay's trace reader and lanes (one per connection), made when connecting.
        self.feed: ReplayFeed | MonitorFeed | None = None
        self._spool_failed = False  # a replay's spool could not be read back
        self._gone: set[int] = set()  # servers (shard indices) found gone (_server_gone)
        self._error_said: tuple[str, str] | None = None  # the first error reply's words

    # -- send state, shared with the compiled pumps -------------------------------------

    issuing = _OnTally(bool)  # connections may send new requests
    next_cut_ns = _OnTally(int)  # when the current interval ends (NEVER outside the window)
    bytes_in = _OnTally(int)
    bytes_out = _OnTally(int)

    @property
    def budget(self) -> int | None:
        """Requests left to send in this phase (None: no limit)."""
        budget = int(self.tally.budget)
        return None if budget < 0 else budget

    @budget.setter
    def budget(self, value: int | None) -> None:
        self.tally.budget = -1 if value is None else value

    # -- preflight ---------------------------------------------------------------------

    async def connect(self) -> None:
        """Open every connection and run its setup.

        Raises:
            TargetUnreachable: a connection could not be opened or set up.
        """
        # Each connection makes ~30 objects the collector tracks (codec, pump, transport,
        # the task that opens it): 10,000 of them set off about ten full passes over all of
        # them, most of a 10k connect's CPU. The collector waits until they are open, then
        # runs once, and what is left is frozen out of its later passes (the preload's);
        # the run unfreezes it at its end.
        collecting = gc.isenabled()
        gc.disable()
        try:
            await self._connect()
        finally:
            if collecting:
                gc.enable()
        gc.collect()
        gc.freeze()

    async def _connect(self) -> None:
        spec = self.spec
        load = spec.config.load
        self.connections = []
        by_shard: list[list[Connection]] = []
        for shard, count in zip(
            self.shards, share_out(spec.connections, len(self.shards)), strict=True
        ):
            workload = spec.config.workload
            ttls = connection_ttls(workload, spec.worker_index, count)
            factories = connection_codec_factories(shard.target, workload, ttls, self.verifier)
            setup = setup_for(shard.target)
            made = [
                self.make_connection(factory, setup, load.pipeline, shard) for factory in factories
            ]
            if workload.ttl_range:  # each sends its own (its pump too)
                for connection, ttl in zip(made, ttls, strict=True):
                    connection.ttl_s = ttl
            if spec.config.workload.set_then_get:  # each connection sends keys of its own
                for connection, plan in zip(made, own_key_plans(shard.plan, count), strict=True):
                    connection.cursor = Cursor(RequestSource(plan))
            self.connections += made
            by_shard.append(made)
        replay = spec.config.replay
        if replay is not None and replay.format == MONITOR_FORMAT:
            self.feed = MonitorFeed(
                replay,
                spec.worker_index,
                spec.n_workers,
                len(self.connections),
                spec.config.workload.seed,
            )
        elif replay is not None:
            self.feed = ReplayFeed(
                replay,
                self.target.protocol,
                spec.worker_index,
                spec.n_workers,
                len(self.connections),
                spec.config.workload.seed,
            )
            self.feed.on_unreadable = self._spool_unreadable
        if self.feed is not None:
            lanes: Sequence[ChunkSource] = self.feed.lanes
            for conn, lane in zip(self.connections, lanes, strict=True):
                conn.cursor = Cursor(lane)
            self.feed.prepare()  # before any connection: a bad row sends nothing
        # Each server's connects in flight stay under its listen backlog, whatever the
        # number of workers and servers (engine/reconnect.py).
        await open_links(
            interleaved(by_shard),
            load.connect_timeout_ns,
            connects_in_flight(len(self.shards), spec.n_workers),
        )

    def make_connection(
        self,
        codec_factory: Callable[[], Any],
        setup: SetupWriter | None,
        pipeline: int,
        shard: Shard,
    ) -> Connection:
        """A connection of this worker (not opened), sending to ``shard``."""
        if self.router is not None:
            return ClusterConnection(
                self.router, self, self.tally, self.recorder, codec_factory, setup, pipeline, shard
            )
        conn = Connection(self, self.tally, self.recorder, codec_factory, setup, pipeline, shard)
        if self.loop is not None:
            conn.opener = self.loop.open
        return conn

    # -- preload -----------------------------------------------------------------------

    async def preload(self) -> IntervalSnapshot:
        """Store this worker's share of the keyspace once (each server its keys)."""
        start = _now()
        for shard in self.shards:
            if self._preload_stopped:
                break
            await self._preload_shard(shard)
        self._shard_stats()
        return self.recorder.cut("preload", 0, start, _now())

    async def _preload_shard(self, shard: Shard) -> None:
        """Send ``shard``'s connections the preload's sets, a source of their own read
        through one cursor they share (the run's sources and cursors are untouched), then
        give them their own cursors back."""
        keys = shard.plan.preload_range()
        preload = Cursor(shard.source.preload(keys))
        connections = [conn for conn in self.connections if conn.shard is shard]
        cursors = [conn.cursor for conn in connections]
        for conn in connections:
            conn.take_cursor(preload)
        self.phase = "preload"
        self.budget = len(keys)
        self._finished = asyncio.Event()
        self.issuing = True
        self._running = True
        # HTTP/1.1 gateways take one request at a time unless the URL says ?pipeline=1.
        http = shard.target.family == "http" and not shard.target.pipelining
        depth = 1 if http else PRELOAD_PIPELINE
        for conn in connections:
            conn.fill(depth)
        watchdog = asyncio.create_task(self._watch_timeouts())
        self.maybe_finished()
        await self._finished.wait()
        watchdog.cancel()
        self.issuing = False
        self._running = False
        for conn, cursor in zip(connections, cursors, strict=True):
            conn.take_cursor(cursor)
        self.budget = None

    # -- the run -----------------------------------------------------------------------

    async def run(self, start_ns: int) -> WorkerSummary:
        """Run warm-up, measure and drain, starting at ``start_ns`` (monotonic clock)."""
        load = self.spec.config.load
        self._measure_start_ns = start_ns + load.warmup_ns
        self._measure_end_ns = (
            self._measure_start_ns + load.duration_ns if load.duration_ns is not None else NEVER
        )
        self._finished = asyncio.Event()
        self.prepare()  # (done already, before the worker said it was ready: a no-op)
        if self.dispatcher is not None:
            self.dispatcher.shift(start_ns)  # its schedule was made from time 0
        await asyncio.sleep(max(0, start_ns - _now()) / 1e9)
        self._began_ns = _now()
        self._interval_start_ns = start_ns
        self._cpu_mark_ns, self._wait_mark_ns = time.process_time_ns(), cpu_wait_ns()
        self.restart_live_min()
        for shard in self.shards:  # preload's replies are not the run's
            shard.completed = 0
        if load.warmup_ns > 0:
            self.phase, self.next_cut_ns = "warmup", self._measure_start_ns
        else:
            self._enter_measure()
        self._running = True
        self.issuing = True
        tasks = [
            asyncio.create_task(self._tick()),
            asyncio.create_task(self._watch_timeouts()),
        ]
        if self.loop is not None and folding(self.tally):
            # The poller measures the hiccups and samples the requests in flight in C;
            # the replies are folded in C too: no Python wakes up every millisecond.
            assert not isinstance(self.tally, PyTally)
            self.loop.start_ticks(self.tally, HICCUP_PERIOD_NS, INFLIGHT_SAMPLE_EVERY)
        else:
            tasks.append(asyncio.create_task(self._hiccups()))
        if self.dispatcher is not None:
            tasks.append(asyncio.create_task(self.dispatcher.run()))
        for task in tasks:
            task.add_done_callback(self._background_ended)
        try:
            if self.dispatcher is None:
                for conn in self.connections:
                    conn.fill()
            await self._finished.wait()
        finally:
            self._send_posted()  # (before the summary: the coordinator counts them first)
            gc.enable()
            gc.unfreeze()
            for task in tasks:
                task.cancel()
            if self.router is not None:
                self.router.close()
            self._running = False
            self.issuing = False
            for conn in self.connections:
                conn.close()
            if self.loop is not None:
                self.loop.close()
            if self.feed is not None:
                self.feed.close()  # the spool's space is freed now, not at the process's end
        return WorkerSummary(
            measure_start_ns=self._measure_start_ns,
            measure_end_ns=self._measure_end_ns,
            began_ns=self._began_ns,
            mismatch_keys=list(self.verifier.examples) if self.verifier else [],
            driver=driver_name(self.python_reason, self.loop_reason),
            trace=self.feed.report() if self.feed is not None else None,
            error_said=self._error_said,
            **self.summary_fields(),
        )

    def _derive_from(self) -> int | None:
        """Where this worker's ``--verify`` versions start, when its pumps' streams derive
        the values (plain runs' sources: workload/plan.py's, numbered as it numbers them);
        None when there are none to derive (no ``--verify``, or timestamps)."""
        if pump_verify(self.spec.config.workload)[0] != VERIFY_DERIVED:
            return None
        return first_version(self.spec.worker_index)

    def prepare(self) -> None:
        """Set the run up, before its start instant is known: the run's pumps, every
        connection attached to one, an open loop's dispatcher (its connections' pumps made
        open-loop ones, a timed replay's first times primed) on a schedule from time 0,
        which ``run`` shifts to the start instant, and a full collection.

        The worker does this before it reports ready (after its preload, with one), so
        the coordinator's start instant, 50 ms after the last report, does not have to
        cover it. Over 10,000 connections it took 0.55 s: done after the Start message,
        a timed replay began 0.5 s behind its start, and sent most of its first second
        late in a burst (docs/benchmarks.md). Done once; ``run`` calls it if no one did.
        """
        if self._prepared:
            return
        self._prepared = True
        load = self.spec.config.load
        if self.python_reason is None:
            assert not isinstance(self.tally, PyTally), "a compiled run has the C tally"
            timed = self.feed is not None and self.feed.config.timed  # a replay at its times
            self.pumps = PumpFactory(
                self.tally,
                self.spec.config.workload.ttl_s,
                open_loop=load.rate_per_s is not None or timed,
                verify=pump_verify(self.spec.config.workload),
                derive_from=self._derive_from(),
                commands=self._command_codes,
            )
        self.dispatcher = self._open_loop(0)  # (attaches its connections' pumps)
        if self.dispatcher is not None:
            self.dispatcher.prime()
        elif self.python_reason is None:
            for conn in self.connections:
                conn.attach()
        gc.collect()
        gc.freeze()
        gc.disable()

    def _open_loop(self, start_ns: int) -> OpenLoopDispatcher | None:
        """The dispatcher of an open-loop run (``--rate``, or a replay at the trace's
        times); None for a closed loop."""
        schedule = self._schedule(start_ns)
        if schedule is None:
            return None
        for conn in self.connections:
            conn.to_open_loop()
        if self.loop is not None:
            # On the compiled event loop the poller runs the schedule, a timed replay's
            # per-connection ones too (engine/loop_dispatch.py)
            assert not isinstance(self.tally, PyTally), "a compiled run has the C tally"
            return LoopDispatcher(
                self,
                self.tally,
                self.recorder,
                self.connections,
                self.shards,
                schedule,
                self.spec.config.load.max_lag_ns,
                self.loop,
            )
        return OpenLoopDispatcher(
            self,
            self.tally,
            self.recorder,
            self.connections,
            self.shards,
            schedule,
            self.spec.config.load.max_lag_ns,
        )

    def _schedule(self, start_ns: int) -> Schedule | list[TraceSchedule] | None:
        """``--rate``: this worker's share of the rate, workers staggered by one slot of
        the total. A timed replay: each connection its lane's rows when due (the trace's
        time 0 is ``start_ns``). None: a closed loop."""
        spec = self.spec
        load = spec.config.load
        if load.rate_per_s is not None:
            return Schedule(
                load.rate_per_s / spec.n_workers,
                start_ns + round(spec.worker_index * 1e9 / load.rate_per_s),
                load.arrival,
                seed=spec.config.workload.seed * 1000 + spec.worker_index,
            )
        if self.feed is not None and self.feed.config.timed:
            return [TraceSchedule(lane, start_ns) for lane in self.feed.lanes]
        return None

    def _background_ended(self, task: asyncio.Task[None]) -> None:
        """A background task (ticks, timeouts, the dispatcher) that raised is a bug: the
        run ends now, rather than wait for ever for what the task would have done, and
        the worker's summary says why."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        if isinstance(exc, SpoolUnreadable):  # (a timed replay's next send times)
            self._end_failed("replay_spool", str(exc))
        else:
            self._end_failed("bug", f"{type(exc).__name__}: {exc}")

    def _spool_unreadable(self, exc: SpoolUnreadable) -> None:
        """A lane could not read its next segment back: the run ends as failed, with the
        error's line, on the loop's next turn (the lane may ask from inside a pump's send,
        where no interval may be cut). Every lane that asks after it tells it again: one
        error is counted."""
        if not self._spool_failed:
            self._spool_failed = True
            asyncio.get_running_loop().call_soon(self._end_failed, "replay_spool", str(exc))

    def _end_failed(self, kind: str, text: str) -> None:
        """End the run now as failed, ``text`` counted as one error of ``kind``."""
        self.note_error(kind, text)
        self._failed = True  # not a Ctrl-C: the run is partial (exit 4), not interrupted
        self._cut_short()

    def stop(self) -> None:
        """End the measured window now (Ctrl-C); in-flight requests still drain, for at
        most ``STOP_DRAIN_S``: what is in flight then is abandoned (a stop in the drain
        abandons it at once).

        During a preload: no more sets are sent, the ones in flight drain, and ``preload``
        returns what was stored (a preload of millions of keys ends in a round trip).
        """
        if self.phase == "preload":
            self._preload_stopped = True
            if self._finished is not None and not self._finished.is_set():
                self.budget = 0
                self.maybe_finished()
        elif self._finished is not None and not self._finished.is_set():
            self._interrupted = True
            self._cut_short()
        if self._finished is not None and not self._finished.is_set():
            asyncio.get_running_loop().call_later(STOP_DRAIN_S, self._end_stopped)

    def _end_stopped(self) -> None:
        """A stopped run's wait for its replies is over: what is still in flight is
        abandoned, counted as ``conn_error`` (in the drain's figures, or the preload's:
        a stopped preload waited --timeout too)."""
        if self._finished is None or self._finished.is_set():
            return
        if self.phase == "drain":
            self._finish(_now())
        elif self.phase == "preload":
            for conn in self.connections:
                if conn.inflight:
                    conn.abandon()
            self._finished.set()

    def _cut_short(self) -> None:
        """End the measured window now; in-flight requests still drain."""
        if self._finished is None or self._finished.is_set():
            return
        now = _now()
        if self.phase in ("warmup", "measure"):
            self._measure_end_ns = now
            if self.phase == "warmup":
                self._measure_start_ns = now
            self.next_cut_ns = now
            self.cut(now)
        else:
            self._finish(now)

    def _enter_measure(self) -> None:
        load = self.spec.config.load
        self.phase = "measure"
        self._index = 0
        self.budget = self.spec.requests
        self.next_cut_ns = min(self._measure_start_ns + load.interval_ns, self._measure_end_ns)

    def cut(self, now: int) -> None:
        """Cut every interval whose boundary ``now`` has passed (called on the hot path).

        A cut that raises ends the run as failed (``_cut_broke``), whoever called it: from
        a pump's read, the exception went only into the event loop's log (the pump
        dropped its read, the run went on, its counts short and its status ok)."""
        try:
            self._cut(now)
        except Exception as exc:
            self._cut_broke(exc)

    def _cut_broke(self, exc: Exception) -> None:
        """An interval could not be cut (a bug: a ``BufferError`` of the recorder's buffers
        was one): ``_broke``."""
        self._broke("an interval could not be cut", exc)

    def _loop_broke(self, exc: Exception) -> None:
        """A callback of the compiled loop raised (a refill, a reader, an end's): the read
        it was serving is lost, so ``_broke`` (was: only the event loop's log)."""
        self._broke("the compiled loop's callback raised", exc)

    def _broke(self, what: str, exc: Exception) -> None:
        """A bug stopped this worker's accounting: the run ends now, failed, naming it;
        what was emitted before is kept, the rest of this worker's share is missing (the
        run is partial)."""
        if self.phase == "done":
            return
        self.note_error("bug", f"{what}: {type(exc).__name__}: {exc}")
        self._failed = True
        self.issuing = False
        self.phase = "done"
        self.next_cut_ns = NEVER
        if self._finished is not None:
            self._finished.set()

    def _cut(self, now: int) -> None:
        interval_ns = self.spec.config.load.interval_ns
        while now >= self.next_cut_ns:
            boundary = self.next_cut_ns
            self._emit_interval(boundary)
            if self.phase == "warmup":
                self._enter_measure()
                self.maybe_finished()
            elif boundary >= self._measure_end_ns:
                self._enter_drain(boundary)
            else:
                self._index += 1
                self.next_cut_ns = min(boundary + interval_ns, self._measure_end_ns)

    def _emit_interval(self, end_ns: int) -> None:
        drain(self.tally, self.recorder, self.verifier)
        said = self.tally.take_said()
        if said is not None and self._error_said is None:
            op, words = said
            self._error_said = (self.recorder.op_names[op], words.decode(errors="replace"))
        for shard in self.shards:
            shard.completed += self.pumps.completed(shard)
        cpu, wait = time.process_time_ns(), cpu_wait_ns()
        self.recorder.add_stat("cpu_ns", cpu - self._cpu_mark_ns)
        if wait is not None and self._wait_mark_ns is not None:  # the loop's thread's
            self.recorder.add_stat("cpu_wait_ns", wait - self._wait_mark_ns)
        self._wait_mark_ns = wait
        self.recorder.add_stat("bytes_in", self.bytes_in)
        self.recorder.add_stat("bytes_out", self.bytes_out)
        if self.dispatcher is not None:
            self.recorder.add_stat("offered", self.dispatcher.offered(end_ns))
        self._cpu_mark_ns, self.bytes_in, self.bytes_out = cpu, 0, 0
        self.recorder.add_stat("connections_live_min", self.take_live_min())
        self._shard_stats()
        if self.phase == "measure" and end_ns >= self._measure_end_ns:
            self._down_at_end(end_ns)
        stats = self.recorder.stats
        samples = stats.pop("inflight_samples", 0)
        inflight_sum = stats.pop("inflight_sum", 0)
        if samples and self.phase == "measure":  # (the poller's ticks sample in every phase)
            # Per interval and worker; merging workers adds these up to the run's total.
            stats["inflight_mean"] = inflight_sum / samples
        snapshot = self.recorder.cut(self.phase, self._index, self._interval_start_ns, end_ns)
        self._interval_start_ns = end_ns
        self._post(snapshot)

    def _post(self, snapshot: IntervalSnapshot) -> None:
        """Send ``snapshot`` after the event loop's next poll while the run is on, else now.

        The cut itself (the tally taken, the histograms made) must be made at the
        boundary; sending it need not. Pickled and written from the cut, a snapshot held
        the compiled loop 1.55-2.2 ms once a second on average (the pickle 0.2-0.6 ms,
        and a write that woke the coordinator, which on a shared core ran before the
        write returned). Sent after the next poll, the poller sends what fell due in
        between, and the cut holds the loop 0.89-1.04 ms (docs/benchmarks.md, "The
        interval cut, taken apart"). Snapshots go in the order they were cut, all
        of them before the run's summary (``run`` sends what is left as it ends).
        """
        self._outbox.append(snapshot)
        if not self._running:
            self._send_posted()
        elif len(self._outbox) == 1:
            # Two hops: a callback scheduled from inside the poller's wait (a read's cut)
            # runs as soon as that wait returns, before the loop polls again; one scheduled
            # from that callback runs after the next poll, which sends what fell due.
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, self._send_posted)

    def _send_posted(self) -> None:
        """Send the snapshots cut and not yet sent, in order. One that cannot be sent
        ends the run failed, naming it (``_broke``); at the run's end (``run`` sends the
        last ones after the phase is done) the summary still says so."""
        try:
            while self._outbox:
                self._emit(self._outbox[0])
                del self._outbox[0]
        except Exception as exc:
            self._outbox.clear()
            if self.phase == "done":
                self.note_error("bug", f"{_UNSENT}: {type(exc).__name__}: {exc}")
                self._failed = True
            else:
                self._broke(_UNSENT, exc)

    def _shard_stats(self) -> None:
        """Each server's replies (and a cluster's redirects) since the last cut, as stats."""
        if len(self.shards) > 1 or self.router is not None:
            for shard in self.shards:
                self.recorder.add_stat(f"server{shard.index}_completed", shard.completed)
                shard.completed = 0
        if self.router is not None:
            self.router.take_stats(self.recorder)

    def _down_at_end(self, end_ns: int) -> None:
        """The servers down when the window ended (``servers_down``), counted in its last
        interval: ``server<i>_down_at_end`` (1 per worker) and ``server<i>_down_at_end_ns``
        (how long it had been down), which make the run failed (results/status.py). Gone
        or not: a short window ends before the gone rule's twice ``--timeout``, and what
        it measured after the server went down was no load on it."""
        index = {shard.target.url: shard.index for shard in self.shards}
        for url, down_ns in self.servers_down(end_ns).items():
            i = index.get(url, self.shards[0].index)
            self.recorder.add_stat(f"server{i}_down_at_end", 1)
            self.recorder.add_stat(f"server{i}_down_at_end_ns", down_ns)

    def _enter_drain(self, boundary: int) -> None:
        self.phase = "drain"
        self._index = 0
        self.issuing = False
        self.next_cut_ns = NEVER
        self._measure_end_ns = boundary
        self.maybe_finished()

    def _finish(self, now: int) -> None:
        if self.phase in ("measure", "drain", "warmup"):
            # Cut short in the drain (Ctrl-C, a spool that broke) the run ends with requests
            # in flight: they are abandoned now, counted as conn_error in the last snapshot.
            # Left to the close after the run, their count came after that snapshot and
            # was lost, while the server may have counted them.
            for conn in self.connections:
                if conn.inflight:
                    conn.abandon()
            try:
                self._emit_interval(now)
            except Exception as exc:  # (as in cut: from a pump's read, only logged)
                self._cut_broke(exc)
                return
        self.phase = "done"
        self.next_cut_ns = NEVER
        assert self._finished is not None
        self._finished.set()

    def maybe_finished(self) -> None:
        """End the phase once nothing is left to send and nothing is in flight."""
        if self._finished is None or self._finished.is_set():
            return
        exhausted = self.phase == "drain" or (
            self.phase in ("preload", "measure") and self.budget == 0
        )
        if self.phase == "measure" and self.feed is not None and self.feed.exhausted():
            exhausted = True
            self.issuing = False  # replies now end the run once nothing is in flight
        if not exhausted:
            self._idle_upto = 0
        elif self._all_idle():
            now = _now()
            if self.phase == "measure":
                self._measure_end_ns = now
            if self.phase == "preload":
                self._finished.set()
            else:
                self._finish(now)

    def _all_idle(self) -> bool:
        """Whether no connection has a request in flight, asked on every reply once
        nothing more is to be sent. A connection found idle then mostly stays idle, so
        the scan goes on from where the last one stopped: over a drain it walks the
        connections once, where a scan from the start on each reply walked them once
        per reply (10,000 connections: 5·10^7 steps, and the worker reported too late).
        Before saying yes it scans them all once more: a request sent meanwhile (a
        cluster's redirect) sends the scan back to the start."""
        conns = self.connections
        i = self._idle_upto
        while i < len(conns) and conns[i].inflight == 0:
            i += 1
        self._idle_upto = i
        if i < len(conns):
            return False
        if all(c.inflight == 0 for c in conns):
            return True
        self._idle_upto = 0
        return False

    # -- background tasks --------------------------------------------------------------

    async def _tick(self) -> None:
        """Cut intervals on time even when no reply arrives (a stalled server)."""
        while True:
            await asyncio.sleep(
                max(0, self.next_cut_ns - _now()) / 1e9 if self.next_cut_ns != NEVER else 0.05
            )
            now = _now()
            if now >= self.next_cut_ns:
                self.cut(now)
            if (
                self.phase == "drain"
                and now >= self._measure_end_ns + self.spec.config.load.timeout_ns
            ):
                # Whatever is still in flight has timed out by now (the watchdog counts it).
                self._check_timeouts(now)
                self.maybe_finished()

    async def _hiccups(self) -> None:
        """Record event-loop stalls, sample requests in flight every 10th wake-up, and fold
        the replies so far every ``FOLD_EVERY``th (the fold is timed as a stall too)."""
        hiccups = self.recorder.hiccup_ns
        buffering = not folding(self.tally)  # (a folding tally is drained at the cuts)
        wakes = 0
        while True:
            before = _now()
            if wakes % FOLD_EVERY == 0:
                if buffering:
                    drain(self.tally, self.recorder, self.verifier)
                self.recorder.fold()
            await asyncio.sleep(HICCUP_PERIOD_NS / 1e9)
            hiccups.append(max(0, _now() - before - HICCUP_PERIOD_NS))
            wakes += 1
            if wakes % INFLIGHT_SAMPLE_EVERY == 0 and self.phase == "measure":
                self.recorder.add_stat("inflight_sum", self._inflight())
                self.recorder.add_stat("inflight_samples", 1)

    def _inflight(self) -> int:
        """Requests in flight on every connection: the compiled pumps' count in their
        tally, else each connection's added up (at 10,000 connections sampled every 10 ms,
        that sum was 10^6 Python calls a second)."""
        if isinstance(self.tally, PyTally):
            return sum(c.inflight for c in self.connections)
        return int(self.tally.inflight)

    async def _watch_timeouts(self) -> None:
        """Look for requests unanswered past the timeout every quarter of it, at most
        every ``TIMEOUT_SCAN_NS``, and no more often than one connection per
        ``TIMEOUT_SCAN_PER_CONNECTION_NS`` (a scan asks every connection)."""
        timeout_ns = self.spec.config.load.timeout_ns
        spread_ns = len(self.connections) * TIMEOUT_SCAN_PER_CONNECTION_NS
        period_s = min(timeout_ns / 4, max(TIMEOUT_SCAN_NS, spread_ns)) / 1e9
        while True:
            await asyncio.sleep(period_s)
            self._check_timeouts(_now())

    def _check_timeouts(self, now: int) -> None:
        timeout_ns = self.spec.config.load.timeout_ns
        if self.loop is None:
            for conn in self.connections:
                conn.check_timeout(now, timeout_ns)
            return
        # On the compiled loop its poller scans the pumps in C: only these can be late.
        for link in self.loop.overdue(now - timeout_ns):
            if isinstance(link, Connection):
                link.check_timeout(now, timeout_ns)

    # -- connection events: counted and reopened by LinkKeeper ---------------------------

    def _server_gone(self, link: Link, text: str) -> None:
        """``link``'s server is gone: noted once as a ``target_lost`` error and counted in
        the ``server<i>_lost`` stat, which makes the run failed (results/status.py). A run
        with a window goes on to its end, reopening (the server may come back); a
        preload, and a run that ends when its work is done (a replay, ``--requests``),
        end now as when stopped: what was sent and answered so far is kept. In the drain
        the run is ending anyway: nothing is decided there."""
        shard = link.shard if isinstance(link, Connection) else self.shards[0]
        if shard.index in self._gone or self.phase not in ("preload", "warmup", "measure"):
            return
        self._gone.add(shard.index)
        self.recorder.add_stat(f"server{shard.index}_lost", 1)
        if self.phase == "preload":
            text += ": the preload ends here"
            self._preload_stopped = True
            if self._finished is not None and not self._finished.is_set():
                self.budget = 0
                self.maybe_finished()
        elif self._measure_end_ns == NEVER:  # (in its warm-up too)
            text += ": gave up on it, the run ends here"
            self._cut_short()
        self.note_error("target_lost", text)
        self.final_error = text

    def _link_ready(self, link: Link) -> None:
        # Open loop: the dispatcher sends on the reopened link when requests are due.
        if self.issuing and self.dispatcher is None:
            link.fill()
