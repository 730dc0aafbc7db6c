"""The scripts in bench/ imported for tests: bench/ is a folder of scripts, not a package
(``python bench/peers.py`` finds its sibling modules on sys.path[0]), so tests put it
there too."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str) -> ModuleType:
    """``bench/<name>.py`` as a module."""
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    return importlib.import_module(name)
