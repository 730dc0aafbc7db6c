"""Sweeps (one run per level of an axis) and comparisons (targets interleaved per round).

Each level or round is an ordinary Coordinator run. A level that fails is recorded as
failed with its reason, never skipped silently; Ctrl-C ends the sweep and keeps what ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from kvbench.config.model import LoadConfig, RunConfig
from kvbench.errors import ConfigError, RunAborted, TargetUnreachable
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.model import RunResult, combine_rounds
from kvbench.runner.coordinator import Coordinator

AXES = ("connections", "pipeline", "rate")
# A sweep of more levels than this is almost surely a typo in the range.
MAX_LEVELS = 1000


def parse_levels(text: str, where: str) -> list[float]:
    """``64:2048:64`` (start:stop:step, stop included) or ``1,2,4,8``.

    Raises:
        ConfigError: malformed, empty, non-positive or too many levels.
    """
    try:
        if ":" in text:
            start, stop, step = (float(p) for p in text.split(":"))
            if step <= 0 or stop < start:
                raise ValueError
            count = int((stop - start) / step + 1e-9) + 1
            levels = [start + i * step for i in range(count)]
        else:
            levels = [float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ConfigError(where, f"{text!r} is not START:STOP:STEP or a list like 1,2,4") from None
    if not levels or min(levels) <= 0:
        raise ConfigError(where, f"{text!r}: levels must be above 0")
    if len(levels) > MAX_LEVELS:
        raise ConfigError(where, f"{text!r} makes {len(levels)} levels (at most {MAX_LEVELS})")
    return levels


def at_level(config: RunConfig, axis: str, level: float) -> RunConfig:
    """The config with ``axis`` set to ``level``."""
    load: LoadConfig = config.load
    if axis == "connections":
        connections = int(level)
        load = replace(load, connections=connections, processes=min(load.processes, connections))
    elif axis == "pipeline":
        load = replace(load, pipeline=int(level))
    elif axis == "rate":
        load = replace(load, rate_per_s=level)
    else:
        raise ConfigError("--axis", f"{axis!r} is not one of {', '.join(AXES)}")
    return replace(config, load=load)


LevelOutcome = tuple[float, RunResult | None, str | None]


def run_sweep(
    config: RunConfig,
    axis: str,
    levels: Sequence[float],
    on_interval: Callable[[IntervalSnapshot], None],
    on_event: Callable[[str], None],
) -> list[LevelOutcome]:
    """Run every level in order; a failed level is kept with its reason."""
    outcomes: list[LevelOutcome] = []
    for number, level in enumerate(levels, 1):
        on_event(f"level {number}/{len(levels)}: {axis} = {level:g}")
        try:
            result = Coordinator(at_level(config, axis, level), on_interval, on_event).run()
        except (TargetUnreachable, RunAborted) as exc:
            outcomes.append((level, None, str(exc)))
            on_event(f"level {level:g} failed: {exc}")
            continue
        outcomes.append((level, result, None))
        if result.status == "interrupted":
            break
    return outcomes


def run_comparison(
    configs: Sequence[RunConfig],
    rounds: int,
    on_interval: Callable[[IntervalSnapshot], None],
    on_event: Callable[[str], None],
) -> list[RunResult]:
    """Rounds interleaved across targets (A B A B ...); one combined result per target."""
    per_target: list[list[RunResult]] = [[] for _ in configs]
    for round_index in range(rounds):
        for config, results in zip(configs, per_target, strict=True):
            on_event(f"round {round_index + 1}/{rounds}: {config.targets[0].url}")
            single = replace(config, load=replace(config.load, rounds=1))
            result = Coordinator(single, on_interval, on_event).run()
            results.append(result)
            if result.status == "interrupted":
                return [combine_rounds(r) for r in per_target if r]
    return [combine_rounds(results) for results in per_target]
