"""The capacity search's decisions against fake servers: deterministic, no clock of ours."""

from __future__ import annotations

import pytest

from kvbench.runner.search import (
    BRACKETED,
    CLIENT,
    CLIENT_LIMIT,
    ERROR,
    FAIL,
    MAX_RATE,
    MAX_STEPS,
    MAX_TIME,
    MIN_RATE,
    PASS,
    STEP_ERROR,
    SearchBounds,
    Step,
    search,
)


def server(capacity: float, client_limit: float = float("inf")):  # type: ignore[no-untyped-def]
    """A fake step: passes below ``capacity``, the client cannot offer ``client_limit``."""
    calls: list[tuple[float, str]] = []

    def measure(rate: float, phase: str) -> Step:
        calls.append((rate, phase))
        if rate >= client_limit:
            return Step(rate, CLIENT, "client limit: worker 0 used 97% of a core", phase)
        return Step(rate, PASS if rate < capacity else FAIL, None, phase)

    return measure, calls


def bounds(**changes: float) -> SearchBounds:
    fields = {
        "start_rate_per_s": 1000.0,
        "precision": 0.02,
        "max_rate_per_s": 1e6,
        "max_steps": 50,
        "max_time_s": 1e9,
    }
    fields.update(changes)
    return SearchBounds(**fields)  # type: ignore[arg-type]


def test_ramps_by_doubling_then_bisects_to_the_precision() -> None:
    measure, calls = server(84_000)
    outcome = search(measure, bounds())
    ramp = [rate for rate, phase in calls if phase == "ramp"]
    assert ramp == [1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000]
    assert outcome.stop == BRACKETED
    assert outcome.passed is not None and outcome.failed is not None
    assert outcome.passed < 84_000 <= outcome.failed
    assert outcome.failed - outcome.passed <= 0.02 * outcome.passed
    # each bisection step is the midpoint of the bracket before it
    assert all(phase == "bisect" for _, phase in calls[len(ramp) :])
    assert calls[len(ramp)][0] == (64000 + 128000) / 2


def test_passes_lie_below_fails_whatever_the_capacity() -> None:
    for capacity in (1500, 3333, 50_000, 777_777):
        measure, _ = server(capacity)
        outcome = search(measure, bounds())
        passes = [s.rate_per_s for s in outcome.steps if s.verdict == PASS]
        fails = [s.rate_per_s for s in outcome.steps if s.verdict == FAIL]
        assert max(passes) < min(fails), capacity
        assert max(passes) == outcome.passed and min(fails) == outcome.failed


def test_a_coarser_precision_takes_fewer_steps() -> None:
    fine = search(server(84_000)[0], bounds(precision=0.02))
    coarse = search(server(84_000)[0], bounds(precision=0.25))
    assert len(coarse.steps) < len(fine.steps)
    assert coarse.failed - coarse.passed <= 0.25 * coarse.passed  # type: ignore[operator]


def test_stops_at_the_client_limit_and_never_goes_past_it() -> None:
    measure, calls = server(capacity=500_000, client_limit=30_000)
    outcome = search(measure, bounds())
    assert outcome.stop == CLIENT_LIMIT
    assert outcome.client_rate == 32_000
    assert outcome.passed == 16_000 and outcome.failed is None  # not the server's
    assert max(rate for rate, _ in calls) == 32_000


def test_a_first_step_that_fails_ramps_down_until_one_passes() -> None:
    measure, calls = server(300)
    outcome = search(measure, bounds())
    assert [rate for rate, _ in calls[:4]] == [1000, 500, 250, 375]
    assert outcome.passed is not None and outcome.passed < 300 <= outcome.failed  # type: ignore[operator]


def test_nothing_passes_ends_at_the_lowest_rate() -> None:
    measure, _ = server(1)
    outcome = search(measure, bounds())
    assert outcome.stop == MIN_RATE and outcome.passed is None


def test_passing_at_the_highest_rate_the_connections_carry_stops_there() -> None:
    measure, calls = server(1e9)
    outcome = search(measure, bounds(max_rate_per_s=50_000))
    assert outcome.stop == MAX_RATE
    assert calls[-1][0] == 50_000 and outcome.failed is None


def test_max_steps_bounds_the_search() -> None:
    measure, calls = server(84_000)
    outcome = search(measure, bounds(max_steps=5))
    assert outcome.stop == MAX_STEPS and len(calls) == 5


def test_max_time_begins_no_step_that_would_overrun() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def measure(rate: float, phase: str) -> Step:
        now[0] += 10.0  # each step takes 10 s
        return Step(rate, PASS, None, phase)

    outcome = search(measure, bounds(max_time_s=35.0), clock)
    assert outcome.stop == MAX_TIME
    assert len(outcome.steps) == 3  # a 4th would end at 40 s


@pytest.mark.parametrize("verdict", [ERROR, "interrupted"])
def test_a_step_that_cannot_be_judged_stops_the_search(verdict: str) -> None:
    def measure(rate: float, phase: str) -> Step:
        return Step(rate, verdict if rate > 2000 else PASS, "target refused", phase)

    outcome = search(measure, bounds())
    assert outcome.stop == (STEP_ERROR if verdict == ERROR else "interrupted")
    assert outcome.passed == 2000 and len(outcome.steps) == 3
