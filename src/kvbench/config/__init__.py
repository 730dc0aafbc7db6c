"""Configuration: TOML scenario + CLI overrides -> validated, frozen RunConfig.

Imports only the standard library, ``kvbench.units`` and ``kvbench.errors``.
"""

from kvbench.config.load import Settings, load_config, parse_ratio
from kvbench.config.model import LoadConfig, ReportConfig, RunConfig, TargetConfig, WorkloadConfig
from kvbench.config.targets import parse_target

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
