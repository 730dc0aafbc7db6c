"""Engine: event loop, connections, phases. One process = one event loop = one Worker.

Imports ``workload``, ``protocols``, ``metrics``, ``config`` and ``errors`` only.

``Worker`` is loaded on first use, not with the package: the coordinator imports a few
engine modules (``spec``, ``setup`` for its probe) and none of the event loop's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvbench.engine.spec import WorkerSpec, WorkerSummary

if TYPE_CHECKING:
    from kvbench.engine.worker import Worker

__all__ = ["Worker", "WorkerSpec", "WorkerSummary"]


def __getattr__(name: str) -> Any:
    if name == "Worker":
        from kvbench.engine.worker import Worker

        return Worker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
