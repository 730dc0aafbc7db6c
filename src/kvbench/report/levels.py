"""Sweeps and comparisons, pure: levels -> throughput/p99 rows, the knee, an SLO's best
level; targets -> ratios with confidence intervals.

Every figure comes from ``summarize`` of stored runs; nothing here touches a server.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from kvbench.errors import ConfigError
from kvbench.metrics.histogram import Histogram
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.json_report import document
from kvbench.report.stats import Spread, spread
from kvbench.report.summary import PERCENTILES, ReportModel, summarize
from kvbench.results.model import SCHEMA_VERSION, RunResult

# The knee: the last level after which throughput grows less than KNEE_GAIN per step while
# p99 grows more than KNEE_P99_GROWTH.
KNEE_GAIN = 0.05
KNEE_P99_GROWTH = 0.10

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


def level_row(
    level: float, run: RunResult | None, reason: str | None = None, slo: Slo | None = None
) -> LevelRow:
    """A sweep row from a level's run, or a failed row when the level did not run."""
    if run is None:
        return LevelRow(level, "failed", reason, None, {}, 0, None)
    model = summarize(run)
    rates = [r["throughput_per_s"] for r in model.rounds if r["status"] == "ok"]
    return LevelRow(
        level=level,
        status=run.status,
        reason=reason,
        throughput=spread(rates) if rates else None,
        latency_us=model.latency_us,
        errors=model.total_errors,
        run_id=run.run_id,
        slo_met=slo.met(model.latency_us) if slo is not None else None,
    )


def knee(rows: list[LevelRow]) -> float | None:
    """The last level that still added throughput efficiently, or None within the range."""
    good = [r for r in rows if r.throughput is not None and r.latency_us.get("p99")]
    for a, b in itertools.pairwise(good):
        assert a.throughput is not None and b.throughput is not None
        gain = b.throughput.mean / a.throughput.mean - 1 if a.throughput.mean else 0
        growth = b.latency_us["p99"] / a.latency_us["p99"] - 1  # type: ignore[operator]
        if gain < KNEE_GAIN and growth > KNEE_P99_GROWTH:
            return a.level
    return None


def best_level(rows: list[LevelRow]) -> float | None:
    """The highest level whose run met the SLO."""
    met = [r.level for r in rows if r.slo_met]
    return max(met) if met else None


def level_document(row: LevelRow) -> dict[str, Any]:
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
        "latency_us": row.latency_us,
        "errors": row.errors,
        "slo_met": row.slo_met,
    }


def sweep_document(
    axis: str, target: str, rows: list[LevelRow], slo: str | None = None
) -> dict[str, Any]:
    """The sweep's result document (``kind: "sweep"``): its levels, knee and SLO level."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "sweep",
        "axis": axis,
        "target": target,
        "levels": [level_document(r) for r in rows],
        "knee": knee(rows),
        "slo": slo,
        "best_level": best_level(rows) if slo else None,
    }


@dataclass(frozen=True, slots=True)
class Ratio:
    """B relative to A, as paired per-round ratios."""

    mean: float
    ci95: tuple[float, float] | None


def paired_ratio(a: list[float], b: list[float]) -> Ratio | None:
    """Mean of per-round ratios b[i]/a[i] with a t interval (rounds were interleaved)."""
    pairs = [y / x for x, y in zip(a, b, strict=False) if x]
    if not pairs:
        return None
    s = spread(pairs)
    return Ratio(s.mean, s.ci95)


@dataclass(frozen=True, slots=True)
class TargetColumn:
    """One target of a comparison."""

    url: str
    model: ReportModel
    round_throughput: list[float]
    round_p99_us: list[float]


def _p99_us(intervals: list[IntervalSnapshot]) -> float:
    hists = [h for s in intervals for h in s.latency.values()]
    merged = Histogram.merged(hists) if hists else None
    return merged.value_at_percentile(99) / 1000 if merged and merged.total_count else 0.0


def target_column(run: RunResult) -> TargetColumn:
    """Per-round throughput and p99 (from each round's merged histogram).

    A run of one round keeps no round records: its whole window is then its one round.
    """
    model = summarize(run)
    if model.rounds:
        rates = [r["throughput_per_s"] for r in model.rounds]
        groups = [[s for s in run.intervals if s.round == i] for i in range(len(run.rounds))]
    else:
        rates, groups = [model.throughput_per_s], [run.intervals]
    url = run.targets[0]["url"] if run.targets else "?"
    return TargetColumn(url, model, rates, [_p99_us(g) for g in groups])


def comparison(columns: list[TargetColumn]) -> list[dict[str, Any]]:
    """Each target against the first: throughput and p99 ratios with 95% CIs."""
    base = columns[0]
    rows = []
    for column in columns[1:]:
        throughput = paired_ratio(base.round_throughput, column.round_throughput)
        p99 = paired_ratio(base.round_p99_us, column.round_p99_us)
        rows.append(
            {
                "target": column.url,
                "baseline": base.url,
                "throughput_ratio": throughput.mean if throughput else None,
                "throughput_ratio_ci95": list(throughput.ci95)
                if throughput and throughput.ci95
                else None,
                "p99_ratio": p99.mean if p99 else None,
                "p99_ratio_ci95": list(p99.ci95) if p99 and p99.ci95 else None,
            }
        )
    return rows


def comparison_sentence(row: dict[str, Any]) -> str:
    """``http+memc://…: 72% of memcached://… throughput (95% CI 69-75%)``."""
    ratio = row["throughput_ratio"]
    if ratio is None:
        return f"{row['target']}: no completed rounds to compare"
    ci = row["throughput_ratio_ci95"]
    ci_text = f" (95% CI {ci[0]:.0%}-{ci[1]:.0%})" if ci else " (one round: no CI)"
    p99 = row["p99_ratio"]
    p99_text = f"; p99 {p99:.2f}x" if p99 else ""
    return f"{row['target']}: {ratio:.0%} of {row['baseline']} throughput{ci_text}{p99_text}"


def compare_document(columns: list[TargetColumn]) -> dict[str, Any]:
    """The comparison's result document (``kind: "compare"``): targets and their ratios."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "compare",
        "targets": [document(c.model) for c in columns],
        "comparison": comparison(columns),
    }
