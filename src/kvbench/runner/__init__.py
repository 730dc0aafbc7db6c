"""Runner: coordinates worker processes through the phases of a run and builds its result.

Imports ``engine``, ``metrics``, ``results``, ``config`` and ``errors``.

The coordinator is imported on first use of its names, not with the package: the CLI
imports ``kvbench.runner.interrupts`` for every command, ``kvbench --help`` included, and
the coordinator brings the engine and numpy with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvbench.runner.coordinator import Coordinator, worker_specs

__all__ = ["Coordinator", "worker_specs"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kvbench.runner import coordinator

        return getattr(coordinator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
