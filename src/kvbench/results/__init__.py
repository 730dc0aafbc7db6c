"""Results: the stored form of a run and the SQLite history.

Imports ``metrics``, ``config`` and ``errors`` only.
"""

from kvbench.results.model import SCHEMA_VERSION, RunResult
from kvbench.results.store import Store

__all__ = ["SCHEMA_VERSION", "RunResult", "Store"]
