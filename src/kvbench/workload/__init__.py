"""Workload: the keys, values and op mix a worker sends, compiled and seeded up front.

Imports ``config``, ``protocols`` (for ``Op``) and ``errors`` only.
"""

from kvbench.workload.plan import CHUNK, RequestSource, WorkloadPlan, compile_plan

__all__ = ["CHUNK", "RequestSource", "WorkloadPlan", "compile_plan"]
