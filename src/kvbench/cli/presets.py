"""``kvbench presets`` and ``kvbench run --preset NAME TARGET``: the classic experiments."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kvbench.cli.console import make_console
from kvbench.cli.export import Outputs, check_history, write_many
from kvbench.cli.live import LiveView
from kvbench.config import ReportConfig, Settings, load_config
from kvbench.config.load import default_db_path
from kvbench.config.presets import PRESETS, Preset, get_preset, with_scheme
from kvbench.errors import ConfigError
from kvbench.report import document, summarize
from kvbench.report.html import render
from kvbench.report.levels import comparison, target_column
from kvbench.report.terminal import fmt_us
from kvbench.results.model import RunResult
from kvbench.results.status import EXIT_CODES, INTERRUPTED, OK, worst
from kvbench.runner.levels import at_level, parse_levels, run_comparison
from kvbench.units import format_rate


@click.command()
@click.argument("name", required=False)
def presets(name: str | None) -> None:
    """List the classic experiments, or describe one.

    \b
    Example:
        kvbench presets
        kvbench presets gateway-vs-native
        kvbench run --preset memcached-storm memcached://127.0.0.1:11211
    """
    console = make_console()
    if name is None:
        table = Table("preset", "shape", "targets", "what")
        for preset in PRESETS.values():
            table.add_row(preset.name, preset.shape, str(preset.targets), preset.title)
        console.print(table)
        console.print("details: kvbench presets NAME; run: kvbench run --preset NAME TARGET")
        return
    preset = get_preset(name)
    console.print(f"[bold]{preset.name}[/bold]: {preset.title}")
    console.print(f"the original: {preset.original}")
    console.print(f"kvbench measures: {preset.measures}")
    settings = ", ".join(f"{k} = {v!r}" for k, v in preset.settings.items())
    console.print(f"settings: {settings}")
    if preset.steps:
        console.print("steps: " + "; then ".join(f"{s.label} ({s.settings})" for s in preset.steps))
    if preset.axis:
        console.print(f"sweeps {preset.axis} over {preset.levels}")


def _preset_settings(preset: Preset, extra: dict[str, Any] | None = None) -> Settings:
    values = {**preset.settings, **(extra or {})}
    return {path: (value, f"preset {preset.name}: {path}") for path, value in values.items()}


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
    several runs writes all of them into each file.
    """
    from kvbench.cli.levels import sweep_and_report  # the CLI's own modules, no cycle at import
    from kvbench.cli.run import measure, publish

    preset = get_preset(name)
    if len(targets) != preset.targets:
        raise ConfigError(
            "TARGET", f"preset {name} takes {preset.targets} target(s), got {len(targets)}"
        )
    urls = [with_scheme(url, preset) for url in targets]
    console = make_console()
    outputs = replace(outputs or Outputs(), json_path=flags.pop("report.json", (None, ""))[0])
    if preset.shape == "queue":
        _refuse_outputs(preset, outputs)
        return _run_queue_preset(preset, urls[0], flags)
    outputs.check()  # before the first step: a file that cannot be written is refused now
    check_history(
        ReportConfig(
            db_path=flags.get("report.db", (None, ""))[0] or default_db_path(),
            save=flags.get("report.save", (True, ""))[0] is not False,
        )
    )
    if "workload.seed" not in flags:  # every step and target sends the same keys
        flags["workload.seed"] = (int.from_bytes(os.urandom(4), "big"), "seed")
    if preset.shape == "steps":
        statuses: list[str] = []
        done: list[tuple[str, RunResult]] = []
        for step in preset.steps:
            settings = {
                **_preset_settings(preset, step.settings),
                **flags,
                "target.urls": (urls, "TARGET"),
            }
            config = load_config(config_path, settings, processes)
            console.print(f"[bold]{preset.name}: {step.label}[/bold]")
            result = measure(console, config)
            statuses.append(publish(console, result, config).name)
            done.append((step.label, result))
            if result.status == INTERRUPTED:
                break
        _write_outputs(console, preset, done, "step", outputs)
        return EXIT_CODES[worst(statuses)]
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
    configs = [
        load_config(
            config_path,
            {
                **settings,
                "target.urls": ([url], "TARGET"),
                "workload.seed": (config.workload.seed, "seed"),
            },
            processes,
        )
        for url in urls
    ]
    done, rows, status = _compare_at_levels(console, configs, preset.axis, levels)
    _write_outputs(
        console,
        preset,
        done,
        f"{preset.axis} target",
        outputs,
        {"status": status, "comparison": rows},
    )
    return EXIT_CODES[status]


def _refuse_outputs(preset: Preset, outputs: Outputs) -> None:
    """Queue presets run ``kvbench queue`` once per step: its files are that command's."""
    for flag, path in (
        ("--json", outputs.json_path),
        ("--csv", outputs.csv_path),
        ("--hdr-log", outputs.hdr_log_path),
        ("--report", outputs.report_path),
    ):
        if path:
            raise ConfigError(
                flag,
                f"not available with --preset {preset.name}: it runs kvbench queue once per "
                "step (kvbench presets NAME shows the steps; run them with kvbench queue --json)",
            )


def _write_outputs(
    console: Console,
    preset: Preset,
    labelled: list[tuple[str, RunResult]],
    label_column: str,
    outputs: Outputs,
    extra: dict[str, Any] | None = None,
) -> None:
    """A multi-run preset's files: every run, labelled, in each one asked for."""
    from kvbench.cli.levels import write_json_document
    from kvbench.cli.report import save_report

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
    console: Console, configs: list[Any], axis: str, levels: list[float]
) -> tuple[list[tuple[str, RunResult]], list[dict[str, Any]], str]:
    """Compare the targets at each level; the runs (labelled level and target), the rows
    and the status of it all (the worst target's at any level)."""
    done: list[tuple[str, RunResult]] = []
    rows: list[dict[str, Any]] = []
    statuses: list[str] = []
    a_url, b_url = configs[0].targets[0].url, configs[1].targets[0].url
    table = Table(title=f"A = {a_url}, B = {b_url}", title_justify="left")
    for column in (
        axis,
        "A ops/s",
        "B ops/s",
        "B/A",
        "95% CI",
        "B/A p99",
        "A p99",
        "B p99",
        "status",
    ):
        table.add_column(column, justify="right")
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
            results = ran.results
            columns = [target_column(r) for r in results]
            statuses += [c.model.status.name for c in columns]
            done += [(f"{level:g} {r.targets[0]['url']}", r) for r in results]
            if ran.interrupted:
                statuses.append(INTERRUPTED)
            if len(columns) < 2:  # Ctrl-C before B's first round: nothing to compare
                break
            (row,) = comparison(columns[:2])
            rows.append({axis: level, **row})
            ci = row["throughput_ratio_ci95"]
            table.add_row(
                f"{level:g}",
                format_rate(columns[0].model.throughput_per_s),
                format_rate(columns[1].model.throughput_per_s),
                f"{row['throughput_ratio']:.0%}" if row["throughput_ratio"] is not None else "",
                f"{ci[0]:.0%}..{ci[1]:.0%}" if ci else "",
                f"{row['p99_ratio']:.2f}x" if row["p99_ratio"] else "",
                fmt_us(columns[0].model.latency_us.get("p99")),
                fmt_us(columns[1].model.latency_us.get("p99")),
                _statuses(columns),
            )
            if ran.interrupted:
                break
    console.print(table)
    return done, rows, worst(statuses)


def _run_queue_preset(preset: Preset, url: str, flags: Settings) -> int:
    """Queue presets run ``kvbench queue`` once per step.

    Of the run flags, -n (messages; the start-after points scale with it), --db,
    --no-save and -q apply; for anything else use ``kvbench queue`` directly.
    """
    from kvbench.cli.queue import queue

    context = click.get_current_context()
    by_code = {code: name for name, code in EXIT_CODES.items()}
    statuses: list[str] = []
    for step in preset.steps:
        make_console().print(f"[bold]{preset.name}: {step.label}[/bold]")
        options = {**preset.settings, **step.settings}
        messages = flags.get("load.requests", (None, ""))[0]
        if messages is not None:  # -n N: N messages, the start-after points scaled with it
            scale = int(messages) / int(preset.settings["messages"])
            options["messages"] = str(messages)
            after = options.get("consumers_start_after")
            if after is not None:
                options["consumers_start_after"] = str(max(1, round(int(after) * scale)))
        code = context.invoke(
            queue,
            target=url,
            json_path=None,
            db=flags.get("report.db", (None, ""))[0],
            no_save=flags.get("report.save", (True, ""))[0] is False,
            quiet=flags.get("report.live", (True, ""))[0] is False,
            **options,
        )
        statuses.append(by_code[int(code or 0)])
    return EXIT_CODES[worst(statuses)]


def _statuses(columns: list[Any]) -> str:
    """``ok``, or which target was not (with the first reason its status gives)."""
    bad = [
        f"{'AB'[i]}: {c.model.status.name}"
        + (f" ({c.model.status.reasons[0]})" if c.model.status.reasons else "")
        for i, c in enumerate(columns)
        if c.model.status.name != OK
    ]
    return "; ".join(bad) or OK
