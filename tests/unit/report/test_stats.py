from __future__ import annotations

import math

import pytest
from scipy import stats as scipy_stats

from kvbench.report.stats import spread, t_critical_95


@pytest.mark.parametrize("df", [1, 2, 4, 9, 29, 30])
def test_t_table_matches_scipy(df: int) -> None:
    assert t_critical_95(df) == pytest.approx(scipy_stats.t.ppf(0.975, df), abs=0.001)


def test_spread_of_known_values() -> None:
    s = spread([10.0, 12.0, 14.0])
    assert (s.n, s.mean, s.minimum, s.maximum) == (3, 12.0, 10.0, 14.0)
    assert s.stddev == pytest.approx(2.0)
    half = 4.303 * 2.0 / math.sqrt(3)
    assert s.ci95 == pytest.approx((12.0 - half, 12.0 + half))


def test_one_value_has_no_interval() -> None:
    s = spread([5.0])
    assert s.ci95 is None and s.stddev == 0.0


def test_interval_covers_the_true_mean_about_95_percent_of_the_time() -> None:
    import random

    rng = random.Random(7)
    covered = 0
    for _ in range(2000):
        lo, hi = spread([rng.gauss(100, 10) for _ in range(5)]).ci95  # type: ignore[misc]
        covered += lo <= 100 <= hi
    assert covered / 2000 == pytest.approx(0.95, abs=0.015)


def test_no_values_is_an_error() -> None:
    with pytest.raises(ValueError):
        spread([])


def test_two_values_have_a_spread_but_no_interval() -> None:
    """Seen: "-72,935..196.2k" ops/s from two rounds (t(1) = 12.7)."""
    s = spread([61_600.0, 184_000.0], floor=0.0)
    assert s.n == 2 and s.stddev > 0 and s.ci95 is None


def test_a_throughput_interval_never_goes_below_zero() -> None:
    s = spread([10.0, 200.0, 20.0], floor=0.0)
    assert s.ci95 is not None and s.ci95[0] == 0.0 and s.clamped
    assert s.ci95[1] == pytest.approx(s.mean + 4.303 * s.stddev / math.sqrt(3))
    unclamped = spread([10.0, 200.0, 20.0])
    assert unclamped.ci95 is not None and unclamped.ci95[0] < 0 and not unclamped.clamped
    assert not spread([10.0, 12.0, 14.0], floor=0.0).clamped
