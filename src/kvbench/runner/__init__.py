"""Runner: coordinates worker processes through the phases of a run and builds its result.

Imports ``engine``, ``metrics``, ``results``, ``config`` and ``errors``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Coordinator", "worker_specs"]


def __getattr__(name: str) -> Any:
    # Loaded on first use, so runner/forkserver.py (standard library only) can be imported
    # first thing without pulling in the coordinator and the engine (PEP 562).
    if name in __all__:
        from kvbench.runner import coordinator

        return getattr(coordinator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
