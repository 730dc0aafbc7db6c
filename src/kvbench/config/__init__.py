"""Configuration: TOML scenario + CLI overrides -> validated, frozen RunConfig.

Imports only the standard library, ``kvbench.units`` and ``kvbench.errors``.

The names below are imported on first use, not with the package: the CLI's flag
suggestions import ``config.names`` to answer a mistyped flag, and that should not cost
the loading and validation code of every section.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvbench.config.load import Settings, load_config, parse_ratio
    from kvbench.config.model import (
        LoadConfig,
        ReportConfig,
        RunConfig,
        TargetConfig,
        WorkloadConfig,
    )
    from kvbench.config.targets import parse_target

# Each public name -> the module that defines it.
_HOMES = {
    "LoadConfig": "model",
    "ReportConfig": "model",
    "RunConfig": "model",
    "Settings": "load",
    "TargetConfig": "model",
    "WorkloadConfig": "model",
    "load_config": "load",
    "parse_ratio": "load",
    "parse_target": "targets",
}
__all__ = [
    "LoadConfig",
    "ReportConfig",
    "RunConfig",
    "Settings",
    "TargetConfig",
    "WorkloadConfig",
    "load_config",
    "parse_ratio",
    "parse_target",
]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
