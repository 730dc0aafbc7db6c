"""Engine: event loop, connections, phases. One process = one event loop = one Worker.

Imports ``workload``, ``protocols``, ``metrics``, ``config`` and ``errors`` only.
"""

from kvbench.engine.worker import Worker, WorkerSpec, WorkerSummary

__all__ = ["Worker", "WorkerSpec", "WorkerSummary"]
