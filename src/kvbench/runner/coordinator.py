"""The coordinator: preflight -> (preload) -> warm-up -> measure -> drain, as phases.

A launcher starts the workers (local processes, or Dask workers: runner/launcher.py) and a
pool talks to them (runner/pool.py, as the queue coordinator's does); the coordinator
starts them at one common instant, merges their interval snapshots as they
arrive (a live line per interval), and builds the RunResult. An interrupt (Ctrl-C,
SIGTERM, SIGHUP: runner/interrupts.py) in any phase sends Stop to every worker and the
partial result is still built, empty when it came before the start; a worker that dies is
recorded and the others' results are kept.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Required, TypedDict, Unpack

from kvbench import __version__
from kvbench.config.model import RunConfig
from kvbench.engine.spec import COMPILED_LOOP, WorkerSpec, WorkerSummary, check_shards
from kvbench.errors import ConfigError, RunAborted, TargetUnreachable, WorkerFailed
from kvbench.metrics.snapshot import IntervalSnapshot, merge_snapshots
from kvbench.results.environment import (
    describe_environment,
    installed_event_loop,
    peak_rss_bytes,
)
from kvbench.results.model import RoundRecord, RunResult, TargetRecord, WorkerRecord
from kvbench.results.queue import QueueSection
from kvbench.results.status import CONNECTION_FAILURE_STATS
from kvbench.results.trace import TraceSection
from kvbench.runner import interrupts, probe, redis_cluster
from kvbench.runner import messages as m
from kvbench.runner.launcher import WorkerLauncher, launcher_for
from kvbench.runner.pool import EXITED, WorkerPool
from kvbench.runner.redis_cluster import SlotMap
from kvbench.units import share_out

# How long after the window's end (plus the request timeout) a worker may take to report.
REPORT_GRACE_NS = 5_000_000_000
# How long a server sample may wait once the run is interrupted (the workers give what
# they have in flight as long: engine/link.py's STOP_DRAIN_S).
STOP_SAMPLE_S = 1.0


def worker_specs(config: RunConfig, slot_map: SlotMap | None = None) -> list[WorkerSpec]:
    """One spec per process, connections and requests shared out (a Redis Cluster run's
    slot map to each)."""
    load = config.load
    n = load.processes
    connections = share_out(load.connections, n)
    requests = share_out(load.requests, n) if load.requests is not None else [None] * n
    return [WorkerSpec(config, i, n, connections[i], requests[i], slot_map) for i in range(n)]


@dataclass
class _RoundReports:
    """What the coordinator has heard from a round's workers so far (their snapshots,
    summaries and failures; a worker's pump keeps its own ``Tally`` of requests)."""

    n_workers: int
    round: int = 0
    # The measure intervals not yet handed on, each worker's part by index; once every
    # worker's part came, their merge (``merged``), the parts let go: held until the run
    # ends, a 2-worker run's parts and merges took ~500 KB a second (1.8 GB an hour).
    intervals: dict[int, dict[int, IntervalSnapshot]] = field(default_factory=dict)
    merged: dict[int, IntervalSnapshot] = field(default_factory=dict)
    first_start_ns: dict[int, int] = field(default_factory=dict)  # per worker: its first part's
    other: dict[str, list[IntervalSnapshot]] = field(default_factory=dict)
    summaries: dict[int, WorkerSummary] = field(default_factory=dict)
    ops_by_worker: dict[int, int] = field(default_factory=dict)
    succeeded_by_worker: dict[int, int] = field(default_factory=dict)  # ops not an error
    cpu_by_worker: dict[int, float] = field(default_factory=dict)
    # how long each worker's loop waited for a CPU (where its kernel says: engine/clock.py)
    cpu_wait_by_worker: dict[int, float] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)
    unreachable: set[int] = field(default_factory=set)  # failed because a target refused
    bad_config: dict[int, str] = field(default_factory=dict)  # where: a trace's file:line
    emitted: int = 0
    ready: set[int] = field(default_factory=set)  # said Ready
    preloading: bool = False  # Preload was sent
    preloaded: set[int] = field(default_factory=set)  # sent their preload's counts
    started: bool = False  # Start was sent: each worker ends with Done or Failed


@dataclass
class _WorkerTotals:
    """One worker process over the rounds: what the run's ``workers`` record of it."""

    index: int
    host: _Host | None  # as its last Ready said (None: it never did)
    ops: int = 0
    succeeded: int = 0  # ops not an error
    cpu_s: float = 0.0
    cpu_wait_s: float | None = None  # where its kernel says (engine/clock.py)
    failed: bool = False  # in any round
    driver: str | None = None  # its last round's (engine/fastpath.py)
    peak_rss_bytes: int | None = None  # its whole life's: the largest over the rounds
    mismatch_keys: list[str] = field(default_factory=list)  # --verify examples
    began_ns: int | None = None  # a cluster's: when it began, on the coordinator's clock
    start_skew_ms: float | None = None  # a cluster's: how long after the earliest worker

    def add(self, heard: _RoundReports) -> None:
        """Add what it reported in a round (CPU rounded to the ms as each round adds)."""
        i = self.index
        self.ops += heard.ops_by_worker.get(i, 0)
        self.succeeded += heard.succeeded_by_worker.get(i, 0)
        self.cpu_s = round(self.cpu_s + heard.cpu_by_worker.get(i, 0.0), 3)
        if i in heard.cpu_wait_by_worker:
            self.cpu_wait_s = round((self.cpu_wait_s or 0.0) + heard.cpu_wait_by_worker[i], 3)
        self.failed = self.failed or i in heard.failures
        summary = heard.summaries.get(i)
        if summary is not None:
            self.driver = summary.driver
            peak = max(self.peak_rss_bytes or 0, summary.peak_rss_bytes or 0)
            self.peak_rss_bytes = peak or None
            self.mismatch_keys.extend(summary.mismatch_keys)

    def record(self, total_ops: int) -> WorkerRecord:
        """Its record, ``share`` of the run's ``total_ops`` (keys in the stored order)."""
        record: WorkerRecord = {"index": self.index}
        if self.host is not None:
            record["host"], record["pid"] = self.host.host, self.host.pid
            if self.host.address:
                record["address"] = self.host.address
                record["clock_offset_ms"] = self.host.clock_offset_ms
        record["ops"] = self.ops
        record["succeeded"] = self.succeeded
        record["cpu_s"] = self.cpu_s
        record["status"] = "failed" if self.failed else "ok"
        if self.cpu_wait_s is not None:
            record["cpu_wait_s"] = self.cpu_wait_s
        if self.driver is not None:
            record["driver"] = self.driver
            record["peak_rss_bytes"] = self.peak_rss_bytes
        if self.mismatch_keys:
            record["mismatch_keys"] = self.mismatch_keys
        if self.began_ns is not None and self.start_skew_ms is not None:
            record["began_ns"] = self.began_ns
            record["start_skew_ms"] = self.start_skew_ms
        record["share"] = round(self.ops / total_ops, 4) if total_ops else 0.0
        return record


class Coordinator:
    """Runs one measurement described by ``config``.

    Args:
        config: the validated run config.
        on_interval: called with each measure interval merged across workers, in order.
        on_event: called with one-line progress notes ("preloading 100000 keys").
        launcher: starts the workers; by default local processes, or the Dask cluster
            named by ``config.load.cluster``.
    """

    def __init__(
        self,
        config: RunConfig,
        on_interval: Callable[[IntervalSnapshot], None] | None = None,
        on_event: Callable[[str], None] | None = None,
        launcher: WorkerLauncher | None = None,
    ) -> None:
        check_shards(config)  # before any worker or socket: a bad --command is exit 2
        self.config = config
        self._launcher = launcher or launcher_for(config)
        self._on_interval = on_interval or (lambda snap: None)
        self._on_event = on_event or (lambda text: None)
        self._pool = WorkerPool(self._launcher)
        self._hosts: dict[int, _Host] = {}  # by worker, as its Ready said
        self._stopping = False
        self._aborted_round: str | None = None
        self._server: dict[str, Any] = {}
        self._sample_errors: list[str] = []
        # Interval samples: none asked again within --timeout of one that failed.
        self._interval_asks = probe.Unanswered(self.config.load.timeout_ns)
        # Requests this run sent on side connections (probe, stats), by target URL: in the
        # document as server.side_requests, so server request counters reconcile.
        self._ledger: probe.Ledger = {}
        self._slot_map: SlotMap | None = None

    def run(self) -> RunResult:
        """Run all phases and return the result; partial on Ctrl-C or a worker failure.

        Raises:
            TargetUnreachable: preflight could not reach a target.
            RunAborted: workers failed before the measurement started.
        """
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        rounds_heard: list[_RoundReports] = []
        targets: list[TargetRecord] = [  # the preflight's, with versions, once it ran
            {"url": t.url, "protocol": t.protocol, "server_version": None}
            for t in self.config.targets
        ]
        try:
            try:
                interrupts.arm()  # a signal that came before (since ``disarm``) stops it here
                self._discover_cluster()
                self._open_workers()
                targets = self._preflight()
                self._run_rounds(rounds_heard)
            except KeyboardInterrupt as exc:  # resolving, probing, between rounds: kept
                self._interrupted(exc)
            interrupts.disarm()  # what was measured is built and kept whole from here
            if not self._stopping:
                self._server["after"] = self._sample()
            return self._result(rounds_heard, started_at, targets)
        finally:
            self._launcher.close()

    def _interrupted(self, exc: KeyboardInterrupt) -> None:
        """Note the interrupt once: the run ends here, what was measured is kept."""
        if not self._stopping:
            name = exc.args[0] if isinstance(exc, interrupts.Interrupted) else "SIGINT"
            self._on_event(f"interrupted ({name}): stopping workers, keeping what was measured")
        self._stopping = True

    def _discover_cluster(self) -> None:
        """A Redis Cluster run: its masters become the targets (runner/redis_cluster.py)."""
        if not any(target.cluster for target in self.config.targets):
            return
        self.config, self._slot_map = redis_cluster.discover(self.config, self._probe_timeout_s)
        counts = ", ".join(
            f"{host}:{port} {n:,}"
            for (host, port), n in zip(
                self._slot_map.nodes, self._slot_map.slot_counts(), strict=True
            )
        )
        masters = len(self._slot_map.nodes)
        noun = "master" if masters == 1 else "masters"
        self._on_event(f"Redis Cluster: {masters} {noun} (slots: {counts})")

    def _open_workers(self) -> None:
        """Learn how many workers the launcher has; the recorded config says that number."""
        load = self.config.load
        count = self._launcher.open(load.processes)
        if count != load.processes:
            self.config = replace(self.config, load=replace(load, processes=count))
        if load.cluster is not None:
            self._on_event(f"{count} load worker(s) on the Dask cluster at {load.cluster}")

    def _run_rounds(self, rounds_heard: list[_RoundReports]) -> None:
        """The rounds, each appended to ``rounds_heard`` as it ends (``run`` keeps the launcher
        open meanwhile)."""
        self._server = {"before": self._sample(), "settings": self._settings(), "intervals": []}
        self._server["side_requests"] = self._ledger
        for round_index in range(self.config.load.rounds):
            if round_index:
                self._on_event(f"round {round_index + 1} of {self.config.load.rounds}")
            try:
                heard = self._run_round(round_index)
            except (RunAborted, TargetUnreachable) as exc:
                if not rounds_heard:
                    raise
                # A later round that cannot start keeps the earlier ones: a partial result.
                self._aborted_round = f"round {round_index + 1} could not start: {exc}"
                break
            rounds_heard.append(heard)
            if self._stopping or heard.failures:
                break

    def _sample(self, keys: tuple[str, ...] | None = None) -> dict[str, Any] | None:
        """Server stats on a side connection; None (and a note) when they cannot be had.

        With several (sharded) servers the counters are summed across them, so the
        client's totals reconcile against the whole pool; each server's own sample is
        kept under ``targets``.
        """
        try:
            return probe.sample_pool(self.config.targets, keys, self._probe_timeout_s, self._ledger)
        except TargetUnreachable as exc:
            self._sample_errors.append(str(exc))
            return None

    def _interval_sample(self) -> dict[str, Any] | None:
        """An interval's server sample, or None; none is asked for within --timeout of
        one that failed (``probe.Unanswered``)."""
        return self._interval_asks.ask(lambda: self._sample(probe.INTERVAL_STATS))

    @property
    def _probe_timeout_s(self) -> float:
        """The side connection waits as long as a request may (--timeout); once the run
        is interrupted, ``STOP_SAMPLE_S`` at most: the user asked it to end, and the server
        may be why (a stalled one would hold the end for --timeout)."""
        timeout_s = self.config.load.timeout_ns / 1e9
        return min(timeout_s, STOP_SAMPLE_S) if self._stopping else timeout_s

    def _settings(self) -> dict[str, str] | None:
        """The server's settings, once before the run; None (and a note) when refused."""
        try:
            return probe.fetch_settings(self.config.targets[0], self._probe_timeout_s, self._ledger)
        except TargetUnreachable as exc:
            self._sample_errors.append(str(exc))
            return None

    def _run_round(self, round_index: int) -> _RoundReports:
        """One round: fresh worker processes, start together, collect (pyperf-style)."""
        if self._slot_map is not None and round_index:  # as the previous round left it
            self._slot_map = redis_cluster.remap(self.config, self._slot_map, self._probe_timeout_s)
        specs = worker_specs(self.config, self._slot_map)
        heard = _RoundReports(len(specs), round_index)
        try:
            self._pool.start(specs)
            self._await_ready(heard)
            if self.config.workload.preload and round_index == 0:
                self._preload(heard)
            start_ns = time.monotonic_ns() + self._launcher.start_delay_ns
            heard.started = True
            self._pool.broadcast(m.Start(start_ns))
            self._collect(heard, start_ns)
        except KeyboardInterrupt as exc:
            self._interrupted(exc)
            self._stop_all(heard)
        finally:
            self._pool.stop()
        return heard

    # -- phases ------------------------------------------------------------------------

    def _preflight(self) -> list[TargetRecord]:
        targets: list[TargetRecord] = []
        for target in self.config.targets:
            version, note = probe.preflight(target, self._probe_timeout_s, self._ledger)
            if note:
                self._on_event(note)
                self._sample_errors.append(note)
            targets.append(
                {"url": target.url, "protocol": target.protocol, "server_version": version}
            )
        return targets

    def _await_ready(self, heard: _RoundReports) -> None:
        if self.config.replay is not None:
            self._on_event("reading the trace into each connection's queue (before the clock)")
        ready = heard.ready
        while len(ready) < heard.n_workers:
            for message in self._receive(heard):
                if isinstance(message, m.Ready):
                    ready.add(message.worker)
                    self._hosts[message.worker] = _host_entry(message)
            self._raise_on_failure(heard, "preflight")

    def _preload(self, heard: _RoundReports) -> None:
        heard.preloading = True
        self._pool.broadcast(m.Preload())
        self._on_event(f"preloading {self.config.workload.keys:,} keys")
        while len(heard.other.get("preload", [])) < heard.n_workers:
            self._receive(heard)
            self._raise_on_failure(heard, "preload")

    def _collect(self, heard: _RoundReports, start_ns: int) -> None:
        load = self.config.load
        deadline: int | None = None
        if load.duration_ns is not None:
            deadline = (
                start_ns + load.warmup_ns + load.duration_ns + load.timeout_ns + REPORT_GRACE_NS
            )
        while len(heard.summaries) + len(heard.failures) < heard.n_workers:
            if deadline is not None and time.monotonic_ns() > deadline:
                for index in range(heard.n_workers):
                    if index not in heard.summaries:
                        heard.failures.setdefault(index, "stopped reporting before the run ended")
                break
            self._receive(heard)

    def _stop_all(self, heard: _RoundReports) -> None:
        """An interrupt: end every worker's window now and collect what they measured.

        Before the common start nothing was measured: the workers are not waited for
        (one still reading its trace is killed by the pool's stop), except a preload's
        counts, which end within a round trip of its last requests.
        """
        self._pool.broadcast(m.Stop())
        deadline = time.monotonic_ns() + self.config.load.timeout_ns + REPORT_GRACE_NS
        try:
            while not self._all_reported(heard):
                if time.monotonic_ns() > deadline:
                    break
                self._receive(heard)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: stop waiting, keep what arrived

    def _all_reported(self, heard: _RoundReports) -> bool:
        if heard.started:
            return len(heard.summaries) + len(heard.failures) >= heard.n_workers
        if heard.preloading:
            return not (heard.ready - heard.preloaded - set(heard.failures))
        return True

    # -- messaging ---------------------------------------------------------------------

    def _receive(self, heard: _RoundReports) -> list[m.Message]:
        """Wait up to 0.2 s for messages and handle them (a dead worker is a Failed one)."""
        received = [message for _, message in self._pool.receive(0.2)]
        for message in received:
            self._handle(heard, message)
        return received

    def _handle(self, heard: _RoundReports, message: m.Message) -> None:
        if isinstance(message, m.Snapshot):
            snap = replace(message.snapshot, round=heard.round)
            if snap.phase == "measure":
                # a worker's ops and CPU are the measured window's, as the verdicts divide
                # them by it (warm-up and preload CPU would read as a busy client)
                worker = message.worker
                # as the totals count them: failed connection attempts are ops too
                # (results/status.py), so the workers' ops add up to the run's
                attempted = snap.ops() + sum(
                    int(snap.stats.get(name, 0)) for name in CONNECTION_FAILURE_STATS
                )
                heard.ops_by_worker[worker] = heard.ops_by_worker.get(worker, 0) + attempted
                heard.succeeded_by_worker[worker] = (
                    heard.succeeded_by_worker.get(worker, 0) + snap.succeeded()
                )
                heard.cpu_by_worker[worker] = (
                    heard.cpu_by_worker.get(worker, 0) + snap.stats.get("cpu_ns", 0) / 1e9
                )
                if "cpu_wait_ns" in snap.stats:
                    heard.cpu_wait_by_worker[worker] = (
                        heard.cpu_wait_by_worker.get(worker, 0) + snap.stats["cpu_wait_ns"] / 1e9
                    )
                heard.intervals.setdefault(snap.index, {})[message.worker] = snap
                heard.first_start_ns.setdefault(worker, snap.start_ns)
                self._emit_complete(heard)
            else:
                heard.other.setdefault(snap.phase, []).append(snap)
                if snap.phase == "preload":
                    heard.preloaded.add(message.worker)
        elif isinstance(message, m.Done):
            assert isinstance(message.summary, WorkerSummary)
            heard.summaries[message.worker] = message.summary
            self._emit_complete(heard)
        elif isinstance(message, m.Failed):
            if self._stopping and not heard.started and message.kind == EXITED:
                return  # stopped before the start, as told: not a failure
            heard.failures.setdefault(message.worker, message.message)
            if message.kind == "unreachable":
                heard.unreachable.add(message.worker)
            elif message.kind == "config":
                heard.bad_config[message.worker] = message.path

    def _emit_complete(self, heard: _RoundReports) -> None:
        """Hand on each interval once every live, unfinished worker has reported it."""
        live = set(range(heard.n_workers)) - set(heard.failures) - set(heard.summaries)
        while heard.emitted in heard.intervals:
            parts = heard.intervals[heard.emitted]
            if live - set(parts):
                return
            merged = merge_snapshots(parts.values())
            heard.merged[heard.emitted] = merged
            del heard.intervals[heard.emitted]
            sample = self._interval_sample()
            if sample is not None:
                self._server["intervals"].append(
                    {"round": heard.round, "index": merged.index, **sample}
                )
            self._on_interval(merged)
            heard.emitted += 1

    def _raise_on_failure(self, heard: _RoundReports, phase: str) -> None:
        if not heard.failures:
            return
        index, message = next(iter(heard.failures.items()))
        if index in heard.unreachable:
            raise TargetUnreachable(message)
        if index in heard.bad_config:
            raise ConfigError(heard.bad_config[index], message)
        raise WorkerFailed(phase, f"worker {index}: {message.strip().splitlines()[-1]}")

    # -- result ------------------------------------------------------------------------

    def _result(
        self, rounds_heard: list[_RoundReports], started_at: str, targets: list[TargetRecord]
    ) -> RunResult:
        intervals: list[IntervalSnapshot] = []
        others: dict[str, list[IntervalSnapshot]] = {}
        rounds: list[RoundRecord] = []
        errors: list[str] = []
        workers: dict[int, _WorkerTotals] = {}
        for heard in rounds_heard:
            merged = _merged_intervals(heard)
            intervals.extend(merged)
            for name, snaps in heard.other.items():
                others.setdefault(name, []).extend(snaps)
            rounds.append(self._round_record(heard, merged))
            errors.extend(self._round_errors(heard, len(rounds_heard) > 1))
            for i in range(heard.n_workers):
                workers.setdefault(i, _WorkerTotals(i, self._hosts.get(i))).add(heard)
        if self.config.load.cluster is not None:
            _start_skews(workers, rounds_heard)
        total_ops = sum(totals.ops for totals in workers.values())
        statuses = [r["status"] for r in rounds]
        if self._stopping or "interrupted" in statuses:
            status = "interrupted"
        elif "partial" in statuses or self._aborted_round is not None:
            status = "partial"
        else:
            status = "ok"
        if self._aborted_round is not None:
            errors.append(self._aborted_round)
        if not intervals and not self._stopping and status != "ok":
            raise RunAborted("measure", errors[0] if errors else "no worker reported")
        trace = self._trace_section(rounds_heard)
        replay = self.config.replay
        return fresh_result(
            trace=trace,
            started_at=started_at,
            status=status,
            mode="open"
            if self.config.load.rate_per_s is not None or (replay is not None and replay.timed)
            else "closed",
            config=self.config.to_dict(),
            targets=targets,
            # no round: interrupted while resolving or probing, before any worker started
            window_start_ns=rounds[0]["window_start_ns"] if rounds else 0,
            window_end_ns=rounds[-1]["window_end_ns"] if rounds else 0,
            intervals=intervals,
            phases={name: merge_snapshots(snaps) for name, snaps in others.items() if snaps},
            workers=[totals.record(total_ops) for totals in workers.values()],
            errors=errors,
            # The connection driver every worker ran (engine/fastpath.py).
            driver=", ".join(sorted({w.driver for w in workers.values() if w.driver is not None})),
            rounds=rounds,
            server={**self._server, "sample_errors": self._sample_errors[:5]},
        )

    def _trace_section(self, rounds_heard: list[_RoundReports]) -> TraceSection | None:
        """A replay's section, its workers' feeds merged (None for other runs).

        Raises:
            ConfigError: the replay had no row to send (an empty trace, or a slice that
                holds none). (A bad row fails a worker before anything is sent.)
        """
        if self.config.replay is None:
            return None
        reports = [
            s.trace
            for heard in rounds_heard
            for s in heard.summaries.values()
            if s.trace is not None
        ]
        replay = self.config.to_dict()["replay"]
        assert isinstance(replay, dict)
        section = TraceSection.from_reports(replay, reports)
        if not self._stopping and reports and not section.counts["rows"]:
            raise ConfigError(
                section.path,
                f"no rows to replay (of {section.counts['lines_read']:,} lines read): an empty "
                "trace, or --from/--to outside its times",
            )
        return section

    def _round_record(self, heard: _RoundReports, merged: list[IntervalSnapshot]) -> RoundRecord:
        summaries = list(heard.summaries.values())
        if summaries:
            start = min(s.measure_start_ns for s in summaries)
            end = max(s.measure_end_ns for s in summaries)
        elif merged:
            start, end = merged[0].start_ns, merged[-1].end_ns
        else:
            start = end = 0
        if self._stopping or any(s.status == "interrupted" for s in summaries):
            status = "interrupted"
        elif heard.failures or any(s.status == "failed" for s in summaries):
            status = "partial"
        else:
            status = "ok"
        return {
            "round": heard.round,
            "window_start_ns": start,
            "window_end_ns": end,
            "status": status,
        }

    def _round_errors(self, heard: _RoundReports, label: bool) -> list[str]:
        prefix = f"round {heard.round + 1}: " if label else ""
        errors = [
            f"{prefix}{self._worker_name(i)}: {msg.strip().splitlines()[-1]}"
            for i, msg in sorted(heard.failures.items())
        ]
        said: dict[tuple[str, str], list[int]] = {}  # the same words, once
        for index, summary in sorted(heard.summaries.items()):
            if summary.error_said is not None:
                said.setdefault(summary.error_said, []).append(index)
        for (op, words), workers in said.items():
            who = ", ".join(self._worker_name(i) for i in workers)
            errors.append(f"{prefix}{who}: the server's first error reply, to a {op}: {words}")
        for index, summary in sorted(heard.summaries.items()):
            if summary.last_error:
                # Each kind counts the problem's occurrences, not requests: a connection a
                # protocol error broke is one, whatever number of requests it ended (each
                # of those is a protocol_error op, counted where ops are).
                kinds = ", ".join(
                    f"{kind} {n:,} {'time' if n == 1 else 'times'}"
                    for kind, n in sorted(summary.errors.items())
                )
                errors.append(
                    f"{prefix}{self._worker_name(index)}: {summary.last_error} (seen: {kinds})"
                )
        return errors

    def _worker_name(self, index: int) -> str:
        """``worker 2``, with its machine's address on a cluster (``worker 2 (10.0.0.7)``)."""
        host = self._hosts.get(index)
        address = host.address if host is not None else ""
        return f"worker {index} ({address})" if address else f"worker {index}"


@dataclass(frozen=True, slots=True)
class _Host:
    """Who a worker is, as its Ready said: host and pid; on a cluster, its address on the
    link to the coordinator and its clock's offset from the coordinator's."""

    host: str
    pid: int
    address: str = ""
    clock_offset_ms: float = 0.0


def _merged_intervals(heard: _RoundReports) -> list[IntervalSnapshot]:
    """A round's measure intervals, merged, in order: those handed on as they were, the
    rest (a worker's part missing: the run was cut short, a worker lost) from the parts
    that came."""
    indexes = sorted(set(heard.merged) | set(heard.intervals))
    return [
        merge_snapshots(
            [
                *([heard.merged[i]] if i in heard.merged else []),
                *heard.intervals.get(i, {}).values(),
            ]
        )
        if i in heard.intervals
        else heard.merged[i]
        for i in indexes
    ]


def _host_entry(ready: m.Ready) -> _Host:
    return _Host(ready.host, ready.pid, ready.address, round(ready.clock_offset_ns / 1e6, 3))


def _start_skews(workers: dict[int, _WorkerTotals], rounds_heard: list[_RoundReports]) -> None:
    """When each worker really began (the first round's, on the coordinator's clock) and
    how far after the earliest worker it came, ``start_skew_ms``.

    All are told one instant; one that began later got Start late or was busy. A worker
    lost before its summary came is placed at its first interval's start (the instant
    it was told), so the skew lists it too.
    """
    starts: dict[int, int] = {}
    for heard in rounds_heard:
        for index in range(heard.n_workers):
            if index in starts:
                continue
            summary = heard.summaries.get(index)
            if summary is not None and summary.began_ns:
                starts[index] = summary.began_ns
                continue
            if index in heard.first_start_ns:
                starts[index] = heard.first_start_ns[index]
    if not starts:
        return
    earliest = min(starts.values())
    for index, start_ns in starts.items():
        workers[index].began_ns = start_ns
        workers[index].start_skew_ms = round((start_ns - earliest) / 1e6, 3)


class ResultFields(TypedDict, total=False):
    """RunResult's fields a runner gives ``fresh_result`` (the rest are measured there)."""

    started_at: Required[str]
    status: Required[str]
    mode: Required[str]
    config: Required[dict[str, Any]]
    targets: Required[list[TargetRecord]]
    window_start_ns: Required[int]
    window_end_ns: Required[int]
    intervals: Required[list[IntervalSnapshot]]
    phases: dict[str, IntervalSnapshot]
    workers: list[WorkerRecord]
    errors: list[str]
    server: dict[str, Any]
    rounds: list[RoundRecord]
    queue: QueueSection | None
    label: str
    trace: TraceSection | None


def fresh_result(*, driver: str | None = None, **fields: Unpack[ResultFields]) -> RunResult:
    """A run's result, measured now (``fields``: RunResult's others): a new id, this
    kvbench's version, this host's environment and the connection driver ran."""
    # The compiled loop's workers wait in their poller, on asyncio (runner/process.py).
    loop = "poller" if driver == COMPILED_LOOP else installed_event_loop()
    environment = describe_environment(loop)
    if driver is not None:
        environment["driver"] = driver
    environment["peak_rss_bytes"] = peak_rss_bytes()  # the coordinator's, up to now
    return RunResult(
        run_id=new_run_id(), kvbench_version=__version__, environment=environment, **fields
    )


def new_run_id() -> str:
    """A sortable, unique run id: ``20261129-203000-1a2b3c``."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"
