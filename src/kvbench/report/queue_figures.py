"""A queue run's own figures (docs/measurement.md, "Queue runs"), for the one summary.

Pure: computed from a ``RunResult`` with a queue section. **puts/s** is the acknowledged
puts over the produce window (the common start to the last acknowledgement); **gets/s**
this run's messages received (duplicates included) over the consume window (the
consumers' start to the last message). An answer that found the queue empty is neither a
get in gets/s nor an error: it is counted on its own (``empty_polls``, the ``miss``
outcome). ``summarize`` puts these rates into the ``put`` and ``get`` op rows, so the
terminal, the result document, the history, ``export``, ``diff`` and the HTML report give
one figure each.
"""

from __future__ import annotations

from typing import Any, TypedDict

from kvbench.metrics.histogram import HIGHEST_TRACKABLE_NS, Histogram
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.latency import latency_summary, min_samples
from kvbench.report.reconcile import restart_evidence
from kvbench.report.rows import IntervalRow
from kvbench.results.model import RunResult
from kvbench.results.queue import QueueInterval, QueueSection


class ServerRestart(TypedDict):
    """The queue server restarted: its counts from interval ``from_index`` on (None:
    only the sample after the run) are a new process's."""

    from_index: int | None
    evidence: str


class StatsQueue(TypedDict, total=False):
    """The server's ``stats queue`` line for the queue (what it said of these)."""

    enqueued: int
    dequeued: int
    backlog: int


class DataDir(TypedDict):
    """The ``--data-dir`` and its size at the end (None: unreadable)."""

    path: str
    bytes: int | None


class QueuePhase(TypedDict):
    """The run as one phase of the classic experiment (``phase_figures``)."""

    puts: int
    puts_per_s: float
    gets: int
    gets_per_s: float
    duration_s: float
    stats_queue_before: StatsQueue | None
    stats_queue_after: StatsQueue | None
    data_dir: DataDir | None


class ProducerDelivery(TypedDict):
    """One producer's line of the delivery ledger."""

    producer: int
    sent: int
    produced: int
    received: int
    unique: int
    lost: int
    not_received: int
    duplicated: int
    out_of_order: int
    lost_examples: list[int]


class Backlog(TypedDict):
    """The backlog: the client's peak and series, the server's count before and after."""

    peak: int | None
    peak_t_s: float | None
    server_before: int | None
    server_after: int | None
    server_restart: ServerRestart | None
    series: list[list[float]]  # [t_s, backlog]


class QueueFigures(TypedDict):
    """The document's ``queue`` section (``queue_figures``)."""

    name: str | None
    backend: str | None
    pop_command: str | None
    messages_planned: int | None
    message_size_bytes: int | None
    producers_count: int | None
    consumers_count: int | None
    sent: int
    produced: int
    failed_puts: int
    received: int
    unique: int
    lost: int
    unknown_fate: int
    unanswered_gets: int
    late_received: int
    in_flight: int
    left_in_queue: int
    duplicated: int
    out_of_order: int
    unexpected: int
    foreign: int
    empty_polls: int
    puts_per_s: float
    gets_per_s: float
    produce_window_s: float
    consume_window_s: float
    e2e_latency_us: dict[str, float | None]
    e2e_latency_hdr: str | None
    e2e_clipped: int
    e2e_range_us: float
    producers: list[ProducerDelivery]
    consumers: list[dict[str, Any]]  # results/queue.py's, as stored
    drained: bool
    stop_reason: str
    carried_producers: int
    phase: QueuePhase
    backlog: Backlog


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _per_s(count: float, window_s: float) -> float:
    return count / window_s if window_s > 0 else 0.0


def _section(run: RunResult) -> QueueSection:
    assert run.queue is not None, "a queue run's figures need its queue section"
    return run.queue


def produce_window_s(run: RunResult) -> float:
    """From the common start to the last put acknowledgement."""
    return max(0, _section(run).produce_end_ns - run.window_start_ns) / 1e9


def consume_window_s(run: RunResult) -> float:
    """From the consumers' start to the last message received."""
    queue = _section(run)
    if queue.consume_start_ns is None:
        return 0.0
    return max(0, queue.consume_end_ns - queue.consume_start_ns) / 1e9


def op_bases(run: RunResult) -> dict[str, tuple[int, float]]:
    """Op -> (what its throughput counts, over which window): ``put`` the acknowledged
    puts over the produce window, ``get`` the messages received over the consume window
    (this run's: a phase of a preset shares its ledger with the phases before it)."""
    queue = _section(run)
    return {
        "put": (queue.own_produced(), produce_window_s(run)),
        "get": (queue.own_received(), consume_window_s(run)),
    }


def server_restart(server: dict[str, Any]) -> ServerRestart | None:
    """The first restart of the queue server between its samples (before, every
    interval's, after): ``{"from_index", "evidence"}``, the server's counts from the sample
    of interval ``from_index`` on (None: only the one after the run) being a new process's.
    """
    samples: list[tuple[int | None, dict[str, Any] | None]] = [(-1, server.get("before"))]
    samples += [(int(s.get("index", 0)), s) for s in server.get("intervals", [])]
    samples.append((None, server.get("after")))
    previous: dict[str, Any] | None = None
    for index, sample in samples:
        if not sample:
            continue
        evidence = restart_evidence(previous, sample) if previous is not None else None
        if evidence is not None:
            return {"from_index": index, "evidence": evidence}
        previous = sample
    return None


def _e2e_point(hist: Histogram | None) -> tuple[float | None, float | None]:
    """An interval's end-to-end p50 and p99 in µs (None where samples are too few)."""
    if hist is None or not hist.total_count:
        return None, None
    pct = {p: min(v, hist.max_ns) for p, v in hist.percentiles([50.0, 99.0]).items()}
    p99 = pct[99.0] / 1000 if hist.total_count >= min_samples(99) else None
    return pct[50.0] / 1000, p99


def interval_fields(
    row: IntervalRow,
    snap: IntervalSnapshot,
    record: QueueInterval | None,
    restart: ServerRestart | None,
) -> None:
    """Add to ``row`` what a queue run's interval adds (and change its ``per_s``: an
    empty answer is no get)."""
    length_s = max(1e-9, (snap.end_ns - snap.start_ns) / 1e9)
    puts = snap.counts.get("put", {}).get("stored", 0)
    messages = snap.counts.get("get", {}).get("hit", 0)
    server_backlog = record.server_backlog if record is not None else None
    restarted_from = restart["from_index"] if restart is not None else None
    if restarted_from is not None and snap.index >= restarted_from:
        server_backlog = None  # a new process's counts: its enqueued - dequeued is no backlog
    p50, p99 = _e2e_point(record.e2e if record is not None else None)
    row["puts"] = puts
    row["messages"] = messages
    row["empties"] = snap.counts.get("get", {}).get("miss", 0)
    row["puts_per_s"] = puts / length_s
    row["gets_per_s"] = messages / length_s
    row["per_s"] = (puts + messages) / length_s
    row["backlog"] = record.backlog if record is not None else None
    row["server_backlog"] = server_backlog
    row["e2e_p50_us"] = p50
    row["e2e_p99_us"] = p99
    row["e2e_clipped"] = record.e2e.out_of_range if record is not None and record.e2e else 0


def phase_figures(run: RunResult) -> QueuePhase:
    """The run as one phase of the classic experiment, in its units: puts (answered
    stored) and gets (messages dequeued, of any run) over the phase's duration (its
    start to the last put acknowledged or message received, the run's window), each rate
    that count over that duration; the server's ``stats queue`` for the queue before and
    after, and the ``--data-dir`` size at the end (None: not asked)."""
    total = run.total()
    counts = total.counts if total is not None else {}
    puts = counts.get("put", {}).get("stored", 0)
    gets = counts.get("get", {}).get("hit", 0)
    # The rates are computed from the duration as given (to the microsecond), so they
    # are recomputable from the document's own figures.
    duration_s = round(max(0, run.window_end_ns - run.window_start_ns) / 1e9, 6)
    return {
        "puts": puts,
        "puts_per_s": round(_per_s(puts, duration_s), 1),
        "gets": gets,
        "gets_per_s": round(_per_s(gets, duration_s), 1),
        "duration_s": duration_s,
        "stats_queue_before": _stats_queue(run.server.get("before")),
        "stats_queue_after": _stats_queue(run.server.get("after")),
        "data_dir": run.server.get("data_dir"),
    }


def _stats_queue(sample: dict[str, Any] | None) -> StatsQueue | None:
    """The queue's ``stats queue`` line (enqueued/dequeued) and the backlog they give."""
    if not sample:
        return None
    line = StatsQueue()
    if "enqueued" in sample:
        line["enqueued"] = sample["enqueued"]
    if "dequeued" in sample:
        line["dequeued"] = sample["dequeued"]
    if "backlog" in sample:
        line["backlog"] = sample["backlog"]
    return line


def queue_figures(run: RunResult) -> QueueFigures:
    """The document's ``queue`` section: every figure a queue run has beyond its ops."""
    queue = _section(run)
    delivery = queue.delivery
    totals = delivery.totals()
    config = run.config
    restart = server_restart(run.server)
    e2e = queue.e2e_total()
    bases = op_bases(run)
    start_ns = run.window_start_ns
    # A write-only run reads nothing: what it stored is left for a drain to judge.
    write_only = config.get("consumers") == 0
    left = totals["produced"] - totals["unique"] if write_only else 0
    lost, unknown, in_flight = (0, 0, 0) if write_only else queue.fates()
    # A producer's own count of lost ones only when no message's fate is in doubt; else
    # its acknowledged messages not received (``not_received``) say how many were missing.
    rows_lost = not write_only and queue.drained and not unknown
    return {
        "name": config.get("queue"),
        "backend": config.get("backend"),
        "pop_command": config.get("pop_command"),
        "messages_planned": config.get("messages"),
        "message_size_bytes": config.get("message_size_bytes"),
        "producers_count": config.get("producers"),
        "consumers_count": config.get("consumers"),
        "sent": totals["sent"],
        "produced": totals["produced"],
        "failed_puts": totals["sent"] - totals["produced"],
        "received": totals["received"],
        "unique": totals["unique"],
        "lost": lost,
        "unknown_fate": unknown,
        "unanswered_gets": queue.unknown_fate,
        "late_received": queue.late_received,
        "in_flight": in_flight,
        "left_in_queue": left,
        "duplicated": totals["duplicated"],
        "out_of_order": totals["out_of_order"],
        "unexpected": delivery.unexpected,
        "foreign": queue.foreign,
        "empty_polls": queue.empties,
        "puts_per_s": round(_per_s(*bases["put"]), 1),
        "gets_per_s": round(_per_s(*bases["get"]), 1),
        "produce_window_s": round(bases["put"][1], 6),
        "consume_window_s": round(bases["get"][1], 6),
        "e2e_latency_us": {k: _round(v) for k, v in latency_summary(e2e).items()},
        "e2e_latency_hdr": e2e.encode_base64() if e2e is not None else None,
        # ages beyond the histogram's range (60 s), recorded at its top: said, not hidden
        "e2e_clipped": e2e.out_of_range if e2e is not None else 0,
        "e2e_range_us": HIGHEST_TRACKABLE_NS / 1000,
        "producers": [
            {
                "producer": row.producer,
                "sent": row.sent,
                "produced": row.produced,
                "received": row.received,
                "unique": row.unique,
                "lost": row.lost if rows_lost else 0,
                "not_received": 0 if write_only else row.lost,
                "duplicated": row.duplicated,
                "out_of_order": row.out_of_order,
                "lost_examples": list(row.lost_examples),
            }
            for row in delivery.producers
        ],
        "consumers": queue.consumers,
        "drained": queue.drained,
        "stop_reason": queue.stop_reason,
        "carried_producers": queue.carried_producers,
        "phase": phase_figures(run),
        "backlog": {
            "peak": queue.backlog_peak,
            "peak_t_s": None
            if queue.backlog_peak_ns is None
            else round((queue.backlog_peak_ns - start_ns) / 1e9, 3),
            "server_before": (run.server.get("before") or {}).get("backlog"),
            "server_after": None
            if restart is not None
            else (run.server.get("after") or {}).get("backlog"),
            "server_restart": restart,
            "series": [[round(t, 3), n] for t, n in queue.backlog_series],
        },
    }
