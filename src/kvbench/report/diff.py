"""Two stored runs compared: throughput and p99 change, per op and in total, with a 95% CI.

Pure: two ``RunResult``s in, a ``RunDiff`` (and its rich rendering) out. Every figure of a
run is ``summarize``'s, of the whole run or of one complete round alone (a copy of the run
holding only that round's intervals); this module only subtracts and compares them.

The method (docs/measurement.md, "Comparing two runs"):

- **throughput**, both runs with >= 3 complete rounds: A and B are the means of their
  rounds' throughputs, the change is B - A, and its 95% confidence interval is Welch's
  (unequal variances, Welch-Satterthwaite degrees of freedom rounded down, Student t).
  Otherwise A and B are the whole runs' throughputs and no interval is possible.
- **p99**: A and B are the whole runs' p99 (merged histograms, never averaged); the
  interval is Welch's over the per-round p99s, the rounds' spread standing for the noise.
- **flag**: a *regression* when the whole interval lies on the bad side of zero
  (throughput: below; p99: above), an *improvement* when it lies on the good side,
  otherwise *within noise*; without an interval, *no CI* (never a flag).
- **status**: each run's (``results.status``) is shown; a failed run's figures are not an
  answer, so the reader is told.
- **queue runs**: their put and get rates are the summary's (each over its side's window,
  empty answers not gets); end-to-end p50 and p99, lost, duplicated and the backlog peak
  are compared too, as plain changes (a queue run has no rounds to give an interval).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kvbench.report.queue_figures import QueueFigures
from kvbench.report.stats import MIN_CI_SAMPLES, spread, t_critical_95
from kvbench.report.summary import ReportModel, summarize
from kvbench.results.model import RunResult

REGRESSION = "regression"
IMPROVEMENT = "improvement"
WITHIN_NOISE = "within noise"
NO_CI = "no CI"
NOT_AVAILABLE = "n/a"

# Settings that name a server instance rather than configure it: never listed as a difference.
_INSTANCE_SETTINGS = {"process_id", "run_id", "tcp_port", "tcpport", "udpport", "executable"}
_ENVIRONMENT_FIELDS = (
    "host",
    "cpu_model",
    "cpu_count",
    "kernel",
    "python",
    "python_implementation",
    "event_loop",
    "driver",
)


def welch_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """The 95% confidence interval of mean(b) - mean(a) by Welch's t; None with < 2 of either.

    Welch's interval does not assume equal variances; its degrees of freedom (the
    Welch-Satterthwaite estimate) are rounded down, which widens the interval slightly.
    With no spread in either sample the interval is the difference itself.
    """
    if len(a) < 2 or len(b) < 2:
        return None
    sa, sb = spread(a), spread(b)
    va, vb = sa.stddev**2 / sa.n, sb.stddev**2 / sb.n
    diff = sb.mean - sa.mean
    if va + vb == 0:
        return (diff, diff)
    df = (va + vb) ** 2 / (va**2 / (sa.n - 1) + vb**2 / (sb.n - 1))
    half = t_critical_95(max(1, math.floor(df))) * math.sqrt(va + vb)
    return (diff - half, diff + half)


@dataclass(frozen=True, slots=True)
class Change:
    """One figure of one op (or ``total``) in run A and run B.

    Attributes:
        metric: ``throughput_per_s`` or ``p99_us``.
        op: the op's name, or ``total``.
        a, b: the figure in each run (None: the op did not run, or too few samples).
        ci95: 95% interval of B - A, or None when it cannot be had.
        flag: ``regression``, ``improvement``, ``within noise``, ``no CI`` or ``n/a``.
        basis: what A and B are (``mean of rounds``, ``whole run``, ``merged histograms``).
    """

    metric: str
    op: str
    a: float | None
    b: float | None
    ci95: tuple[float, float] | None
    flag: str
    basis: str

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def relative(self) -> float | None:
        """B / A - 1, or None when A is missing or zero."""
        delta = self.delta
        return None if delta is None or not self.a else delta / self.a


@dataclass(frozen=True, slots=True)
class RunDiff:
    """Run B against run A."""

    run_a: str
    run_b: str
    rounds_a: int  # complete rounds
    rounds_b: int
    changes: list[Change]
    differences: list[tuple[str, str, str]] = field(default_factory=list)  # (what, A, B)
    status_a: str = "ok"  # each run's status (results.status)
    status_b: str = "ok"
    queue: bool = False  # queue runs (they have no rounds)

    @property
    def has_ci(self) -> bool:
        return self.rounds_a >= MIN_CI_SAMPLES and self.rounds_b >= MIN_CI_SAMPLES

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.flag == REGRESSION]


def _round_models(run: RunResult) -> list[ReportModel]:
    """The summary of each complete round alone (nothing but that round's intervals)."""
    models = []
    for record in run.rounds:
        if record.get("status") != "ok":
            continue
        alone = dataclasses.replace(
            run,
            intervals=[s for s in run.intervals if s.round == record["round"]],
            rounds=[record],
            phases={},
            server={},
            workers=[],
            errors=[],
        )
        models.append(summarize(alone))
    return models


Figure = Callable[[ReportModel, str], float | None]


def _throughput(model: ReportModel, op: str) -> float | None:
    if op == "total":
        return model.throughput_per_s
    row = next((r for r in model.ops if r.op == op), None)
    return None if row is None else row.throughput_per_s


def _p99(model: ReportModel, op: str) -> float | None:
    if op == "total":
        return model.latency_us.get("p99")
    row = next((r for r in model.ops if r.op == op), None)
    return None if row is None else row.latency_us.get("p99")


def _per_round(models: list[ReportModel], figure: Figure, op: str) -> list[float]:
    return [v for v in (figure(m, op) for m in models) if v is not None]


def _flag(ci: tuple[float, float] | None, higher_is_better: bool, have_both: bool) -> str:
    if not have_both:
        return NOT_AVAILABLE
    if ci is None:
        return NO_CI
    worse = ci[1] < 0 if higher_is_better else ci[0] > 0
    better = ci[0] > 0 if higher_is_better else ci[1] < 0
    return REGRESSION if worse else IMPROVEMENT if better else WITHIN_NOISE


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), item, out)
    else:
        out[prefix] = value if isinstance(value, str) else json.dumps(value)


def _context(run: RunResult) -> dict[str, str]:
    """What a reader must know to judge whether two runs are comparable."""
    out: dict[str, str] = {
        "kvbench version": run.kvbench_version,
        "mode": run.mode,
        "target": " ".join(str(t.get("url")) for t in run.targets),
        "server version": " ".join(str(t.get("server_version")) for t in run.targets),
    }
    # the targets are listed above; a queue run's tag is new each run
    config = {k: v for k, v in run.config.items() if k not in ("targets", "report", "run_tag")}
    _flatten("config", config, out)
    for name in _ENVIRONMENT_FIELDS:
        if name in run.environment:
            out[f"environment.{name}"] = str(run.environment[name])
    settings = run.server.get("settings") or {}
    for name, value in settings.items():
        if name not in _INSTANCE_SETTINGS:
            out[f"server.{name}"] = str(value)
    return out


def differences(a: RunResult, b: RunResult) -> list[tuple[str, str, str]]:
    """(what, value in A, value in B) for everything that differs between the two runs."""
    ca, cb = _context(a), _context(b)
    names = list(ca) + [name for name in cb if name not in ca]
    return [
        (name, ca.get(name, "-"), cb.get(name, "-"))
        for name in names
        if ca.get(name) != cb.get(name)
    ]


def diff_runs(a: RunResult, b: RunResult) -> RunDiff:
    """Compare run B with run A (see the module docstring for the method)."""
    model_a, model_b = summarize(a), summarize(b)
    rounds_a, rounds_b = _round_models(a), _round_models(b)
    with_ci = len(rounds_a) >= MIN_CI_SAMPLES and len(rounds_b) >= MIN_CI_SAMPLES
    ops = sorted({r.op for r in model_a.ops} | {r.op for r in model_b.ops})
    changes: list[Change] = []
    for op in [*ops, "total"]:
        tpa, tpb = _per_round(rounds_a, _throughput, op), _per_round(rounds_b, _throughput, op)
        if with_ci and len(tpa) >= MIN_CI_SAMPLES and len(tpb) >= MIN_CI_SAMPLES:
            va: float | None = spread(tpa).mean
            vb: float | None = spread(tpb).mean
            ci, basis = welch_interval(tpa, tpb), "mean of rounds"
        else:
            va, vb = _throughput(model_a, op), _throughput(model_b, op)
            ci, basis = None, "whole run"
        flag = _flag(ci, True, va is not None and vb is not None)
        changes.append(Change("throughput_per_s", op, va, vb, ci, flag, basis))
        pa, pb = _p99(model_a, op), _p99(model_b, op)
        p99_rounds_a, p99_rounds_b = _per_round(rounds_a, _p99, op), _per_round(rounds_b, _p99, op)
        ci = welch_interval(p99_rounds_a, p99_rounds_b) if with_ci else None
        flag = _flag(ci, False, pa is not None and pb is not None)
        changes.append(Change("p99_us", op, pa, pb, ci, flag, "merged histograms"))
    changes += _queue_changes(model_a, model_b)
    return RunDiff(
        a.run_id,
        b.run_id,
        len(rounds_a),
        len(rounds_b),
        changes,
        differences(a, b),
        model_a.status.name,
        model_b.status.name,
        model_a.queue is not None or model_b.queue is not None,
    )


# A queue run's own figures compared: (metric, row, where in the summary's queue figures).
_QUEUE_FIGURES: tuple[tuple[str, str, Callable[[QueueFigures], float | None]], ...] = (
    ("e2e_p50_us", "end to end", lambda q: q["e2e_latency_us"]["p50"]),
    ("e2e_p99_us", "end to end", lambda q: q["e2e_latency_us"]["p99"]),
    ("lost", "delivery", lambda q: q["lost"]),
    ("duplicated", "delivery", lambda q: q["duplicated"]),
    ("backlog_peak", "backlog", lambda q: q["backlog"]["peak"]),
)
# How each metric is named in the table, and whether higher is better (None: neither).
_METRICS = {
    "throughput_per_s": "ops/s",
    "p99_us": "p99",
    "e2e_p50_us": "p50",
    "e2e_p99_us": "p99",
    "lost": "lost",
    "duplicated": "duplicated",
    "backlog_peak": "peak",
}


def _queue_changes(a: ReportModel, b: ReportModel) -> list[Change]:
    """End-to-end latency, delivery and backlog of two queue runs (none otherwise)."""
    if a.queue is None or b.queue is None:
        return []
    changes = []
    for metric, row, figure in _QUEUE_FIGURES:
        va, vb = figure(a.queue), figure(b.queue)
        flag = _flag(None, False, va is not None and vb is not None)
        changes.append(Change(metric, row, va, vb, None, flag, "whole run"))
    return changes


class ChangeEntry(TypedDict):
    """A ``Change`` as ``kvbench diff --json`` gives it (figures rounded)."""

    metric: str
    op: str
    a: float | None
    b: float | None
    change: float | None
    change_ratio: float | None
    ci95: list[float | None] | None
    flag: str
    basis: str


class DiffDocument(TypedDict):
    """``kvbench diff --json``: run B against run A."""

    run_a: str
    run_b: str
    status: dict[str, str]  # a, b
    complete_rounds: dict[str, int]  # a, b
    method: str
    changes: list[ChangeEntry]
    regressions: int
    differences: list[dict[str, str]]  # what, a, b


def to_dict(diff: RunDiff) -> DiffDocument:
    """The diff as a JSON-ready dict (``kvbench diff --json``)."""

    def number(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    return {
        "run_a": diff.run_a,
        "run_b": diff.run_b,
        "status": {"a": diff.status_a, "b": diff.status_b},
        "complete_rounds": {"a": diff.rounds_a, "b": diff.rounds_b},
        "method": "Welch 95% interval of B - A over per-round values"
        if diff.has_ci
        else f"no confidence interval: a run has fewer than {MIN_CI_SAMPLES} complete rounds",
        "changes": [
            {
                "metric": c.metric,
                "op": c.op,
                "a": number(c.a),
                "b": number(c.b),
                "change": number(c.delta),
                "change_ratio": None if c.relative is None else round(c.relative, 5),
                "ci95": None if c.ci95 is None else [number(c.ci95[0]), number(c.ci95[1])],
                "flag": c.flag,
                "basis": c.basis,
            }
            for c in diff.changes
        ],
        "regressions": len(diff.regressions),
        "differences": [{"what": w, "a": va, "b": vb} for w, va, vb in diff.differences],
    }


# -- terminal rendering ------------------------------------------------------------------

_FLAG_STYLE = {REGRESSION: "bold red", IMPROVEMENT: "green", WITHIN_NOISE: "", NO_CI: "dim"}


def _value(metric: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if metric == "throughput_per_s":
        return f"{value:,.0f}/s"
    return f"{value:,.1f}us" if metric.endswith("_us") else f"{value:,.0f}"


def _signed(metric: str, value: float) -> str:
    text = _value(metric, abs(value))
    return ("+" if value >= 0 else "-") + text


def _percent(value: float, base: float | None) -> str:
    return f" ({value / base:+.1%})" if base else ""


def render(diff: RunDiff) -> RenderableType:
    """The diff as a table (one row per op and figure), the method line and the differences."""
    table = Table(
        title=f"kvbench diff  A={diff.run_a} ({diff.status_a})  B={diff.run_b} ({diff.status_b})",
        title_justify="left",
    )
    for name in ("op", "figure", "A", "B", "change", "95% CI of change", "flag"):
        table.add_column(name, justify="left" if name in ("op", "figure", "flag") else "right")
    for c in diff.changes:
        delta = c.delta
        change = "n/a" if delta is None else _signed(c.metric, delta) + _percent(delta, c.a)
        ci = (
            ""
            if c.ci95 is None
            else f"{_signed(c.metric, c.ci95[0])} .. {_signed(c.metric, c.ci95[1])}"
        )
        table.add_row(
            c.op,
            _METRICS[c.metric],
            _value(c.metric, c.a),
            _value(c.metric, c.b),
            change,
            ci,
            Text(c.flag, style=_FLAG_STYLE.get(c.flag, "")),
            style="bold" if c.op == "total" else "",
        )
    notes = Text()
    if diff.has_ci:
        notes.append(
            f"95% CI: Welch's t over {diff.rounds_a} and {diff.rounds_b} rounds; throughput A/B "
            "are round means, p99 A/B from merged histograms (CI from per-round p99s); a "
            "regression is a CI entirely on the worse side of zero\n"
        )
    elif diff.queue:
        notes.append(
            "no confidence interval is possible: a queue run has no rounds; the plain change "
            "is shown and nothing is flagged\n",
            style="yellow",
        )
    else:
        notes.append(
            f"no confidence interval is possible: complete rounds A {diff.rounds_a}, "
            f"B {diff.rounds_b} (a CI needs {MIN_CI_SAMPLES} rounds in both; run with --rounds N); "
            "the plain change is shown and nothing is flagged\n",
            style="yellow",
        )
    for name, status in (("A", diff.status_a), ("B", diff.status_b)):
        if status != "ok":
            notes.append(f"run {name} is {status}: see kvbench show for why\n", style="yellow")
    if diff.regressions:
        names = ", ".join(f"{c.op} {_METRICS[c.metric]}" for c in diff.regressions)
        notes.append(f"regression beyond the noise: {names}\n", style="bold red")
    if diff.differences:
        notes.append("the runs differ in:\n")
        for what, va, vb in diff.differences:
            notes.append(f"  {what}: {va} -> {vb}\n", style="dim")
    return Group(table, notes)
