"""Workload: the keys, values and op mix a worker sends, compiled and seeded up front.

Imports ``config``, ``protocols`` (for ``Op``) and ``errors`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvbench.workload.plan import CHUNK, RequestSource, WorkloadPlan, compile_plan

__all__ = ["CHUNK", "RequestSource", "WorkloadPlan", "compile_plan"]


def __getattr__(name: str) -> Any:
    """The plan's names, loaded on first use: the coordinator imports a few of this
    package's modules (``slots``: a Redis Cluster's slot map) and not the plan, nor
    numpy.random with it (~7 MB of its memory during a run)."""
    if name in __all__:
        from kvbench.workload import plan

        return getattr(plan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
