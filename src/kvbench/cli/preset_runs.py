"""``kvbench run --preset NAME TARGET``: the classic experiments, run as library calls.

A preset (config/presets.py) is settings and a shape: runs in steps, a sweep, a comparison
at every level, or queue runs in steps. Each shape runs through cli/session.py's functions
(measure and publish, ``sweep_and_report``, ``measure_queue``), so a preset's runs are
ordinary runs: stored, labelled with their step or level, and written into the files asked
for (every run, labelled, in each).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from rich.console import Console

from kvbench.cli.console import make_console
from kvbench.cli.live import LiveView
from kvbench.cli.outputs import (
    Outputs,
    check_history,
    save_report,
    write_json_document,
    write_many,
)
from kvbench.cli.session import measure, measure_queue, publish, sweep_and_report
from kvbench.config import ReportConfig, RunConfig, Settings, load_config
from kvbench.config.load import default_db_path
from kvbench.config.presets import Preset, get_preset, with_scheme
from kvbench.config.queue import build_queue_config
from kvbench.errors import ConfigError
from kvbench.report import document, summarize
from kvbench.report.html import render
from kvbench.report.levels import TargetColumn, comparison, target_column
from kvbench.report.tables import compared_levels_table
from kvbench.results.model import RunResult
from kvbench.results.status import EXIT_CODES, INTERRUPTED, worst
from kvbench.runner.levels import at_level, parse_levels, run_comparison

# Runs of a preset, labelled (a step's name, a level, a level and a target).
Labelled = list[tuple[str, RunResult]]


def run_preset(
    name: str,
    targets: tuple[str, ...],
    flags: Settings,
    config_path: str | None,
    processes: int,
    outputs: Outputs | None = None,
) -> int:
    """Run a preset with ``flags`` (the command line's settings) on top of its own.

    ``outputs``: --csv, --hdr-log and --report (--json comes in ``flags``); a preset of
    several runs writes all of them into each file. Returns the exit code of the worst
    run's status.
    """
    preset = get_preset(name)
    if len(targets) != preset.targets:
        raise ConfigError(
            "TARGET", f"preset {name} takes {preset.targets} target(s), got {len(targets)}"
        )
    urls = [with_scheme(url, preset) for url in targets]
    console = make_console()
    outputs = replace(outputs or Outputs(), json_path=flags.pop("report.json", (None, ""))[0])
    report = _report(flags)
    outputs.check()  # before the first step: a file that cannot be written is refused now
    check_history(report)
    if preset.shape == "queue":
        return _queue_steps(console, preset, urls[0], flags, report, outputs)
    if "workload.seed" not in flags:  # every step and target sends the same keys
        flags["workload.seed"] = (int.from_bytes(os.urandom(4), "big"), "seed")
    if preset.shape == "steps":
        return _steps(console, preset, urls, flags, config_path, processes, outputs)
    return _levels(console, preset, urls, flags, config_path, processes, outputs)


def _report(flags: Settings) -> ReportConfig:
    """Where the preset's runs go: --db, --no-save and -q (--json is the preset's file)."""
    return ReportConfig(
        db_path=flags.get("report.db", (None, ""))[0] or default_db_path(),
        save=flags.get("report.save", (True, ""))[0] is not False,
        live=flags.get("report.live", (True, ""))[0] is not False,
    )


def _preset_settings(preset: Preset, extra: dict[str, Any] | None = None) -> Settings:
    values = {**preset.settings, **(extra or {})}
    return {path: (value, f"preset {preset.name}: {path}") for path, value in values.items()}


def _steps(
    console: Console,
    preset: Preset,
    urls: list[str],
    flags: Settings,
    config_path: str | None,
    processes: int,
    outputs: Outputs,
) -> int:
    """Runs in order, each published (and labelled) as its step; Ctrl-C ends them."""
    statuses: list[str] = []
    done: Labelled = []
    for step in preset.steps:
        settings = {
            **_preset_settings(preset, step.settings),
            **flags,
            "target.urls": (urls, "TARGET"),
        }
        config = load_config(config_path, settings, processes)
        console.print(f"[bold]{preset.name}: {step.label}[/bold]")
        result = measure(console, config)
        result.label = f"{preset.name}: {step.label}"
        statuses.append(publish(console, result, config.report, Outputs()).name)
        done.append((step.label, result))
        if result.status == INTERRUPTED:
            break
    _write_outputs(console, preset, done, "step", outputs)
    return EXIT_CODES[worst(statuses)]


def _queue_steps(
    console: Console,
    preset: Preset,
    url: str,
    flags: Settings,
    report: ReportConfig,
    outputs: Outputs,
) -> int:
    """Queue runs in order (``measure_queue``), each published and labelled as its step.

    Of the run flags, -n (messages; the start-after points scale with it), --db,
    --no-save and -q apply; for anything else use ``kvbench queue`` directly.
    """
    statuses: list[str] = []
    done: Labelled = []
    for step in preset.steps:
        options = {**preset.settings, **step.settings}
        messages = flags.get("load.requests", (None, ""))[0]
        if messages is not None:  # -n N: N messages, the start-after points scaled with it
            scale = int(messages) / int(preset.settings["messages"])
            options["messages"] = str(messages)
            after = options.get("consumers_start_after")
            if after is not None:
                options["consumers_start_after"] = str(max(1, round(int(after) * scale)))
        config = build_queue_config(url, options, report)
        console.print(f"[bold]{preset.name}: {step.label}[/bold]")
        result = measure_queue(console, config, f"{preset.name}: {step.label}")
        statuses.append(publish(console, result, report, Outputs()).name)
        done.append((step.label, result))
        if result.status == INTERRUPTED:
            break
    _write_outputs(console, preset, done, "step", outputs)
    return EXIT_CODES[worst(statuses)]


def _levels(
    console: Console,
    preset: Preset,
    urls: list[str],
    flags: Settings,
    config_path: str | None,
    processes: int,
    outputs: Outputs,
) -> int:
    """A sweep, or a comparison at every level, over the preset's axis (a range given on
    the command line narrows the preset's)."""
    assert preset.axis is not None and preset.levels is not None
    axis_path = f"load.{preset.axis}"
    level_text = preset.levels
    given = flags.get(axis_path, (None, ""))[0]
    if isinstance(given, str) and (":" in given or "," in given):  # narrow the preset's range
        level_text = flags.pop(axis_path)[0]
    settings = {**_preset_settings(preset), **flags, "target.urls": (urls[:1], "TARGET")}
    config = load_config(config_path, settings, processes)
    levels = parse_levels(level_text, f"--{preset.axis}")
    if preset.shape == "sweep":
        return sweep_and_report(console, config, preset.axis, levels, None, outputs)
    seeded = {**settings, "workload.seed": (config.workload.seed, "seed")}
    configs = [
        load_config(config_path, {**seeded, "target.urls": ([url], "TARGET")}, processes)
        for url in urls
    ]
    done, rows, status = _compare_at_levels(console, configs, preset.axis, levels)
    extra = {"status": status, "comparison": rows}
    _write_outputs(console, preset, done, f"{preset.axis} target", outputs, extra)
    return EXIT_CODES[status]


def _write_outputs(
    console: Console,
    preset: Preset,
    labelled: Labelled,
    label_column: str,
    outputs: Outputs,
    extra: dict[str, Any] | None = None,
) -> None:
    """A multi-run preset's files: every run, labelled, in each one asked for."""
    if outputs.json_path:
        doc = {
            "preset": preset.name,
            "runs": [
                {label_column.replace(" ", "_"): label, "document": document(summarize(run))}
                for label, run in labelled
            ],
            **(extra or {}),
        }
        write_json_document(outputs.json_path, doc, console)
    write_many(
        console,
        labelled,
        label_column.replace(" ", "_"),
        csv_path=outputs.csv_path,
        hdr_log_path=outputs.hdr_log_path,
    )
    if outputs.report_path and labelled:
        save_report(console, outputs.report_path, render([run for _, run in labelled]))


def _compare_at_levels(
    console: Console, configs: list[RunConfig], axis: str, levels: list[float]
) -> tuple[Labelled, list[dict[str, Any]], str]:
    """Compare the targets at each level; the runs (labelled level and target), the rows
    and the status of it all (the worst target's at any level)."""
    done: Labelled = []
    rows: list[dict[str, Any]] = []
    shown: list[tuple[float, list[TargetColumn], dict[str, Any]]] = []
    statuses: list[str] = []
    base = configs[0]
    with LiveView(console, base, runs=len(levels) * len(configs)) as view:
        for level in levels:
            view.note(f"level {axis} = {level:g}")
            ran = run_comparison(
                [at_level(c, axis, level) for c in configs],
                base.load.rounds,
                view.interval,
                view.note,
            )
            columns = [target_column(r) for r in ran.results]
            statuses += [c.model.status.name for c in columns]
            done += [(f"{level:g} {r.targets[0]['url']}", r) for r in ran.results]
            if ran.interrupted:
                statuses.append(INTERRUPTED)
            if len(columns) < 2:  # Ctrl-C before B's first round: nothing to compare
                break
            (row,) = comparison(columns[:2])
            rows.append({axis: level, **row})
            shown.append((level, columns, row))
            if ran.interrupted:
                break
    console.print(compared_levels_table(axis, shown))
    return done, rows, worst(statuses)
