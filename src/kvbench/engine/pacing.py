"""Open-loop pacing: when each request *should* be sent. Pure: no clock, no I/O.

A ``Schedule`` answers "how many requests are due by time t" and "when was request i
due"; the dispatcher sends what is due, and latency is measured from those intended
times (wrk2), so a stalled server cannot hide its queue by slowing the client down.

- uniform: request i is due at ``start + i * 1e9 / rate`` (exact integer arithmetic, no
  drift over long runs).
- poisson: gaps are exponential with mean ``1e9 / rate``; fb-etc: generalized Pareto
  gaps of Facebook's ETC model with the same mean (workload/models.py). Either is drawn
  seeded in chunks kept as numpy arrays, so a question costs a bisect and one ``searchsorted`` in one chunk
  whatever the rate (rebuilding one array of every kept time per 1 ms tick cost 1.4 s of
  CPU per 5 s at 10k/s).
- trace (``TraceSchedule``, ``kvbench replay --speed S``): a connection's requests are
  due at the times of their trace rows, scaled by the speed.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kvbench.engine.clock import NEVER
from kvbench.workload.models import fb_gaps_ns

# The arrival processes a Schedule draws: fixed gaps, or gaps from a distribution.
ARRIVALS = ("uniform", "poisson", "fb-etc")

# Intended times are drawn this many at a time for Poisson (and fb-etc) arrivals.
POISSON_CHUNK = 8192
# Uniform intended times are computed in int64 this many at a time (Schedule._uniform:
# times 1e12 stays below 2**63).
UNIFORM_BLOCK = 1 << 20
INT64_MAX = 2**63 - 1
# A send this far behind its slot is counted late: beyond what timer granularity explains.
LATE_NS = 2_000_000


class Schedule:
    """The intended send times of one worker's requests.

    Poisson times are kept from the first request not yet released with ``release``;
    questions about earlier requests raise ``ValueError`` rather than guess.

    Args:
        rate_per_s: requests per second this schedule offers (> 0).
        start_ns: when request 0 is due.
        arrival: ``uniform``, ``poisson`` or ``fb-etc`` (drawn gaps are handled alike:
            "Poisson" below means either).
        seed: seeds the drawn gaps.
    """

    def __init__(
        self, rate_per_s: float, start_ns: int, arrival: str = "uniform", seed: int = 0
    ) -> None:
        if rate_per_s <= 0:
            raise ValueError("rate_per_s must be positive")
        if arrival not in ARRIVALS:
            raise ValueError(f"unknown arrival process {arrival!r}")
        self.rate_per_s = rate_per_s
        self.start_ns = start_ns
        self.arrival = arrival
        self._milli_rate = round(rate_per_s * 1000)
        self._rng = np.random.default_rng([seed, 2])
        # Poisson: chunks of POISSON_CHUNK absolute due times; _chunks[0] starts at request
        # _base. _firsts holds each chunk's first time (for bisect), _released_ns the last
        # time released (the answer for earlier instants is not known any more).
        self._chunks: list[npt.NDArray[np.int64]] = []
        self._firsts: list[int] = []
        self._base = 0
        self._released_ns: int | None = None
        self._last_ns = start_ns

    def intended_ns(self, i: int) -> int:
        """When request ``i`` (0-based) is due.

        Raises:
            ValueError: Poisson, and request ``i`` was released.
        """
        if self.arrival == "uniform":
            # ceil(i / rate): the exact inverse of due_by's floor.
            return self.start_ns - (-(i * 1_000_000_000 * 1000) // self._milli_rate)
        chunk, offset = self._locate(i)
        return int(self._chunks[chunk][offset])

    def intended_range(self, first: int, stop: int) -> list[int]:
        """The intended times of requests ``first .. stop - 1``, in order."""
        if self.arrival == "uniform" and stop > first and self.intended_ns(stop - 1) > INT64_MAX:
            start, milli_rate = self.start_ns, self._milli_rate  # (past int64: Python ints)
            return [start - (-(i * 1_000_000_000_000) // milli_rate) for i in range(first, stop)]
        times: list[int] = self.intended_array(first, stop).tolist()
        return times

    def intended_array(self, first: int, stop: int) -> npt.NDArray[np.int64]:
        """``intended_range`` as int64s: what the compiled loop's schedule is fed
        (``SCHED_FEED``, 4,096, at a time), computed without a Python int per request.
        A list of 4,096 uniform times cost 2-3 ms of Python: every 55 ms at 75,000/s, a
        pause of the loop's sends that made 1-3% of them more than 2 ms late."""
        if stop <= first:
            return np.empty(0, dtype=np.int64)
        if self.arrival == "uniform":
            if self.intended_ns(stop - 1) > INT64_MAX:
                raise OverflowError(f"request {stop - 1} is due past 2**63 ns")
            out = []
            for low in range(first, stop, UNIFORM_BLOCK):
                out.append(self._uniform(low, min(stop, low + UNIFORM_BLOCK)))
            return out[0] if len(out) == 1 else np.concatenate(out)
        self._locate(stop - 1)  # draws the times up to stop - 1
        parts = []
        i = first
        while i < stop:
            chunk, offset = self._locate(i)
            take = min(stop - i, POISSON_CHUNK - offset)
            parts.append(self._chunks[chunk][offset : offset + take])
            i += take
        return parts[0].copy() if len(parts) == 1 else np.concatenate(parts)

    def _uniform(self, first: int, stop: int) -> npt.NDArray[np.int64]:
        """Uniform times ``first .. stop - 1`` (at most ``UNIFORM_BLOCK``), exactly
        ``intended_ns``'s: ``ceil(i * 1e12 / milli_rate)`` after the start, with ``first``'s
        share of the quotient taken out in Python ints and the rest in int64, which holds
        it (``UNIFORM_BLOCK * 1e12`` plus a remainder below the rate)."""
        scaled = 1_000_000_000 * 1000
        whole, rest = divmod(first * scaled, self._milli_rate)
        steps = np.arange(stop - first, dtype=np.int64) * scaled + rest
        return (self.start_ns + whole) - (-steps // self._milli_rate)

    def shift(self, delta_ns: int) -> None:
        """Move every time ``delta_ns`` later: the schedule was made before its start
        instant was known (``Worker.prepare``), and no time of it was drawn yet.

        Raises:
            RuntimeError: Poisson times were drawn already (they would keep the old start).
        """
        if self._chunks:
            raise RuntimeError("shift: times were drawn from the schedule already")
        self.start_ns += delta_ns
        self._last_ns += delta_ns

    def due_by(self, now_ns: int) -> int:
        """How many requests (counting from 0) are due at or before ``now_ns``.

        Raises:
            ValueError: Poisson, and ``now_ns`` is earlier than a released request.
        """
        if now_ns < self.start_ns:
            return 0
        if self.arrival == "uniform":
            return (now_ns - self.start_ns) * self._milli_rate // (1_000_000_000 * 1000) + 1
        while not self._chunks or int(self._chunks[-1][-1]) <= now_ns:
            self._extend()
        chunk = bisect_right(self._firsts, now_ns) - 1
        if chunk < 0:  # before every kept time: after the released ones, or unknown
            if self._released_ns is not None and now_ns < self._released_ns:
                raise ValueError("due_by: requests due before this instant were released")
            return self._base
        found = int(np.searchsorted(self._chunks[chunk], now_ns, side="right"))
        return self._base + chunk * POISSON_CHUNK + found

    def release(self, below: int) -> None:
        """Forget the Poisson due times of requests before ``below``, a chunk at a time
        (bounded memory). ``intended_ns`` and ``due_by`` then refuse to answer for them."""
        while len(self._chunks) > 1 and self._base + POISSON_CHUNK <= below:
            self._released_ns = int(self._chunks[0][-1])
            del self._chunks[0], self._firsts[0]
            self._base += POISSON_CHUNK

    def finished(self) -> bool:
        """A rate never runs out of requests."""
        return False

    def _locate(self, i: int) -> tuple[int, int]:
        """(chunk, offset) of request ``i``, drawing times up to it."""
        if i < self._base:
            raise ValueError(f"intended_ns: request {i} was released")
        while i >= self._base + len(self._chunks) * POISSON_CHUNK:
            self._extend()
        return divmod(i - self._base, POISSON_CHUNK)

    def _extend(self) -> None:
        if self.arrival == "poisson":
            gaps = self._rng.exponential(1e9 / self.rate_per_s, POISSON_CHUNK)
        else:
            gaps = fb_gaps_ns(self.rate_per_s, POISSON_CHUNK, self._rng)
        times = self._last_ns + np.cumsum(gaps)
        if not self._chunks and self._base == 0:
            times = np.concatenate(([self.start_ns], times[:-1]))
        chunk = times.astype(np.int64)
        self._chunks.append(chunk)
        self._firsts.append(int(chunk[0]))
        self._last_ns = int(chunk[-1])


def lag_outcome(lag_ns: int, late_ns: int, max_lag_ns: int) -> str:
    """``on_time``, ``late`` (sent behind its slot by more than ``late_ns``) or ``dropped``
    (more than ``max_lag_ns`` behind: not sent at all)."""
    if lag_ns > max_lag_ns:
        return "dropped"
    if lag_ns > late_ns:
        return "late"
    return "on_time"


class _Fed(Protocol):
    done: bool


class TimedLane(Protocol):
    """What a schedule asks of a timed replay's lane (workload/trace_source.py ``Lane``,
    workload/monitor_feed.py ``MonitorLane``)."""

    @property
    def feed(self) -> _Fed: ...

    @property
    def taken(self) -> int: ...

    def offsets(self, first: int, stop: int) -> list[int]: ...

    def due_count(self, offset_ns: int) -> int: ...

    def pending(self) -> int: ...


class TraceSchedule:
    """The intended send times of one connection's requests in a timed replay.

    The same questions as ``Schedule`` (``intended_ns``, ``intended_range``, ``due_by``,
    ``release``), answered from the trace: request i of a lane is due at ``start_ns`` plus
    the offset the replay feed gave its row (workload/trace_source.py: the trace's time,
    spread within its second, scaled by ``--speed``), read before the replay started.
    Counts are over the lane's requests from the start of the replay.

    Args:
        lane: the connection's lane (``Lane``: ``due_count``, ``offsets``, ``feed``).
        start_ns: when the replay's time 0 is.
    """

    def __init__(self, lane: TimedLane, start_ns: int) -> None:
        self.lane = lane
        self.start_ns = start_ns

    def intended_ns(self, i: int) -> int:
        """When lane request ``i`` is due (``NEVER`` past the lane's last request)."""
        offsets = self.lane.offsets(i, i + 1)
        return self.start_ns + offsets[0] if offsets else NEVER

    def intended_range(self, first: int, stop: int) -> list[int]:
        """The intended times of lane requests ``first .. stop - 1`` (all in the lane)."""
        times = self.intended_from(first, stop - first)
        if len(times) != stop - first:
            raise ValueError(
                f"intended_range: requests {first}..{stop - 1} are not all in the lane"
            )
        return times

    def intended_from(self, first: int, count: int) -> list[int]:
        """The intended times of up to ``count`` lane requests from ``first`` on (fewer at
        the lane's end, none past it)."""
        start = self.start_ns
        return [start + offset for offset in self.lane.offsets(first, first + count)]

    def shift(self, delta_ns: int) -> None:
        """Move every time ``delta_ns`` later (``Schedule.shift``): the trace's time 0 is
        then the start instant."""
        self.start_ns += delta_ns

    def due_by(self, now_ns: int) -> int:
        """How many lane requests are due at or before ``now_ns``."""
        if now_ns < self.start_ns:
            return self.lane.taken
        return self.lane.due_count(now_ns - self.start_ns)

    def release(self, below: int) -> None:
        """Nothing to forget: a lane drops its chunks as they are sent."""

    def finished(self) -> bool:
        """Every request of the lane was handed out."""
        return self.lane.feed.done and self.lane.pending() == 0
