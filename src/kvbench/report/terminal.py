"""Terminal output: the live line per interval and the summary (rich renderables).

Everything is printed to an injected ``Console`` so tests capture it; the figures come
from ``summary`` and nothing here computes a statistic of its own. A queue run's summary
has its own table (put and get requests, end to end), the delivery ledger per producer and
the backlog, from the same model; a replay's adds the trace's profile and what was sent.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from kvbench.metrics.histogram import HIGHEST_TRACKABLE_NS
from kvbench.metrics.outcome import NOTE_OUTCOMES, OUTCOME_NAMES, REDIRECT_OUTCOMES
from kvbench.report.fit import FittedTable
from kvbench.report.latency import PERCENTILES
from kvbench.report.queue_figures import QueueFigures, QueuePhase
from kvbench.report.rows import IntervalRow, NetworkFigures
from kvbench.report.stats import MIN_CI_SAMPLES, Spread
from kvbench.report.summary import ReportModel
from kvbench.results.status import format_error_rate
from kvbench.units import format_byte_rate, format_rate, format_us

_LEVEL_STYLE = {"info": "cyan", "warning": "yellow", "error": "bold red"}
_STATUS_STYLE = {"ok": "green", "failed": "bold red", "partial": "yellow", "interrupted": "yellow"}
# From this many connections asked, the summary says how many were live even when all were.
MANY_CONNECTIONS = 1000


def fmt_us(value_us: float | None) -> str:
    """A latency in microseconds for a table cell; ``n/a`` when there are too few samples."""
    return "n/a" if value_us is None else format_us(value_us)


def whole_rate(per_s: float) -> str:
    """A live rate as whole ops per second, exact: ``10,843`` (not ``10.8k``), so the
    seconds of a run add up to its ``total``."""
    return f"{round(per_s):,}"


def live_line(row: IntervalRow, width: int | None = None) -> str:
    """One interval as one line: total rate, then rate / p50 / p99 per op, errors, CPU.

    Rates are exact whole ops per second. At ``width`` (a terminal's columns) the per-op
    parts collapse into the total when the line would not fit, and a line still too long
    breaks between its parts, never inside a figure."""
    head = [f"[{row['t_s']:>6.1f}s] {whole_rate(row['per_s']):>7} ops/s"]
    if (offered := row.get("offered_per_s")) is not None:
        head.append(f"(offered {whole_rate(offered)}/s)")
    per_op = [
        f"{op} {whole_rate(vals['per_s'])}/s p50 {fmt_us(vals['p50_us'])} "
        f"p99 {fmt_us(vals['p99_us'])}"
        for op, vals in sorted(row["ops"].items())
    ]
    tail = []
    if "total" in row:  # so far in this round, and ops so far / time so far
        tail.append(f"total {row['total']:,} avg {whole_rate(row['avg_per_s'])}/s")
    tail.append(f"err {row['errors']}")
    if (late := row.get("late")) is not None:  # open loop: sent behind their slots
        tail.append(f"late {late:,}")
    if row.get("length_s"):
        tail.append(f"cpu {row['cpu_s'] / row['length_s']:.0%}")
    if row.get("reconnects"):
        tail.append(f"reconnects {row['reconnects']}")
    redirects = row.get("redirects")
    if redirects and any(redirects.values()):  # a Redis Cluster's slots moved in this interval
        tail.append(f"moved {redirects['moved']} ask {redirects['ask']}")
    live, asked = row.get("connections_live"), row.get("connections_asked")
    if live is not None and asked and live < asked:
        tail.append(f"live conns {live}/{asked}")
    line = "  ".join(head + per_op + tail)
    if width is None or len(line) <= width:
        return line
    return _break_between(head + tail, width)


def _break_between(parts: list[str], width: int) -> str:
    """``parts`` joined by two spaces, on as few lines of ``width`` as they fit (the
    next ones indented by two), broken between parts."""
    lines: list[list[str]] = [[]]
    for part in parts:
        indent = 2 if len(lines) > 1 else 0
        if lines[-1] and indent + len("  ".join([*lines[-1], part])) > width:
            lines.append([])
        lines[-1].append(part)
    return "\n  ".join("  ".join(line) for line in lines)


class ItemLine:
    """A head and its items, two spaces apart, on one line; with ``wrap`` and a narrower
    console, on as many lines as they need, broken only between items (an item is one
    thing and its figures: a server and its share, a counter and its two counts, which a
    break between words put on two lines)."""

    def __init__(self, head: str, items: list[str], style: str = "", wrap: bool = False):
        self.head, self.items, self.style, self.wrap = head, items, style, wrap

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = f"{self.head} " + "  ".join(self.items)
        if not self.wrap:
            yield Text(line, style=self.style)
            return
        width = options.max_width
        if len(line) > width and self.items:
            first = f"{self.head} {self.items[0]}"  # (the head alone, if they do not fit)
            parts = [first] if len(first) <= width else [self.head, self.items[0]]
            line = _break_between([*parts, *self.items[1:]], width)
        yield Text(line, style=self.style, no_wrap=False, overflow="fold")


def interval_ops(row: IntervalRow) -> int:
    """The ops that succeeded in the interval (what the row's ``total`` adds up; errors
    are the line's ``err``, not throughput)."""
    return sum(int(vals["succeeded"]) for vals in row["ops"].values())


def unit_rates(row: IntervalRow) -> tuple[int, int, int]:
    """The interval's rate per second (whole ops), per minute and per hour: 60 and 3600
    times the per-second figure as printed, so each is recomputable from the line."""
    per_s = round(interval_ops(row) / row["length_s"]) if row["length_s"] else 0
    return per_s, 60 * per_s, 3600 * per_s


def unit_rates_line(row: IntervalRow) -> str:
    """One interval as the single-key-readers original reported it: time since the
    warm-up ended, the interval's ops and the run's so far, the rate per s, min and hour."""
    per_s, per_min, per_h = unit_rates(row)
    parts = [
        f"[{row['t_s']:>6.1f}s]",
        f"ops {interval_ops(row):,}",
        f"total {row['total']:,}",
        f"per s {per_s:,}",
        f"per min {per_min:,}",
        f"per hour {per_h:,}",
        f"err {row['errors']}",
    ]
    return "  ".join(parts)


def unit_rates_sentence(axis: str, level: float, per_s: float) -> str:
    """A level's throughput in the single-key-readers original's units: ``connections 2:
    11,318 ops per s = 679,080 per min = 40,744,800 per hour`` (60 and 3600 x the whole
    per-second figure printed)."""
    whole = round(per_s)
    return (
        f"{axis} {level:g}: {whole:,} ops per s = {60 * whole:,} per min = "
        f"{3600 * whole:,} per hour"
    )


# The summary's columns, the most wanted first: a narrow terminal shows those that fit.
SUMMARY_PRIORITY = (
    "op", "ops/s", "errors", "p50", "p99", "p90", "p99.9", "p99.99", "max", "mean", "hit %",
    "ops", "TX", "RX",
)  # fmt: skip


def summary_table(model: ReportModel, wide: bool = False) -> Table:
    """Per-op throughput, outcomes and latency percentiles, and a total row.

    No figure is folded or cut: at a narrow width the columns that fit are shown, by
    ``SUMMARY_PRIORITY``, and a line names the rest (``wide``: every column).
    """
    run = model.run
    table = FittedTable(
        title=f"kvbench {run.run_id}  {', '.join(t['url'] for t in run.targets)}  "
        f"({run.window_s:.2f}s window, {model.status.name})",
        title_justify="left",
        priority=SUMMARY_PRIORITY,
        wide=wide,
        see=f"--wide, the JSON (--json), or kvbench show {run.run_id} --wide",
    )
    table.add_column("op")
    table.add_column("ops", justify="right")
    table.add_column("ops/s", justify="right")  # successes only
    table.add_column("hit %", justify="right")
    table.add_column("errors", justify="right")
    for name, _ in PERCENTILES:
        table.add_column(name.replace("_", "."), justify="right")
    table.add_column("max", justify="right")
    table.add_column("mean", justify="right")
    # Bytes sent and received per second, when the workers counted them (the network line
    # says it in total; the compiled driver splits them by op, the Python one does not).
    network = model.network is not None
    if network:
        table.add_column("TX", justify="right", no_wrap=True)  # a figure and its unit
        table.add_column("RX", justify="right", no_wrap=True)
    for row in model.ops:
        table.add_row(
            row.op,
            f"{row.count:,}",
            f"{row.throughput_per_s:,.0f}",
            "" if row.hit_ratio is None else f"{row.hit_ratio:.1%}",
            f"{row.errors:,}",
            *(fmt_us(row.latency_us[name]) for name, _ in PERCENTILES),
            fmt_us(row.latency_us["max"]),
            fmt_us(row.latency_us["mean"]),
            *(byte_rates(row.network) if network else ()),
        )
        if row.service_time_us is not None:
            table.add_row(
                f"{row.op} service",
                "",
                "",
                "",
                "",
                *(fmt_us(row.service_time_us[name]) for name, _ in PERCENTILES),
                fmt_us(row.service_time_us["max"]),
                fmt_us(row.service_time_us["mean"]),
                *(("", "") if network else ()),
                style="dim",
            )
    if len(model.ops) > 1:
        table.add_row(
            "total",
            f"{model.total_ops:,}",
            f"{model.throughput_per_s:,.0f}",
            "",
            f"{model.total_errors:,}",
            *(fmt_us(model.latency_us[name]) for name, _ in PERCENTILES),
            fmt_us(model.latency_us["max"]),
            fmt_us(model.latency_us["mean"]),
            *(byte_rates(model.network) if network else ()),
            style="bold",
        )
    return table


def byte_rates(network: NetworkFigures | None) -> tuple[str, str]:
    """The TX and RX cells: bytes sent and received per second (blank: not counted)."""
    if network is None:
        return "", ""
    return format_byte_rate(network["out_per_s"]), format_byte_rate(network["in_per_s"])


# Counted beside an op's outcome, never as one: a late request also ended hit or miss, a
# redirected one ended where it was sent. Shown apart, so an op's outcomes add up to it.
_NOTED = frozenset(OUTCOME_NAMES[int(o)] for o in NOTE_OUTCOMES | REDIRECT_OUTCOMES)


def outcome_counts(outcomes: dict[str, int], labels: dict[str, str] | None = None) -> str:
    """``hit 26,951  miss 14,229; noted: late 3,862``: the outcomes (they sum to the op's
    count), then the notes on some of them."""
    labels = labels or {}
    ends = "  ".join(f"{labels.get(k, k)} {n:,}" for k, n in outcomes.items() if k not in _NOTED)
    notes = "  ".join(f"{k} {n:,}" for k, n in outcomes.items() if k in _NOTED)
    return f"{ends}; noted: {notes}" if notes else ends


def outcome_lines(model: ReportModel) -> Text:
    """``get: hit 90,112  miss 9,888`` per op; multi-gets add their keys and keys/s."""
    text = Text()
    for row in model.ops:
        counts = outcome_counts(row.outcomes)
        if row.op == "mget" and row.keys:
            counts += f"  ({row.keys:,} keys, {format_rate(row.keys_per_s)} keys/s)"
        text.append(f"{row.op}: {counts}\n")
    for name, phase in model.phases.items():
        text.append(
            f"{name} (not in the figures): {phase['ops']:,} ops, {phase['errors']:,} errors\n",
            style="dim",
        )
    return text


def network_line(model: ReportModel) -> Text:
    """``network: received 12.3 MB/s (123,456,789 B), sent ... over the 10.00s window``:
    the bytes on the wire, each rate recomputable from the bytes and the window."""
    net = model.network
    if not net:
        return Text()
    return Text(
        f"network: received {format_byte_rate(net['in_per_s'])} ({int(net['bytes_in']):,} B), "
        f"sent {format_byte_rate(net['out_per_s'])} ({int(net['bytes_out']):,} B) over the "
        f"{model.run.window_s:.2f}s window\n"
    )


def round_lines(model: ReportModel) -> Text:
    """Per-round throughput and its spread, when there was more than one round.

    Whole ops per second, as the live lines (``10,843``, not ``10.8k``): the rounds a
    user adds up give the mean printed beside them (to within rounding)."""
    text = Text()
    if len(model.rounds) < 2:
        return text
    rates = "  ".join(whole_rate(r["throughput_per_s"]) for r in model.rounds)
    text.append(f"rounds: {rates} ops/s\n")
    s = model.throughput_spread()
    if s is not None:
        ci = ", " + ci_text(s)
        text.append(
            f"throughput over {s.n} rounds: mean {whole_rate(s.mean)} ops/s, "
            f"stddev {whole_rate(s.stddev)}, min {whole_rate(s.minimum)}, "
            f"max {whole_rate(s.maximum)}{ci}\n"
        )
    return text


def ci_text(s: Spread) -> str:
    """``95% CI 180,212 .. 196,104`` (a bound clamped at 0 says so), or why there is none."""
    if s.ci95 is None:
        return f"95% CI needs {MIN_CI_SAMPLES} rounds"
    low = "0 (clamped)" if s.clamped else whole_rate(s.ci95[0])
    return f"95% CI {low} .. {whole_rate(s.ci95[1])}"


def status_lines(model: ReportModel) -> Text:
    """The errors (count, rate, share) and the run's status with its reasons."""
    text = Text()
    counts = model.tally
    if counts.errors:
        text.append(
            f"errors: {counts.errors:,} ({format_rate(model.errors_per_s)}/s, "
            f"{format_error_rate(counts.error_rate)} of {counts.attempted:,} ops)\n"
        )
    status = model.status
    text.append(f"status: {status.name}", style=_STATUS_STYLE.get(status.name, ""))
    if status.reasons:
        text.append(" - " + "; ".join(status.reasons))
    text.append("\n")
    return text


def reconciliation_lines(model: ReportModel, wrap: bool = False) -> list[RenderableType]:
    """Client vs server counts, each counter an item (``ItemLine``); the server's CPU."""
    text = Text()
    lines: list[RenderableType] = [text]
    if model.server_restarts:
        restarts = "; ".join(r.describe() for r in model.server_restarts)
        text.append(
            f"server counters vs client: not comparable, the server restarted ({restarts})\n",
            style="yellow",
        )
    elif not model.reconciliation:
        return lines
    else:
        parts = []
        for r in model.reconciliation:
            mark = "ok" if r.matches else "MISMATCH"
            parts.append(f"{r.name} {r.client:,}/{r.server:,} {mark}")
        style = "" if all(r.matches for r in model.reconciliation) else "yellow"
        text = Text()
        lines = [ItemLine("server counters (all phases) vs client:", parts, style, wrap), text]
    if model.server_cpu is not None:
        text.append(
            f"server CPU {model.server_cpu.cores:.2f} cores of {model.server_cpu.threads} thread(s)"
        )
        lag = model.loop_lag_us.get("p99")
        text.append(f"; client loop lag p99 {fmt_us(lag)}\n" if lag is not None else "\n")
    return lines


def verify_lines(model: ReportModel) -> Text:
    """``--verify``: get hits checked and mismatches (all phases), with example keys."""
    text = Text()
    found = model.verification
    if found is None:
        return text
    text.append(f"verify: {found.checked:,} get hits checked (all phases), ")
    if not found.mismatches:
        text.append("0 mismatches\n")
    else:
        keys = ", ".join(found.example_keys)
        text.append(f"{found.mismatches:,} MISMATCHES, e.g. {keys}\n", style="yellow")
    return text


def server_lines(model: ReportModel, wrap: bool = False) -> list[RenderableType]:
    """Sharded runs: each server's share of the completions (an ``ItemLine``); a Redis
    Cluster's redirects."""
    lines: list[RenderableType] = []
    cluster = model.cluster
    if model.servers:
        shares = [f"{s['url']} {s['completed']:,} ({s['share']:.0%})" for s in model.servers]
        placement = (
            "Redis Cluster slots"
            if cluster is not None
            else model.servers[0].get("placement", "ketama")
        )
        lines.append(ItemLine(f"servers ({placement}):", shares, wrap=wrap))
    if cluster is not None:
        refreshes = cluster["map_refreshes"]
        moved = [f"MOVED {cluster['moved']:,}", f"ASK {cluster['ask']:,}"]
        if refreshes:
            times = "time" if refreshes == 1 else "times"
            moved.append(f"(slot map asked again {refreshes:,} {times})")
        lines.append(ItemLine("redirects:", moved, wrap=wrap))
    return lines


def connection_lines(model: ReportModel) -> Text:
    """Connections asked and live, and what happened to them: when anything did, or when
    many were asked (``MANY_CONNECTIONS``: whoever asks for 10,000 wants to see them all
    live)."""
    text = Text()
    c = model.connections
    if not c:
        return text
    events = (
        c["connect_failures"],
        c["connect_resets"],
        c["connect_resets_before"],
        c["reconnects"],
    )
    short = c["live_min"] is not None and c["live_min"] < c["asked"]
    if not (short or any(events)):
        if c["asked"] >= MANY_CONNECTIONS and c["live_min"] is not None:
            text.append(
                f"connections: {c['asked']:,} asked, {c['live_min']:,} live at the fewest; "
                f"opened {c['connects']:,}, none refused, lost or failed\n"
            )
        return text
    live = "n/a" if c["live_min"] is None else f"{c['live_min']:,}"
    text.append(
        f"connections: {c['asked']:,} asked, {live} live at the fewest; opened {c['connects']:,}, "
        f"refused at accept {c['connect_resets'] + c['connect_resets_before']:,} "
        f"({c['connect_resets_before']:,} before the start), "
        f"reconnect attempts {c['reconnect_attempts']:,}, failed {c['connect_failures']:,}; "
        f"{c['errors']:,} connection errors in the window (in the total's errors)\n"
    )
    return text


def trace_lines(model: ReportModel) -> Text:
    """A replay: the trace's op mix, rate and sizes, and what was sent against it."""
    text = Text()
    trace = model.trace
    if trace is None:
        return text
    profile, sent = trace["profile"], trace["sent"]
    speed = trace["speed"]
    rate = profile["rate"]
    text.append(
        f"trace {trace['path']}: {profile['rows']:,} rows over {sent['trace_span_s']:,}s of "
        f"trace time, {format_rate(rate['mean_per_s'])}/s mean, "
        f"{format_rate(rate['peak_per_s'])}/s peak; "
        + ("replayed as fast as the server answered\n" if speed == "max" else f"speed {speed:g}x")
    )
    if speed != "max":
        offered = sent["offered_per_s"]
        text.append(
            " (nothing offered: the run ended before its clock started)\n"
            if offered is None  # interrupted while the trace was read
            else f" (offered {format_rate(offered)}/s over {sent['replay_span_s']:,.1f}s)\n"
        )
    mix = ", ".join(
        f"{name} {n / profile['rows']:.1%}" for name, n in profile["ops"].items() if profile["rows"]
    )
    text.append(f"  op mix: {mix}\n")
    sizes_of = (
        ("key size", profile["key_size_bytes"]),
        ("value size", profile["value_size_bytes"]),
    )
    for label, sizes in sizes_of:
        if sizes:
            text.append(
                f"  {label}: p50 {sizes['p50']:g}  p90 {sizes['p90']:g}  p99 {sizes['p99']:g}  "
                f"max {sizes['max']:g} bytes\n"
            )
    ttls = profile.get("ttls_s") or []
    if ttls:  # as the page says it
        stores = int((profile["value_size_bytes"] or {}).get("count", 0))
        text.append(
            "  TTL of the stores, the most common first: "
            + ", ".join(
                ("none" if ttl == 0 else f"{ttl:,} s")
                + f" \N{MULTIPLICATION SIGN} {n:,}"
                + (f" ({n / stores:.1%} of {stores:,})" if stores else "")
                for ttl, n in ttls
            )
            + "\n"
        )
    as_ = ", ".join(
        f"{t}->{o}"
        for t, o in sent["sent_as"].items()
        if t in profile["ops"] and "clients" not in sent  # a capture's: each as itself
    )
    skipped = ", ".join(f"{why}: {n:,}" for why, n in sent["skipped"].items())
    capture = (
        f"; {sent['clients']:,} client(s), a connection each"
        + (f", {sent['selects_inserted']:,} SELECTs put in" if sent.get("selects_inserted") else "")
        + (", the cut-off last line left out" if sent.get("truncated_lines") else "")
        if "clients" in sent  # a MONITOR capture (docs/replay.md)
        else ""
    )
    text.append(
        f"  sent {sent['total']:,} of {sent['requests']:,} queued"
        + (f" ({as_})" if as_ else "")
        + (f"; {sent['in_drain']:,} of them in the drain" if sent["in_drain"] else "")
        + capture
        + (f"; skipped {skipped}" if skipped else "")
        + (f"; {sent['keys_clamped']:,} keys clamped to 250 bytes" if sent["keys_clamped"] else "")
        + (
            f"; {sent['ttls_clamped']:,} TTLs over 30 days sent as 30 days"
            if sent.get("ttls_clamped")
            else ""
        )
        + "\n"
    )
    return text


def verdict_lines(model: ReportModel) -> Text:
    text = Text()
    for verdict in model.verdicts:
        text.append(f"{verdict.level}: ", style=_LEVEL_STYLE.get(verdict.level, ""))
        text.append(f"{verdict.message}\n")
    return text


def summary(model: ReportModel, wide: bool = False, wrap: bool = False) -> RenderableType:
    """The end-of-run summary: table, outcomes, verdicts (``wide``: every column of the
    table, whatever the width; ``wrap``: lines wrap between words at the width, even on
    a soft-wrapping console, so a terminal never breaks one inside a figure)."""
    if model.queue is not None:
        first: list[RenderableType] = [
            queue_table(model, wide),
            delivery_table(model, wide),
            queue_lines(model),
        ]
    else:
        first = [summary_table(model, wide), outcome_lines(model), trace_lines(model)]
    parts: list[RenderableType] = [
        *first,
        network_line(model),
        round_lines(model),
        *server_lines(model, wrap),
        *reconciliation_lines(model, wrap),
        connection_lines(model),
        verify_lines(model),
    ]
    if model.verdicts:
        parts.append(verdict_lines(model))
    parts.append(status_lines(model))
    # Sections with nothing to say are left out; the rest lose their last newline (the
    # Group puts each on its own line).
    shown = [p.copy() if isinstance(p, Text) else p for p in parts]
    for part in shown:
        if isinstance(part, Text):
            part.rstrip()
            if wrap:
                part.no_wrap, part.overflow = False, "fold"
        elif wrap and isinstance(part, Table) and isinstance(part.title, str):
            part.title = Text(part.title, no_wrap=False, overflow="fold")
    return Group(*[p for p in shown if not (isinstance(p, Text) and not p.plain)])


def print_summary(
    console: Console, model: ReportModel, wide: bool = False, quiet: bool = False
) -> None:
    """The summary (``quiet``: one line per op, as ``redis-benchmark -q`` prints)."""
    wrap = console.is_terminal  # a pipe or file keeps each line whole, for grep
    console.print(quiet_summary(model) if quiet else summary(model, wide, wrap))


def quiet_summary(model: ReportModel) -> Text:
    """``-q``: one line per op, ``get: 123,456 ops/s, p50 310.0us, p99 1.02ms`` (a total
    line with several ops), then the verdicts (one line each) and the status line: the
    figures and whether they can be trusted, nothing else."""
    text = Text()
    rows = [(row.op, row.throughput_per_s, row.latency_us, row.errors) for row in model.ops]
    if len(rows) > 1:
        rows.append(("total", model.throughput_per_s, model.latency_us, model.total_errors))
    for op, rate, latency, errors in rows:
        text.append(
            f"{op}: {rate:,.0f} ops/s, p50 {fmt_us(latency['p50'])}, "
            f"p99 {fmt_us(latency['p99'])}" + (f", errors {errors:,}" if errors else "") + "\n"
        )
    text.append_text(verdict_lines(model))
    text.append_text(status_lines(model))
    text.rstrip()
    return text


# -- queue runs --------------------------------------------------------------------------

# A dequeue's outcomes in queue words: a hit brought a message, a miss found it empty.
_GET_LABELS = {"hit": "message", "miss": "empty"}


def queue_live_line(row: IntervalRow) -> str:
    """``[  1.0s] put 52.1k/s  get 50.3k/s  e2e p50 1.20ms p99 4.10ms  backlog 1,234 ...``."""
    parts = [
        f"[{row['t_s']:>6.1f}s]",
        f"put {format_rate(row['puts_per_s'])}/s",
        f"get {format_rate(row['gets_per_s'])}/s",
    ]
    top = HIGHEST_TRACKABLE_NS / 1000 if row.get("e2e_clipped") else None
    parts.append(
        f"e2e p50 {_percentile_text(row['e2e_p50_us'], top)} "
        f"p99 {_percentile_text(row['e2e_p99_us'], top)}"
    )
    # The client's backlog where it knows it (never a 0 it does not know), the server's
    # count where it says.
    backlog, server = row.get("backlog"), row.get("server_backlog")
    if backlog is not None:
        parts.append(f"backlog {backlog:,}")
        if server is not None:
            parts.append(f"(server {server:,})")
    elif server is not None:
        parts.append(f"backlog (server {server:,})")
    parts.append(f"empty {row['empties']:,}")
    parts.append(f"err {row['errors']}")
    if row["length_s"]:
        parts.append(f"cpu {row['cpu_s'] / row['length_s']:.0%}")
    if row.get("reconnects"):
        parts.append(f"reconnects {row['reconnects']}")
    return "  ".join(parts)


def queue_table(model: ReportModel, wide: bool = False) -> Table:
    """Put and get requests and end to end: count, rate, latency percentiles (the
    columns that fit, as ``summary_table``)."""
    run, queue = model.run, model.queue
    assert queue is not None
    table = FittedTable(
        title=f"kvbench queue {run.run_id}  {', '.join(t['url'] for t in run.targets)}  "
        f"({run.window_s:.2f}s, {model.status.name})",
        title_justify="left",
        priority=("per s", "p50", "p99", "count", "p90", "p99.9", "p99.99", "max", "mean"),
        wide=wide,
        see=f"--wide, the JSON (--json), or kvbench show {run.run_id} --wide",
    )
    for name in ("", "count", "per s"):
        table.add_column(name, justify="left" if not name else "right")
    for name, _ in PERCENTILES:
        table.add_column(name.replace("_", "."), justify="right")
    table.add_column("max", justify="right")
    table.add_column("mean", justify="right")
    ops = {row.op: row for row in model.ops}
    rows: list[tuple[str, int, float | None, dict[str, float | None]]] = [
        (f"{op} (request)", ops[op].count, queue["puts_per_s"] if op == "put" else None,
         ops[op].latency_us)
        for op in ("put", "get")
        if op in ops
    ]  # fmt: skip
    rows.append(("end to end", queue["received"], queue["gets_per_s"], queue["e2e_latency_us"]))
    # End-to-end ages beyond the histogram's range sit in its top bucket: a percentile
    # there is a lower bound, printed as such (the line under the table counts them).
    clipped_at = queue["e2e_range_us"] if queue.get("e2e_clipped") else None
    for label, count, rate, lat in rows:
        top = clipped_at if label == "end to end" else None
        table.add_row(
            label,
            f"{count:,}",
            "" if rate is None else format_rate(rate),
            *(_percentile_text(lat[name], top) for name, _ in PERCENTILES),
            fmt_us(lat["max"]),
            fmt_us(lat["mean"]),
        )
    return table


def _percentile_text(value_us: float | None, clipped_at_us: float | None) -> str:
    """``fmt_us``, or ``>60s`` for a percentile at or beyond where values were clipped."""
    if value_us is not None and clipped_at_us is not None and value_us >= clipped_at_us:
        return ">" + fmt_us(clipped_at_us)
    return fmt_us(value_us)


def delivery_table(model: ReportModel, wide: bool = False) -> Table:
    """The delivery ledger: per producer, sent, stored, received, lost, duplicated, late
    (``wide``: every column whatever the width, as the table above; was: "out of order"
    left out at 80 columns even with --wide, which that line did not offer)."""
    queue = model.queue
    assert queue is not None
    table = FittedTable(
        title="delivery per producer",
        title_justify="left",
        wide=wide,
        see=f"--wide, the JSON (--json), or kvbench show {model.run.run_id} --wide",
    )
    # Not received: acknowledged and not received, whatever became of them (lost in a run
    # that drained, unless a get never answered may have taken them; the line below says).
    names = ("producer", "sent", "stored", "received", "not received", "duplicated", "out of order")
    for name in names:
        table.add_column(name, justify="right")
    for p in queue["producers"]:
        figures = (p["sent"], p["produced"], p["received"], p["not_received"], p["duplicated"],
                   p["out_of_order"])  # fmt: skip
        table.add_row(str(p["producer"]), *(f"{n:,}" for n in figures))
    return table


def queue_lines(model: ReportModel) -> Text:
    """Rates and their windows, the backlog, the delivery in one line, outcomes per op."""
    queue = model.queue
    assert queue is not None
    text = Text()
    text.append(
        f"puts {format_rate(queue['puts_per_s'])}/s over {queue['produce_window_s']:.2f}s; "
        f"gets {format_rate(queue['gets_per_s'])}/s over {queue['consume_window_s']:.2f}s "
        f"({queue['pop_command']}; {queue['empty_polls']:,} found the queue empty)\n"
    )
    if queue.get("e2e_clipped"):
        text.append(
            f"end to end: {queue['e2e_clipped']:,} of {queue['received']:,} ages were beyond "
            f"{fmt_us(queue['e2e_range_us'])}, the histogram's range: percentiles there read "
            f">{fmt_us(queue['e2e_range_us'])}; max is the largest seen\n",
            style="yellow",
        )
    # (the original's figures, each over the whole phase: "puts/s" alone beside the line
    # above, which gives each side's own window, read as one figure twice)
    text.append("over the whole phase: " + phase_line(queue["phase"]) + "\n")
    text.append(_phase_server_line(queue["name"], queue["phase"]))
    backlog = queue["backlog"]
    server = ""
    if backlog["server_after"] is not None:
        server = (
            f"; the server's count: {backlog['server_before']:,} before, "
            f"{backlog['server_after']:,} after"
        )
    peak_at = f" at {backlog['peak_t_s']:.2f}s" if backlog["peak_t_s"] is not None else ""
    if backlog["peak"] is not None:
        text.append(f"backlog peak {backlog['peak']:,}{peak_at}{server}\n")
    elif server:  # a drain of messages no run of it stored: only the server can count them
        text.append(f"backlog: not known to the client (it stored none of them){server}\n")
    if queue["consumers_count"] == 0:
        text.append(
            f"delivery: {queue['produced']:,} stored, {queue['left_in_queue']:,} left in the "
            f"queue for a drain to read  ({queue['stop_reason']})\n"
        )
        return _outcome_lines(model, text)
    text.append(
        f"delivery: {queue['produced']:,} stored, {queue['unique']:,} received, "
        f"lost {queue['lost']:,}, duplicated {queue['duplicated']:,}, "
        f"out of order {queue['out_of_order']:,}"
        + (f", foreign {queue['foreign']:,}" if queue["foreign"] else "")
        + (f", unexpected {queue['unexpected']:,}" if queue["unexpected"] else "")
        + _fate_words(queue, model.status.name)
        + f"  ({queue['stop_reason']})\n",
        style="" if not (queue["lost"] or queue["duplicated"]) else "bold red",
    )
    return _outcome_lines(model, text)


def _fate_words(queue: QueueFigures, status: str) -> str:
    """The acknowledged messages neither received nor lost, in words: of unknown fate (a
    get never answered may have taken them), in flight when the run ended."""
    words = ""
    if queue.get("unknown_fate"):
        words += (
            f", unknown fate {queue['unknown_fate']:,} ({queue['unanswered_gets']:,} gets "
            "unanswered after the server may have dequeued)"
        )
    if queue.get("in_flight"):
        when = "interrupted" if status == "interrupted" else "the run ended"
        words += f", in flight when {when} {queue['in_flight']:,}"
    return words


def _outcome_lines(model: ReportModel, text: Text) -> Text:
    for row in model.ops:
        labels = _GET_LABELS if row.op == "get" else {}
        text.append(f"{row.op}: {outcome_counts(row.outcomes, labels)}\n")
    return text


def phase_end_line(label: str, model: ReportModel) -> str:
    """A phase's end, as the old storm benchmarks printed it: ops in total (the live
    lines' last total: successful ops), the window's length, their average (total /
    length), errors."""
    total = sum(interval_ops(row) for row in model.intervals)
    window_s = model.run.window_s
    average = total / window_s if window_s else 0.0
    return (
        f"{label} ends: total {total:,} ops in {window_s:.3f}s, average "
        f"{format_rate(average)} ops/s ({average:,.1f}/s), errors {model.total_errors:,}"
    )


def phase_line(phase: QueuePhase) -> str:
    """``puts 1,000,000  puts/s 43.1k  gets 0  gets/s 0  duration 23.201s``: the
    classic experiment's figures, each rate its count over the duration shown."""
    return (
        f"puts {phase['puts']:,}  puts/s {format_rate(phase['puts_per_s'])}  "
        f"gets {phase['gets']:,}  gets/s {format_rate(phase['gets_per_s'])}  "
        f"duration {phase['duration_s']:.3f}s"
    )


def _phase_server_line(name: str | None, phase: QueuePhase) -> str:
    """``stats queue`` before and after, and the data directory's size."""
    parts = []
    before, after = phase["stats_queue_before"], phase["stats_queue_after"]
    if before is not None or after is not None:
        shown = [
            f"{sample['enqueued']:,}/{sample['dequeued']:,} {when}"
            for sample, when in ((before, "before"), (after, "after"))
            if sample is not None and "enqueued" in sample
        ]
        if shown:
            parts.append(f"stats queue {name} (enqueued/dequeued): {', '.join(shown)}")
    data_dir = phase["data_dir"]
    if data_dir is not None:
        size = data_dir["bytes"]
        parts.append(
            f"data dir {data_dir['path']}: "
            + ("unreadable" if size is None else f"{size:,} bytes ({size / 2**20:,.1f} MiB)")
        )
    return "".join(part + "\n" for part in parts)
