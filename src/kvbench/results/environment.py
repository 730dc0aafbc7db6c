"""Where a run ran: host, CPU, kernel, Python, event loop — stored with every run."""

from __future__ import annotations

import importlib.util
import os
import platform
import resource
import socket
import sys
from typing import Any


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, or the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def installed_event_loop() -> str:
    """``uvloop`` when it is installed (the workers run on it: runner/process.py), else
    ``asyncio``; found without importing it, so the coordinator, which runs no event loop
    of the engine's, does not load it (nor the engine) to name it."""
    return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"


def peak_rss_bytes() -> int:
    """The calling process's peak resident memory so far, in bytes (``ru_maxrss``: KiB on
    Linux, bytes on macOS). Each worker sends its own with its summary; the coordinator's
    is the environment's ``peak_rss_bytes``: a run's memory is read from its result, not
    from a tool watching it."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def describe_environment(event_loop: str) -> dict[str, Any]:
    """A JSON-ready description of this machine and interpreter."""
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else None,
        "kernel": platform.release(),
        "os": platform.system(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "event_loop": event_loop,
    }
