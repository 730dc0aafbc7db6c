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


def _preset_config(**flags: str) -> object:
    """memcached-storm's set step, with these command-line settings over the preset's."""
    from kvbench.cli.preset_runs import _Run

    preset = get_preset("memcached-storm")
    run = _Run(
        None,  # type: ignore[arg-type]
        preset,
        ["memcached://127.0.0.1:1"],
        {k: (v, f"--{k}") for k, v in flags.items()},
        None,
        1,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
    )
    return run.config(["memcached://127.0.0.1:1"], preset.steps[0].settings)


def test_the_command_lines_request_count_replaces_the_presets_duration() -> None:
    """-n on a preset that sets a duration: the run counts requests (was: "give a duration
    or a request count, not both", about a duration the user never gave)."""
    load = _preset_config(**{"load.requests": "40000"}).load  # type: ignore[attr-defined]
    assert (load.requests, load.duration_ns) == (40_000, None)
    load = _preset_config(**{"load.duration": "3s"}).load  # type: ignore[attr-defined]
    assert (load.requests, load.duration_ns) == (None, 3 * 10**9)
