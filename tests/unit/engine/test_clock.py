"""engine/clock.py: the run delay a worker's loop thread waited for a CPU."""

from __future__ import annotations

import sys
import time

import pytest

from kvbench.engine import clock


def test_the_wait_is_none_where_the_kernel_does_not_say(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "_SCHEDSTAT", "/nonexistent/schedstat")
    assert clock.cpu_wait_ns() is None


@pytest.mark.skipif(sys.platform != "linux", reason="Linux's scheduler statistics")
def test_the_wait_is_read_and_only_grows() -> None:
    first = clock.cpu_wait_ns()
    if first is None:
        pytest.skip("this kernel keeps no scheduler statistics")
    end = time.monotonic() + 0.05
    while time.monotonic() < end:  # on a CPU: the wait may grow, never shrink
        pass
    second = clock.cpu_wait_ns()
    assert second is not None and second >= first >= 0
