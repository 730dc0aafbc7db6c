"""Latency over time: per interval and op, the requests, p50, p99 and max, and what happened
in that interval (the server restarted, a connection was lost, a verdict's cause).

A run's percentiles hide when its slow requests happened; these rows show it. Pure: read
from a stored run's interval snapshots, never averaged (an interval's percentiles are its
own histogram's). ``kvbench show RUN --over-time`` prints them (``over_time_table``) and
the HTML report's latency heatmap (report/heatmap.py) draws the same intervals and marks.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kvbench.metrics.histogram import Histogram
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.connections import connection_failures
from kvbench.report.fit import FittedTable
from kvbench.report.latency import min_samples, percentile_ns
from kvbench.report.reconcile import Restart, server_restarts
from kvbench.report.terminal import fmt_us
from kvbench.results.model import RunResult

# Marker kinds, in the order a note lists them.
RESTART, CONNECTION, VERDICT = "restart", "connection", "verdict"
# The verdicts whose cause lies in particular intervals (the others judge the whole run:
# client CPU, Little's law, the server's counters): each is marked where its cause is.
ERROR_VERDICTS = frozenset({"errors.rate", "ops.none"})
LATE_VERDICT, RANGE_VERDICT, INCOMPLETE_VERDICT = (
    "open.late",
    "latency.out_of_range",
    "run.incomplete",
)
# Connection losses: requests in flight when a connection broke, or its replies broke
# the protocol; connects refused or reset at accept; reconnects made.
_LOST_OUTCOMES = (Outcome.CONN_ERROR, Outcome.PROTOCOL_ERROR)


@dataclass(frozen=True, slots=True)
class Marker:
    """Something that happened in an interval: ``kind`` is restart, connection or verdict."""

    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class OpLatency:
    """One op in one interval.

    Attributes:
        ops: requests that ended in the interval (every final outcome, as the summary's
            ``count``): the rows of a run add up to its count.
        latencies: those with a latency in the histogram (replies and timeouts; a request
            lost with its connection, or dropped, has none).
        p50_us, p99_us: None with too few samples (report/latency.py ``min_samples``).
        max_us: the interval's largest latency, exact; None without latencies.
    """

    ops: int
    latencies: int
    p50_us: float | None
    p99_us: float | None
    max_us: float | None


@dataclass(frozen=True, slots=True)
class IntervalLatency:
    """One measured interval of a run.

    Attributes:
        position: its place in ``run.intervals``.
        round: its round (0-based).
        start_s, end_s: its bounds in seconds from its round's window start.
        t0_s, t1_s: the same on one time line across rounds (each round's window follows
            the previous ones', as the report's charts draw them).
        ops: op name -> its figures in the interval.
        markers: what happened in the interval.
    """

    position: int
    round: int
    start_s: float
    end_s: float
    t0_s: float
    t1_s: float
    ops: dict[str, OpLatency]
    markers: tuple[Marker, ...]


def op_latency(snap: IntervalSnapshot, op: str) -> OpLatency:
    """An op's figures in one interval (or in several merged)."""
    hist = snap.latency.get(op)
    count = hist.total_count if hist is not None else 0
    if hist is None or not count:
        return OpLatency(snap.ops(op), 0, None, None, None)
    return OpLatency(
        snap.ops(op), count, _percentile(hist, 50.0), _percentile(hist, 99.0), hist.max_ns / 1000
    )


def _percentile(hist: Histogram, percentile: float) -> float | None:
    if hist.total_count < min_samples(percentile):
        return None
    return percentile_ns(hist, percentile) / 1000


class Timeline:
    """Seconds on the run's time line: each round's window after the previous rounds'."""

    def __init__(self, run: RunResult) -> None:
        self._starts = [int(r["window_start_ns"]) for r in run.rounds] or [run.window_start_ns]
        self._offsets = [0.0]
        for index in range(len(run.rounds)):
            self._offsets.append(self._offsets[-1] + run.round_window_s(index))

    def round_starts_s(self) -> list[float]:
        """Where rounds 2, 3, ... begin on the time line."""
        return [round(t, 6) for t in self._offsets[1:-1]]

    def round_start_ns(self, round_index: int) -> int:
        return self._starts[min(round_index, len(self._starts) - 1)]

    def seconds(self, snap: IntervalSnapshot) -> tuple[float, float]:
        """(start, end) of ``snap`` on the time line."""
        start = self.round_start_ns(snap.round)
        offset = self._offsets[min(snap.round, len(self._offsets) - 1)]
        return (
            round(offset + max(0, snap.start_ns - start) / 1e9, 6),
            round(offset + max(0, snap.end_ns - start) / 1e9, 6),
        )


def rows(run: RunResult, fired: Collection[str]) -> list[IntervalLatency]:
    """Every measured interval of ``run``, with its markers.

    Args:
        fired: the ids of the verdicts the run's summary gave (``Verdict.id``); each of
            those whose cause lies in intervals is marked there.
    """
    line = Timeline(run)
    names = sorted({op for snap in run.intervals for op in snap.counts} | _latency_ops(run))
    marks = markers(run, fired)
    out: list[IntervalLatency] = []
    for position, snap in enumerate(run.intervals):
        start = line.round_start_ns(snap.round)
        t0, t1 = line.seconds(snap)
        out.append(
            IntervalLatency(
                position,
                snap.round,
                round(max(0, snap.start_ns - start) / 1e9, 6),
                round(max(0, snap.end_ns - start) / 1e9, 6),
                t0,
                t1,
                {op: op_latency(snap, op) for op in names},
                tuple(marks.get(position, ())),
            )
        )
    return out


def _latency_ops(run: RunResult) -> set[str]:
    return {op for snap in run.intervals for op in snap.latency}


def markers(run: RunResult, fired: Collection[str]) -> dict[int, list[Marker]]:
    """Interval position -> what happened in it: restarts, then connections, then the
    causes of the verdicts in ``fired``."""
    out: dict[int, list[Marker]] = {}
    for restart in server_restarts(run.server):
        position = restart_position(run.intervals, restart)
        if position is not None:
            where = f"{restart.url} " if restart.url else ""
            out.setdefault(position, []).append(
                Marker(RESTART, f"server {where}restarted ({restart.evidence})")
            )
    last = len(run.intervals) - 1
    for position, snap in enumerate(run.intervals):
        found = [m for m in (_connection_marker(snap),) if m is not None]
        found += _verdict_markers(snap, fired, position == last, run.status)
        if found:
            out.setdefault(position, []).extend(found)
    return out


def restart_position(intervals: Sequence[IntervalSnapshot], restart: Restart) -> int | None:
    """The interval a restart fell in: the last one ended by the time the server's new
    process was first seen (the server is sampled after each interval), else the first.
    None when the restart's time is not known, or the run has no intervals."""
    if restart.before_ns is None or not intervals:
        return None
    ended = [i for i, s in enumerate(intervals) if s.end_ns <= restart.before_ns]
    return max(ended, key=lambda i: intervals[i].end_ns) if ended else 0


def _connection_marker(snap: IntervalSnapshot) -> Marker | None:
    lost = sum(snap.count(op, outcome) for op in snap.counts for outcome in _LOST_OUTCOMES)
    failed = connection_failures(snap)
    reconnects = int(snap.stats.get("reconnects", 0))
    parts = [
        f"{lost:,} in flight" if lost else "",
        f"{failed:,} connects failed" if failed else "",
        f"{reconnects:,} reconnects" if reconnects else "",
    ]
    text = ", ".join(p for p in parts if p)
    return Marker(CONNECTION, f"conn lost: {text}") if text else None


def _verdict_markers(
    snap: IntervalSnapshot, fired: Collection[str], last: bool, status: str
) -> list[Marker]:
    out: list[Marker] = []
    for verdict in sorted(ERROR_VERDICTS & set(fired)):
        errors = snap.errors() + connection_failures(snap)
        if errors:
            out.append(Marker(VERDICT, f"{verdict} {errors:,} errors"))
    if LATE_VERDICT in fired:
        late, dropped = snap.counted(Outcome.LATE), snap.counted(Outcome.DROPPED)
        if late or dropped:
            what = [f"{late:,} late" if late else "", f"{dropped:,} dropped" if dropped else ""]
            out.append(Marker(VERDICT, f"{LATE_VERDICT} {' '.join(w for w in what if w)}"))
    if RANGE_VERDICT in fired:
        beyond = sum(h.out_of_range for h in snap.latency.values())
        if beyond:
            out.append(Marker(VERDICT, f"{RANGE_VERDICT} {beyond:,} beyond 60 s"))
    if INCOMPLETE_VERDICT in fired and last:
        out.append(Marker(VERDICT, f"{INCOMPLETE_VERDICT}: {status} here"))
    return out


def note(markers: Sequence[Marker]) -> str:
    """An interval's markers as one note (each says what it is: ``server restarted``,
    ``conn lost``, a verdict's id)."""
    return "; ".join(m.text for m in markers)


# Columns per op, shown or left out together; the note comes after the first op's.
_OP_COLUMNS = ("ops", "p50", "p99", "max")


def over_time_table(intervals: Sequence[IntervalLatency], wide: bool = False) -> FittedTable:
    """One row per interval: its time, per op its requests, p50, p99 and max, and a note
    of what happened then. No figure is cut at a narrow terminal: the ops that do not fit
    are left out, each op's four columns together (``FittedTable``)."""
    ops = sorted({op for row in intervals for op in row.ops})
    rounds = len({row.round for row in intervals}) > 1
    groups = [(f"{op} ops/p50/p99/max", [f"{op} {c}" for c in _OP_COLUMNS]) for op in ops]
    priority: list[str | tuple[str, Sequence[str]]] = ["round", "t", *groups[:1], "note"]
    table = FittedTable(
        title="Latency over time (each interval's own histogram)",
        title_justify="left",
        priority=[*priority, *groups[1:]],
        wide=wide,
        see="--wide, or --over-time --json",
    )
    for name in ("round",) * rounds + ("t",) + tuple(n for _, g in groups for n in g):
        table.add_column(name, justify="right")
    table.add_column("note", justify="left")
    for row in intervals:
        cells = [str(row.round + 1)] * rounds + [f"{row.end_s:.1f}s"]
        for op in ops:
            figures = row.ops.get(op)
            if figures is None:
                cells += [""] * len(_OP_COLUMNS)
                continue
            cells.append(f"{figures.ops:,}")
            if figures.max_us is None:  # no latency in the interval: nothing to say "n/a" of
                cells += [""] * (len(_OP_COLUMNS) - 1)
            else:
                cells += [fmt_us(v) for v in (figures.p50_us, figures.p99_us, figures.max_us)]
        table.add_row(*cells, note(row.markers))
    return table


def to_json(row: IntervalLatency) -> dict[str, object]:
    """A row as ``kvbench show RUN --over-time --json`` prints it."""
    return {
        "round": row.round,
        "start_s": row.start_s,
        "end_s": row.end_s,
        "ops": {
            op: {
                "ops": f.ops,
                "latencies": f.latencies,
                "p50_us": f.p50_us,
                "p99_us": f.p99_us,
                "max_us": f.max_us,
            }
            for op, f in row.ops.items()
        },
        "markers": [{"kind": m.kind, "text": m.text} for m in row.markers],
    }
