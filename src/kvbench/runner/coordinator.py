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
from typing import Any

from kvbench import __version__
from kvbench.config.model import RunConfig
from kvbench.engine.shards import check_shards
from kvbench.engine.worker import WorkerSpec, WorkerSummary
from kvbench.errors import ConfigError, RunAborted, TargetUnreachable, WorkerFailed
from kvbench.metrics.snapshot import IntervalSnapshot, merge_snapshots
from kvbench.results.environment import describe_environment
from kvbench.results.model import RunResult
from kvbench.results.status import CONNECTION_FAILURE_STATS
from kvbench.results.trace import TraceSection
from kvbench.runner import interrupts, probe, redis_cluster
from kvbench.runner import messages as m
from kvbench.runner.launcher import WorkerLauncher, launcher_for
from kvbench.runner.pool import EXITED, WorkerPool
from kvbench.runner.process import event_loop_name
from kvbench.runner.redis_cluster import SlotMap
from kvbench.units import share_out

# How long after the window's end (plus the request timeout) a worker may take to report.
REPORT_GRACE_NS = 5_000_000_000


def worker_specs(config: RunConfig, slot_map: SlotMap | None = None) -> list[WorkerSpec]:
    """One spec per process, connections and requests shared out (a Redis Cluster run's
    slot map to each)."""
    load = config.load
    n = load.processes
    connections = share_out(load.connections, n)
    requests = share_out(load.requests, n) if load.requests is not None else [None] * n
    return [WorkerSpec(config, i, n, connections[i], requests[i], slot_map) for i in range(n)]


@dataclass
class _Tally:
    """What the coordinator has heard from its workers so far."""

    n_workers: int
    round: int = 0
    intervals: dict[int, dict[int, IntervalSnapshot]] = field(default_factory=dict)
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
        self._hosts: dict[int, dict[str, Any]] = {}
        self._stopping = False
        self._aborted_round: str | None = None
        self._server: dict[str, Any] = {}
        self._sample_errors: list[str] = []
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
        tallies: list[_Tally] = []
        targets: list[dict[str, Any]] = [  # the preflight's, with versions, once it ran
            {"url": t.url, "protocol": t.protocol, "server_version": None}
            for t in self.config.targets
        ]
        try:
            try:
                interrupts.arm()  # a signal that came before (since ``disarm``) stops it here
                self._discover_cluster()
                self._open_workers()
                targets = self._preflight()
                self._run_rounds(tallies)
            except KeyboardInterrupt as exc:  # resolving, probing, between rounds: kept
                self._interrupted(exc)
            interrupts.disarm()  # what was measured is built and kept whole from here
            if not self._stopping:
                self._server["after"] = self._sample()
            return self._result(tallies, started_at, targets)
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
        self._on_event(f"Redis Cluster: {len(self._slot_map.nodes)} masters (slots: {counts})")

    def _open_workers(self) -> None:
        """Learn how many workers the launcher has; the recorded config says that number."""
        load = self.config.load
        count = self._launcher.open(load.processes)
        if count != load.processes:
            self.config = replace(self.config, load=replace(load, processes=count))
        if load.cluster is not None:
            self._on_event(f"{count} load worker(s) on the Dask cluster at {load.cluster}")

    def _run_rounds(self, tallies: list[_Tally]) -> None:
        """The rounds, each appended to ``tallies`` as it ends (``run`` keeps the launcher
        open meanwhile)."""
        self._server = {"before": self._sample(), "settings": self._settings(), "intervals": []}
        self._server["side_requests"] = self._ledger
        for round_index in range(self.config.load.rounds):
            if round_index:
                self._on_event(f"round {round_index + 1} of {self.config.load.rounds}")
            try:
                tally = self._run_round(round_index)
            except (RunAborted, TargetUnreachable) as exc:
                if not tallies:
                    raise
                # A later round that cannot start keeps the earlier ones: a partial result.
                self._aborted_round = f"round {round_index + 1} could not start: {exc}"
                break
            tallies.append(tally)
            if self._stopping or tally.failures:
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

    @property
    def _probe_timeout_s(self) -> float:
        """The side connection waits as long as a request may (--timeout)."""
        return self.config.load.timeout_ns / 1e9

    def _settings(self) -> dict[str, str] | None:
        """The server's settings, once before the run; None (and a note) when refused."""
        try:
            return probe.fetch_settings(self.config.targets[0], self._probe_timeout_s, self._ledger)
        except TargetUnreachable as exc:
            self._sample_errors.append(str(exc))
            return None

    def _run_round(self, round_index: int) -> _Tally:
        """One round: fresh worker processes, start together, collect (pyperf-style)."""
        if self._slot_map is not None and round_index:  # as the previous round left it
            self._slot_map = redis_cluster.remap(self.config, self._slot_map, self._probe_timeout_s)
        specs = worker_specs(self.config, self._slot_map)
        tally = _Tally(len(specs), round_index)
        try:
            self._pool.start(specs)
            self._await_ready(tally)
            if self.config.workload.preload and round_index == 0:
                self._preload(tally)
            start_ns = time.monotonic_ns() + self._launcher.start_delay_ns
            tally.started = True
            self._pool.broadcast(m.Start(start_ns))
            self._collect(tally, start_ns)
        except KeyboardInterrupt as exc:
            self._interrupted(exc)
            self._stop_all(tally)
        finally:
            self._pool.stop()
        return tally

    # -- phases ------------------------------------------------------------------------

    def _preflight(self) -> list[dict[str, Any]]:
        targets = []
        for target in self.config.targets:
            version, note = probe.preflight(target, self._probe_timeout_s, self._ledger)
            if note:
                self._on_event(note)
                self._sample_errors.append(note)
            targets.append(
                {"url": target.url, "protocol": target.protocol, "server_version": version}
            )
        return targets

    def _await_ready(self, tally: _Tally) -> None:
        if self.config.replay is not None:
            self._on_event("reading the trace into each connection's queue (before the clock)")
        ready = tally.ready
        while len(ready) < tally.n_workers:
            for message in self._receive(tally):
                if isinstance(message, m.Ready):
                    ready.add(message.worker)
                    self._hosts[message.worker] = _host_entry(message)
            self._raise_on_failure(tally, "preflight")

    def _preload(self, tally: _Tally) -> None:
        tally.preloading = True
        self._pool.broadcast(m.Preload())
        self._on_event(f"preloading {self.config.workload.keys:,} keys")
        while len(tally.other.get("preload", [])) < tally.n_workers:
            self._receive(tally)
            self._raise_on_failure(tally, "preload")

    def _collect(self, tally: _Tally, start_ns: int) -> None:
        load = self.config.load
        deadline: int | None = None
        if load.duration_ns is not None:
            deadline = (
                start_ns + load.warmup_ns + load.duration_ns + load.timeout_ns + REPORT_GRACE_NS
            )
        while len(tally.summaries) + len(tally.failures) < tally.n_workers:
            if deadline is not None and time.monotonic_ns() > deadline:
                for index in range(tally.n_workers):
                    if index not in tally.summaries:
                        tally.failures.setdefault(index, "stopped reporting before the run ended")
                break
            self._receive(tally)

    def _stop_all(self, tally: _Tally) -> None:
        """An interrupt: end every worker's window now and collect what they measured.

        Before the common start nothing was measured: the workers are not waited for
        (one still reading its trace is killed by the pool's stop), except a preload's
        counts, which end within a round trip of its last requests.
        """
        self._pool.broadcast(m.Stop())
        deadline = time.monotonic_ns() + self.config.load.timeout_ns + REPORT_GRACE_NS
        try:
            while not self._all_reported(tally):
                if time.monotonic_ns() > deadline:
                    break
                self._receive(tally)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: stop waiting, keep what arrived

    def _all_reported(self, tally: _Tally) -> bool:
        if tally.started:
            return len(tally.summaries) + len(tally.failures) >= tally.n_workers
        if tally.preloading:
            return not (tally.ready - tally.preloaded - set(tally.failures))
        return True

    # -- messaging ---------------------------------------------------------------------

    def _receive(self, tally: _Tally) -> list[m.Message]:
        """Wait up to 0.2 s for messages and handle them (a dead worker is a Failed one)."""
        received = [message for _, message in self._pool.receive(0.2)]
        for message in received:
            self._handle(tally, message)
        return received

    def _handle(self, tally: _Tally, message: m.Message) -> None:
        if isinstance(message, m.Snapshot):
            snap = replace(message.snapshot, round=tally.round)
            if snap.phase == "measure":
                # a worker's ops and CPU are the measured window's, as the verdicts divide
                # them by it (warm-up and preload CPU would read as a busy client)
                worker = message.worker
                # as the totals count them: failed connection attempts are ops too
                # (results/status.py), so the workers' ops add up to the run's
                attempted = snap.ops() + sum(
                    int(snap.stats.get(name, 0)) for name in CONNECTION_FAILURE_STATS
                )
                tally.ops_by_worker[worker] = tally.ops_by_worker.get(worker, 0) + attempted
                tally.succeeded_by_worker[worker] = (
                    tally.succeeded_by_worker.get(worker, 0) + snap.succeeded()
                )
                tally.cpu_by_worker[worker] = (
                    tally.cpu_by_worker.get(worker, 0) + snap.stats.get("cpu_ns", 0) / 1e9
                )
                if "cpu_wait_ns" in snap.stats:
                    tally.cpu_wait_by_worker[worker] = (
                        tally.cpu_wait_by_worker.get(worker, 0) + snap.stats["cpu_wait_ns"] / 1e9
                    )
                tally.intervals.setdefault(snap.index, {})[message.worker] = snap
                self._emit_complete(tally)
            else:
                tally.other.setdefault(snap.phase, []).append(snap)
                if snap.phase == "preload":
                    tally.preloaded.add(message.worker)
        elif isinstance(message, m.Done):
            assert isinstance(message.summary, WorkerSummary)
            tally.summaries[message.worker] = message.summary
            self._emit_complete(tally)
        elif isinstance(message, m.Failed):
            if self._stopping and not tally.started and message.kind == EXITED:
                return  # stopped before the start, as told: not a failure
            tally.failures.setdefault(message.worker, message.message)
            if message.kind == "unreachable":
                tally.unreachable.add(message.worker)
            elif message.kind == "config":
                tally.bad_config[message.worker] = message.path

    def _emit_complete(self, tally: _Tally) -> None:
        """Hand on each interval once every live, unfinished worker has reported it."""
        live = set(range(tally.n_workers)) - set(tally.failures) - set(tally.summaries)
        while tally.emitted in tally.intervals:
            parts = tally.intervals[tally.emitted]
            if live - set(parts):
                return
            merged = merge_snapshots(parts.values())
            sample = self._sample(probe.INTERVAL_STATS)
            if sample is not None:
                self._server["intervals"].append(
                    {"round": tally.round, "index": merged.index, **sample}
                )
            self._on_interval(merged)
            tally.emitted += 1

    def _raise_on_failure(self, tally: _Tally, phase: str) -> None:
        if not tally.failures:
            return
        index, message = next(iter(tally.failures.items()))
        if index in tally.unreachable:
            raise TargetUnreachable(message)
        if index in tally.bad_config:
            raise ConfigError(tally.bad_config[index], message)
        raise WorkerFailed(phase, f"worker {index}: {message.strip().splitlines()[-1]}")

    # -- result ------------------------------------------------------------------------

    def _result(
        self, tallies: list[_Tally], started_at: str, targets: list[dict[str, Any]]
    ) -> RunResult:
        intervals: list[IntervalSnapshot] = []
        others: dict[str, list[IntervalSnapshot]] = {}
        rounds: list[dict[str, Any]] = []
        errors: list[str] = []
        workers: dict[int, dict[str, Any]] = {}
        for tally in tallies:
            merged = [merge_snapshots(tally.intervals[i].values()) for i in sorted(tally.intervals)]
            intervals.extend(merged)
            for name, snaps in tally.other.items():
                others.setdefault(name, []).extend(snaps)
            rounds.append(self._round_record(tally, merged))
            errors.extend(self._round_errors(tally, len(tallies) > 1))
            for i in range(tally.n_workers):
                entry = workers.setdefault(
                    i,
                    {
                        "index": i,
                        **self._hosts.get(i, {}),
                        "ops": 0,
                        "succeeded": 0,
                        "cpu_s": 0.0,
                        "status": "ok",
                    },
                )
                entry["ops"] += tally.ops_by_worker.get(i, 0)
                entry["succeeded"] += tally.succeeded_by_worker.get(i, 0)
                entry["cpu_s"] = round(entry["cpu_s"] + tally.cpu_by_worker.get(i, 0.0), 3)
                if i in tally.cpu_wait_by_worker:
                    entry["cpu_wait_s"] = round(
                        entry.get("cpu_wait_s", 0.0) + tally.cpu_wait_by_worker[i], 3
                    )
                if i in tally.failures:
                    entry["status"] = "failed"
                summary = tally.summaries.get(i)
                if summary is not None:
                    entry["driver"] = summary.driver
                if summary is not None and summary.mismatch_keys:  # --verify examples
                    entry.setdefault("mismatch_keys", []).extend(summary.mismatch_keys)
        if self.config.load.cluster is not None:
            _start_skews(workers, tallies)
        total_ops = sum(entry["ops"] for entry in workers.values())
        for entry in workers.values():
            entry["share"] = round(entry["ops"] / total_ops, 4) if total_ops else 0.0
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
        trace = self._trace_section(tallies)
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
            workers=list(workers.values()),
            errors=errors,
            # The connection driver every worker ran (engine/fastpath.py).
            driver=", ".join(sorted({w["driver"] for w in workers.values() if "driver" in w})),
            rounds=rounds,
            server={**self._server, "sample_errors": self._sample_errors[:5]},
        )

    def _trace_section(self, tallies: list[_Tally]) -> TraceSection | None:
        """A replay's section, its workers' feeds merged (None for other runs).

        Raises:
            ConfigError: the replay had no row to send (an empty trace, or a slice that
                holds none). (A bad row fails a worker before anything is sent.)
        """
        if self.config.replay is None:
            return None
        reports = [
            s.trace for tally in tallies for s in tally.summaries.values() if s.trace is not None
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

    def _round_record(self, tally: _Tally, merged: list[IntervalSnapshot]) -> dict[str, Any]:
        summaries = list(tally.summaries.values())
        if summaries:
            start = min(s.measure_start_ns for s in summaries)
            end = max(s.measure_end_ns for s in summaries)
        elif merged:
            start, end = merged[0].start_ns, merged[-1].end_ns
        else:
            start = end = 0
        if self._stopping or any(s.status == "interrupted" for s in summaries):
            status = "interrupted"
        elif tally.failures or any(s.status == "failed" for s in summaries):
            status = "partial"
        else:
            status = "ok"
        return {
            "round": tally.round,
            "window_start_ns": start,
            "window_end_ns": end,
            "status": status,
        }

    def _round_errors(self, tally: _Tally, label: bool) -> list[str]:
        prefix = f"round {tally.round + 1}: " if label else ""
        errors = [
            f"{prefix}{self._worker_name(i)}: {msg.strip().splitlines()[-1]}"
            for i, msg in sorted(tally.failures.items())
        ]
        for index, summary in sorted(tally.summaries.items()):
            if summary.last_error:
                errors.append(
                    f"{prefix}{self._worker_name(index)}: {summary.last_error} ({summary.errors})"
                )
        return errors

    def _worker_name(self, index: int) -> str:
        """``worker 2``, with its machine's address on a cluster (``worker 2 (10.0.0.7)``)."""
        address = self._hosts.get(index, {}).get("address")
        return f"worker {index} ({address})" if address else f"worker {index}"


def _host_entry(ready: m.Ready) -> dict[str, Any]:
    """Who a worker is: host and pid; on a cluster, its address and clock offset too."""
    entry: dict[str, Any] = {"host": ready.host, "pid": ready.pid}
    if ready.address:
        entry["address"] = ready.address
        entry["clock_offset_ms"] = round(ready.clock_offset_ns / 1e6, 3)
    return entry


def _start_skews(workers: dict[int, dict[str, Any]], tallies: list[_Tally]) -> None:
    """When each worker really began (the first round's, on the coordinator's clock) and
    how far after the earliest worker it came, ``start_skew_ms``.

    All are told one instant; one that began later got Start late or was busy. A worker
    lost before its summary came is placed at its first interval's start (the instant
    it was told), so the skew lists it too.
    """
    starts: dict[int, int] = {}
    for tally in tallies:
        for index in range(tally.n_workers):
            if index in starts:
                continue
            summary = tally.summaries.get(index)
            if summary is not None and summary.began_ns:
                starts[index] = summary.began_ns
                continue
            firsts = [tally.intervals[i][index] for i in sorted(tally.intervals)
                      if index in tally.intervals[i]]  # fmt: skip
            if firsts:
                starts[index] = firsts[0].start_ns
    if not starts:
        return
    earliest = min(starts.values())
    for index, start_ns in starts.items():
        workers[index]["began_ns"] = start_ns
        workers[index]["start_skew_ms"] = round((start_ns - earliest) / 1e6, 3)


def fresh_result(*, driver: str | None = None, **fields: Any) -> RunResult:
    """A run's result, measured now (``fields``: RunResult's others): a new id, this
    kvbench's version, this host's environment and the connection driver ran."""
    environment = describe_environment(event_loop_name())
    if driver is not None:
        environment["driver"] = driver
    return RunResult(
        run_id=new_run_id(), kvbench_version=__version__, environment=environment, **fields
    )


def new_run_id() -> str:
    """A sortable, unique run id: ``20261129-203000-1a2b3c``."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"
