"""A capacity search's answer, pure: the highest passing rate and its interval, the
search's result document, and its lines as the terminal prints them.

From the steps report/search.py judged (docs/search.md, "The answer and its interval").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvbench.report.search import CLIENT, FAIL, PASS
from kvbench.results.model import SCHEMA_VERSION
from kvbench.results.status import FAILED, INTERRUPTED, OK, PARTIAL
from kvbench.units import format_us

# Why a search ended (runner/search.py's stop) -> the search's status.
_STOP_STATUS = {
    "bracketed": OK,
    "client_limit": OK,
    "max_rate": OK,
    "max_steps": PARTIAL,
    "max_time": PARTIAL,
    "min_rate": FAILED,
    "error": FAILED,
    "interrupted": INTERRUPTED,
}


def _status(steps: Sequence[dict[str, Any]], stop: str) -> str:
    """The search's status: ok with an answer, failed with none (no step passed, even
    when the client was the limit), partial when a bound ended it first."""
    if stop != INTERRUPTED and not any(s["verdict"] == PASS for s in steps):
        return FAILED
    return _STOP_STATUS[stop]


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def answer(
    steps: Sequence[dict[str, Any]], stop: str, objectives: Sequence[str], settings: dict[str, Any]
) -> dict[str, Any]:
    """The search's answer: the highest passing rate, its interval, and the sentence.

    The interval (docs/search.md, "The interval") runs from the lower end of the 95% CI of
    the throughput the passing step's rounds achieved (its mean without a CI, with fewer
    than 3 rounds) to the lowest rate that failed an objective: the server met the
    objectives at the one and missed them at the other, and the rounds say how far the
    first figure may be off. With no failing rate (the client was the limit, or the
    connections' highest rate passed), it has no upper end: the answer is "at least".
    """
    passed = [s for s in steps if s["verdict"] == PASS]
    best = max(passed, key=lambda s: s["rate_per_s"]) if passed else None
    above = [
        s
        for s in steps
        if s["verdict"] == FAIL and (best is None or s["rate_per_s"] > best["rate_per_s"])
    ]
    lowest_fail = min(above, key=lambda s: s["rate_per_s"]) if above else None
    first_fail = next((s for s in steps if s["verdict"] == FAIL), None)
    client = next((s for s in steps if s["verdict"] == CLIENT), None)
    slo = " and ".join(objectives)
    rounds = settings.get("rounds", 1)
    low = high = None
    if best is not None:
        ci = best.get("achieved_ci95_per_s")
        low = min(ci[0] if ci else best["achieved_per_s"] or 0.0, best["rate_per_s"])
        high = lowest_fail["rate_per_s"] if lowest_fail else None
    return {
        "rate_per_s": best["rate_per_s"] if best else None,
        "achieved_per_s": best["achieved_per_s"] if best else None,
        "interval_per_s": [low, high] if best else None,
        "at_least": best is not None and lowest_fail is None,
        "first_failure": {
            "step": first_fail["number"],
            "rate_per_s": first_fail["rate_per_s"],
            "reason": first_fail["reason"],
        }
        if first_fail
        else None,
        "client_limit": {"rate_per_s": client["rate_per_s"], "reason": client["reason"]}
        if client
        else None,
        "sentence": _sentence(best, low, high, client, stop, slo, rounds, steps, settings),
    }


def _sentence(
    best: dict[str, Any] | None,
    low: float | None,
    high: float | None,
    client: dict[str, Any] | None,
    stop: str,
    slo: str,
    rounds: int,
    steps: Sequence[dict[str, Any]],
    settings: dict[str, Any],
) -> str:
    over = f"over {rounds} round{'s' if rounds != 1 else ''} at each step"
    if stop == "error" or stop == "interrupted":
        last = steps[-1] if steps else None
        why = (
            f"step {last['number']} at {_rate(last['rate_per_s'])}/s: {last['reason']}"
            if last
            else stop
        )
        head = f"the search stopped ({why})"
        if best is None:
            return f"no answer: {head}"
        return f"at least {_rate(best['rate_per_s'])} ops/s with {slo}; {head}"
    if best is None:
        if client is not None:
            return (
                f"no answer: the client could not offer {_rate(client['rate_per_s'])}/s on time, "
                f"the lowest rate tried ({client['reason']})"
            )
        lowest = min(s["rate_per_s"] for s in steps)
        return f"no rate met {slo}: every step failed, down to {_rate(lowest)}/s"
    assert low is not None
    head = f"{_rate(best['rate_per_s'])} ops/s with {slo}"
    if client is not None:
        whose = (
            f"the client is the limit at {_rate(client['rate_per_s'])}/s, not the server: "
            f"{client['reason']}"
        )
        if high is None:
            return f"at least {head} (95% interval from {_rate(low)}, {over}); {whose}"
        return (  # a server's fail above it still bounds the answer; the bracket is wide
            f"max {head}; 95% interval {_rate(low)}\u2013{_rate(high)} {over} (wider than "
            f"--precision: {whose})"
        )
    flag = "--max-steps" if stop == "max_steps" else "--max-time"
    if high is None and stop in ("max_steps", "max_time"):  # no fail before the bound
        return (
            f"at least {head} (95% interval from {_rate(low)}, {over}): {flag} ended the "
            "search before a step missed the objectives; raise it to search higher"
        )
    if high is None:
        return (
            f"at least {head} (95% interval from {_rate(low)}, {over}): it passed at "
            f"{_rate(settings['max_rate_per_s'])}/s, the most {settings['connections']} "
            f"connection(s) x pipeline {settings['pipeline']} carry; raise --connections or "
            "--pipeline to search higher"
        )
    sentence = f"max {head}; 95% interval {_rate(low)}\u2013{_rate(high)} {over}"
    if stop in ("max_steps", "max_time"):
        sentence += f" (wider than --precision: {flag} ended the search)"
    return sentence


def search_document(
    search_id: str,
    started_at: str,
    target: str,
    objectives: Sequence[str],
    steps: Sequence[dict[str, Any]],
    stop: str,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """The search's result document (``kind: "search"``), as printed, stored and drawn.

    Args:
        steps: in the order measured: number, phase, rate_per_s, verdict, reason and the
            figures of ``judge_step``.
        stop: why it ended (runner/search.py).
        settings: start rate, precision, rounds, duration, bounds, connections, pipeline.
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "search",
        "search_id": search_id,
        "started_at": started_at,
        "target": target,
        "objectives": list(objectives),
        "status": _status(steps, stop),
        "stop": stop,
        "settings": settings,
        "answer": answer(steps, stop, objectives, settings),
        "steps": list(steps),
    }


def step_line(step: dict[str, Any]) -> str:
    """``step 3 (ramp) 4,000/s: pass  achieved 3,998/s  p50 45.0us  p99 120.0us  errors 0.000%``."""
    head = (
        f"step {step['number']} ({step['phase']}) {_rate(step['rate_per_s'])}/s: {step['verdict']}"
    )
    if step.get("achieved_per_s") is None:
        return f"{head}  {step['reason'] or ''}".rstrip()
    ci = step.get("achieved_ci95_per_s")
    ci_text = f" (95% CI {_rate(ci[0])}\u2013{_rate(ci[1])})" if ci else ""
    latency = "  ".join(
        f"{name} {format_us(v) if v is not None else 'n/a'}"
        for name, v in step["latency_us"].items()
    )
    text = (
        f"{head}  achieved {_rate(step['achieved_per_s'])}/s{ci_text}  {latency}  "
        f"errors {step['error_rate']:.3%}"
    )
    return f"{text}  - {step['reason']}" if step["reason"] else text


def search_lines(doc: dict[str, Any]) -> list[str]:
    """The search as the terminal prints it, after its steps: the curve by rate, the first
    failing step, the answer, why it stopped."""
    lines = [
        f"kvbench search {doc['search_id']}: {doc['target']}, {' and '.join(doc['objectives'])}"
    ]
    lines.append("curve (by offered rate):")
    lines.append(f"  {'offered/s':>12} {'achieved/s':>12} {'p50':>10} {'p99':>10}  verdict")
    for step in sorted(doc["steps"], key=lambda s: s["rate_per_s"]):
        latency = step.get("latency_us") or {}
        cells = [
            format_us(latency[name]) if latency.get(name) is not None else "-"
            for name in ("p50", "p99")
        ]
        achieved = step.get("achieved_per_s")
        lines.append(
            f"  {_rate(step['rate_per_s']):>12} {_rate(achieved) if achieved is not None else '-':>12} "
            f"{cells[0]:>10} {cells[1]:>10}  {step['verdict']}"
        )
    first = doc["answer"]["first_failure"]
    if first:
        lines.append(
            f"first failing step: step {first['step']} at {_rate(first['rate_per_s'])}/s: "
            f"{first['reason']}"
        )
    lines.append(doc["answer"]["sentence"])
    lines.append(f"search status: {status_words(doc)}")
    return lines


def status_words(doc: dict[str, Any]) -> str:
    """``ok (bracketed)``: the status, and why the search stopped where that says more
    (was: ``interrupted (interrupted)``)."""
    stop = doc["stop"].replace("_", " ")
    return doc["status"] if stop == doc["status"] else f"{doc['status']} ({stop})"
