"""Facebook's ETC model: every sampler against its distribution's CDF within sampling
error (a Kolmogorov-Smirnov bound for n draws, seeded), and the clipping rules."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.config.workload_fields import FB_ETC_MAX_KEY_BYTES
from kvbench.engine.pacing import Schedule
from kvbench.workload.models import (
    FB_GAP_GPD,
    FB_KEY_GEV,
    FB_VALUE_HEAD,
    fb_gap_sigma_ns,
    fb_key_sizes,
    fb_value_size_cdf,
    fb_value_sizes,
    gev_cdf,
    gev_quantile,
    gpd_cdf,
    gpd_quantile,
    ks_bound,
    model_key_sizes,
    model_value_sizes,
)

N = 200_000


def ks_distance_discrete(sizes: np.ndarray, cdf_at: np.ndarray, grid: np.ndarray) -> float:
    """The largest gap between the sample's CDF and the model's at whole sizes."""
    empirical = np.searchsorted(np.sort(sizes), grid, side="right") / len(sizes)
    return float(np.abs(empirical - cdf_at).max())


def test_quantile_functions_invert_their_cdfs() -> None:
    p = np.linspace(0.001, 0.999, 999)
    assert np.allclose(gev_cdf(gev_quantile(p, *FB_KEY_GEV), *FB_KEY_GEV), p)
    assert np.allclose(gpd_cdf(gpd_quantile(p, *FB_GAP_GPD), *FB_GAP_GPD), p)


def test_key_sizes_follow_the_rounded_gev() -> None:
    sizes = fb_key_sizes(N, np.random.default_rng(1))
    grid = np.arange(0, 200)
    # round(G) <= k  <=>  G < k + 0.5
    distance = ks_distance_discrete(sizes, gev_cdf(grid + 0.5, *FB_KEY_GEV), grid)
    assert distance < ks_bound(N)
    # the median: mu + sigma ((ln 2)^-xi - 1) / xi = 33.85 bytes
    assert np.median(sizes) == 34


def test_value_sizes_follow_mutilates_head_and_pareto_tail() -> None:
    sizes = fb_value_sizes(N, np.random.default_rng(2))
    grid = np.arange(0, 20_000)
    distance = ks_distance_discrete(sizes, fb_value_size_cdf(grid), grid)
    assert distance < ks_bound(N)
    # the head: 2-byte values are the commonest single size (17.8%)
    assert abs((sizes == 2).mean() - FB_VALUE_HEAD[2]) < 4 * np.sqrt(0.18 * 0.82 / N)
    assert (sizes >= 15).mean() == pytest.approx(1 - sum(FB_VALUE_HEAD), abs=0.01)


def test_a_sampler_off_its_distribution_fails_the_same_check() -> None:
    """The check has teeth: sizes one byte longer are rejected."""
    sizes = fb_key_sizes(N, np.random.default_rng(1)) + 1
    grid = np.arange(0, 200)
    assert ks_distance_discrete(sizes, gev_cdf(grid + 0.5, *FB_KEY_GEV), grid) > ks_bound(N)


@pytest.mark.parametrize("rate", [1_000.0, 52_718.0])
def test_fb_etc_arrivals_are_pareto_gaps_with_the_rates_mean(rate: float) -> None:
    schedule = Schedule(rate, 0, "fb-etc", seed=7)
    times = np.array(schedule.intended_range(0, N + 1), dtype=np.float64)
    gaps = np.diff(times)
    sigma = fb_gap_sigma_ns(rate)
    ordered = np.sort(gaps)
    model = gpd_cdf(ordered, 0.0, sigma, FB_GAP_GPD[2])
    upper = np.arange(1, N + 1) / N
    distance = max(np.abs(upper - model).max(), np.abs(upper - 1 / N - model).max())
    # times are whole ns: gaps move by < 1 ns, far inside the bound at these rates
    assert distance < ks_bound(N)
    assert gaps.mean() == pytest.approx(1e9 / rate, rel=0.02)
    assert schedule.due_by(int(times[-1])) == N + 1


def test_the_model_sigma_is_the_papers_at_its_own_rate() -> None:
    """At the paper's mean gap (sigma / (1 - xi) us) the rescaled sigma is the paper's."""
    _, sigma_us, xi = FB_GAP_GPD
    rate = 1e6 * (1 - xi) / sigma_us
    assert fb_gap_sigma_ns(rate) == pytest.approx(sigma_us * 1000)


def test_key_sizes_are_clipped_to_fit_the_numbers_and_memcached_and_counted() -> None:
    prefix = "p" * 40  # longer than most drawn sizes: most keys are clipped up
    sizes, clipped = model_key_sizes(prefix, 1000, seed=3)
    assert sizes.min() == 43 and sizes.max() <= FB_ETC_MAX_KEY_BYTES
    assert clipped.below == int((fb_key_sizes(1000, np.random.default_rng([3, 5])) < 43).sum())
    assert clipped.below > 500 and clipped.total == 1000


def test_value_tables_are_the_same_for_every_worker_and_clip_nothing_at_this_seed() -> None:
    a, clipped = model_value_sizes(11)
    b, _ = model_value_sizes(11)
    assert np.array_equal(a, b)
    assert clipped.above == 0 and clipped.below == 0
