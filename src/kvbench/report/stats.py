"""Statistics over rounds: mean, sample standard deviation, Student-t 95% intervals.

Pure functions over plain floats (no scipy at run time): the t quantiles are tabulated.
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
    ci95: tuple[float, float] | None  # None with fewer than two samples


def spread(values: Sequence[float]) -> Spread:
    """Mean, stddev, min, max and the 95% confidence interval of the mean.

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
    half = t_critical_95(n - 1) * stddev / math.sqrt(n)
    return Spread(n, mean, stddev, min(values), max(values), (mean - half, mean + half))
