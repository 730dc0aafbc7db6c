"""Where a run ran: host, CPU, kernel, Python, event loop — stored with every run."""

from __future__ import annotations

import os
import platform
import socket
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
