"""Results: the stored form of a run and the SQLite history.

Imports ``metrics``, ``config`` and ``errors`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvbench.results.model import SCHEMA_VERSION, RunResult
    from kvbench.results.store import Store

__all__ = ["SCHEMA_VERSION", "RunResult", "Store"]


def __getattr__(name: str) -> Any:
    """The package's names, loaded on first use: a worker imports ``environment`` (its
    peak RSS) and not the history (``store``, sqlite3) with it."""
    if name == "Store":
        from kvbench.results.store import Store

        return Store
    if name in __all__:
        from kvbench.results import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
