"""The pacing schedule as tables (vegeta pacer_test style): no clock, exact answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.engine.pacing import POISSON_CHUNK, UNIFORM_BLOCK, Schedule, lag_outcome

S = 1_000_000_000


@pytest.mark.parametrize(
    ("rate", "i", "expected_ns"),
    [
        (1000, 0, 0),
        (1000, 1, 1_000_000),
        (1000, 999, 999_000_000),
        (3, 1, 333_333_334),
        (3, 3, S),
        (0.5, 1, 2 * S),
        (1_000_000, 1_000_000, S),
        (7, 7 * 3600, 3600 * S),
    ],
)
def test_uniform_intended_times(rate: float, i: int, expected_ns: int) -> None:
    assert Schedule(rate, 0).intended_ns(i) == expected_ns


@pytest.mark.parametrize(
    ("rate", "now_ns", "due"),
    [
        (1000, -1, 0),
        (1000, 0, 1),
        (1000, 999_999, 1),
        (1000, 1_000_000, 2),
        (1000, S, 1001),
        (3, S - 1, 3),
        (3, S, 4),
        (0.5, 3 * S, 2),
    ],
)
def test_uniform_due_counts(rate: float, now_ns: int, due: int) -> None:
    assert Schedule(rate, 0).due_by(now_ns) == due


def test_uniform_due_and_intended_agree_with_a_start_offset() -> None:
    schedule = Schedule(777, 5 * S)
    for now in range(5 * S, 6 * S, 12_345_679):
        due = schedule.due_by(now)
        assert schedule.intended_ns(due - 1) <= now < schedule.intended_ns(due)


def test_poisson_is_seeded_and_has_the_asked_rate() -> None:
    a = Schedule(10_000, 0, "poisson", seed=1)
    b = Schedule(10_000, 0, "poisson", seed=1)
    times = [a.intended_ns(i) for i in range(50_000)]
    assert times == [b.intended_ns(i) for i in range(50_000)]
    assert times[0] == 0 and times == sorted(times)
    assert a.due_by(5 * S) == pytest.approx(50_000, rel=0.02)
    gaps = np.diff(times)
    assert np.std(gaps) == pytest.approx(np.mean(gaps), rel=0.05)  # exponential: sd == mean


def test_poisson_due_by_agrees_with_intended_after_release() -> None:
    schedule = Schedule(1000, 0, "poisson", seed=4)
    due = schedule.due_by(20 * S)
    schedule.release(due - 10)
    assert schedule.intended_ns(due - 1) <= 20 * S < schedule.intended_ns(due)


@pytest.mark.parametrize("arrival", ["uniform", "poisson"])
def test_intended_range_is_intended_ns_over_chunk_boundaries(arrival: str) -> None:
    schedule = Schedule(50_000, 7 * S, arrival, seed=9)
    reference = Schedule(50_000, 7 * S, arrival, seed=9)
    first, stop = POISSON_CHUNK - 100, 3 * POISSON_CHUNK + 17
    assert schedule.intended_range(first, stop) == [
        reference.intended_ns(i) for i in range(first, stop)
    ]
    assert schedule.intended_range(stop, stop) == []


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.01, 2e9),
    st.integers(0, 10**15),
    st.one_of(st.integers(0, 10**4), st.integers(0, 10**12), st.just(UNIFORM_BLOCK - 3)),
    st.integers(0, 5000),
)
def test_uniform_int64_times_are_intended_ns_exactly(
    rate: float, start: int, first: int, count: int
) -> None:
    """What the compiled loop is fed (``intended_array``, int64 without a Python int per
    request) is ``intended_ns``'s exact arithmetic, across a block's edge; times past
    int64 are refused there and kept as Python ints by ``intended_range``."""
    schedule = Schedule(rate, start)
    expected = [schedule.intended_ns(i) for i in range(first, first + count)]
    assert schedule.intended_range(first, first + count) == expected
    if expected and expected[-1] >= 2**63:
        with pytest.raises(OverflowError):
            schedule.intended_array(first, first + count)
        return
    times = schedule.intended_array(first, first + count)
    assert times.dtype == np.int64 and times.tolist() == expected


def test_poisson_int64_times_are_its_chunks() -> None:
    schedule, again = Schedule(75_000, 10**14, "poisson", 3), Schedule(75_000, 10**14, "poisson", 3)
    times = schedule.intended_array(100, 3 * POISSON_CHUNK)
    assert times.tolist() == [again.intended_ns(i) for i in range(100, 3 * POISSON_CHUNK)]


def test_poisson_due_by_is_exact_across_released_chunks() -> None:
    """Releasing whole chunks never changes an answer about a kept instant."""
    schedule = Schedule(100_000, 0, "poisson", seed=5)
    reference = Schedule(100_000, 0, "poisson", seed=5)
    for now in range(0, 2 * S, 997_331):  # ~1 ms ticks, 100 requests each
        due = schedule.due_by(now)
        assert due == reference.due_by(now)
        assert schedule.intended_ns(due - 1) <= now < schedule.intended_ns(due)
        schedule.release(due)
    assert schedule._base >= 20 * POISSON_CHUNK  # the old chunks were let go


def test_poisson_refuses_questions_about_released_requests() -> None:
    schedule = Schedule(100_000, 0, "poisson", seed=5)
    due = schedule.due_by(S)
    schedule.release(due)
    kept = schedule._base
    assert kept > 0
    with pytest.raises(ValueError):
        schedule.intended_ns(kept - 1)
    with pytest.raises(ValueError):
        schedule.due_by(schedule.intended_ns(kept) - S // 2)
    # Between the last released time and the first kept one, the count is still known.
    assert schedule.due_by(schedule.intended_ns(kept) - 1) == kept


@pytest.mark.parametrize(
    ("lag", "outcome"),
    [(0, "on_time"), (1_000_000, "on_time"), (1_000_001, "late"), (S, "late"), (S + 1, "dropped")],
)
def test_lag_outcomes(lag: int, outcome: str) -> None:
    assert lag_outcome(lag, late_ns=1_000_000, max_lag_ns=S) == outcome


def test_bad_schedules_are_refused() -> None:
    with pytest.raises(ValueError):
        Schedule(0, 0)
    with pytest.raises(ValueError):
        Schedule(10, 0, "bursty")
