"""Runner: coordinates worker processes through the phases of a run and builds its result.

Imports ``engine``, ``metrics``, ``results``, ``config`` and ``errors``.
"""

from kvbench.runner.coordinator import Coordinator, worker_specs

__all__ = ["Coordinator", "worker_specs"]
