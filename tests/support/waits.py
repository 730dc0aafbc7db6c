"""Waiting on a condition inside a test's event loop, instead of sleeping for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(condition: Callable[[], bool], what: str) -> None:
    """Let the loop run until ``condition`` holds (a generous deadline: a loaded machine)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"waited 10 s for {what}"
        await asyncio.sleep(0.001)
