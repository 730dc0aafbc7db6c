"""The open-loop dispatcher's timerfd: when it fires, how it re-arms, how it closes."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from kvbench.engine.timer import Timer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")
MS = 1_000_000


def fire_times(arm: str, seconds: float) -> list[int]:
    """When a timer armed by ``arm`` ("at" 20 ms ahead, "every" 5 ms, "past") fired."""

    async def main() -> list[int]:
        fired: list[int] = []
        timer = Timer.open(lambda: fired.append(time.monotonic_ns()))
        assert timer is not None
        start = time.monotonic_ns()
        if arm == "at":
            timer.at(start + 20 * MS)
        elif arm == "every":
            timer.every(5 * MS)
        else:
            timer.at(start - 1 * MS)
        await asyncio.sleep(seconds)
        timer.close()
        return [t - start for t in fired]

    return asyncio.run(main())


def test_at_fires_once_and_not_before_its_instant() -> None:
    fired = fire_times("at", 0.2)
    assert len(fired) == 1
    assert fired[0] >= 20 * MS


def test_an_instant_already_past_fires_at_once() -> None:
    fired = fire_times("past", 0.1)
    assert len(fired) == 1
    assert fired[0] < 100 * MS


def test_every_fires_until_rearmed_once() -> None:
    async def main() -> tuple[int, int]:
        fired: list[int] = []
        timer = Timer.open(lambda: fired.append(time.monotonic_ns()))
        assert timer is not None
        timer.every(2 * MS)
        timer.every(2 * MS)  # the same period again: left running as it is
        await asyncio.sleep(0.1)
        periodic = len(fired)
        timer.at(time.monotonic_ns() + 10_000 * MS)  # once, far away: the period ends
        await asyncio.sleep(0.05)
        after = len(fired) - periodic
        timer.close()
        return periodic, after

    periodic, after = asyncio.run(main())
    assert periodic >= 3
    assert after <= 1  # at most an expiry read just as it was re-armed


def test_close_stops_watching_and_closes_the_descriptor() -> None:
    async def main() -> int:
        timer = Timer.open(lambda: None)
        assert timer is not None
        fd = timer._fd
        timer.every(1 * MS)
        timer.close()
        await asyncio.sleep(0.01)
        return fd

    fd = asyncio.run(main())
    with pytest.raises(OSError):
        os.fstat(fd)
