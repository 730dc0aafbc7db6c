"""The engine's clock: integer nanoseconds on the system-wide monotonic clock.

CLOCK_MONOTONIC is shared by every process on the host, so a start time the coordinator
picks means the same instant in each worker. Tests inject a FakeClock.
"""

from __future__ import annotations

import time
from typing import Protocol

# A time that never comes: no interval cut is scheduled.
NEVER = 2**63 - 1

# Linux's scheduler statistics of the calling thread: "<on-CPU ns> <run delay ns> <slices>".
_SCHEDSTAT = "/proc/thread-self/schedstat"


def cpu_wait_ns() -> int | None:
    """How long the calling thread has waited so far, runnable, for a CPU: the time other
    processes on its cores took from it (Linux's run delay). None where the kernel does
    not say (not Linux, or built without scheduler statistics)."""
    try:
        with open(_SCHEDSTAT, "rb") as stats:
            return int(stats.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


class Clock(Protocol):
    def now_ns(self) -> int: ...


class MonotonicClock:
    """The real clock (``time.monotonic_ns``)."""

    now_ns = staticmethod(time.monotonic_ns)


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, start_ns: int = 0) -> None:
        self.value_ns = start_ns

    def now_ns(self) -> int:
        return self.value_ns

    def advance(self, delta_ns: int) -> None:
        self.value_ns += delta_ns
