"""Sweeps and comparisons, pure: levels -> throughput/p99 rows, the knee, an SLO's best
level; targets -> ratios with confidence intervals.

Every figure comes from ``summarize`` of stored runs; nothing here touches a server.
Only complete levels and rounds (status ``ok``) enter the knee and the ratios: an
interrupted, failed or partial one is shown with its status and left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypedDict

from kvbench.errors import ConfigError
from kvbench.metrics.histogram import Histogram
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.json_report import document
from kvbench.report.latency import PERCENTILES, percentile_ns
from kvbench.report.stats import MIN_CI_SAMPLES, Ratio, Spread, log_ratio, spread
from kvbench.report.summary import ReportModel, summarize
from kvbench.results.model import SCHEMA_VERSION, RunResult
from kvbench.results.status import FAILED, INTERRUPTED, OK, worst

# The knee (docs/measurement.md, "Sweeps"): the first level whose throughput reaches
# KNEE_SHARE of the sweep's highest, provided a later level's p99 is at least
# KNEE_P99_GROWTH above that level's: past it, more load buys latency, not throughput. A
# later rise in throughput moves the maximum and so the knee (an early plateau is not one).
KNEE_SHARE = 0.95
KNEE_P99_GROWTH = 0.10
KNEE_RULE = (
    f"the first level whose throughput reaches {KNEE_SHARE:.0%} of the sweep's highest, "
    f"when a later level's p99 is at least {KNEE_P99_GROWTH:.0%} higher"
)

_SLO = re.compile(r"^\s*(p\d+(?:\.\d+)?)\s*(<=|<)\s*([\d.]+)\s*(ns|us|µs|ms|s)\s*$")
_UNIT_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_NAMES = {name.replace("_", "."): name for name, _ in PERCENTILES}


@dataclass(frozen=True, slots=True)
class Slo:
    """A latency objective such as ``p99<1ms``."""

    percentile: str  # summary key: p50, p90, p99, p99_9, p99_99
    limit_us: float
    inclusive: bool

    def met(self, latency_us: dict[str, float | None]) -> bool | None:
        """True/False, or None when the percentile had too few samples to judge."""
        value = latency_us.get(self.percentile)
        if value is None:
            return None
        return value <= self.limit_us if self.inclusive else value < self.limit_us


def parse_slo(text: str, where: str = "--slo") -> Slo:
    """``p99<1ms``, ``p99.9<=250us``.

    Raises:
        ConfigError: not of that form, or an unknown percentile.
    """
    match = _SLO.match(text)
    if not match or match.group(1) not in _NAMES:
        known = ", ".join(_NAMES)
        raise ConfigError(
            where, f"{text!r} is not an objective like p99<1ms (percentiles: {known})"
        )
    limit = float(match.group(3)) * _UNIT_US[match.group(4)]
    return Slo(_NAMES[match.group(1)], limit, match.group(2) == "<=")


@dataclass(frozen=True, slots=True)
class LevelRow:
    """One level of a sweep."""

    level: float
    status: str  # ok, interrupted, partial, failed
    reason: str | None
    throughput: Spread | None
    latency_us: dict[str, float | None]
    errors: int
    run_id: str | None
    slo_met: bool | None = None
    # --verify: get hits whose value was not the one stored (wrong length or bytes).
    bad_values: int | None = None


def level_row(
    level: float,
    run: RunResult | None,
    reason: str | None = None,
    slo: Slo | None = None,
    status: str = FAILED,
) -> LevelRow:
    """A sweep row from a level's run, or a row of ``status`` when the level did not run.

    A level's status is its run's (``results.status``); its throughput is the mean over
    its complete rounds; its SLO is judged only when it is ``ok`` (None otherwise).
    """
    if run is None:
        return LevelRow(level, status, reason, None, {}, 0, None)
    model = summarize(run)
    rates = [r["throughput_per_s"] for r in model.rounds if r["status"] == OK]
    judged = model.status
    return LevelRow(
        level=level,
        status=judged.name,
        reason=reason or ("; ".join(judged.reasons) if judged.name != OK else None),
        throughput=spread(rates, floor=0.0) if rates else None,
        latency_us=model.latency_us,
        errors=model.total_errors,
        run_id=run.run_id,
        # Judged on a complete level only: a failed run's percentiles are not an answer
        # (was: a level whose server went down at its end was "met", and the best level).
        slo_met=slo.met(model.latency_us) if slo is not None and judged.name == OK else None,
        bad_values=model.verification.mismatches if model.verification is not None else None,
    )


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One level of a curve as the knee sees it."""

    level: float
    throughput_per_s: float
    p99_us: float


def knee_of(points: list[CurvePoint]) -> float | None:
    """The knee of a curve (``KNEE_RULE``), or None when it lies beyond the range."""
    if not points:
        return None
    best = max(p.throughput_per_s for p in points)
    index = next(i for i, p in enumerate(points) if p.throughput_per_s >= KNEE_SHARE * best)
    point = points[index]
    later = points[index + 1 :]
    grows = any(p.p99_us >= (1 + KNEE_P99_GROWTH) * point.p99_us for p in later)
    return point.level if grows else None


def knee(rows: list[LevelRow]) -> float | None:
    """The knee of a sweep over its complete levels (status ok, a throughput and a p99)."""
    points = [
        CurvePoint(r.level, r.throughput.mean, p99)
        for r in rows
        if r.status == OK and r.throughput is not None and (p99 := r.latency_us.get("p99"))
    ]
    return knee_of(sorted(points, key=lambda p: p.level))


def best_level(rows: list[LevelRow]) -> float | None:
    """The highest level whose run was complete (``ok``) and met the SLO."""
    met = [r.level for r in rows if r.slo_met]
    return max(met) if met else None


class LevelDocument(TypedDict):
    """One level as the sweep's result document lists it."""

    level: float
    status: str
    reason: str | None
    run_id: str | None
    throughput_per_s: float | None  # the mean over its complete rounds
    throughput_ci95_per_s: list[float] | None
    rounds: int  # complete rounds: a CI needs MIN_CI_SAMPLES
    latency_us: dict[str, float | None]
    errors: int
    slo_met: bool | None
    bad_values: int | None


class SweepDocument(TypedDict):
    """The sweep's result document (``kind: "sweep"``)."""

    schema_version: int
    kind: str
    status: str
    axis: str
    target: str
    levels: list[LevelDocument]
    knee: float | None
    slo: str | None
    best_level: float | None


def level_document(row: LevelRow) -> LevelDocument:
    """One level as the sweep's result document lists it."""
    t = row.throughput
    return {
        "level": row.level,
        "status": row.status,
        "reason": row.reason,
        "run_id": row.run_id,
        "throughput_per_s": round(t.mean, 1) if t else None,
        "throughput_ci95_per_s": [round(t.ci95[0], 1), round(t.ci95[1], 1)]
        if t and t.ci95
        else None,
        "rounds": t.n if t else 0,  # complete rounds: a CI needs MIN_CI_SAMPLES
        "latency_us": row.latency_us,
        "errors": row.errors,
        "slo_met": row.slo_met,
        "bad_values": row.bad_values,
    }


def sweep_document(
    axis: str, target: str, rows: list[LevelRow], slo: str | None = None
) -> SweepDocument:
    """The sweep's result document (``kind: "sweep"``): its levels, knee and SLO level."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "sweep",
        "status": worst(r.status for r in rows),
        "axis": axis,
        "target": target,
        "levels": [level_document(r) for r in rows],
        "knee": knee(rows),
        "slo": slo,
        "best_level": best_level(rows) if slo else None,
    }


def paired_ratio(
    a: list[float], b: list[float], a_ok: list[bool], b_ok: list[bool]
) -> Ratio | None:
    """B relative to A over the rounds complete in both (rounds were interleaved: round i
    of A ran next to round i of B), on logs (``stats.log_ratio``)."""
    pairs = [(x, y) for x, y, x_ok, y_ok in zip(a, b, a_ok, b_ok, strict=False) if x_ok and y_ok]
    return log_ratio(pairs)


@dataclass(frozen=True, slots=True)
class TargetColumn:
    """One target of a comparison.

    Attributes:
        round_ok: per round, whether it is complete (process status ok); an interrupted
            or partial round is left out of the ratios.
    """

    url: str
    model: ReportModel
    round_throughput: list[float]
    round_p99_us: list[float]
    round_ok: list[bool]


def _p99_us(intervals: list[IntervalSnapshot]) -> float:
    hists = [h for s in intervals for h in s.latency.values()]
    merged = Histogram.merged(hists) if hists else None
    return percentile_ns(merged, 99) / 1000 if merged and merged.total_count else 0.0


def target_column(run: RunResult, model: ReportModel | None = None) -> TargetColumn:
    """Per-round throughput and p99 (from each round's merged histogram).

    A run of one round keeps no round records: its whole window is then its one round.
    ``model``: the run's summary where the caller has it already (an HTML report's, its
    intervals merged: only its rounds, totals and status are read here); summarizing an
    hour of 1 s intervals again took seconds per run.
    """
    model = model if model is not None else summarize(run)
    if model.rounds:
        rates = [r["throughput_per_s"] for r in model.rounds]
        complete = [r["status"] == OK for r in model.rounds]
        groups = [[s for s in run.intervals if s.round == i] for i in range(len(run.rounds))]
    else:
        rates, complete, groups = [model.throughput_per_s], [run.status == OK], [run.intervals]
    url = run.targets[0]["url"] if run.targets else "?"
    return TargetColumn(url, model, rates, [_p99_us(g) for g in groups], complete)


class ComparisonRow(TypedDict):
    """A target against the first (the baseline): paired ratios, each side's status."""

    target: str
    baseline: str
    rounds_paired: int
    throughput_ratio: float | None
    throughput_ratio_ci95: list[float] | None
    p99_ratio: float | None
    p99_ratio_ci95: list[float] | None
    status: str
    baseline_status: str


def _mean(ratio: Ratio | None) -> float | None:
    return ratio.mean if ratio else None


def _ci95(ratio: Ratio | None) -> list[float] | None:
    return list(ratio.ci95) if ratio and ratio.ci95 else None


def comparison(columns: list[TargetColumn]) -> list[ComparisonRow]:
    """Each target against the first: throughput and p99 ratios with 95% CIs, over the
    rounds complete in both; each side's status."""
    if not columns:
        return []
    base = columns[0]
    rows: list[ComparisonRow] = []
    for column in columns[1:]:
        ok = (base.round_ok, column.round_ok)
        throughput = paired_ratio(base.round_throughput, column.round_throughput, *ok)
        p99 = paired_ratio(base.round_p99_us, column.round_p99_us, *ok)
        rows.append(
            {
                "target": column.url,
                "baseline": base.url,
                "rounds_paired": throughput.n if throughput else 0,
                "throughput_ratio": _mean(throughput),
                "throughput_ratio_ci95": _ci95(throughput),
                "p99_ratio": _mean(p99),
                "p99_ratio_ci95": _ci95(p99),
                "status": column.model.status.name,
                "baseline_status": base.model.status.name,
            }
        )
    return rows


# A paired ratio whose 95% CI spans more than this factor (hi / lo) is no answer: the
# rounds disagreed (a busy machine, a server warming up), as pyperf warns of a large
# standard deviation. The figures are printed; the sentence says not to trust them.
UNSTABLE_CI_SPAN = 1.5


def instability(ci: list[float] | None) -> str | None:
    """``"unstable: ..."`` when a ratio's 95% CI is too wide to be an answer, else None."""
    if not ci or ci[0] <= 0 or ci[1] / ci[0] <= UNSTABLE_CI_SPAN:
        return None
    return (
        f"unstable: the rounds disagree, the 95% CI runs from {ci[0]:.1%} to {ci[1]:.1%} "
        f"({ci[1] / ci[0]:.1f}x); rerun with more --rounds, on a quieter machine"
    )


def comparison_sentence(row: ComparisonRow) -> str:
    """``http+memc://…: 72% of memcached://… throughput (95% CI 69-75%)``, and the status
    of a side that is not ok."""
    ratio = row["throughput_ratio"]
    if ratio is None:
        return f"{row['target']}: no round complete on both sides to compare"
    ci = row["throughput_ratio_ci95"]
    if ci:
        ci_text = f" (95% CI {ci[0]:.0%}-{ci[1]:.0%})"
    elif row["rounds_paired"] < MIN_CI_SAMPLES:
        ci_text = f" (95% CI needs {MIN_CI_SAMPLES} rounds)"
    else:
        ci_text = " (no CI: a round had no success)"
    p99 = row["p99_ratio"]
    p99_text = f"; p99 {p99:.2f}x" if p99 else ""
    sides = [
        f"{name} {status}"
        for name, status in (
            (row["target"], row["status"]),
            (row["baseline"], row["baseline_status"]),
        )
        if status != OK
    ]
    status_text = f"; {', '.join(sides)}" if sides else ""
    caution = instability(ci)
    return (
        f"{row['target']}: {ratio:.0%} of {row['baseline']} throughput{ci_text}{p99_text}"
        f"{status_text}{f' - {caution}' if caution else ''}"
    )


class CompareDocument(TypedDict):
    """The comparison's result document (``kind: "compare"``)."""

    schema_version: int
    kind: str
    status: str
    targets: list[dict[str, Any]]  # each target's result document (json_report.py)
    comparison: list[ComparisonRow]


def compare_document(columns: list[TargetColumn], interrupted: bool = False) -> CompareDocument:
    """The comparison's result document (``kind: "compare"``): targets and their ratios.

    ``status`` is the worst of the targets' (``interrupted`` when Ctrl-C ended it).
    """
    statuses = [c.model.status.name for c in columns] + ([INTERRUPTED] if interrupted else [])
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "compare",
        "status": worst(statuses),
        "targets": [document(c.model) for c in columns],
        "comparison": comparison(columns),
    }


class RoundFigures(TypedDict):
    """One target at one level as the original reported it (``round_figures``)."""

    url: str
    rounds_per_s: list[int]  # whole ops/s, as printed
    rounds_ok: list[bool]
    mean_per_s: int | None  # of the complete rounds' printed figures
    min_per_s: int | None
    max_per_s: int | None
    failed_requests: int
    p99_us: float | None
    status: str


class ShareOfSecond(TypedDict):
    """The first target's throughput as a % of the second's (``share_of_second``)."""

    first: RoundFigures
    second: RoundFigures
    first_pct_of_second: float | None
    rounds_paired: int
    paired_ratio: float | None
    paired_ratio_ci95: list[float] | None
    status: str


def round_figures(column: TargetColumn) -> RoundFigures:
    """One target at one level, as the original reported it: every round's throughput
    (whole ops/s, as printed), and the mean, min and max of the complete rounds' printed
    figures, and its failed requests (errors, and a set-then-get run's misses)."""
    rates = [round(r) for r in column.round_throughput]
    complete = [r for r, ok in zip(rates, column.round_ok, strict=True) if ok]
    return {
        "url": column.url,
        "rounds_per_s": rates,
        "rounds_ok": column.round_ok,
        "mean_per_s": round(sum(complete) / len(complete)) if complete else None,
        "min_per_s": min(complete) if complete else None,
        "max_per_s": max(complete) if complete else None,
        "failed_requests": column.model.total_errors,
        "p99_us": column.model.latency_us.get("p99"),
        "status": column.model.status.name,
    }


def share_of_second(columns: list[TargetColumn]) -> ShareOfSecond:
    """The first target's throughput as a % of the second's (the original's figure: "the
    gateway as a % of native"), from the two printed means, so a reader recomputes it from
    the figures on the page; beside it the paired-ratio estimate (first / second, a
    geometric mean over the rounds complete on both sides) and its 95% CI."""
    first, second = round_figures(columns[0]), round_figures(columns[1])
    a, b = first["mean_per_s"], second["mean_per_s"]
    paired = paired_ratio(
        columns[1].round_throughput,
        columns[0].round_throughput,
        columns[1].round_ok,
        columns[0].round_ok,
    )
    return {
        "first": first,
        "second": second,
        "first_pct_of_second": round(100 * a / b, 1) if a is not None and b else None,
        "rounds_paired": paired.n if paired else 0,
        "paired_ratio": _mean(paired),
        "paired_ratio_ci95": _ci95(paired),
        "status": worst([first["status"], second["status"]]),
    }


def share_sentence(axis: str, level: float, row: ShareOfSecond) -> str:
    """``connections 64: http+memc://… = 31.2% of memcached://… (11,337 / 36,338 ops/s)``."""
    first, second = row["first"], row["second"]
    head = f"{axis} {level:g}: {first['url']}"
    if row["first_pct_of_second"] is None:
        return f"{head}: no complete round on both sides to compare"
    caution = instability(row.get("paired_ratio_ci95"))
    return (
        f"{head} = {row['first_pct_of_second']:.1f}% of {second['url']} "
        f"({first['mean_per_s']:,} / {second['mean_per_s']:,} ops/s)"
        f"{f' - {caution}' if caution else ''}"
    )
