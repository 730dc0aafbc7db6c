"""Sweeps (one run per level of an axis) and comparisons (targets interleaved per round).

Each level or round is an ordinary Coordinator run. A level that fails is recorded as
failed with its reason, never skipped silently. Ctrl-C ends the sweep or comparison and
keeps what ran: the levels and rounds that finished stay complete, the one it cut short is
marked interrupted (whether its workers were measuring or still starting).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kvbench.config.model import LoadConfig, RunConfig
from kvbench.errors import ConfigError, RunAborted, TargetUnreachable
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.model import RunResult, combine_rounds
from kvbench.runner.cluster import workers_line
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


# What a level cut short by Ctrl-C before its measurement began says instead of figures.
NOT_STARTED = "interrupted before its measurement began"


@dataclass(frozen=True, slots=True)
class LevelOutcome:
    """One level of a sweep.

    Attributes:
        result: its run, or None when it did not run.
        reason: why there is no result (the target refused, the workers failed, Ctrl-C).
        interrupted: Ctrl-C ended the sweep during this level.
    """

    level: float
    result: RunResult | None
    reason: str | None = None
    interrupted: bool = False


def run_sweep(
    config: RunConfig,
    axis: str,
    levels: Sequence[float],
    on_interval: Callable[[IntervalSnapshot], None],
    on_event: Callable[[str], None],
    on_start: Callable[[RunConfig], None] = lambda config: None,
) -> list[LevelOutcome]:
    """Run every level in order; a failed level is kept with its reason; Ctrl-C stops.
    ``on_start`` hears each level's config as its run starts; after the run, ``on_event``
    gets the ops its warm-up did (excluded from every figure) when it had one."""
    outcomes: list[LevelOutcome] = []
    for number, level in enumerate(levels, 1):
        try:
            on_event(f"level {number}/{len(levels)}: {axis} = {level:g}")
            leveled = at_level(config, axis, level)
            on_start(leveled)
            result = Coordinator(leveled, on_interval, on_event).run()
        except (TargetUnreachable, RunAborted) as exc:
            outcomes.append(LevelOutcome(level, None, str(exc)))
            on_event(f"level {level:g} failed: {exc}")
            continue
        except KeyboardInterrupt:  # before its workers measured: nothing to keep
            outcomes.append(LevelOutcome(level, None, NOT_STARTED, interrupted=True))
            on_event(f"level {level:g} {NOT_STARTED}")
            break
        result.label = f"{axis} {level:g}"  # what tells the levels apart in the history
        if config.load.cluster is not None:
            on_event(f"level {level:g}: {workers_line(result.workers)}")
        warmup = result.phases.get("warmup")
        if warmup is not None:
            on_event(f"level {level:g}: warm-up {warmup.ops():,} ops (excluded)")
        interrupted = result.status == "interrupted"
        outcomes.append(LevelOutcome(level, result, None, interrupted))
        if interrupted:
            break
    return outcomes


@dataclass(frozen=True, slots=True)
class ComparisonRuns:
    """A comparison's runs.

    Attributes:
        results: per target that ran at least one round, its rounds combined (in target
            order; Ctrl-C may leave the last targets without one).
        interrupted: Ctrl-C ended it; the round it cut short is the last of its target
            (status interrupted), or missing when its workers were still starting.
    """

    results: list[RunResult]
    interrupted: bool = False


def run_comparison(
    configs: Sequence[RunConfig],
    rounds: int,
    on_interval: Callable[[IntervalSnapshot], None],
    on_event: Callable[[str], None],
    on_start: Callable[[RunConfig, int], None] = lambda config, round_index: None,
) -> ComparisonRuns:
    """Rounds interleaved across targets (A B A B ...); one combined result per target,
    labelled ``compare: URL`` for the history. ``on_start`` hears each round's config
    and index (from 0) as it starts: each is a run of one round."""
    per_target: list[list[RunResult]] = [[] for _ in configs]
    interrupted = False
    for round_index in range(rounds):
        for config, results in zip(configs, per_target, strict=True):
            single = replace(config, load=replace(config.load, rounds=1))
            try:
                on_event(f"round {round_index + 1}/{rounds}: {config.targets[0].url}")
                on_start(single, round_index)
                result = Coordinator(single, on_interval, on_event).run()
            except KeyboardInterrupt:
                on_event(f"round {round_index + 1} of {config.targets[0].url} {NOT_STARTED}")
                interrupted = True
                break
            results.append(result)
            if result.status == "interrupted":
                interrupted = True
                break
        if interrupted:
            break
    combined = [combine_rounds(r) for r in per_target if r]
    for result in combined:  # what tells the compared runs apart in the history
        result.label = f"compare: {result.targets[0]['url']}"
    return ComparisonRuns(combined, interrupted)
