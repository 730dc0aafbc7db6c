"""A sweep preset's rounds by request count, set per level (cli/preset_runs.py)."""

from __future__ import annotations

from kvbench.cli.preset_runs import _at_level
from kvbench.config import load_config
from kvbench.config.presets import get_preset


def config(**settings: str) -> object:
    base = {"target.urls": (["memcached://127.0.0.1:1"], "T")}
    return load_config(None, {**base, **{k: (v, k) for k, v in settings.items()}}, 1)


def test_each_level_gets_max_5000_or_20_per_connection() -> None:
    preset = get_preset("gateway-vs-native")
    counted = config(**{"load.requests": "5000"})
    for level, expected in ((64, 5000), (512, 10_240), (2048, 40_960)):
        load = _at_level(counted, "connections", level, preset).load  # type: ignore[arg-type]
        assert (load.connections, load.requests, load.duration_ns) == (level, expected, None)


def test_a_run_by_duration_keeps_its_duration() -> None:
    timed = config(**{"load.duration": "2s"})
    load = _at_level(timed, "connections", 64, None).load  # type: ignore[arg-type]
    assert (load.requests, load.duration_ns) == (None, 2 * 10**9)
