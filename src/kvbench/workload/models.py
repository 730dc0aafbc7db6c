"""Facebook's ETC workload model (Atikoglu et al., SIGMETRICS 2012), as mutilate draws it.

Three samplers, each an inverse CDF applied to seeded uniforms, so a run is reproducible
and the tests can hold every sampler to its distribution's quantiles:

- key sizes: the generalized extreme value distribution (mu 30.7984, sigma 8.20449,
  xi 0.078688), rounded to whole bytes (mutilate Generator.cc ``createFacebookKey``,
  KeyGenerator: ``round(G)``); one size per key, the key's whole length (prefix included);
- value sizes: mutilate's ``fb_value``: a discrete head of sizes 0-14 bytes with the
  paper's measured probabilities (44.155% in all), else the generalized Pareto with
  theta 15, sigma 214.476, xi 0.348238, truncated to whole bytes as mutilate's ``int``
  conversion does (the paper's table gives theta 0 for the fit of the whole range; the
  head is why mutilate starts the tail at 15);
- inter-arrival gaps: the generalized Pareto (theta 0, sigma 16.0292 us, xi 0.154971)
  with sigma rescaled so the mean gap is 1 / rate (mutilate ``GPareto::set_lambda``):
  the model's shape at the offered ``--rate``.

Sizes outside what a server takes are clipped, and counted (``Clipped``): keys to
[prefix + digits, 250] bytes (memcached's KEY_MAX_LENGTH), values to
``FB_ETC_MAX_VALUE_BYTES``. Pure: numpy and the config, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# The bounds sizes are clipped to (memcached's longest key; a value every default
# memcached stores: the model puts about 3e-10 of its values above it).
from kvbench.config.model import WorkloadConfig
from kvbench.config.workload_fields import FB_ETC, FB_ETC_MAX_KEY_BYTES, FB_ETC_MAX_VALUE_BYTES

# Key sizes: GEV(mu, sigma, xi) (Atikoglu et al. 2012, Table 5; mutilate Generator.cc).
FB_KEY_GEV = (30.7984, 8.20449, 0.078688)
# Value sizes: the discrete head (size -> probability) and the generalized Pareto tail
# (theta, sigma, xi) above it (mutilate Generator.cc createFacebookValue).
FB_VALUE_HEAD = (
    0.00536,
    0.00047,
    0.17820,
    0.09239,
    0.00018,
    0.02740,
    0.00065,
    0.00606,
    0.00023,
    0.00837,
    0.00837,
    0.08989,
    0.00092,
    0.00326,
    0.01980,
)
FB_VALUE_GPD = (15.0, 214.476, 0.348238)
# Inter-arrival gaps in microseconds: GPD(theta, sigma, xi); sigma is rescaled to --rate.
FB_GAP_GPD = (0.0, 16.0292, 0.154971)
# Distinct value sizes a worker's table holds under fb-etc: 16x the default table, so
# the heavy tail is drawn out to about its 99.99th percentile.
FB_ETC_VALUE_TABLE_SIZE = 16_384


@dataclass(frozen=True, slots=True)
class Clipped:
    """Sizes drawn outside the bounds and set to the bound: how many, of how many."""

    below: int
    above: int
    total: int


def gev_quantile(
    p: npt.NDArray[np.float64], mu: float, sigma: float, xi: float
) -> npt.NDArray[np.float64]:
    """The generalized extreme value distribution's inverse CDF (xi != 0):
    mu + sigma * ((-ln p)^-xi - 1) / xi."""
    out: npt.NDArray[np.float64] = mu + sigma * ((-np.log(p)) ** -xi - 1.0) / xi
    return out


def gev_cdf(
    x: npt.NDArray[np.float64], mu: float, sigma: float, xi: float
) -> npt.NDArray[np.float64]:
    """The GEV's CDF: exp(-(1 + xi (x - mu) / sigma)^(-1/xi)) inside its support."""
    t = np.maximum(1.0 + xi * (np.asarray(x, dtype=np.float64) - mu) / sigma, 0.0)
    with np.errstate(divide="ignore"):
        out: npt.NDArray[np.float64] = np.exp(-(t ** (-1.0 / xi)))
    return out


def gpd_quantile(
    p: npt.NDArray[np.float64], theta: float, sigma: float, xi: float
) -> npt.NDArray[np.float64]:
    """The generalized Pareto distribution's inverse CDF (xi != 0):
    theta + sigma * ((1 - p)^-xi - 1) / xi."""
    out: npt.NDArray[np.float64] = theta + sigma * ((1.0 - p) ** -xi - 1.0) / xi
    return out


def gpd_cdf(
    x: npt.NDArray[np.float64], theta: float, sigma: float, xi: float
) -> npt.NDArray[np.float64]:
    """The GPD's CDF: 1 - (1 + xi (x - theta) / sigma)^(-1/xi) for x >= theta, else 0."""
    z = np.maximum(np.asarray(x, dtype=np.float64) - theta, 0.0)
    out: npt.NDArray[np.float64] = 1.0 - (1.0 + xi * z / sigma) ** (-1.0 / xi)
    return out


def _uniforms(rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]:
    """``n`` uniforms in the open interval (0, 1): both quantile functions diverge at an
    end."""
    return np.clip(rng.random(n), np.finfo(np.float64).tiny, 1.0 - np.finfo(np.float64).eps)


def fb_key_sizes(n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """``n`` key sizes from the model, unclipped: round(GEV) as mutilate's KeyGenerator."""
    return np.rint(gev_quantile(_uniforms(rng, n), *FB_KEY_GEV)).astype(np.int64)


def fb_value_sizes(n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """``n`` value sizes from the model, unclipped.

    One uniform per size, read as the mixture's inverse CDF: below the head's total
    probability it picks a head size, above it the rest of the uniform (rescaled to
    [0, 1)) is the tail's quantile, truncated to whole bytes. The same distribution as
    mutilate's Discrete-then-GPareto draw.
    """
    u = _uniforms(rng, n)
    head = np.cumsum(FB_VALUE_HEAD)
    in_head = u < head[-1]
    sizes = np.empty(n, dtype=np.int64)
    sizes[in_head] = np.searchsorted(head, u[in_head], side="right")
    tail = (u[~in_head] - head[-1]) / (1.0 - head[-1])
    sizes[~in_head] = np.floor(gpd_quantile(tail, *FB_VALUE_GPD)).astype(np.int64)
    return sizes


def fb_value_size_cdf(size: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """P(value size <= size) under the model, for whole sizes (floor of the tail)."""
    s = np.asarray(size, dtype=np.float64)
    head = np.concatenate(([0.0], np.cumsum(FB_VALUE_HEAD)))
    in_head = head[np.clip(np.floor(s).astype(np.int64) + 1, 0, len(FB_VALUE_HEAD))]
    # floor(X) <= s  <=>  X < s + 1 for the continuous tail
    tail = gpd_cdf(np.floor(s) + 1.0, *FB_VALUE_GPD)
    out: npt.NDArray[np.float64] = np.where(s < 0, 0.0, in_head + (1.0 - head[-1]) * tail)
    return out


def fb_gap_sigma_ns(rate_per_s: float) -> float:
    """The gaps' sigma in ns so their mean is 1 / rate: GPD mean = theta + sigma / (1 -
    xi) with theta 0 (mutilate ``GPareto::set_lambda``)."""
    xi = FB_GAP_GPD[2]
    return (1.0 - xi) * 1e9 / rate_per_s


def fb_gaps_ns(rate_per_s: float, n: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """``n`` inter-arrival gaps in ns from the model at ``rate_per_s`` (mean 1e9 / rate)."""
    return gpd_quantile(_uniforms(rng, n), 0.0, fb_gap_sigma_ns(rate_per_s), FB_GAP_GPD[2])


def clip_sizes(
    sizes: npt.NDArray[np.int64], low: int, high: int
) -> tuple[npt.NDArray[np.int64], Clipped]:
    """``sizes`` clipped to [low, high], and how many were moved."""
    clipped = Clipped(int((sizes < low).sum()), int((sizes > high).sum()), len(sizes))
    return np.clip(sizes, low, high), clipped


def min_key_bytes(prefix: str, count: int) -> int:
    """The shortest key that holds the prefix and every key's number (keys stay
    distinct): mutilate's ``max(round(G), digits)``, with kvbench's prefix."""
    return len(prefix.encode()) + len(str(max(count - 1, 0)))


def model_key_sizes(prefix: str, count: int, seed: int) -> tuple[npt.NDArray[np.int64], Clipped]:
    """The key table's sizes under fb-etc (the same for every worker: the run's seed
    only), clipped to [``min_key_bytes``, 250]."""
    raw = fb_key_sizes(count, np.random.default_rng([seed, 5]))
    return clip_sizes(raw, min_key_bytes(prefix, count), FB_ETC_MAX_KEY_BYTES)


def model_value_sizes(seed: int) -> tuple[npt.NDArray[np.int64], Clipped]:
    """A value table's sizes under fb-etc (the same for every worker), clipped to
    [0, FB_ETC_MAX_VALUE_BYTES]."""
    raw = fb_value_sizes(FB_ETC_VALUE_TABLE_SIZE, np.random.default_rng([seed, 6]))
    return clip_sizes(raw, 0, FB_ETC_MAX_VALUE_BYTES)


def ks_bound(n: int, alpha: float = 1e-3) -> float:
    """The Kolmogorov-Smirnov distance ``n`` samples stay within with probability 1 -
    alpha (the asymptotic bound sqrt(ln(2 / alpha) / 2n), conservative for discrete
    distributions)."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def model_figures(config: WorkloadConfig) -> dict[str, dict[str, float | int]]:
    """What the run's fb-etc tables hold, for the run's header and its JSON: per model in
    use (``key_size``, ``value_size``), the sizes' range and mean and how many were
    clipped at each bound. The tables depend on the seed alone, so these are every
    worker's."""
    figures: dict[str, dict[str, float | int]] = {}
    if config.key_size_model == FB_ETC:
        count = config.keys + config.insert_keys
        sizes, clipped = model_key_sizes(config.key_prefix, count, config.seed)
        figures["key_size"] = _figures(sizes, clipped)
    if config.value_size_model == FB_ETC:
        sizes, clipped = model_value_sizes(config.seed)
        figures["value_size"] = _figures(sizes, clipped)
    return figures


def _figures(sizes: npt.NDArray[np.int64], clipped: Clipped) -> dict[str, float | int]:
    return {
        "entries": clipped.total,
        "min_bytes": int(sizes.min()),
        "max_bytes": int(sizes.max()),
        "mean_bytes": round(float(sizes.mean()), 1),
        "clipped_below": clipped.below,
        "clipped_above": clipped.above,
    }
