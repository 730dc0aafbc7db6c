"""The engine's clock: integer nanoseconds on the system-wide monotonic clock.

CLOCK_MONOTONIC is shared by every process on the host, so a start time the coordinator
picks means the same instant in each worker. Tests inject a FakeClock.
"""

from __future__ import annotations

import time
from typing import Protocol

# A time that never comes: no interval cut is scheduled.
NEVER = 2**63 - 1


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
