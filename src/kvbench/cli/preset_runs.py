"""``kvbench run --preset NAME TARGET``: the classic experiments, run as library calls.

A preset (config/presets.py) is settings and a shape: runs in steps, a sweep, a comparison
at every level, or queue runs in steps. Each shape runs through cli/session.py's functions
(measure and publish, ``sweep_and_report``, ``measure_queue_phase``), so a preset's runs are
ordinary runs: stored, labelled with their step or level, and written into the files asked
for (every run, labelled, in each).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rich.console import Console

from kvbench.cli.console import fitted, make_console
from kvbench.cli.live import LiveView
from kvbench.cli.outputs import (
    Outputs,
    check_history,
    save_report,
    write_json_document,
    write_many,
)
from kvbench.cli.session import measure, measure_queue_phase, publish, sweep_and_report
from kvbench.config import ReportConfig, RunConfig, Settings, load_config
from kvbench.config.load import default_db_path
from kvbench.config.model import WorkloadConfig
from kvbench.config.presets import Preset, Step, get_preset, with_scheme
from kvbench.config.queue import build_queue_config
from kvbench.errors import ConfigError, TargetUnreachable, exit_code
from kvbench.report import document, summarize
from kvbench.report.batches import BatchFigures, batch_figures, batch_line, batches_table
from kvbench.report.html import render
from kvbench.report.levels import ShareOfSecond, share_of_second, share_sentence, target_column
from kvbench.report.tables import compared_rounds_table, queue_phases_table, share_table
from kvbench.report.terminal import phase_end_line
from kvbench.report.ycsb import ycsb_document, ycsb_figures, ycsb_lines
from kvbench.results.model import RunResult
from kvbench.results.status import EXIT_CODES, INTERRUPTED, worst
from kvbench.runner.batches import run_batch_level
from kvbench.runner.levels import at_level, parse_levels, run_comparison
from kvbench.runner.queue import QueueCarry
from kvbench.workload.models import model_figures

# Runs of a preset, labelled (a step's name, a level, a level and a target).
Labelled = list[tuple[str, RunResult]]
# The flag a queue preset reads besides -n: the server's data directory (--data-dir).
DATA_DIR = "queue.data_dir"
# Run flags the queue preset applies to every phase, as the kvbench queue option they are.
QUEUE_FLAGS = {
    "load.requests": "messages",
    "load.pipeline": "pipeline",
    "load.timeout": "timeout",
    "load.interval": "interval",
    "load.duration": "duration",
    DATA_DIR: "data_dir",
}
# How long a run is: the command line's (-n or --duration) replaces the preset's, whichever
# the preset set.
_LENGTH = ("load.requests", "load.duration")
# Run flags it takes for the preset itself: where the results go, the live line.
QUEUE_OWN_FLAGS = (
    "report.db",
    "report.save",
    "report.live",
    "report.quiet",
    "report.wide",
    "report.json",
)
# The exit code of a target that cannot be reached (cli/__init__.py's for TargetUnreachable).
# Settings put-get-batches has no use for (a client sends one request at a time, each key
# once per batch, as fast as it can, once): given on the command line, refused by name.
BATCHES_IGNORE = (
    "load.duration",
    "load.pipeline",
    "workload.ratio",
    "load.rate",
    "load.rounds",
    "load.warmup",
    "load.processes",
)


@dataclass(frozen=True)
class _Run:
    """One preset run: the preset, its targets, the command line's settings and files."""

    console: Console
    preset: Preset
    urls: list[str]
    flags: Settings
    config_path: str | None
    processes: int
    outputs: Outputs
    report: ReportConfig

    def settings(self, urls: list[str], step: dict[str, Any] | None = None) -> Settings:
        """The preset's settings (and a step's), the command line's over them, ``urls``."""
        preset = self.preset
        values = {**preset.settings, **(step or {})}
        if not self.flags.keys().isdisjoint(_LENGTH):  # -n or --duration: how long, not both
            values = {path: value for path, value in values.items() if path not in _LENGTH}
        own = {path: (value, f"preset {preset.name}: {path}") for path, value in values.items()}
        return {**own, **self.flags, "target.urls": (urls, "TARGET")}

    def config(self, urls: list[str], step: dict[str, Any] | None = None) -> RunConfig:
        return load_config(self.config_path, self.settings(urls, step), self.processes)


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
    if DATA_DIR in flags and preset.shape != "queue":
        raise ConfigError("--data-dir", f"preset {name} runs no queue: no data directory to read")
    if len(targets) < preset.targets or (len(targets) > preset.targets and not preset.more_targets):
        more = " or more" if preset.more_targets else ""
        raise ConfigError(
            "TARGET", f"preset {name} takes {preset.targets}{more} target(s), got {len(targets)}"
        )
    outputs = replace(outputs or Outputs(), json_path=flags.pop("report.json", (None, ""))[0])
    report = _report(flags)
    outputs.check()  # before the first step: a file that cannot be written is refused now
    check_history(report)
    if preset.shape != "queue" and "workload.seed" not in flags:  # the same keys everywhere
        flags["workload.seed"] = (int.from_bytes(os.urandom(4), "big"), "seed")
    urls = [with_scheme(url, preset) for url in targets]
    run = _Run(
        make_console(outputs.to_stdout()),
        preset,
        urls,
        flags,
        config_path,
        processes,
        outputs,
        report,
    )
    shapes = {"queue": _queue_steps, "steps": _steps, "batches": _batches}
    return shapes.get(preset.shape, _levels)(run)


def _report(flags: Settings) -> ReportConfig:
    """Where the preset's runs go: --db, --no-save and -q (--json is the preset's file)."""
    return ReportConfig(
        db_path=flags.get("report.db", (None, ""))[0] or default_db_path(),
        save=flags.get("report.save", (True, ""))[0] is not False,
        live=flags.get("report.live", (True, ""))[0] is not False,
        wide=flags.get("report.wide", (False, ""))[0] is True,
        quiet=flags.get("report.quiet", (False, ""))[0] is True,
    )


def _steps(run: _Run) -> int:
    """Load runs in order, each with its step's settings (a step that reads what the one
    before wrote gets its span of keys and its time window: ``_reading``)."""
    before: list[tuple[RunResult, int, int]] = []  # result, wall-clock ms at start and end

    def measure_step(step: Step) -> tuple[RunResult, ReportConfig]:
        settings = dict(step.settings)
        if step.reads_previous and before:
            settings.update(_reading(*before[-1]))
        config = run.config(run.urls, settings)
        start_ms = time.time_ns() // 1_000_000
        result = measure(run.console, config)
        before.append((result, start_ms, time.time_ns() // 1_000_000 + 1))
        return result, config.report

    return _in_steps(run, measure_step)


def _reading(written: RunResult, start_ms: int, end_ms: int) -> dict[str, Any]:
    """Settings that make a step read exactly the keys ``written`` stored: each worker
    walks its own start of the keyspace (the same seed and workers), as many keys as the
    slowest worker stored in the window (its successful sets: replies in the window are a
    prefix of what was sent, and the drain waited for the rest; a refused set stored
    nothing); timestamps must fall in the time the step ran (--verify)."""
    settings: dict[str, Any] = {"workload.verify_window_ms": (start_ms, end_ms)}
    stored = [int(w.get("succeeded", 0)) for w in written.workers]
    if stored and min(stored) > 0:
        settings["workload.key_span"] = min(stored)
    return settings


def check_queue_flags(preset: Preset, flags: Settings, config_path: str | None) -> None:
    """Refuse a run flag the queue preset does not take, by name, before any phase.

    Raises:
        ConfigError: naming the first such flag (``--config`` too: a queue run has no
            load config file).
    """
    if config_path is not None:
        raise ConfigError("--config", f"preset {preset.name} runs queues: it reads no config file")
    for path, (_, source) in flags.items():
        if path not in QUEUE_FLAGS and path not in QUEUE_OWN_FLAGS:
            raise ConfigError(
                source,
                f"preset {preset.name} does not take this flag (it takes -n, -P, --timeout, "
                "--interval, --duration, --data-dir and the output flags; for the rest use "
                "kvbench queue)",
            )


def queue_step_options(preset: Preset, step: Step, flags: Settings) -> dict[str, Any]:
    """A queue phase's ``kvbench queue`` options: the preset's, the step's, and the
    command line's flags over them (the same in every phase). -n N sends N messages and
    scales the start-after points with it."""
    options = {**preset.settings, **step.settings}
    for path, name in QUEUE_FLAGS.items():
        value = flags.get(path, (None, ""))[0]
        if value is not None:
            options[name] = str(value)
    messages = flags.get("load.requests", (None, ""))[0]
    after = options.get("consumers_start_after")
    if messages is not None and after is not None:
        scale = int(messages) / int(preset.settings["messages"])
        options["consumers_start_after"] = str(max(1, round(int(after) * scale)))
    return options


def _queue_steps(run: _Run) -> int:
    """Queue runs in order (``measure_queue_phase``), each with its step's settings, each
    continuing the one before (one run tag, one delivery ledger: a message stored in the
    write and never read in the drain is lost); then the phases in the original's units.

    The run flags a queue takes (``QUEUE_FLAGS``) apply to every phase; --db, --no-save,
    -q and the output files too; any other is refused (``check_queue_flags``).
    """
    preset = run.preset
    check_queue_flags(preset, run.flags, run.config_path)
    carried: list[QueueCarry] = []
    phases: Labelled = []

    def measure_step(step: Step) -> tuple[RunResult, ReportConfig]:
        options = queue_step_options(preset, step, run.flags)
        config = build_queue_config(run.urls[0], options, run.report)
        result, carry = measure_queue_phase(run.console, config, carried[-1] if carried else None)
        carried.append(carry)
        phases.append((step.label, result))
        return result, run.report

    code = _in_steps(run, measure_step)
    models = [(label, summarize(result)) for label, result in phases]
    title = f"{preset.name}: each phase in the original's units, and kvbench's checks"
    run.console.print(queue_phases_table(title, models, run.report.wide))
    return code


def _in_steps(run: _Run, measure_step: Callable[[Step], tuple[RunResult, ReportConfig]]) -> int:
    """Each step measured, labelled and published in order (Ctrl-C ends them), then the
    preset's files; the exit code of the worst step's status."""
    console, preset = run.console, run.preset
    statuses: list[str] = []
    done: Labelled = []
    for step in preset.steps:
        console.print(f"[bold]{preset.name}: {step.label}[/bold]")
        result, report = measure_step(step)
        result.label = f"{preset.name}: {step.label}"
        statuses.append(publish(console, result, report, Outputs()).name)
        if preset.shape == "steps":
            console.print(phase_end_line(step.label, summarize(result)))
        if preset.figures == "ycsb":
            console.print(f"YCSB's figures ({preset.name}, {step.label}):")
            for line in ycsb_lines(ycsb_figures(result)):
                console.print(line, highlight=False)
        done.append((step.label, result))
        if result.status == INTERRUPTED:
            break
    _write_outputs(console, preset, done, "step", run.outputs)
    return EXIT_CODES[worst(statuses)]


def _levels(run: _Run) -> int:
    """A sweep, or a comparison at every level, over the preset's axis (a range given on
    the command line narrows the preset's)."""
    preset, flags = run.preset, run.flags
    assert preset.axis is not None and preset.levels is not None
    axis_path = f"load.{preset.axis}"
    level_text = preset.levels
    if flags.get(axis_path, (None, ""))[0] is not None:  # a range, a list or one level
        level_text = str(flags.pop(axis_path)[0])
    by_count = preset.requests_per_round is not None and not (
        {"load.duration", "load.requests"} & set(flags)
    )
    if by_count:  # rounds of a request count set per level (_at_level); this one is replaced
        flags["load.requests"] = (preset.round_requests(1), f"preset {preset.name}")
    config = run.config(run.urls[:1])
    levels = parse_levels(level_text, f"--{preset.axis}")
    if preset.shape == "sweep":
        return sweep_and_report(
            run.console, config, preset.axis, levels, None, run.outputs, preset.unit_rates
        )
    flags["workload.seed"] = (config.workload.seed, "seed")
    configs = [run.config([url]) for url in run.urls]
    done, rows, status = _compare_at_levels(
        run.console, configs, preset.axis, levels, preset if by_count else None
    )
    extra = {"status": status, "comparison": rows}
    _write_outputs(run.console, preset, done, f"{preset.axis} target", run.outputs, extra)
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
                {
                    label_column.replace(" ", "_"): label,
                    "document": document(summarize(run)),
                    **_preset_figures(preset, run),
                }
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


def _preset_figures(preset: Preset, run: RunResult) -> dict[str, Any]:
    """A run's figures in its preset's own terms: YCSB's (``ycsb``), and what fb-etc's
    size tables held (``model``: their range, mean, and what was clipped)."""
    figures: dict[str, Any] = {}
    if preset.figures == "ycsb":
        figures["ycsb"] = ycsb_document(ycsb_figures(run))
    if run.config.get("workload", {}).get("key_size_model") or run.config.get("workload", {}).get(
        "value_size_model"
    ):
        figures["model"] = model_figures(WorkloadConfig(**_workload_fields(run)))
    return figures


def _workload_fields(run: RunResult) -> dict[str, Any]:
    """The fields of the run's stored workload config that decide its fb-etc tables."""
    stored = run.config.get("workload", {})
    names = ("keys", "insert_keys", "key_prefix", "seed", "key_size_model", "value_size_model")
    return {name: stored[name] for name in names if name in stored}


def _at_level(config: RunConfig, axis: str, level: float, counted: Preset | None) -> RunConfig:
    """``config`` at ``level``; ``counted``: with its preset's request count per round."""
    config = at_level(config, axis, level)
    requests = counted.round_requests(config.load.connections) if counted else None
    if requests is None:
        return config
    return replace(config, load=replace(config.load, requests=requests, duration_ns=None))


def _compare_at_levels(
    console: Console,
    configs: list[RunConfig],
    axis: str,
    levels: list[float],
    counted: Preset | None = None,
) -> tuple[Labelled, list[dict[str, Any]], str]:
    """Compare the targets at each level; the runs (labelled level and target), the rows
    and the status of it all (the worst target's at any level). ``counted``: rounds end
    after the preset's request count for the level."""
    done: Labelled = []
    rows: list[dict[str, Any]] = []
    shown: list[tuple[float, ShareOfSecond]] = []
    statuses: list[str] = []
    base = configs[0]
    with LiveView(console, base, runs=len(levels) * len(configs)) as view:
        for level in levels:
            view.start_level(axis, level)
            view.note(f"level {axis} = {level:g}")
            ran = run_comparison(
                [_at_level(c, axis, level, counted) for c in configs],
                base.load.rounds,
                view.interval,
                view.note,
                view.start,
            )
            columns = [target_column(r) for r in ran.results]
            statuses += [c.model.status.name for c in columns]
            done += [(f"{level:g} {r.targets[0]['url']}", r) for r in ran.results]
            if ran.interrupted:
                statuses.append(INTERRUPTED)
            if len(columns) < 2:  # Ctrl-C before B's first round: nothing to compare
                break
            row = share_of_second(columns[:2])
            rows.append({axis: level, **row})
            shown.append((level, row))
            if ran.interrupted:
                break
    console.print(compared_rounds_table(axis, shown))
    console.print(share_table(axis, shown))
    for level, row in shown:  # the original's figure, with the targets named
        console.print(share_sentence(axis, level, row))
    return done, rows, worst(statuses)


def _batches(run: _Run) -> int:
    """put-get-batches: at each level, that many clients set every key, then get it
    (runner/batches.py); each level published as a run, then the table of all of them."""
    preset, flags = run.preset, run.flags
    assert preset.levels is not None
    if flags.get("load.requests", (None, ""))[0] is not None:
        raise ConfigError(
            "-n", f"{preset.name}: each client sets and gets every key once; R is --keys"
        )
    for path in BATCHES_IGNORE:
        if path in flags:
            raise ConfigError(
                flags[path][1],
                f"{preset.name}: each client sets every key once, then gets it, one request "
                "at a time, on one process; this flag does not apply",
            )
    given = flags.pop("load.connections", (None, ""))[0]
    text = str(given) if given is not None else preset.levels
    levels = parse_levels(text, "--connections")
    if any(level != int(level) for level in levels):
        raise ConfigError("--connections", f"{text!r}: a level is a number of clients (whole)")
    config = run.config(run.urls)
    done: Labelled = []
    rows: list[BatchFigures] = []
    statuses: list[str] = []
    unreachable: TargetUnreachable | None = None  # a later level's: the levels before kept
    for level in levels:
        clients = int(level)
        run.console.print(f"[bold]{preset.name}: {clients} client(s)[/bold]")
        try:
            result = run_batch_level(config, clients)
        except TargetUnreachable as exc:
            if not done:  # nothing measured: the CLI's one line, exit 3
                raise
            unreachable = TargetUnreachable(f"{clients} client(s): {exc}")
            break
        result.label = f"{preset.name}: {clients} client(s)"
        statuses.append(publish(run.console, result, run.report, Outputs()).name)
        figures = batch_figures(result)
        run.console.print(batch_line(figures))
        done.append((str(clients), result))
        rows.append(figures)
        if result.status == INTERRUPTED:
            break
    run.console.print(batches_table(rows, [t.url for t in config.targets]))
    extra: dict[str, Any] = {"status": worst(statuses), "batches": rows}
    if unreachable is not None:
        extra["unreachable"] = str(unreachable)
    _write_outputs(run.console, preset, done, "clients", run.outputs, extra)
    if unreachable is not None:  # the levels before it are printed and written above
        message = f"kvbench: error: {unreachable}; stopped, the levels before it kept"
        print(fitted(message), file=sys.stderr)
        return exit_code(unreachable)
    return EXIT_CODES[worst(statuses)]
