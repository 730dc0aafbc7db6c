"""Statistics over rounds: mean, sample standard deviation, Student-t 95% intervals.

Pure functions over plain floats (no scipy at run time): the t quantiles are tabulated.
An interval needs ``MIN_CI_SAMPLES`` rounds; a ratio's interval is taken on the logs of
the paired ratios (``log_ratio``), so it is never negative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Two-sided 95% Student t critical values t(0.975, df) for df = 1..30 (standard tables);
# beyond 30 the normal value 1.96 is within 2%.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


# Fewer rounds give no interval: with 2, t(0.975, 1) = 12.7 makes it wider than the figure
# itself (seen: "-72,935..196.2k" ops/s). 3 rounds (t = 4.3) is the least that says anything.
MIN_CI_SAMPLES = 3


def t_critical_95(df: int) -> float:
    """t(0.975, df): the half-width multiplier of a two-sided 95% interval."""
    if df < 1:
        raise ValueError("a confidence interval needs at least two samples")
    return _T975[df - 1] if df <= len(_T975) else 1.96


@dataclass(frozen=True, slots=True)
class Spread:
    """Summary of repeated measurements of one quantity."""

    n: int
    mean: float
    stddev: float  # sample standard deviation (n - 1); 0 for one sample
    minimum: float
    maximum: float
    ci95: tuple[float, float] | None  # None with fewer than MIN_CI_SAMPLES samples
    clamped: bool = False  # the interval's lower end fell below the floor and is the floor


def spread(values: Sequence[float], floor: float | None = None) -> Spread:
    """Mean, stddev, min, max and the 95% confidence interval of the mean.

    Args:
        values: one figure per round.
        floor: the least the mean can be (0 for a throughput): a lower bound below it is
            raised to it and ``clamped`` says so.

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("spread of no values")
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return Spread(n, mean, 0.0, values[0], values[0], None)
    stddev = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    if n < MIN_CI_SAMPLES:
        return Spread(n, mean, stddev, min(values), max(values), None)
    half = t_critical_95(n - 1) * stddev / math.sqrt(n)
    low, clamped = mean - half, False
    if floor is not None and low < floor:
        low, clamped = floor, True
    return Spread(n, mean, stddev, min(values), max(values), (low, mean + half), clamped)


@dataclass(frozen=True, slots=True)
class Ratio:
    """B relative to A from paired rounds: a geometric mean of the per-pair ratios.

    Attributes:
        n: pairs used.
        mean: exp(mean of log(b/a)).
        ci95: exp(mean +- t * s / sqrt(n)) of the logs; None below MIN_CI_SAMPLES pairs.
    """

    n: int
    mean: float
    ci95: tuple[float, float] | None


def log_ratio(pairs: Sequence[tuple[float, float]]) -> Ratio | None:
    """The ratio b/a of paired figures (round i of A with round i of B), on logs.

    Ratios multiply, so their mean and interval are taken on logs: the interval is
    exp(m +- t * s / sqrt(n)) where m and s are the mean and standard deviation of
    log(b/a), never negative and symmetric in A and B (A/B is its reciprocal). A pair with
    a zero cannot be logged: when B is 0 somewhere (nothing succeeded) the ratio is the
    ratio of the sums, without an interval.

    Returns:
        None when no pair has a > 0.
    """
    usable = [(a, b) for a, b in pairs if a > 0]
    if not usable:
        return None
    if any(b <= 0 for _, b in usable):
        return Ratio(len(usable), sum(b for _, b in usable) / sum(a for a, _ in usable), None)
    logs = spread([math.log(b / a) for a, b in usable])
    ci = (math.exp(logs.ci95[0]), math.exp(logs.ci95[1])) if logs.ci95 else None
    return Ratio(logs.n, math.exp(logs.mean), ci)
