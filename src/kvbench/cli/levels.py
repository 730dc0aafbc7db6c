"""``kvbench sweep`` and ``kvbench compare``: many runs, one answer.

Both take every option of ``kvbench run`` (copied from it, so they never drift apart);
the swept axis is the one of --connections, --pipeline or --rate given as a range.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kvbench.cli.console import make_console
from kvbench.cli.export import Outputs, check_history, write_many, write_text
from kvbench.cli.live import LiveView
from kvbench.cli.report import save_report
from kvbench.cli.run import default_processes, run, settings_from_options
from kvbench.config import RunConfig, load_config
from kvbench.errors import ConfigError
from kvbench.report import document, summarize
from kvbench.report.html import render, render_sweep
from kvbench.report.levels import (
    LevelRow,
    Slo,
    compare_document,
    comparison_sentence,
    level_row,
    parse_slo,
    sweep_document,
    target_column,
)
from kvbench.report.stats import MIN_CI_SAMPLES
from kvbench.report.terminal import fmt_us, print_summary
from kvbench.results.model import RunResult
from kvbench.results.status import EXIT_CODES, FAILED, INTERRUPTED
from kvbench.results.store import Store
from kvbench.runner.levels import AXES, LevelOutcome, parse_levels, run_comparison, run_sweep
from kvbench.units import format_rate

_AXIS_OPTION = {"connections": "connections", "pipeline": "pipeline", "rate": "rate"}


def _copy_run_options(command: click.Command, skip: set[str]) -> click.Command:
    command.params.extend(p for p in run.params if p.name not in skip)
    return command


def _save(config: RunConfig, results: list[RunResult]) -> None:
    if config.report.save:
        with Store(config.report.db_path) as store:
            for result in results:
                store.save_run(result, document(summarize(result)))


def write_json_document(path: str | None, doc: dict[str, Any], console: Console) -> None:
    """Write --json (a file that cannot be written is one line naming the flag)."""
    if path:
        write_text("--json", path, json.dumps(doc, indent=2) + "\n")
        console.print(f"result document written to {path}")


def _split_axis(options: dict[str, Any]) -> tuple[str, list[float]]:
    ranged = [
        a
        for a in AXES
        if isinstance(options.get(a), str) and (":" in options[a] or "," in options[a])
    ]
    if len(ranged) != 1:
        raise ConfigError(
            "sweep",
            "give exactly one of --connections, --pipeline or --rate as a range, e.g. --connections 64:2048:64",
        )
    axis = ranged[0]
    levels = parse_levels(options.pop(axis), f"--{axis}")
    return axis, levels


def _level_table(rows: list[LevelRow], axis: str) -> Table:
    table = Table(title=f"sweep over {axis}", title_justify="left")
    for name in (axis, "status", "ops/s", "95% CI", "p50", "p99", "errors", "SLO"):
        table.add_column(name, justify="right")
    for row in rows:
        t = row.throughput
        ci = ""
        if t and t.ci95:
            low = "0 (clamped)" if t.clamped else format_rate(t.ci95[0])
            ci = f"{low}..{format_rate(t.ci95[1])}"
        elif t and t.n > 1:
            ci = f"needs {MIN_CI_SAMPLES} rounds"
        table.add_row(
            f"{row.level:g}",
            row.status if not row.reason else f"{row.status}: {row.reason}",
            format_rate(t.mean) if t else "",
            ci,
            fmt_us(row.latency_us.get("p50")),
            fmt_us(row.latency_us.get("p99")),
            f"{row.errors:,}",
            {True: "met", False: "missed", None: ""}[row.slo_met],
        )
    return table


@click.command()
@click.argument("target")
@click.option(
    "--slo", help="A latency objective, e.g. 'p99<1ms': report the highest level meeting it."
)
def sweep(
    target: str, config_path: str | None = None, slo: str | None = None, **options: Any
) -> int:
    """Run TARGET at each level of one axis and find where it saturates.

    Give one of --connections, --pipeline or --rate as START:STOP:STEP or a list.
    Per level: status, throughput mean with a 95% CI over --rounds (3 or more), p50/p99,
    errors; then the knee (the first level within 5% of the highest throughput, when p99
    climbs after it) and, with --slo, the highest level that meets it. A level that fails is reported as failed, never skipped; the exit
    status is the worst level's (1 when one failed, 130 on Ctrl-C).

    \b
    Example:
        kvbench sweep memcached://127.0.0.1:11211 --connections 64:2048:64 --rounds 5
        kvbench sweep redis://127.0.0.1:6379 --pipeline 1,2,4,8,16,32 --slo 'p99<1ms'
    """
    console = make_console()
    outputs = Outputs.pop_from(options)
    axis, levels = _split_axis(options)
    settings = settings_from_options((target,), options)
    config = load_config(config_path, settings, default_processes())
    outputs.check()
    check_history(config.report)
    return sweep_and_report(console, config, axis, levels, slo, outputs)


def _level_row(outcome: LevelOutcome, objective: Slo | None) -> LevelRow:
    status = INTERRUPTED if outcome.interrupted else FAILED
    return level_row(outcome.level, outcome.result, outcome.reason, objective, status)


def sweep_and_report(
    console: Console,
    config: RunConfig,
    axis: str,
    levels: list[float],
    slo: str | None,
    outputs: Outputs,
) -> int:
    """Run a sweep, save its runs, print its table, knee and SLO level, write its files.

    Returns:
        The exit code of the sweep's status (the worst level's).
    """
    objective = parse_slo(slo) if slo else None
    with LiveView(console, config, runs=len(levels)) as view:
        outcomes = run_sweep(config, axis, levels, view.interval, view.note)
    rows = [_level_row(outcome, objective) for outcome in outcomes]
    runs = [o.result for o in outcomes if o.result is not None]
    _save(config, runs)
    console.print(_level_table(rows, axis))
    doc = sweep_document(axis, config.targets[0].url, rows, slo)
    console.print(
        f"knee: {axis} = {doc['knee']:g}"
        if doc["knee"] is not None
        else "knee: none within the swept range"
    )
    if objective:
        best = doc["best_level"]
        console.print(
            f"highest level meeting {slo}: {best:g}" if best is not None else f"no level met {slo}"
        )
    console.print(f"sweep status: {doc['status']}")
    write_json_document(outputs.json_path, doc, console)
    labelled = [(f"{o.level:g}", o.result) for o in outcomes if o.result is not None]
    write_many(
        console, labelled, axis, csv_path=outputs.csv_path, hdr_log_path=outputs.hdr_log_path
    )
    if outputs.report_path:
        html = render_sweep(axis, config.targets[0].url, rows, runs, slo)
        save_report(console, outputs.report_path, html)
    return EXIT_CODES[doc["status"]]


@click.command()
@click.argument("targets", nargs=-1, required=True, metavar="TARGET_A TARGET_B [...]")
def compare(targets: tuple[str, ...], config_path: str | None = None, **options: Any) -> int:
    """Run the same seeded workload against each TARGET, rounds interleaved A B A B.

    Prints each target's summary and its throughput and p99 relative to the first, with
    95% confidence intervals from the paired per-round ratios (3 rounds at least; use
    --rounds 5 or more). Exit status: the worst target's (1 when one failed, 130 on Ctrl-C).

    \b
    Example:
        kvbench compare memcached://127.0.0.1:11211 memcached+binary://127.0.0.1:11211 --rounds 5
    """
    if len(targets) < 2:
        raise ConfigError("compare", "give at least two targets")
    console = make_console()
    outputs = Outputs.pop_from(options)
    base_settings = settings_from_options((targets[0],), options)
    seed_config = load_config(config_path, base_settings, default_processes())
    configs = []
    for url in targets:  # one seed for all: the same requests against each target
        settings = {
            **base_settings,
            "target.urls": ([url], "TARGET"),
            "workload.seed": (seed_config.workload.seed, "--seed"),
        }
        configs.append(load_config(config_path, settings, default_processes()))
    outputs.check()
    check_history(seed_config.report)
    with LiveView(console, seed_config, runs=len(configs)) as view:
        ran = run_comparison(configs, seed_config.load.rounds, view.interval, view.note)
    results = ran.results
    _save(seed_config, results)
    columns = [target_column(r) for r in results]
    for column in columns:
        print_summary(console, column.model)
    doc = compare_document(columns, ran.interrupted)
    for row in doc["comparison"]:
        console.print(comparison_sentence(row))
    if len(results) < len(configs):
        missing = ", ".join(c.targets[0].url for c in configs[len(results) :])
        console.print(f"not measured (interrupted before its first round): {missing}")
    console.print(f"compare status: {doc['status']}")
    write_json_document(outputs.json_path, doc, console)
    labelled = [(r.targets[0]["url"], r) for r in results]
    write_many(
        console, labelled, "target", csv_path=outputs.csv_path, hdr_log_path=outputs.hdr_log_path
    )
    if outputs.report_path and results:
        save_report(console, outputs.report_path, render(results))
    return EXIT_CODES[doc["status"]]


_copy_run_options(sweep, {"targets"})
_copy_run_options(compare, {"targets"})
