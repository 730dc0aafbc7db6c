"""The queue run's report: its result document, verdicts and terminal rendering.

``queue_document`` is a pure function of a ``QueueRunResult``; the terminal summary is a
pure function of that document, so a stored queue run prints the same as a fresh one.
Every figure is defined in docs/measurement.md ("Queue runs").
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from kvbench.metrics.histogram import Histogram
from kvbench.report.reconcile import restart_evidence
from kvbench.report.summary import PERCENTILES, latency_summary, min_samples
from kvbench.report.terminal import fmt_us
from kvbench.results.model import SCHEMA_VERSION
from kvbench.results.queue import QueueIntervalRecord, QueueRunResult
from kvbench.results.status import judge, tally
from kvbench.units import format_rate

_LEVEL_STYLE = {"info": "cyan", "warning": "yellow", "error": "bold red"}
# A worker busier than this share of one core may have been the bottleneck (as for runs).
CPU_SATURATED = 0.9
_ERROR_OUTCOMES = ("error_reply", "timeout", "conn_error")
# A dequeue's outcomes in queue words: a hit brought a message, a miss found it empty.
_GET_LABELS = {"hit": "message", "miss": "empty"}


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _latency(hist: Histogram | None) -> dict[str, float | None]:
    return {k: _round(v) for k, v in latency_summary(hist).items()}


def _per_s(count: int, window_s: float) -> float:
    return round(count / window_s, 1) if window_s > 0 else 0.0


def queue_interval_row(record: QueueIntervalRecord, origin_ns: int) -> dict[str, Any]:
    """One merged interval as a document row (and live line)."""
    snap = record.snapshot
    length_s = max(1e-9, (snap.end_ns - snap.start_ns) / 1e9)
    counts = snap.counts
    row: dict[str, Any] = {
        "t_s": round((snap.end_ns - origin_ns) / 1e9, 3),
        "length_s": round(length_s, 3),
        "puts": counts.get("put", {}).get("stored", 0),
        "messages": counts.get("get", {}).get("hit", 0),
        "empties": counts.get("get", {}).get("miss", 0),
        "errors": snap.errors(),
        "backlog": record.backlog,
        "server_backlog": record.server_backlog,
        "cpu_s": round(snap.stats.get("cpu_ns", 0) / 1e9, 4),
        "reconnects": int(snap.stats.get("reconnects", 0)),
    }
    row["puts_per_s"] = round(row["puts"] / length_s, 1)
    row["gets_per_s"] = round(row["messages"] / length_s, 1)
    e2e = record.e2e
    pct = e2e.percentiles([50.0, 99.0]) if e2e is not None and e2e.total_count else {}
    row["e2e_p50_us"] = _round(pct[50.0] / 1000) if pct else None
    enough = e2e is not None and e2e.total_count >= min_samples(99)
    row["e2e_p99_us"] = _round(pct[99.0] / 1000) if pct and enough else None
    return row


def queue_live_line(row: dict[str, Any]) -> str:
    """``[  1.0s] put 52.1k/s  get 50.3k/s  e2e p50 1.20ms p99 4.10ms  backlog 1,234 ...``."""
    parts = [
        f"[{row['t_s']:>6.1f}s]",
        f"put {format_rate(row['puts_per_s'])}/s",
        f"get {format_rate(row['gets_per_s'])}/s",
        f"e2e p50 {fmt_us(row['e2e_p50_us'])} p99 {fmt_us(row['e2e_p99_us'])}",
        f"backlog {row['backlog']:,}",
    ]
    if row.get("server_backlog") is not None:
        parts.append(f"(server {row['server_backlog']:,})")
    parts.append(f"empty {row['empties']:,}")
    parts.append(f"err {row['errors']}")
    if row["length_s"]:
        parts.append(f"cpu {row['cpu_s'] / row['length_s']:.0%}")
    if row.get("reconnects"):
        parts.append(f"reconnects {row['reconnects']}")
    return "  ".join(parts)


def server_restart(server: dict[str, Any]) -> dict[str, Any] | None:
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


def _server_backlogs(
    rows: list[dict[str, Any]], records: list[QueueIntervalRecord], restart: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The rows, without the server's backlog from a restart on (its counts started again:
    ``enqueued - dequeued`` of the new process is not the queue's length)."""
    if restart is None:
        return rows
    start = restart["from_index"]
    for row, record in zip(rows, records, strict=True):
        if start is not None and record.snapshot.index >= start:
            row["server_backlog"] = None
    return rows


def queue_document(result: QueueRunResult) -> dict[str, Any]:
    """The result document of a queue run (docs/measurement.md, "Queue runs")."""
    snapshots = [r.snapshot for r in result.intervals]
    counts: dict[str, dict[str, int]] = {}
    latency: dict[str, Histogram] = {}
    for snap in snapshots:
        for op, outcomes in snap.counts.items():
            into = counts.setdefault(op, {})
            for name, n in outcomes.items():
                into[name] = into.get(name, 0) + n
        for op, hist in snap.latency.items():
            latency.setdefault(op, Histogram()).merge(hist)
    e2e_parts = [r.e2e for r in result.intervals if r.e2e is not None]
    e2e = Histogram.merged(e2e_parts) if e2e_parts else None
    delivery = result.delivery
    totals = delivery.totals()
    window_s = max(0, result.end_ns - result.start_ns) / 1e9
    messages = totals["received"]
    ops: dict[str, dict[str, Any]] = {}
    for op in ("put", "get"):
        outcomes = counts.get(op, {})
        count = sum(outcomes.values())
        ops[op] = {
            "count": count,
            "throughput_per_s": _per_s(count, window_s),
            "outcomes": dict(sorted(outcomes.items())),
            "errors": sum(outcomes.get(name, 0) for name in _ERROR_OUTCOMES),
            "latency_us": _latency(latency.get(op)),
        }
    config = result.config
    restart = server_restart(result.server)
    queue = {
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
        "received": messages,
        "unique": totals["unique"],
        "lost": totals["lost"],
        "duplicated": totals["duplicated"],
        "out_of_order": totals["out_of_order"],
        "unexpected": delivery.unexpected,
        "foreign": result.foreign,
        "empty_polls": result.empties,
        "puts_per_s": _per_s(totals["produced"], result.produce_window_s),
        "gets_per_s": _per_s(messages, result.consume_window_s),
        "produce_window_s": round(result.produce_window_s, 6),
        "consume_window_s": round(result.consume_window_s, 6),
        "e2e_latency_us": _latency(e2e),
        "e2e_latency_hdr": e2e.encode_base64() if e2e is not None else None,
        "producers": [
            {
                "producer": row.producer,
                "sent": row.sent,
                "produced": row.produced,
                "received": row.received,
                "unique": row.unique,
                "lost": row.lost,
                "duplicated": row.duplicated,
                "out_of_order": row.out_of_order,
                "lost_examples": list(row.lost_examples),
            }
            for row in delivery.producers
        ],
        "consumers": result.consumers,
        "drained": result.drained,
        "stop_reason": result.stop_reason,
        "backlog": {
            "peak": result.backlog_peak,
            "peak_t_s": None
            if result.backlog_peak_ns is None
            else round((result.backlog_peak_ns - result.start_ns) / 1e9, 3),
            "server_before": (result.server.get("before") or {}).get("backlog"),
            "server_after": None
            if restart is not None
            else (result.server.get("after") or {}).get("backlog"),
            "server_restart": restart,
            "series": [[round(t, 3), n] for t, n in result.backlog_series],
        },
    }
    status = judge(result.status, tally(None), None, delivery_problem(queue))
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kvbench_version": result.kvbench_version,
        "run_id": result.run_id,
        "started_at": result.started_at,
        "status": status.name,
        "status_reasons": list(status.reasons),
        "process_status": result.status,
        "mode": "queue",
        "targets": result.targets,
        "config": config,
        "window_s": round(window_s, 6),
        "totals": {
            "ops": ops["put"]["count"] + ops["get"]["count"],
            "throughput_per_s": _per_s(messages, window_s),
            "errors": ops["put"]["errors"] + ops["get"]["errors"],
        },
        "ops": ops,
        "queue": queue,
        "intervals": _server_backlogs(
            [queue_interval_row(r, result.start_ns) for r in result.intervals],
            result.intervals,
            restart,
        ),
        "workers": result.workers,
        "server": result.server,
        "environment": result.environment,
        "errors": result.errors,
    }
    document["verdicts"] = queue_verdicts(document)
    return document


def delivery_problem(queue: dict[str, Any]) -> str | None:
    """Duplicated messages, or lost ones in a run that drained the queue, in words; None
    when delivery was right. Messages not received when a limit or Ctrl-C ended the run
    may still be queued: not a failure."""
    problems = []
    if queue["lost"] and queue["drained"]:
        problems.append(f"{queue['lost']:,} acknowledged messages were never received")
    if queue["duplicated"]:
        problems.append(f"{queue['duplicated']:,} messages were received twice or more")
    return "; ".join(problems) or None


def queue_verdicts(document: dict[str, Any]) -> list[dict[str, Any]]:
    """What the figures say about the run, each with its evidence."""
    queue = document["queue"]
    verdicts: list[dict[str, Any]] = []

    def add(id_: str, level: str, message: str, **evidence: Any) -> None:
        verdicts.append({"id": id_, "level": level, "message": message, "evidence": evidence})

    if not queue["drained"]:
        add(
            "queue.not_drained",
            "warning",
            f"the run ended before the queue was drained ({queue['stop_reason'] or document['process_status']}): "
            "'lost' includes messages that may still be in the queue",
            server_backlog_after=queue["backlog"]["server_after"],
        )
    if queue["lost"]:
        by_producer = {p["producer"]: p["lost"] for p in queue["producers"] if p["lost"]}
        if queue["drained"]:
            message = f"{queue['lost']:,} acknowledged messages were never received"
        else:
            message = f"{queue['lost']:,} acknowledged messages were not received before the end"
        add(
            "delivery.lost",
            "error" if queue["drained"] else "warning",
            message,
            by_producer=by_producer,
        )
    if queue["duplicated"]:
        add(
            "delivery.duplicated",
            "error",
            f"{queue['duplicated']:,} messages were received twice or more",
        )
    if queue["out_of_order"]:
        add(
            "delivery.out_of_order",
            "warning",
            f"{queue['out_of_order']:,} messages arrived at a consumer after a later one of the same producer",
        )
    if queue["unexpected"]:
        add(
            "delivery.unexpected",
            "error",
            f"{queue['unexpected']:,} messages of this run named a producer or sequence number never sent",
        )
    if queue["foreign"]:
        add(
            "queue.foreign",
            "warning",
            f"{queue['foreign']:,} messages dequeued were not this run's (left in the queue before, or another client)",
        )
    restart = queue["backlog"]["server_restart"]
    if restart is not None:
        add(
            "queue.server_restarted",
            "warning",
            f"the queue server restarted during the run ({restart['evidence']}): its queue "
            "counts started again, so its backlog is not shown from then on",
            **restart,
        )
    if queue["failed_puts"]:
        add(
            "queue.failed_puts",
            "warning",
            f"{queue['failed_puts']:,} puts were not acknowledged (error reply, timeout or broken connection); "
            "they are not counted lost",
        )
    errors = document["totals"]["errors"]
    if errors:
        add(
            "errors",
            "warning",
            f"{errors:,} requests failed",
            by_op={k: v["errors"] for k, v in document["ops"].items()},
        )
    for worker in document["workers"]:
        cpu, active = worker.get("cpu_s"), worker.get("active_s")
        if cpu and active and cpu / active > CPU_SATURATED:
            add(
                "client.cpu",
                "warning",
                f"{worker['role']} {worker['index']} used {cpu / active:.0%} of a core: "
                "the client may have been the bottleneck",
                cpu_s=cpu,
                active_s=active,
            )
    if document["process_status"] != "ok":
        causes = "; ".join(document["errors"][:3])
        add(
            "run.incomplete",
            "warning",
            f"the run is {document['process_status']}" + (f": {causes}" if causes else ""),
        )
    else:  # problems a worker survived (protocol errors, failed reconnects), as for runs
        for message in document["errors"]:
            add("run.error", "warning", message)
    return verdicts


# -- terminal ---------------------------------------------------------------------------


def _latency_table(document: dict[str, Any]) -> Table:
    queue = document["queue"]
    table = Table(
        title=f"kvbench queue {document['run_id']}  {', '.join(t['url'] for t in document['targets'])}  "
        f"({document['window_s']:.2f}s, {document['status']})",
        title_justify="left",
    )
    for name in ("", "count", "per s"):
        table.add_column(name, justify="left" if not name else "right")
    for name, _ in PERCENTILES:
        table.add_column(name.replace("_", "."), justify="right")
    table.add_column("max", justify="right")
    table.add_column("mean", justify="right")
    rows = (
        (
            "put (request)",
            document["ops"]["put"]["count"],
            queue["puts_per_s"],
            document["ops"]["put"]["latency_us"],
        ),
        (
            "get (request)",
            document["ops"]["get"]["count"],
            None,
            document["ops"]["get"]["latency_us"],
        ),
        ("end to end", queue["received"], queue["gets_per_s"], queue["e2e_latency_us"]),
    )
    for label, count, rate, lat in rows:
        table.add_row(
            label,
            f"{count:,}",
            "" if rate is None else format_rate(rate),
            *(fmt_us(lat[name]) for name, _ in PERCENTILES),
            fmt_us(lat["max"]),
            fmt_us(lat["mean"]),
        )
    return table


def _delivery_table(queue: dict[str, Any]) -> Table:
    table = Table(title="delivery per producer", title_justify="left")
    for name in ("producer", "sent", "stored", "received", "lost", "duplicated", "out of order"):
        table.add_column(name, justify="right")
    for p in queue["producers"]:
        table.add_row(
            str(p["producer"]),
            f"{p['sent']:,}",
            f"{p['produced']:,}",
            f"{p['received']:,}",
            f"{p['lost']:,}",
            f"{p['duplicated']:,}",
            f"{p['out_of_order']:,}",
        )
    return table


def _lines(document: dict[str, Any]) -> Text:
    queue = document["queue"]
    text = Text()
    text.append(
        f"puts {format_rate(queue['puts_per_s'])}/s over {queue['produce_window_s']:.2f}s; "
        f"gets {format_rate(queue['gets_per_s'])}/s over {queue['consume_window_s']:.2f}s "
        f"({queue['pop_command']}; {queue['empty_polls']:,} found the queue empty)\n"
    )
    backlog = queue["backlog"]
    server = ""
    if backlog["server_after"] is not None:
        server = f"; the server's count: {backlog['server_before']:,} before, {backlog['server_after']:,} after"
    peak_at = f" at {backlog['peak_t_s']:.2f}s" if backlog["peak_t_s"] is not None else ""
    text.append(f"backlog peak {backlog['peak']:,}{peak_at}{server}\n")
    text.append(
        f"delivery: {queue['produced']:,} stored, {queue['unique']:,} received, lost {queue['lost']:,}, "
        f"duplicated {queue['duplicated']:,}, out of order {queue['out_of_order']:,}"
        + (f", foreign {queue['foreign']:,}" if queue["foreign"] else "")
        + (f", unexpected {queue['unexpected']:,}" if queue["unexpected"] else "")
        + f"  ({queue['stop_reason']})\n",
        style="" if not (queue["lost"] or queue["duplicated"]) else "bold red",
    )
    for name, op in document["ops"].items():
        labels = _GET_LABELS if name == "get" else {}
        outcomes = "  ".join(f"{labels.get(k, k)} {v:,}" for k, v in op["outcomes"].items())
        text.append(f"{name}: {outcomes}\n")
    return text


def queue_summary(document: dict[str, Any]) -> RenderableType:
    """The end-of-run summary of a queue run, from its document."""
    parts: list[RenderableType] = [
        _latency_table(document),
        _delivery_table(document["queue"]),
        _lines(document),
    ]
    if document["verdicts"]:
        text = Text()
        for verdict in document["verdicts"]:
            text.append(f"{verdict['level']}: ", style=_LEVEL_STYLE.get(verdict["level"], ""))
            text.append(f"{verdict['message']}\n")
        parts.append(text)
    status = Text(
        f"status: {document['status']}", style="" if document["status"] == "ok" else "bold red"
    )
    if document.get("status_reasons"):
        status.append(" - " + "; ".join(document["status_reasons"]))
    parts.append(status)
    return Group(*parts)


def print_queue_summary(console: Console, document: dict[str, Any]) -> None:
    console.print(queue_summary(document))
