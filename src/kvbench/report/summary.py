"""Pure: RunResult -> ReportModel (rates, percentiles, outcomes, verdicts, status).

Every figure any report prints is computed here, once, from the stored run, whatever its
kind: a load run, or a queue run, whose own figures (delivery, end-to-end latency, backlog;
report/queue_figures.py) join the model's ``queue`` and whose put and get rates are over
each side's window. Throughput counts successes only (error replies are errors, with their
own rate); the status is ``results.status``'s. Percentiles come from merged histograms; a
percentile with too few samples behind it is None ("n/a"), never a number the data cannot
support.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvbench.metrics.histogram import Histogram
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.snapshot import IntervalSnapshot, merge_snapshots
from kvbench.report.cluster import (
    ClusterFigures,
    cluster_figures,
    cluster_verdicts,
    interval_redirects,
    is_cluster,
)
from kvbench.report.connections import (
    ConnectionsSection,
    connection_failures,
    connection_verdicts,
    connections_section,
)
from kvbench.report.latency import latency_summary, min_samples, percentile_ns
from kvbench.report.queue_figures import (
    QueueFigures,
    ServerRestart,
    interval_fields,
    op_bases,
    queue_figures,
    server_restart,
)
from kvbench.report.reconcile import (
    Reconciled,
    Restart,
    ServerCpu,
    reconcile,
    reconcile_nodes,
    server_cpu,
    server_restarts,
)
from kvbench.report.rows import (
    IntervalRow,
    NetworkFigures,
    OpInterval,
    PhaseCounts,
    RoundRow,
    ServerShare,
)
from kvbench.report.stats import Spread, spread
from kvbench.report.trace_figures import TraceFigures, trace_figures
from kvbench.report.verdicts import Evidence, Verdict, all_verdicts, restart_verdicts
from kvbench.report.verification import Verification, verification, verification_verdicts
from kvbench.results.model import RunResult
from kvbench.results.queue import QueueInterval
from kvbench.results.status import (
    Status,
    Tally,
    max_error_rate,
    run_status,
    set_then_get,
    tally,
)


@dataclass(frozen=True, slots=True)
class OpRow:
    """One op's line in the summary."""

    op: str
    count: int  # every op that ended in the window, whatever its outcome
    completed: int  # those the server answered (error replies included)
    succeeded: int  # those answered with a reply that is not an error
    throughput_per_s: float  # succeeded / window
    outcomes: dict[str, int]
    errors: int
    errors_per_s: float  # errors / window
    error_rate: float  # errors / count
    latency_us: dict[str, float | None]
    service_time_us: dict[str, float | None] | None
    keys: int
    keys_per_s: float
    hit_ratio: float | None
    out_of_range: int = 0  # latencies beyond the histogram's 60 s, recorded at 60 s
    # Its requests' and replies' bytes and per second (network_figures); None: the
    # workers counted bytes in total only.
    network: NetworkFigures | None = None


@dataclass(frozen=True, slots=True)
class ReportModel:
    """Everything a report shows about one run."""

    run: RunResult
    ops: list[OpRow]
    total_ops: int
    total_errors: int
    throughput_per_s: float  # successes / window
    latency_us: dict[str, float | None]
    status: Status
    tally: Tally  # the window's ops by fate (attempted, succeeded, errors by kind)
    intervals: list[IntervalRow]
    phases: dict[str, PhaseCounts]
    verdicts: list[Verdict]
    rounds: list[RoundRow] = field(default_factory=list)
    reconciliation: list[Reconciled] = field(default_factory=list)
    server_cpu: ServerCpu | None = None
    loop_lag_us: dict[str, float | None] = field(default_factory=dict)
    servers: list[ServerShare] = field(default_factory=list)
    verification: Verification | None = None  # --verify only
    connections: ConnectionsSection | None = None  # report/connections.py
    # The server restarted during the run: these reconciliation rows were not comparable.
    server_restarts: list[Restart] = field(default_factory=list)
    not_comparable: list[str] = field(default_factory=list)
    queue: QueueFigures | None = None  # a queue run's figures (report/queue_figures.py)
    cluster: ClusterFigures | None = None  # a Redis Cluster run's (report/cluster.py)
    trace: TraceFigures | None = None  # a replay's figures (report/trace_figures.py)
    network: NetworkFigures | None = None  # bytes on the wire in the window (network_figures)

    @property
    def errors_per_s(self) -> float:
        window_s = self.run.window_s
        return self.total_errors / window_s if window_s else 0.0

    def throughput_spread(self) -> Spread | None:
        """Throughput over complete rounds (mean, stddev, min, max, 95% CI), or None."""
        values = [r["throughput_per_s"] for r in self.rounds if r["status"] == "ok"]
        return spread(values, floor=0.0) if values else None


def _op_row(
    name: str, total: IntervalSnapshot, window_s: float, basis: tuple[int, float] | None = None
) -> OpRow:
    """One op's figures; ``basis`` (a queue run's put or get): what its throughput counts,
    over which window, instead of its successes over the run's window."""
    outcomes = dict(sorted(total.counts.get(name, {}).items()))
    count = total.ops(name)
    succeeded = total.succeeded(name)
    if basis is not None:
        succeeded, window_s = basis
    errors = total.errors(name)
    hits = outcomes.get("hit", 0)
    misses = outcomes.get("miss", 0)
    keys = total.keys.get(name, hits + misses if name in ("get", "gets") else 0)
    service = total.service.get(name)
    return OpRow(
        op=name,
        count=count,
        completed=total.completed(name),
        succeeded=succeeded,
        throughput_per_s=_throughput(succeeded, window_s, basis is not None),
        outcomes=outcomes,
        errors=errors,
        errors_per_s=errors / window_s if window_s else 0.0,
        error_rate=errors / count if count else 0.0,
        latency_us=latency_summary(total.latency.get(name)),
        service_time_us=latency_summary(service) if service is not None else None,
        keys=keys,
        keys_per_s=keys / window_s if window_s else 0.0,
        hit_ratio=hits / (hits + misses) if hits + misses else None,
        out_of_range=sum(
            h.out_of_range for h in (total.latency.get(name), service) if h is not None
        ),
        network=network_figures(total, window_s, name),
    )


def _throughput(succeeded: int, window_s: float, queue: bool) -> float:
    rate = succeeded / window_s if window_s else 0.0
    # A queue's rates are given to 0.1/s, as its document's queue section holds them, so
    # the op rows, that section, the history and diff print one figure.
    return round(rate, 1) if queue else rate


def interval_row(snap: IntervalSnapshot, window_start_ns: int) -> IntervalRow:
    length_s = max(1e-9, (snap.end_ns - snap.start_ns) / 1e9)
    ops: dict[str, OpInterval] = {}
    for name in snap.counts:
        hist = snap.latency.get(name)
        pct = hist.percentiles([50.0, 99.0]) if hist is not None and hist.total_count else {}
        ops[name] = {
            "count": snap.ops(name),
            # Throughput counts successes only: the running total and average add these.
            "succeeded": snap.succeeded(name),
            "per_s": snap.succeeded(name) / length_s,
            "p50_us": pct[50.0] / 1000 if pct else None,
            "p99_us": pct[99.0] / 1000
            if pct and hist is not None and hist.total_count >= min_samples(99)
            else None,
        }
    row: IntervalRow = {
        "round": snap.round,
        "t_s": round((snap.end_ns - window_start_ns) / 1e9, 3),
        "length_s": round(length_s, 3),
        "ops": ops,
        "errors": snap.errors() + connection_failures(snap),
        "errors_per_s": (snap.errors() + connection_failures(snap)) / length_s,
        "per_s": snap.succeeded() / length_s,
        "cpu_s": snap.stats.get("cpu_ns", 0) / 1e9,
        "offered_per_s": snap.stats["offered"] / length_s if "offered" in snap.stats else None,
        "late": snap.counted(Outcome.LATE) if "offered" in snap.stats else None,
        "reconnects": int(snap.stats.get("reconnects", 0)),
        "connection_errors": connection_failures(snap),
        "connections_live": int(snap.stats["connections_live_min"])
        if "connections_live_min" in snap.stats
        else None,
    }
    if "redirect_moved" in snap.stats:
        row["redirects"] = interval_redirects(snap)
    return row


class Running:
    """Cumulative successful ops and the running average (successes so far / time since
    the round's window began; an error reply is no throughput), added to interval rows in
    order; a new round starts from zero. The live view
    and the summary (hence the document and the CSV) both use it, so they agree."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        """From zero again (the live view: a new run of a sweep or preset begins)."""
        self._round: int | None = None
        self._total = 0
        self._by_op: dict[str, int] = {}

    def add(self, row: IntervalRow) -> IntervalRow:
        """``row`` with ``total`` and ``avg_per_s``, and the same per op."""
        if row["round"] != self._round:
            self._round, self._total, self._by_op = row["round"], 0, {}
        elapsed_s = row["t_s"]
        for name, vals in row["ops"].items():
            done = self._by_op.get(name, 0) + vals["succeeded"]
            self._by_op[name] = done
            vals["total"] = done
            vals["avg_per_s"] = done / elapsed_s if elapsed_s > 0 else 0.0
        self._total += sum(vals["succeeded"] for vals in row["ops"].values())
        row["total"] = self._total
        row["avg_per_s"] = self._total / elapsed_s if elapsed_s > 0 else 0.0
        return row


def queue_interval_row(
    snap: IntervalSnapshot, record: QueueInterval | None, window_start_ns: int
) -> IntervalRow:
    """A queue run's interval as its row (the live line's, before the run is stored)."""
    return _with_queue(interval_row(snap, window_start_ns), snap, record, None)


def _with_queue(
    row: IntervalRow,
    snap: IntervalSnapshot,
    record: QueueInterval | None,
    restart: ServerRestart | None,
) -> IntervalRow:
    """A queue run's interval row: its queue figures added, no empty answer a get."""
    interval_fields(row, snap, record, restart)
    if "get" in row["ops"]:
        row["ops"]["get"]["per_s"] = row["gets_per_s"]
    return row


def _round_start(run: RunResult, index: int) -> int:
    if index < len(run.rounds):
        return int(run.rounds[index]["window_start_ns"])
    return run.window_start_ns


def _rounds(run: RunResult) -> list[RoundRow]:
    """Per round: its throughput (successes in its intervals / its window).

    ``status`` is the round's process status: ``ok`` for a complete round.
    """
    rows: list[RoundRow] = []
    for index, record in enumerate(run.rounds):
        window_s = run.round_window_s(index)
        snaps = [s for s in run.intervals if s.round == record["round"]]
        succeeded = sum(s.succeeded() for s in snaps)
        rows.append(
            {
                "round": record["round"] + 1,
                "status": record["status"],
                "window_s": window_s,
                "completed": sum(s.completed() for s in snaps),
                "succeeded": succeeded,
                "throughput_per_s": succeeded / window_s if window_s else 0.0,
            }
        )
    return rows


def _by_script(run: RunResult) -> dict[str, int] | None:
    """A replayed MONITOR capture's commands run by its scripts, by name (None: none)."""
    if run.trace is None:
        return None
    counts = run.trace.counts.get("by_script")
    return {str(k): int(v) for k, v in counts.items()} if counts else None


def _family(run: RunResult) -> str:
    protocol = str(run.targets[0]["protocol"]) if run.targets else ""
    if protocol.startswith("http"):
        return "http"
    return "redis" if protocol.startswith("resp") else "memcache"


def _servers(run: RunResult) -> list[ServerShare]:
    """Sharded runs: each server's completions in the window and its share of them."""
    if len(run.targets) < 2:
        return []
    counts = [
        sum(s.stats.get(f"server{i}_completed", 0) for s in run.intervals)
        for i in range(len(run.targets))
    ]
    total = sum(counts) or 1
    # A Redis Cluster places keys by hash slot, whatever --placement (kept in the config) says.
    cluster = is_cluster(run)
    placement = "slots" if cluster else run.config.get("workload", {}).get("placement", "ketama")
    rows: list[ServerShare] = [
        {"url": t["url"], "completed": int(n), "share": round(n / total, 4), "placement": placement}
        for t, n in zip(run.targets, counts, strict=True)
    ]
    if cluster:  # what each master sent elsewhere (report/cluster.py)
        for i, row in enumerate(rows):
            row["redirected"] = int(
                sum(s.stats.get(f"server{i}_redirected", 0) for s in run.intervals)
            )
    return rows


def _intervals(run: RunResult) -> list[IntervalRow]:
    """Per interval: its row; a queue run's with its queue figures."""
    if run.queue is None:
        running = Running()
        return [running.add(interval_row(s, _round_start(run, s.round))) for s in run.intervals]
    restart = server_restart(run.server)
    records = {record.index: record for record in run.queue.intervals}
    return [
        _with_queue(interval_row(s, run.window_start_ns), s, records.get(s.index), restart)
        for s in run.intervals
    ]


def summarize(run: RunResult, intervals_of: RunResult | None = None) -> ReportModel:
    """Compute the report model of a run; its interval rows are those of ``intervals_of``
    where given (the run with adjacent intervals merged, for a page's charts)."""
    total = run.total()
    window_s = run.window_s
    bases = op_bases(run) if run.queue is not None else {}
    rows = (
        [_op_row(name, total, window_s, bases.get(name)) for name in sorted(total.counts)]
        if total
        else []
    )
    figures = queue_figures(run) if run.queue is not None else None
    # Connection failures included (results.status counts them); a pair's miss is an error.
    counts = tally(total, set_then_get(run.config))
    connections = connections_section(run)
    total_completed = sum(r.completed for r in rows)
    merged = Histogram.merged(total.latency.values()) if total and total.latency else None
    service = Histogram.merged(total.service.values()) if total and total.service else None
    phases: dict[str, PhaseCounts] = {
        name: {"ops": snap.ops(), "errors": snap.errors(), "counts": snap.counts}
        for name, snap in run.phases.items()
    }
    everything = run.intervals + list(run.phases.values())
    mget_width = int(run.config.get("workload", {}).get("multiget_keys", 1))
    all_phases = merge_snapshots(everything) if everything else None
    reconciliation = (
        reconcile(_family(run), all_phases, run.server, mget_width, _by_script(run))
        if all_phases
        else []
    )
    if all_phases is not None and is_cluster(run):  # and each master's own counters
        urls = [str(t["url"]) for t in run.targets]
        reconciliation += reconcile_nodes(all_phases, run.server, urls)
    cluster = cluster_figures(run)
    restarts = server_restarts(run.server)
    # A restarted server counts from zero again: its deltas say nothing about the client's.
    not_comparable = [r.name for r in reconciliation] if restarts else []
    reconciliation = [] if restarts else reconciliation
    cpu = server_cpu(_family(run), run.server)
    hiccup = total.hiccup if total else None
    outcomes: dict[str, int] = {}
    for row in rows:
        for name, n in row.outcomes.items():
            outcomes[name] = outcomes.get(name, 0) + n
    mean_for_little = service if run.mode == "open" else merged
    evidence = Evidence(
        run=run,
        tally=counts,
        completed=total_completed,
        mean_latency_ns=mean_for_little.mean_ns()
        if mean_for_little and mean_for_little.total_count
        else None,
        hiccup=hiccup,
        latency_p99_ns=percentile_ns(merged, 99) if merged and merged.total_count else None,
        reconciliation=reconciliation,
        server_cpu=cpu,
        outcomes=outcomes,
        out_of_range=sum(r.out_of_range for r in rows),
        max_error_rate=None if figures is not None else max_error_rate(run.config),
        queue=figures,
    )
    return ReportModel(
        run=run,
        ops=rows,
        total_ops=counts.attempted,
        total_errors=counts.errors,
        # a queue run's: puts/s + gets/s, each over its own side's window
        throughput_per_s=sum(r.throughput_per_s for r in rows)
        if figures is not None
        else (counts.succeeded / window_s if window_s else 0.0),
        latency_us=latency_summary(merged),
        status=run_status(run, counts),
        tally=counts,
        intervals=_intervals(intervals_of or run),
        rounds=_rounds(run) if figures is None else [],
        phases=phases,
        verdicts=all_verdicts(evidence)
        + verification_verdicts(verification(run))
        + connection_verdicts(connections, run)
        + restart_verdicts(restarts, not_comparable)
        + cluster_verdicts(cluster),
        reconciliation=reconciliation,
        server_cpu=cpu,
        loop_lag_us=latency_summary(hiccup),
        verification=verification(run),
        servers=_servers(run),
        connections=connections,
        server_restarts=restarts,
        not_comparable=not_comparable,
        queue=figures,
        cluster=cluster,
        trace=trace_figures(run, total),
        network=network_figures(total, window_s),
    )


def network_figures(
    total: IntervalSnapshot | None, window_s: float, op: str | None = None
) -> NetworkFigures | None:
    """The bytes the workers read from and wrote to their sockets in the window (protocol
    framing and all: what crossed the network, mutilate's RX and TX, memtier's KB/sec), and
    per second of the window; None when no worker counted them.

    ``op``: that op's share, its requests' bytes (``bytes_out.<op>``) and its replies'
    (``bytes_in.<op>``), as either driver counts them; None when the workers counted
    totals only. The ops' shares add up to the totals but for the
    bytes of replies not accounted in the window (one cut by its start or end, the read
    that broke the protocol): ``bytes_in_other``, ``bytes_out_other`` in the totals."""
    if total is None or "bytes_in" not in total.stats:
        return None
    stats = total.stats
    if op is not None:
        if not any(name.startswith("bytes_out.") for name in stats):
            return None
        received, sent = int(stats.get(f"bytes_in.{op}", 0)), int(stats.get(f"bytes_out.{op}", 0))
    else:
        received, sent = int(stats["bytes_in"]), int(stats.get("bytes_out", 0))
    figures: NetworkFigures = {
        "bytes_in": received,
        "bytes_out": sent,
        "in_per_s": received / window_s if window_s else 0.0,
        "out_per_s": sent / window_s if window_s else 0.0,
    }
    if op is None and any(name.startswith("bytes_out.") for name in stats):
        for direction in ("bytes_in", "bytes_out"):
            shares = sum(int(v) for k, v in stats.items() if k.startswith(f"{direction}."))
            other = (received if direction == "bytes_in" else sent) - shares
            figures["bytes_in_other" if direction == "bytes_in" else "bytes_out_other"] = other
    return figures
