"""Open-loop pacing: when each request *should* be sent. Pure: no clock, no I/O.

A ``Schedule`` answers "how many requests are due by time t" and "when was request i
due"; the dispatcher sends what is due, and latency is measured from those intended
times (wrk2), so a stalled server cannot hide its queue by slowing the client down.

- uniform: request i is due at ``start + i * 1e9 / rate`` (exact integer arithmetic, no
  drift over long runs).
- poisson: gaps are exponential with mean ``1e9 / rate``, drawn seeded in chunks.
"""

from __future__ import annotations

import numpy as np

# Intended times are drawn this many at a time for Poisson arrivals.
POISSON_CHUNK = 8192


class Schedule:
    """The intended send times of one worker's requests.

    Args:
        rate_per_s: requests per second this schedule offers (> 0).
        start_ns: when request 0 is due.
        arrival: ``uniform`` or ``poisson``.
        seed: seeds the Poisson gaps.
    """

    def __init__(
        self, rate_per_s: float, start_ns: int, arrival: str = "uniform", seed: int = 0
    ) -> None:
        if rate_per_s <= 0:
            raise ValueError("rate_per_s must be positive")
        if arrival not in ("uniform", "poisson"):
            raise ValueError(f"unknown arrival process {arrival!r}")
        self.rate_per_s = rate_per_s
        self.start_ns = start_ns
        self.arrival = arrival
        self._rng = np.random.default_rng([seed, 2])
        # Poisson: absolute due times of requests [_base, _base + len(_times)).
        self._base = 0
        self._times: list[int] = []
        self._last_ns = start_ns

    def intended_ns(self, i: int) -> int:
        """When request ``i`` (0-based) is due. For Poisson, ``i`` must not go backwards
        past requests already released with ``release``."""
        if self.arrival == "uniform":
            # ceil(i / rate): the exact inverse of due_by's floor.
            return self.start_ns - (-(i * 1_000_000_000 * 1000) // round(self.rate_per_s * 1000))
        while i >= self._base + len(self._times):
            self._extend()
        return self._times[i - self._base]

    def due_by(self, now_ns: int) -> int:
        """How many requests (counting from 0) are due at or before ``now_ns``."""
        if now_ns < self.start_ns:
            return 0
        if self.arrival == "uniform":
            milli_rate = round(self.rate_per_s * 1000)
            return (now_ns - self.start_ns) * milli_rate // (1_000_000_000 * 1000) + 1
        while not self._times or self._times[-1] <= now_ns:
            self._extend()
        return self._base + int(np.searchsorted(np.asarray(self._times), now_ns, side="right"))

    def release(self, below: int) -> None:
        """Forget Poisson due times of requests before ``below`` (bounded memory)."""
        drop = below - self._base
        if self.arrival == "poisson" and drop > POISSON_CHUNK:
            del self._times[:drop]
            self._base = below

    def _extend(self) -> None:
        gaps = self._rng.exponential(1e9 / self.rate_per_s, POISSON_CHUNK)
        times = self._last_ns + np.cumsum(gaps)
        if not self._times and self._base == 0:
            times = np.concatenate(([self.start_ns], times[:-1]))
        new = times.astype(np.int64).tolist()
        self._times.extend(new)
        self._last_ns = new[-1]


def lag_outcome(lag_ns: int, late_ns: int, max_lag_ns: int) -> str:
    """``on_time``, ``late`` (sent behind its slot by more than ``late_ns``) or ``dropped``
    (more than ``max_lag_ns`` behind: not sent at all)."""
    if lag_ns > max_lag_ns:
        return "dropped"
    if lag_ns > late_ns:
        return "late"
    return "on_time"
