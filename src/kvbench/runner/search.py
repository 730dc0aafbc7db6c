"""The capacity search's decisions: which rate to offer next, and when to stop.

Pure: the measuring is injected (``measure(rate, phase) -> Step``; cli/capacity.py runs a
level of rounds and judges it, report/search.py), and so is the clock, so the tests drive
every branch with a fake server. The rule (docs/search.md):

- ramp: from the start rate, multiply by ``growth`` while steps pass; a first step that
  fails divides instead, until one passes;
- bisect: between the highest passing and the lowest failing rate, at their midpoint,
  until the bracket is within ``precision`` of its lower end;
- stop at once when a step says the client was the limit (``CLIENT``): a rate the client
  cannot offer on time says nothing about the server, so the search never goes past it;
  and when a step could not be judged (``ERROR``, ``INTERRUPTED``), or a bound is reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, CLIENT, ERROR, INTERRUPTED = "pass", "fail", "client", "error", "interrupted"

# Why a search ended (``SearchOutcome.stop``).
BRACKETED = "bracketed"  # the bracket is within --precision: the answer
CLIENT_LIMIT = "client_limit"  # the client could not offer a step's rate on time
MAX_RATE = "max_rate"  # passing at the highest rate the connections can carry
MIN_RATE = "min_rate"  # failing at the lowest rate the search offers
MAX_STEPS = "max_steps"
MAX_TIME = "max_time"
STEP_ERROR = "error"  # a step's run failed to run (unreachable, aborted, partial)
STOPPED = "interrupted"  # Ctrl-C

# A ramp that divides its start rate below this has found nothing the server takes.
MIN_SEARCH_RATE_PER_S = 10.0


@dataclass(frozen=True, slots=True)
class Step:
    """One step as measured and judged.

    Attributes:
        rate_per_s: the offered rate.
        verdict: PASS, FAIL (an objective missed: the server), CLIENT (the rate was not
            offered on time: the client), ERROR or INTERRUPTED (no judgement).
        reason: for anything but PASS, what decided it (``p99 1.84 ms >= 1 ms``).
        phase: ``ramp`` or ``bisect``.
        detail: the step's figures, for the report (opaque here).
    """

    rate_per_s: float
    verdict: str
    reason: str | None = None
    phase: str = "ramp"
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchBounds:
    """Where a search starts and what bounds it.

    Attributes:
        start_rate_per_s: the first step's rate.
        precision: stop bisecting when (lowest fail - highest pass) / highest pass is
            at most this (0.02: 2%).
        max_rate_per_s: the highest rate to offer (the connections' slots bound it).
        max_steps: steps at most.
        max_time_s: a step is begun only if the search's time so far plus the longest
            step yet fits within this.
        growth: the ramp's factor between steps.
    """

    start_rate_per_s: float
    precision: float
    max_rate_per_s: float
    max_steps: int
    max_time_s: float
    growth: float = 2.0


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """The steps in the order measured, why the search ended, and its bracket.

    Attributes:
        passed: the highest rate that passed (None: none did).
        failed: the lowest rate that failed on an objective (None: none did).
        client_rate: the rate at which the client was the limit (None: it never was).
    """

    steps: list[Step]
    stop: str
    passed: float | None
    failed: float | None
    client_rate: float | None = None


def _next_rate(passed: float | None, failed: float | None, bounds: SearchBounds) -> float:
    if passed is None:
        assert failed is not None
        return failed / bounds.growth
    if failed is None:
        return min(passed * bounds.growth, bounds.max_rate_per_s)
    middle = (passed + failed) / 2
    whole = float(round(middle))  # whole requests/s read better, when it stays inside
    return whole if passed < whole < failed else middle


def _bracketed(passed: float | None, failed: float | None, precision: float) -> bool:
    return passed is not None and failed is not None and failed - passed <= precision * passed


def search(
    measure: Callable[[float, str], Step],
    bounds: SearchBounds,
    clock: Callable[[], float] = time.monotonic,
) -> SearchOutcome:
    """Ramp, then bisect, to the highest rate whose step passes.

    Args:
        measure: runs one step at a rate (``phase`` is ``ramp`` or ``bisect``) and
            judges it.
        bounds: start rate, precision and the bounds.
        clock: seconds, for ``max_time_s``.

    Returns:
        Every step and why it ended; the bracket is ``passed`` .. ``failed``.
    """
    steps: list[Step] = []
    passed: float | None = None
    failed: float | None = None
    started, longest = clock(), 0.0
    rate = min(bounds.start_rate_per_s, bounds.max_rate_per_s)
    while True:
        if len(steps) >= bounds.max_steps:
            return SearchOutcome(steps, MAX_STEPS, passed, failed)
        if steps and clock() - started + longest > bounds.max_time_s:
            return SearchOutcome(steps, MAX_TIME, passed, failed)
        phase = "bisect" if passed is not None and failed is not None else "ramp"
        begun = clock()
        step = measure(rate, phase)
        longest = max(longest, clock() - begun)
        steps.append(step)
        if step.verdict == CLIENT:
            return SearchOutcome(steps, CLIENT_LIMIT, passed, failed, rate)
        if step.verdict in (ERROR, INTERRUPTED):
            return SearchOutcome(
                steps, STOPPED if step.verdict == INTERRUPTED else STEP_ERROR, passed, failed
            )
        if step.verdict == PASS:
            passed = rate
            if failed is None and rate >= bounds.max_rate_per_s:
                return SearchOutcome(steps, MAX_RATE, passed, failed)
        else:
            failed = rate
        if _bracketed(passed, failed, bounds.precision):
            return SearchOutcome(steps, BRACKETED, passed, failed)
        rate = _next_rate(passed, failed, bounds)
        if rate < MIN_SEARCH_RATE_PER_S:
            return SearchOutcome(steps, MIN_RATE, passed, failed)
