"""Verdicts: whether a run's figures can be trusted, each with the evidence behind it.

Pure functions of the summary's inputs; one pass (``all_verdicts``) for every kind of run,
a queue run's delivery and backlog verdicts included. Each verdict names what it saw, so a
reader can judge it: "worker 0 used 97% of a core" is evidence, "client-bound" alone is
not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvbench.metrics.histogram import Histogram
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.latency import min_samples, percentile_ns
from kvbench.report.queue_figures import QueueFigures
from kvbench.report.reconcile import Reconciled, Restart, ServerCpu
from kvbench.results.model import RunResult
from kvbench.results.status import (
    DEFAULT_MAX_ERROR_RATE,
    INTERRUPTED,
    Tally,
    describe_kinds,
    format_error_rate,
    format_share,
    window_whole,
)
from kvbench.units import format_duration_ns, format_us

# A worker above this share of one core was likely the bottleneck (DESIGN.md §3)...
CLIENT_CPU_LIMIT = 0.9
# ...and so was one that used less only because other processes took its core: runnable
# (on a CPU, or waiting for one) above CLIENT_CPU_LIMIT of the window, waiting this share.
CLIENT_CPU_WAIT_SHARE = 0.1
# Event-loop stalls above this at p99 delay replies by as much: client-bound...
LOOP_LAG_P99_NS = 1_000_000
# ...when they are a part of the latencies worth naming: a stall below this share of the
# requests' own p99 moves no reported percentile by more than that share (a 2 ms stall in
# a run whose p99 is 50 ms is not what its figures show).
LOOP_LAG_SHARE_OF_P99 = 0.25
# The hiccup task's 1 ms samples needed for its p99 to say anything: as for any p99
# (report/latency.py), else a short run's p99 is its one slowest wake-up.
MIN_LOOP_LAG_SAMPLES = min_samples(99)
# Little's law compares a mean in flight sampled every 10 ms with throughput x mean latency:
# over a window shorter than this the samples are too few and the window's edges (the
# first sends, the last replies of a -n run) weigh enough to miss by 20-30% (0.3-0.4 s
# -n runs did, on a healthy loopback stack).
MIN_LITTLE_SPAN_NS = 1_000_000_000
# The server is saturated when it uses this share of the cores its threads can use.
SERVER_CPU_SHARE = 0.85
LITTLE_TOLERANCE = 0.10
# ...and, in an open loop, never less than one request per worker process: the samples
# are taken when a worker's event loop wakes, which in an open loop is just after its
# dispatcher sent a tick's requests, so each worker's samples count the request it just
# sent. At a light --rate that is most of what is in flight: 5,000/s on 2 processes
# sampled 2.1 against Little's 0.6, 20,000/s on 1 process 1.8 against 1.6 (healthy
# runs: service times of 55-110 us, nothing queued). A closed loop's wake-ups follow
# replies, and its samples have no such lean.
LITTLE_MIN_GAP = 1.0
# Open loop: achieved below this share of the offered rate is a warning.
ACHIEVED_SHARE = 0.95


@dataclass(frozen=True, slots=True)
class Verdict:
    """A statement about whether a figure can be trusted, with its evidence."""

    id: str
    level: str  # "info", "warning", "error"
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the verdicts look at."""

    run: RunResult
    tally: Tally  # the window's ops: attempted, succeeded, errors by kind
    completed: int  # replies (error replies included): what Little's law counts
    mean_latency_ns: float | None
    hiccup: Histogram | None
    reconciliation: list[Reconciled]
    server_cpu: ServerCpu | None
    outcomes: dict[str, int]
    out_of_range: int = 0
    # None: errors do not decide the status (a queue run's delivery does)
    max_error_rate: float | None = DEFAULT_MAX_ERROR_RATE
    queue: QueueFigures | None = None  # a queue run's figures (report/queue_figures.py)
    latency_p99_ns: float | None = None  # the requests' p99 (None: not known)


@dataclass(frozen=True, slots=True)
class _Busy:
    """A worker (or queue role) the client.cpu rule flags."""

    role: str
    index: int
    busy: float  # share of its span on a CPU
    waited: float | None  # share of its span runnable but waiting for a CPU (None: unknown)
    starved: bool
    driver: str


def _share_range(values: list[float]) -> str:
    """``49-50%``, or ``50%`` when they round alike."""
    low, high = f"{min(values):.0%}", f"{max(values):.0%}"
    return low if low == high else f"{low[:-1]}-{high}"


def _server_saturated(ev: Evidence) -> bool:
    cpu = ev.server_cpu
    return cpu is not None and cpu.cores >= SERVER_CPU_SHARE * cpu.threads


def _busy_workers(ev: Evidence) -> tuple[list[_Busy], dict[str, int]]:
    """The workers (queue roles) the client.cpu rule flags, and how many each role has."""
    window_s = ev.run.window_s
    flagged: list[_Busy] = []
    counts: dict[str, int] = {}
    for worker in ev.run.workers:
        role = worker.get("role", "worker")
        counts[role] = counts.get(role, 0) + 1
        # a queue's producer or consumer is busy for its own span (active_s), not the run's
        span_s = worker.get("active_s") or window_s
        busy = (worker.get("cpu_s") or 0) / span_s if span_s else 0
        waited = (worker.get("cpu_wait_s") or 0) / span_s if span_s else 0
        starved = waited >= CLIENT_CPU_WAIT_SHARE and busy + waited > CLIENT_CPU_LIMIT
        if busy > CLIENT_CPU_LIMIT or starved:
            known = waited if "cpu_wait_s" in worker else None
            flagged.append(
                _Busy(role, worker["index"], busy, known, starved, worker.get("driver", ""))
            )
    return flagged, counts


def client_verdicts(ev: Evidence) -> list[Verdict]:
    """client.cpu (one per role) and client.loop_lag.

    A worker busy on its own core beside a saturated server is not a client limit: the
    server could take no more, so the server.cpu verdict says both were busy (``make
    run`` on 2 cores: the server 0.99 of its core, the one worker 92% of the other). A
    worker that waited for its core is flagged whatever the server did: other processes
    delayed the client, and its latencies."""
    out: list[Verdict] = []
    flagged, counts = _busy_workers(ev)
    if _server_saturated(ev):
        flagged = [b for b in flagged if b.starved]
    by_role: dict[str, list[_Busy]] = {}
    for b in flagged:
        by_role.setdefault(b.role, []).append(b)
    # One verdict per role, not per worker: two starved workers are one finding.
    out += [_client_cpu(group, counts[role]) for role, group in by_role.items()]
    if ev.hiccup is not None and ev.hiccup.total_count >= MIN_LOOP_LAG_SAMPLES:
        p99 = percentile_ns(ev.hiccup, 99)
        latency_p99 = ev.latency_p99_ns
        if p99 > LOOP_LAG_P99_NS and (
            latency_p99 is None or p99 >= LOOP_LAG_SHARE_OF_P99 * latency_p99
        ):
            out.append(_loop_lag(ev, p99))
    return out


def _loop_lag(ev: Evidence, p99: float) -> Verdict:
    """client.loop_lag: a warning, but in a closed loop beside a saturated server.

    There the server's queue sets the figures: with N requests in flight and the server
    busy all the while, throughput is the server's and the mean latency N / throughput
    (Little's law), whatever the client's loop did; a stall moves replies from the
    server's queue to the client's socket buffers, and can only add to the tail. (Had the
    stalls left the server idle, it would not have been saturated.) An open loop's
    latencies run from intended send times, which a stall delays outright: always a
    warning."""
    lag_us = round(p99 / 1000, 1)  # (the message says the evidence's figure)
    # (written as the summary's "client loop lag p99" writes the same figure: it said
    # 25.43ms there and "stalled 25.4 ms" here)
    stalled = (
        f"the client's event loop stalled {format_us(lag_us)} at p99 "
        f"(limit {format_duration_ns(LOOP_LAG_P99_NS)})"
    )
    evidence = {"loop_lag_p99_us": lag_us}
    if ev.run.mode == "closed" and _server_saturated(ev):
        return Verdict(
            "client.loop_lag",
            "info",
            f"{stalled} beside a saturated server: in a closed loop the server's queue "
            "sets throughput and mean latency (Little's law); the stalls can add only to "
            "the tail",
            {**evidence, "server_saturated": True},
        )
    return Verdict(
        "client.loop_lag", "warning", f"{stalled}: latencies include client delay", evidence
    )


def _client_cpu(group: list[_Busy], of: int) -> Verdict:
    """The client.cpu verdict of one role's flagged workers (``of``: how many it has)."""
    first = group[0]
    # A busy Python driver is worth naming: the compiled one costs far less per op.
    why = f"; it ran the {first.driver} driver" if first.driver.startswith("python (") else ""
    more = "" if first.role != "worker" else " (add --processes or client machines)"
    starved = [b for b in group if b.starved]
    # Said from the evidence's figures (3 places), so that each is the other's: a share
    # of 0.6451 was "65%" in the message and 0.645, "64%", in the evidence.
    waits = [round(b.waited, 3) for b in starved if b.waited is not None]
    if len(group) == 1:
        name, its = f"{first.role} {first.index}", "its core"
    else:
        name, its = f"{len(group)} of {of} {first.role}s", "their cores"
    shared = (
        f" and waited {_share_range(waits)} of the window for one (other processes ran on {its})"
        if waits
        else ""
    )
    evidence: dict[str, Any]
    if len(group) == 1:
        evidence = {
            "worker": first.index,
            "cpu_share": round(first.busy, 3),
            "driver": first.driver,
        }
        if first.waited is not None:
            evidence["cpu_wait_share"] = round(first.waited, 3)
    else:
        evidence = {
            "workers": [b.index for b in group],
            "cpu_share": [round(b.busy, 3) for b in group],
            "driver": first.driver,
        }
        if all(b.waited is not None for b in group):
            evidence["cpu_wait_share"] = [round(b.waited or 0, 3) for b in group]
    return Verdict(
        "client.cpu",
        "warning",
        f"{name} used {_share_range([round(b.busy, 3) for b in group])} of a core{shared}: the client "
        f"may be the bottleneck{more}{why}",
        evidence,
    )


def server_verdicts(ev: Evidence) -> list[Verdict]:
    out: list[Verdict] = []
    cpu = ev.server_cpu
    if cpu is not None and _server_saturated(ev):
        cores = round(cpu.cores, 3)  # (the message says the evidence's figure)
        evidence: dict[str, Any] = {
            "server_cores": cores,
            "server_threads": cpu.threads,
        }
        busy = [b for b in _busy_workers(ev)[0] if not b.starved]
        beside = ""
        if busy:
            first = busy[0]
            name = f"{first.role} {first.index}" if len(busy) == 1 else f"{len(busy)} {first.role}s"
            beside = (
                f"; {name} used {_share_range([round(b.busy, 3) for b in busy])} of a core "
                "beside it: "
                "both sides were near their limit, and the server's is the one reached"
            )
            evidence["client_cpu_share"] = [round(b.busy, 3) for b in busy]
        out.append(
            Verdict(
                "server.cpu",
                "info",
                f"the server used {cores:.2f} cores of its {cpu.threads} thread(s): it is "
                f"saturated, so this throughput is its limit at these settings{beside}",
                evidence,
            )
        )
    bad = [r for r in ev.reconciliation if not r.matches]
    if bad:
        names = ", ".join(f"{r.name} client {r.client:,} server {r.server:,}" for r in bad)
        out.append(
            Verdict(
                "server.reconciliation",
                "warning",
                f"the server's counters disagree with the client's ({names}): "
                + _mismatch_cause(ev.run, bad),
                {r.name: {"client": r.client, "server": r.server} for r in bad},
            )
        )
    return out


def _mismatch_cause(run: RunResult, bad: list[Reconciled]) -> str:
    """Why the server counted more than the client: a worker lost mid-run (its machine or
    link gone) had requests served after its last report, which nothing counts."""
    lost = [w for w in run.workers if w.get("status") == "failed"]
    if lost and all(r.server > r.client for r in bad):
        who = ", ".join(
            f"worker {w['index']} ({w['address']})" if w.get("address") else f"worker {w['index']}"
            for w in lost
        )
        return (
            f"{who} was lost mid-run: the server also served what it sent after its last "
            "report, which no figure counts"
        )
    return "another client may be using the server, or requests were lost"


def measurement_verdicts(ev: Evidence) -> list[Verdict]:
    out: list[Verdict] = []
    run = ev.run
    if run.status != "ok":
        window = f"{run.window_s:.2f}s"
        if run.status == INTERRUPTED and window_whole(run):
            message = (
                f"the run is {run.status} in its drain: its {window} window was measured whole"
            )
        elif (run.config.get("load") or {}).get("duration_ns"):
            message = f"the run is {run.status}: figures cover {window} of the planned window"
        else:  # a replay, a count of requests: no window was planned (was: "of the planned
            # window", for a replay's 4.13s against a trace of 2.99s)
            message = f"the run is {run.status}: figures cover its first {window}"
        out.append(Verdict("run.incomplete", "warning", message, {"status": run.status}))
    if ev.max_error_rate is not None:
        out += error_verdicts(ev.tally, ev.max_error_rate)
    little = littles_law(run.intervals, ev.completed, run.window_s, ev.mean_latency_ns)
    floor = LITTLE_MIN_GAP * max(1, len(run.workers)) if run.mode == "open" else 0.0
    # The window's edges: the replies of requests sent in its first mean latency come
    # after it began, those of its last after it ended; they weigh latency / window.
    edges = (ev.mean_latency_ns or 0) / 1e9 / run.window_s if run.window_s else 0.0
    tolerance = LITTLE_TOLERANCE + edges
    gap = max(tolerance * little[1], floor) if little is not None else 0.0
    if little is not None and abs(little[0] - little[1]) > gap:
        allowed = f"tolerance {tolerance:.0%}"
        if floor:
            allowed += f", at least {floor:.0f} request(s) in an open loop"
        drained = run.phases["drain"].ops() if "drain" in run.phases else 0
        why = (
            # the requests in flight when it was stopped are counted in flight to its
            # end, and timed in the drain (was: "client queueing?", for a replay
            # interrupted with 8 requests held by a stopped server)
            f"the {drained:,} request(s) in flight when the run was stopped are timed in the "
            "drain, not in these figures"
            if run.status != "ok" and drained
            else "time was spent outside the measured span (client queueing?)"
        )
        expected, measured = round(little[0], 2), round(little[1], 2)  # (said as stored)
        out.append(
            Verdict(
                "little.law",
                "warning",
                f"replies/s x mean latency = {expected:.1f} requests in flight, but "
                f"{measured:.1f} were measured (Little's law, {allowed}): {why}",
                {"expected_inflight": expected, "measured_inflight": measured},
            )
        )
    if ev.out_of_range:
        out.append(
            Verdict(
                "latency.out_of_range",
                "warning",
                f"{ev.out_of_range:,} latencies were beyond 60 s and were recorded as 60 s: the "
                "top percentiles are lower bounds (the maximum is the largest one seen)",
                {"out_of_range": ev.out_of_range},
            )
        )
    for message in run.errors:
        out.append(Verdict("run.error", "warning", message))
    return out


def error_verdicts(counts: Tally, limit: float) -> list[Verdict]:
    """``ops.none`` when nothing succeeded; ``errors.rate`` when ops failed (an error above
    ``limit``, the run's --max-error-rate, which makes the run failed; else info). Both name
    the main error kinds with their counts."""
    evidence: dict[str, Any] = {
        "ops": counts.attempted,
        "succeeded": counts.succeeded,
        "errors": counts.errors,
        "error_rate": round(counts.error_rate, 6),
        "max_error_rate": limit,
        "kinds": counts.kinds,
    }
    kinds = describe_kinds(counts.kinds)
    if counts.succeeded == 0:
        ended = f": {counts.attempted:,} attempts, all failed: {kinds}" if counts.attempted else ""
        return [Verdict("ops.none", "error", f"no op succeeded in the window{ended}", evidence)]
    if not counts.errors:
        return []
    above = counts.error_rate > limit
    return [
        Verdict(
            "errors.rate",
            "error" if above else "info",
            f"{format_error_rate(counts.error_rate)} of {counts.attempted:,} ops failed ({kinds}); "
            f"{'above' if above else 'within'} the {format_share(limit)} allowed "
            "(--max-error-rate)",
            evidence,
        )
    ]


def open_loop_verdicts(ev: Evidence) -> list[Verdict]:
    run = ev.run
    if run.mode != "open":
        return []
    out: list[Verdict] = []
    offered = sum(s.stats.get("offered", 0) for s in run.intervals)
    if offered and ev.completed < ACHIEVED_SHARE * offered:
        out.append(
            Verdict(
                "open.achieved",
                "warning",
                f"achieved {ev.completed:,} of {offered:,.0f} offered requests "
                f"({ev.completed / offered:.1%}): the target rate was not sustained",
                {"offered": int(offered), "achieved": ev.completed},
            )
        )
    late, dropped = ev.outcomes.get("late", 0), ev.outcomes.get("dropped", 0)
    if late or dropped:
        out.append(
            Verdict(
                "open.late",
                "warning" if dropped else "info",
                f"{late:,} requests were sent late and {dropped:,} dropped (never sent): the "
                "schedule fell behind",
                {"late": late, "dropped": dropped},
            )
        )
    return out


def littles_law(
    intervals: list[IntervalSnapshot],
    completed: int,
    window_s: float,
    mean_latency_ns: float | None,
) -> tuple[float, float] | None:
    """(throughput x mean latency, measured mean in flight), or None without samples over
    at least MIN_LITTLE_SPAN_NS."""
    means = [
        (s.stats["inflight_mean"], s.end_ns - s.start_ns)
        for s in intervals
        if "inflight_mean" in s.stats
    ]
    span = sum(length for _, length in means)
    if not means or span < MIN_LITTLE_SPAN_NS or not window_s or mean_latency_ns is None:
        return None
    measured = sum(mean * length for mean, length in means) / span
    expected = completed / window_s * mean_latency_ns / 1e9
    if measured < 1:  # too little in flight for the comparison to mean anything
        return None
    return expected, measured


def all_verdicts(ev: Evidence) -> list[Verdict]:
    return (
        client_verdicts(ev)
        + server_verdicts(ev)
        + open_loop_verdicts(ev)
        + queue_verdicts(ev)
        + measurement_verdicts(ev)
    )


def queue_verdicts(ev: Evidence) -> list[Verdict]:
    """A queue run's delivery (lost, duplicated, out of order, unexpected, foreign), its
    end (drained or not), its server (restarted) and its failed requests."""
    queue = ev.queue
    if queue is None:
        return []
    out = _delivery_verdicts(queue)
    # A write-only run (--consumers 0) leaves its messages queued on purpose: no warning.
    if not queue["drained"] and queue["consumers_count"] != 0:
        out.insert(
            0,
            Verdict(
                "queue.not_drained",
                "warning",
                f"the run ended before the queue was drained "
                f"({queue['stop_reason'] or ev.run.status}): "
                f"{queue.get('in_flight', 0):,} acknowledged messages were in flight when "
                "it ended (not yet received: still queued or on their way), none counted lost",
                {"server_backlog_after": queue["backlog"]["server_after"]},
            ),
        )
    restart = queue["backlog"]["server_restart"]
    if restart is not None:
        out.append(
            Verdict(
                "queue.server_restarted",
                "warning",
                f"the queue server restarted during the run ({restart['evidence']}): its "
                "queue counts started again, so its backlog is not shown from then on",
                dict(restart),
            )
        )
    if queue["failed_puts"]:
        out.append(
            Verdict(
                "queue.failed_puts",
                "warning",
                f"{queue['failed_puts']:,} puts were not acknowledged (error reply, timeout or "
                "broken connection); they are not counted lost",
            )
        )
    by_op = _errors_by_op(ev)
    if sum(by_op.values()):
        failed = sum(by_op.values())
        out.append(Verdict("errors", "warning", f"{failed:,} requests failed", {"by_op": by_op}))
    return out


def _errors_by_op(ev: Evidence) -> dict[str, int]:
    total = ev.run.total()
    return {op: total.errors(op) for op in sorted(total.counts)} if total else {}


def _delivery_verdicts(queue: QueueFigures) -> list[Verdict]:
    out: list[Verdict] = []
    if queue["lost"]:
        by_producer = {p["producer"]: p["lost"] for p in queue["producers"] if p["lost"]}
        out.append(
            Verdict(
                "delivery.lost",
                "error",
                f"{queue['lost']:,} acknowledged messages were never received",
                {"by_producer": by_producer},
            )
        )
    if queue.get("e2e_clipped"):
        out.append(
            Verdict(
                "queue.e2e_clipped",
                "warning",
                f"{queue['e2e_clipped']:,} of {queue['received']:,} end-to-end latencies were "
                "beyond 60 s, the histogram's range: percentiles there read >60s (lower "
                "bounds); the maximum is the largest one seen",
                {"e2e_clipped": queue["e2e_clipped"]},
            )
        )
    if queue.get("unknown_fate"):
        out.append(
            Verdict(
                "delivery.unknown_fate",
                "warning",
                f"unknown fate: {queue['unknown_fate']:,} acknowledged messages not received, "
                f"as {queue['unanswered_gets']:,} gets went unanswered (timed out, lost "
                "with their connection, or abandoned by a stopped run) after the server may "
                "have dequeued; not counted lost",
                {"unanswered_gets": queue["unanswered_gets"]},
            )
        )
    if queue["duplicated"]:
        out.append(
            Verdict(
                "delivery.duplicated",
                "error",
                f"{queue['duplicated']:,} messages were received twice or more",
            )
        )
    if queue["out_of_order"]:
        out.append(
            Verdict(
                "delivery.out_of_order",
                "warning",
                f"{queue['out_of_order']:,} messages arrived at a consumer after a later one "
                "of the same producer",
            )
        )
    if queue["unexpected"]:
        out.append(
            Verdict(
                "delivery.unexpected",
                "error",
                f"{queue['unexpected']:,} messages of this run named a producer or sequence "
                "number never sent",
            )
        )
    if queue["foreign"]:
        out.append(
            Verdict(
                "queue.foreign",
                "warning",
                f"{queue['foreign']:,} messages dequeued were not this run's (left in the "
                "queue before, or another client)",
            )
        )
    return out


def restart_verdicts(restarts: list[Restart], not_comparable: list[str]) -> list[Verdict]:
    """A warning when the server restarted during the run: its counters started again."""
    if not restarts:
        return []
    counters = ", ".join(not_comparable) or "none were compared"
    return [
        Verdict(
            "server.restarted",
            "warning",
            f"the server restarted during the run ({'; '.join(r.describe() for r in restarts)}): "
            f"its counters started again, so they are not comparable with the client's "
            f"({counters}); server CPU leaves out the samples the restart fell between",
            {
                "restarts": [
                    {"url": r.url, "after": r.after, "before": r.before, "evidence": r.evidence}
                    for r in restarts
                ],
                "not_comparable": not_comparable,
            },
        )
    ]
