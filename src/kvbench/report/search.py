"""The capacity search, pure: objectives, and each step's verdict from its run.

``kvbench search`` (docs/search.md) offers rates in steps (runner/search.py decides which);
here a step's stored run becomes its verdict: PASS when every objective held, FAIL when one
was missed (naming it, with the figure), CLIENT when the rate was not offered or a miss
came with evidence that the client delayed requests (a client limit is never reported as
the server's). report/search_answer.py makes the steps an answer. Nothing here touches a
server.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvbench.errors import ConfigError
from kvbench.metrics.histogram import Histogram
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.latency import min_samples, percentile_ns
from kvbench.report.stats import spread
from kvbench.report.summary import ReportModel, summarize
from kvbench.report.verdicts import ACHIEVED_SHARE
from kvbench.results.model import RunResult
from kvbench.results.status import FAILED, INTERRUPTED, OK, PARTIAL
from kvbench.units import format_us

PASS, FAIL, CLIENT, ERROR = "pass", "fail", "client", "error"

# The client was the limit when its sends lagged their slots by more than this at p99
# (engine/pacing.py counts a send 2 ms behind as late; a tick's batching explains 0.1 ms)...
SEND_LAG_P99_LIMIT_NS = 2_000_000
# ...or when more than this share of the offered requests went out late or not at all...
LATE_SHARE_LIMIT = 0.01
# ...or it achieved less than ACHIEVED_SHARE of the offered rate (report/verdicts.py), while
# its connections had free slots: in flight below this share of connections x pipeline at
# every interval. With the slots full, requests waited for the server's replies, not for
# the client: that lateness is the server's queue, and intended-time latency shows it.
SLOTS_FULL_SHARE = 0.5
# Verdicts (report/verdicts.py) that say the client, not the server, set the pace.
CLIENT_VERDICTS = ("client.cpu", "client.loop_lag")

_LATENCY = re.compile(r"^\s*p(\d+(?:\.\d+)?)\s*(<=|<)\s*([\d.]+)\s*(ns|us|µs|ms|s)\s*$")
_ERROR_RATE = re.compile(r"^\s*error_rate\s*(<=|<)\s*([\d.]+)\s*(%?)\s*$")
_UNIT_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


@dataclass(frozen=True, slots=True)
class Objective:
    """``p99<1ms`` (a latency percentile, from intended send times) or ``error_rate<0.1%``.

    Attributes:
        text: as given.
        percentile: 0 < p <= 100 for a latency objective; None for the error rate.
        limit: microseconds for a latency, a share (0.001) for the error rate.
        inclusive: ``<=`` rather than ``<``.
    """

    text: str
    percentile: float | None
    limit: float
    inclusive: bool

    @property
    def name(self) -> str:
        """``p99``, ``p99.9``, ``error_rate``: the figure it judges."""
        return "error_rate" if self.percentile is None else f"p{self.percentile:g}"

    def holds(self, value: float) -> bool:
        return value <= self.limit if self.inclusive else value < self.limit

    def describe(self, value: float) -> str:
        """``p99 1.84 ms >= 1 ms``: the figure against the limit, the way it went."""
        op = (
            ("<=" if self.inclusive else "<")
            if self.holds(value)
            else (">" if self.inclusive else ">=")
        )
        if self.percentile is None:
            return f"error rate {value:.3%} {op} {self.limit:.3%}"
        return f"{self.name} {format_us(value)} {op} {format_us(self.limit)}"


def parse_objective(text: str) -> Objective:
    """``p99<1ms``, ``p99.9<=250us``, ``p50<100us``, ``error_rate<0.1%``.

    Raises:
        ConfigError: naming --slo, when it is none of these.
    """
    latency = _LATENCY.match(text)
    if latency:
        percentile = float(latency.group(1))
        limit = float(latency.group(3)) * _UNIT_US[latency.group(4)]
        if 0 < percentile <= 100 and limit > 0:
            return Objective(text.strip(), percentile, limit, latency.group(2) == "<=")
    errors = _ERROR_RATE.match(text)
    if errors:
        share = float(errors.group(2)) / (100 if errors.group(3) else 1)
        if 0 < share <= 1:
            return Objective(text.strip(), None, share, errors.group(1) == "<=")
    raise ConfigError(
        "--slo",
        f"{text!r} is not an objective like p99<1ms, p99.9<=250us or error_rate<0.1% "
        "(a percentile above 0 and at most 100, a limit above 0)",
    )


def _merged(snaps: Sequence[IntervalSnapshot], field: str = "latency") -> Histogram | None:
    hists = [h for s in snaps for h in getattr(s, field).values()]
    return Histogram.merged(hists) if hists else None


def _percentile_us(hist: Histogram | None, percentile: float) -> float | None:
    if hist is None or hist.total_count < min_samples(percentile):
        return None
    return percentile_ns(hist, percentile) / 1000


def _rounds(run: RunResult, model: ReportModel) -> list[tuple[float, list[IntervalSnapshot]]]:
    """Per complete round: its throughput and its intervals (one round: the run's window)."""
    if not model.rounds:
        return [(model.throughput_per_s, list(run.intervals))]
    return [
        (r["throughput_per_s"], [s for s in run.intervals if s.round == r["round"] - 1])
        for r in model.rounds
        if r["status"] == OK
    ]


def _sending(run: RunResult, model: ReportModel, slots: int) -> dict[str, Any]:
    """How the client kept to its schedule: offered, late, dropped, send lag, in flight."""
    offered = int(sum(s.stats.get("offered", 0) for s in run.intervals))
    outcomes: dict[str, int] = {}
    for row in model.ops:
        for name in ("late", "dropped"):
            outcomes[name] = outcomes.get(name, 0) + row.outcomes.get(name, 0)
    lags = [s.lag for s in run.intervals if s.lag is not None]
    lag = Histogram.merged(lags) if lags else None
    inflight = [s.stats["inflight_mean"] for s in run.intervals if "inflight_mean" in s.stats]
    completed = sum(r.completed for r in model.ops)
    return {
        "offered": offered,
        "completed": completed,
        "late": outcomes["late"] if outcomes else 0,
        "dropped": outcomes["dropped"] if outcomes else 0,
        "send_lag_p99_us": percentile_ns(lag, 99) / 1000 if lag and lag.total_count else None,
        "inflight_max": max(inflight) if inflight else None,
        "slots": slots,
    }


def _slots_free(sending: dict[str, Any]) -> str | None:
    """``with 3 of 50 connection slots in use`` while the connections had room; None when
    they were full (late sends then waited for the server's replies, not for the client)."""
    inflight, slots = sending["inflight_max"], sending["slots"]
    if inflight is not None and inflight >= SLOTS_FULL_SHARE * slots:
        return None
    return f"with {inflight or 0:.0f} of {slots:,} connection slots in use"


def shortfall(sending: dict[str, Any]) -> tuple[str, bool] | None:
    """Fewer than ``ACHIEVED_SHARE`` of the offered requests answered: why, and whether the
    connections had room (the client did not send them: the rate was not offered) or were
    full (the server did not keep up: a miss however low the latency, as its backlog grows
    with every second); None when the rate was served."""
    free, offered = _slots_free(sending), sending["offered"]
    if not offered or sending["completed"] >= ACHIEVED_SHARE * offered:
        return None
    where = free or "with the connection slots full: the server did not keep up"
    reason = (
        f"achieved {sending['completed']:,} of {offered:,} offered requests "
        f"({sending['completed'] / offered:.1%}, limit {ACHIEVED_SHARE:.0%}) {where}"
    )
    return reason, free is not None


def client_limit(model: ReportModel, sending: dict[str, Any]) -> str | None:
    """The evidence that the client delayed the step's requests; None when there is none.

    The client's own verdicts (its CPU, its event loop) count alone. Late sends count only
    while the connections had free slots: with the slots full the requests were waiting
    for the server.
    """
    for verdict in model.verdicts:
        if verdict.id in CLIENT_VERDICTS:
            return verdict.message
    free = _slots_free(sending)
    if free is None:
        return None
    lag, offered = sending["send_lag_p99_us"], sending["offered"]
    if lag is not None and lag * 1000 > SEND_LAG_P99_LIMIT_NS:
        return (
            f"sends lagged their schedule {format_us(lag)} at p99 (limit "
            f"{format_us(SEND_LAG_P99_LIMIT_NS / 1000)}) {free}"
        )
    behind = sending["late"] + sending["dropped"]
    if offered and behind > LATE_SHARE_LIMIT * offered:
        return (
            f"{behind:,} of {offered:,} requests went out late or not at all "
            f"({behind / offered:.1%}, limit {LATE_SHARE_LIMIT:.0%}) {free}"
        )
    return None


@dataclass(frozen=True, slots=True)
class StepJudgement:
    """A step's verdict, what decided it, and its figures (``figures`` is JSON)."""

    verdict: str
    reason: str | None
    figures: dict[str, Any]


def judge_step(
    run: RunResult | None,
    objectives: Sequence[Objective],
    slots: int,
    reason: str | None = None,
) -> StepJudgement:
    """A step's verdict from its run (all its rounds): CLIENT, FAIL, PASS, or ERROR.

    CLIENT when the rate was not offered (``shortfall``), or when an objective was missed
    while the client delayed requests (``client_limit``): such a miss is never reported as
    the server's. A pass stands even when the client was late: its latencies include the
    client's delays, so the server met the objectives with room to spare.

    Args:
        run: the step's run; None when it did not run (``reason`` says why).
        objectives: all must hold, judged on the step's rounds together: a percentile
            over every request of them, the error rate over every op.
        slots: connections x pipeline (config/limits.py ``max_connection_slots``).
    """
    if run is None:
        return StepJudgement(ERROR, reason or "the step did not run", {})
    model = summarize(run)
    rounds = _rounds(run, model)
    merged = _merged([s for _, snaps in rounds for s in snaps])
    sending = _sending(run, model, slots)
    figures = _figures(run, model, rounds, merged, objectives, sending)
    status = model.status.name
    if status == INTERRUPTED:
        return StepJudgement(INTERRUPTED, "interrupted (Ctrl-C)", figures)
    if status == PARTIAL:
        return StepJudgement(ERROR, "; ".join(model.status.reasons), figures)
    short = shortfall(sending)
    if short is not None and short[1]:  # the rate was not offered: nothing to judge by
        return StepJudgement(CLIENT, f"client limit: {short[0]}", figures)
    judged = _against_objectives(objectives, figures, merged, status, model)
    if short is not None and judged.verdict != ERROR:  # the server fell behind the rate
        missed = [judged.reason] if judged.reason else []
        judged = StepJudgement(FAIL, "; ".join([*missed, short[0]]), figures)
    if judged.verdict != FAIL:
        # A pass stands whatever the client did: latency from the intended send times
        # counts the client's delays too, so the server alone did at least as well.
        return judged
    limited = client_limit(model, sending)
    if limited is None:
        return judged
    return StepJudgement(
        CLIENT,
        f"client limit: {limited}; the miss ({judged.reason}) cannot be the server's alone",
        figures,
    )


def _figures(
    run: RunResult,
    model: ReportModel,
    rounds: list[tuple[float, list[IntervalSnapshot]]],
    merged: Histogram | None,
    objectives: Sequence[Objective],
    sending: dict[str, Any],
) -> dict[str, Any]:
    """A step's figures as its document lists them: throughput over the rounds, the
    percentiles (p50, p99 and the objectives') over all of them and per round, errors,
    and how the client kept to its schedule."""
    rates = [rate for rate, _ in rounds]
    achieved = spread(rates, floor=0.0) if rates else None
    wanted = sorted({50.0, 99.0} | {o.percentile for o in objectives if o.percentile})
    return {
        "run_id": run.run_id,
        "status": model.status.name,
        "achieved_per_s": achieved.mean if achieved else None,
        "achieved_ci95_per_s": list(achieved.ci95) if achieved and achieved.ci95 else None,
        "rounds": len(rounds),
        "latency_us": {f"p{p:g}": _percentile_us(merged, p) for p in wanted},
        "round_latency_us": {
            f"p{p:g}": [_percentile_us(_merged(snaps), p) for _, snaps in rounds] for p in wanted
        },
        "error_rate": model.total_errors / model.total_ops if model.total_ops else 0.0,
        **sending,
    }


def _against_objectives(
    objectives: Sequence[Objective],
    figures: dict[str, Any],
    merged: Histogram | None,
    status: str,
    model: ReportModel,
) -> StepJudgement:
    missed: list[str] = []
    for objective in objectives:
        if objective.percentile is None:
            value: float | None = figures["error_rate"]
        else:
            value = figures["latency_us"][objective.name]
            if value is None:
                count = merged.total_count if merged else 0
                need = min_samples(objective.percentile)
                return StepJudgement(
                    ERROR,
                    f"{count:,} requests are too few to judge {objective.name} (needs "
                    f"{need:,}): raise --duration or --rounds",
                    figures,
                )
        assert value is not None
        if not objective.holds(value):
            missed.append(objective.describe(value))
    if status == FAILED:  # errors above --max-error-rate, nothing succeeded
        missed += list(model.status.reasons)
    if missed:
        return StepJudgement(FAIL, "; ".join(missed), figures)
    return StepJudgement(PASS, None, figures)
