"""What the commands do, as library functions: measure, publish, sweep, compare, queue,
replay.

Every command that runs something (``run``, ``sweep``, ``compare``, ``queue``,
``replay``, the presets) calls these; none imports another command module. A run is one skeleton whatever
its kind: settings from the flags, the files checked, the coordinator run with a live
view, then ``publish``: the one summary printed, the run stored, its files written.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.console import Console

from kvbench.cli.live import LiveView
from kvbench.cli.outputs import (
    Outputs,
    check_history,
    save_report,
    saved_run_hint,
    unsaved_warning,
    write_exports,
    write_json_document,
    write_many,
)
from kvbench.config import ReportConfig, RunConfig, Settings, load_config
from kvbench.config.model import TargetConfig
from kvbench.config.queue import QueueConfig
from kvbench.config.replay import MONITOR_FORMAT, ReplayConfig
from kvbench.errors import ConfigError, StoreError
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report import document, summarize
from kvbench.report.levels import (
    LevelRow,
    compare_document,
    comparison_sentence,
    level_row,
    parse_slo,
    sweep_document,
    target_column,
)
from kvbench.report.summary import queue_interval_row
from kvbench.report.tables import level_reasons, level_table
from kvbench.report.terminal import print_summary, queue_live_line, unit_rates_sentence
from kvbench.results.model import RunResult
from kvbench.results.queue import QueueInterval
from kvbench.results.status import EXIT_CODES, FAILED, INTERRUPTED, Status
from kvbench.results.store import Store
from kvbench.runner import interrupts
from kvbench.runner.coordinator import Coordinator
from kvbench.runner.embedded import throwaway_memcached
from kvbench.runner.limits import check_limits
from kvbench.units import format_duration_ns
from kvbench.workload.models import model_figures

if TYPE_CHECKING:
    from kvbench.runner.queue import QueueCarry

# A run's coordinator imports only what it runs and shows while the workers run: the
# modules of the other kinds of run (queues, sweeps, Dask, replays) and the HTML report
# (jinja2) are imported where they are used, so they take none of a run's memory.

# option name -> config path; CLI values override the scenario file.
OPTION_PATHS = {
    "connections": "load.connections",
    "processes": "load.processes",
    "pipeline": "load.pipeline",
    "duration": "load.duration",
    "requests": "load.requests",
    "warmup": "load.warmup",
    "timeout": "load.timeout",
    "interval": "load.interval",
    "ratio": "workload.ratio",
    "op_order": "workload.op_order",
    "keys": "workload.keys",
    "key_prefix": "workload.key_prefix",
    "key_pattern": "workload.key_pattern",
    "key_size": "workload.key_size",
    "key_template": "workload.key_template",
    "value_size": "workload.value_size",
    "value_kind": "workload.value_kind",
    "allow_oversize": "workload.allow_oversize",
    "verify": "workload.verify",
    "placement": "workload.placement",
    "multiget": "workload.multiget_keys",
    "ttl": "workload.ttl_s",
    "preload": "workload.preload",
    "seed": "workload.seed",
    "json_path": "report.json",
    "db": "report.db",
    "rate": "load.rate",
    "arrival": "load.arrival",
    "max_lag": "load.max_lag",
    "busy_poll": "load.busy_poll",
    "rounds": "load.rounds",
    "max_error_rate": "load.max_error_rate",
    "cluster": "load.cluster",
    "cluster_listen": "load.cluster_listen",
    "prometheus": "report.prometheus",
}


def default_processes() -> int:
    """One worker per core this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def settings_from_options(targets: tuple[str, ...], options: dict[str, Any]) -> Settings:
    """CLI options as config settings, each naming its flag for error messages."""
    settings: Settings = {}
    for name, path in OPTION_PATHS.items():
        value = options.get(name)
        if value is not None and value is not False:
            settings[path] = (value, "--" + name.replace("_path", "").replace("_", "-"))
    if options.get("commands"):
        settings["workload.commands"] = (options["commands"], "--command")
    if options.get("no_save"):
        settings["report.save"] = (False, "--no-save")
    if options.get("quiet"):
        settings["report.live"] = (False, "--quiet")
        settings["report.quiet"] = (True, "--quiet")
    if options.get("no_live"):
        settings["report.live"] = (False, "--no-live")
    if options.get("wide"):
        settings["report.wide"] = (True, "--wide")
    if targets:
        settings["target.urls"] = (list(targets), "TARGET")
    return settings


# -- one run ---------------------------------------------------------------------------


def run_once(
    console: Console, settings: Settings, config_path: str | None, outputs: Outputs
) -> int:
    """``kvbench run``: check the files, measure (a throwaway memcached when no target is
    named), publish. Returns the exit code of the run's status."""
    config = load_config(config_path, settings, default_processes())
    outputs = replace(outputs, json_path=config.report.json_path)  # --json or the file's
    outputs.check()
    check_history(config.report)
    with _targets(len(config.targets), console) as url:
        if url is not None:
            settings["target.urls"] = ([url], "TARGET")
            config = load_config(config_path, settings, default_processes())
        check_limits(config)
        result = measure(console, config)
    return publish(console, result, config.report, outputs).exit_code


@contextlib.contextmanager
def _targets(config_targets: int, console: Console) -> Iterator[str | None]:
    """A throwaway memcached when no target was named, else nothing."""
    if config_targets:
        yield None
        return
    with throwaway_memcached() as url:
        console.print(
            f"no target given: started a throwaway memcached at {url} (stopped after the run)"
        )
        yield url


def measure(console: Console, config: RunConfig) -> RunResult:
    """Run one measurement with the live view; return its result."""
    interrupts.disarm()  # from here a signal is the run's: kept as an interrupted result
    load = config.load
    span = (
        f"{load.duration_ns / 1e9:g}s"
        if load.duration_ns is not None
        else f"{load.requests:,} requests"
        if load.requests is not None
        else _replay_span(config)
    )
    console.print(
        f"kvbench: {', '.join(t.url for t in config.targets)}  {load.connections} connections"
        f" x pipeline {load.pipeline}"
        + (
            f" on the Dask cluster at {load.cluster}, {span}"
            if load.cluster
            else f" on {load.processes} process(es), {span}"
        )
        + (f" x {load.rounds} rounds" if load.rounds > 1 else "")
        + (f", open loop {load.rate_per_s:,.0f}/s" if load.rate_per_s else "")
        + (f", busy poll {format_duration_ns(load.busy_poll_ns)}" if load.busy_poll_ns else "")
        + f", seed {config.workload.seed}",
        # a terminal's width breaks it between words (never inside the seed); a pipe or
        # file keeps it one line, for grep, as the summary does
        soft_wrap=not console.is_terminal,
    )
    for line in model_lines(config):
        console.print(line, soft_wrap=not console.is_terminal)
    with LiveView(console, config) as view:
        result = Coordinator(config, view.interval, view.note).run()
    sys.stdout.flush()
    if load.cluster:
        from kvbench.runner.cluster import workers_line

        console.print(workers_line(result.workers))
    return result


def model_lines(config: RunConfig) -> list[str]:
    """One line per fb-etc size table: its range, mean and what was clipped (the tables
    depend on the seed alone: every worker's)."""
    lines = []
    for name, f in model_figures(config.workload).items():
        what = "key sizes" if name == "key_size" else "value sizes"
        lines.append(
            f"fb-etc {what}: {f['entries']:,} drawn, {f['min_bytes']:,}-{f['max_bytes']:,} "
            f"bytes, mean {f['mean_bytes']:,}; clipped: {f['clipped_below']:,} below, "
            f"{f['clipped_above']:,} above"
        )
    load = config.load
    if load.arrival == "fb-etc" and load.rate_per_s:
        lines.append(
            "fb-etc arrivals: each worker's gaps generalized Pareto (xi 0.154971) with mean "
            f"{load.processes * 1e6 / load.rate_per_s:,.2f} us: {load.rate_per_s:,.0f}/s "
            f"over {load.processes} worker(s)"
        )
    return lines


def publish(console: Console, run: RunResult, report: ReportConfig, outputs: Outputs) -> Status:
    """Print the summary, save to the history, write --json, --csv, --hdr-log, --report.

    Any kind of run (a load run, a queue run): one summary, which every file reads. Each
    of the two places that keep the run is written even when the other fails: a file that
    cannot be written (a full disk) loses nothing if the history holds the run, and a
    history that cannot be written (a full disk, ``StoreError``) loses nothing if the
    files asked for hold it, which one warning line says; the exit code then still
    follows the run's status.

    Returns:
        The run's status (``results.status``): the exit code follows it.

    Raises:
        ConfigError: a file could not be written; the message says how to write it again.
        StoreError: the history could not be written and no file asked for holds the run.
    """
    model = summarize(run)
    print_summary(console, model, report.wide, report.quiet)
    unsaved = _save(console, run, report, document(model))
    with saved_run_hint(run.run_id if report.save and unsaved is None else None):
        write_exports(
            console,
            run,
            model,
            json_path=outputs.json_path,
            csv_path=outputs.csv_path,
            hdr_log_path=outputs.hdr_log_path,
        )
        if outputs.report_path:
            from kvbench.report.html import render

            save_report(console, outputs.report_path, render([run]))
    if unsaved is not None:
        unsaved_warning(console, f"run {run.run_id} is", unsaved, outputs)
    return model.status


def _save(
    console: Console, run: RunResult, report: ReportConfig, doc: dict[str, Any]
) -> StoreError | None:
    """Store the run in the history (when it is kept); the error if it could not be."""
    if not report.save:
        return None
    try:
        with Store(report.db_path) as store:
            store.save_run(run, doc)
    except StoreError as exc:
        return exc
    console.print(f"saved as run {run.run_id} in {report.db_path}")
    return None


def save_runs(report: ReportConfig, results: list[RunResult]) -> StoreError | None:
    """Store several runs (a sweep's levels, a comparison's targets), each with its
    document; the error if the history could not store them (``publish`` says why the
    files are written all the same)."""
    if not report.save:
        return None
    try:
        with Store(report.db_path) as store:
            for result in results:
                store.save_run(result, document(summarize(result)))
    except StoreError as exc:
        return exc
    return None


def _runs_unsaved(console: Console, error: StoreError | None, runs: int, outputs: Outputs) -> None:
    if error is not None:
        unsaved_warning(console, f"the {runs} runs are", error, outputs)


# -- a replay --------------------------------------------------------------------------

# Requests in flight per connection of a replay at the trace's times, unless -P says (or
# the target takes one at a time: an HTTP gateway): a client's requests go in order on
# one connection, and a busy client sends many at once.
TIMED_REPLAY_PIPELINE = 64


def _pipelines(targets: tuple[TargetConfig, ...]) -> bool:
    """The targets take pipelined requests: not an HTTP gateway without ``?pipeline=1``
    (a timed replay's default pipeline is 1 there, as a run's)."""
    return all(target.family != "http" or target.pipelining for target in targets)


def replay_once(
    console: Console, settings: Settings, section: ReplayConfig, outputs: Outputs
) -> int:
    """``kvbench replay``: check the trace and the files, measure, publish, as ``kvbench
    run`` does. Returns the exit code of the run's status.

    A MONITOR capture is read whole here first (``_monitor_section``), for its command
    names and its clients (one connection each).

    Raises:
        ConfigError: several targets, or the trace cannot be read (its first block); a
            capture's bad line, or a target or flag it cannot be replayed with.
    """
    from kvbench.workload.monitor import detect_format
    from kvbench.workload.trace import check_trace

    if section.format == "auto":
        section = replace(section, format=detect_format(section.path))
    if section.format == MONITOR_FORMAT:
        section = _monitor_section(section, settings)
    config = load_config(None, settings, 1)
    if section.timed and "load.pipeline" not in settings and _pipelines(config.targets):
        settings["load.pipeline"] = (TIMED_REPLAY_PIPELINE, "--pipeline")
        config = load_config(None, settings, 1)
    if len(config.targets) != 1 or config.targets[0].cluster:
        raise ConfigError("TARGET", "a replay sends to one server (one client, one connection)")
    if section.format == MONITOR_FORMAT:
        _check_monitor_target(config.targets[0])
    elif section.value_size_bytes is not None:
        raise ConfigError("--value-size", "resizes a redis-monitor capture's values only")
    else:
        check_trace(section.path)
    load = replace(config.load, duration_ns=None, requests=None, rate_per_s=None, warmup_ns=0)
    config = replace(config, load=load, replay=section)
    outputs = replace(outputs, json_path=config.report.json_path)
    outputs.check()
    check_history(config.report)
    check_limits(config, server=False)  # values come at the trace's sizes
    result = measure(console, config)
    return publish(console, result, config.report, outputs).exit_code


def _monitor_section(section: ReplayConfig, settings: Settings) -> ReplayConfig:
    """A MONITOR capture's section: read once here (a bad line fails before any socket),
    for its command names and its clients, one connection each.

    Raises:
        ConfigError: a bad line, ``-c`` given, or nothing to send.
    """
    if "load.connections" in settings:
        raise ConfigError(
            "--connections", "a MONITOR capture opens one connection per captured client"
        )
    from kvbench.workload.monitor_feed import scan_capture

    scan = scan_capture(section)
    if not scan.counts.clients:
        skipped = sum(scan.counts.skipped.values())
        raise ConfigError(
            section.path,
            f"no command to replay ({scan.counts.lines_read:,} lines read, {skipped:,} "
            "commands skipped): an empty capture, or --from/--to outside its times",
        )
    settings["load.connections"] = (scan.counts.clients, "TRACE")
    return replace(section, commands=tuple(scan.names), clients=scan.counts.clients)


def _check_monitor_target(target: TargetConfig) -> None:
    """A capture goes to one Redis server whose URL selects no database: the capture
    says which database each command ran in."""
    if target.family != "redis":
        raise ConfigError(
            "TARGET", f"a Redis MONITOR capture replays to redis://, not {target.url}"
        )
    if target.db:
        raise ConfigError(
            "TARGET",
            f"{target.url}: a MONITOR capture names each command's database: give the URL "
            "without one",
        )


def _replay_span(config: RunConfig) -> str:
    replay = config.replay
    assert replay is not None
    speed = "as fast as the server answers" if replay.speed is None else f"speed {replay.speed:g}x"
    return f"the trace {replay.path}, {speed}"


# -- a queue run -----------------------------------------------------------------------


def queue_once(console: Console, config: QueueConfig, outputs: Outputs) -> int:
    """``kvbench queue``: check the files, measure, publish, as ``kvbench run`` does.
    Returns the exit code of the run's status."""
    outputs.check()
    check_history(config.report)
    result = measure_queue(console, config)
    return publish(console, result, config.report, outputs).exit_code


def measure_queue(console: Console, config: QueueConfig) -> RunResult:
    """One queue run: producers and consumers, a live line per interval; its result (mode
    ``queue``)."""
    return measure_queue_phase(console, config, None)[0]


def measure_queue_phase(
    console: Console, config: QueueConfig, carry: QueueCarry | None
) -> tuple[RunResult, QueueCarry]:
    """A queue run that continues ``carry`` (an earlier phase's tag and ledger; None: a
    run of its own): its result, and what the next phase continues."""
    interrupts.disarm()  # from here a signal is the run's: kept as an interrupted result
    start = (
        f", consumers start after {config.consumers_start_after:,} stored"
        if config.consumers_start_after and config.consumers
        else ""
    )
    if config.producers == 0:
        what = f"a drain: {config.consumers} consumer(s) until the queue is empty"
    else:
        what = (
            f"{config.producers} producer(s) x {config.consumers} consumer(s)"
            + (" (write only)" if config.consumers == 0 else "")
            + f", {config.messages:,} messages of {config.message_size_bytes} bytes"
        )
    pop = f", {config.pop_command}" if config.consumers else ""
    console.print(
        f"kvbench queue: {config.target.url}  {what}, pipeline {config.pipeline}{pop}{start}"
    )
    origin: list[int] = []

    def show_interval(snapshot: IntervalSnapshot, record: QueueInterval) -> None:
        if not origin:
            origin.append(snapshot.start_ns)
        if config.report.live:
            console.print(queue_live_line(queue_interval_row(snapshot, record, origin[0])))

    from kvbench.runner.queue import QueueCoordinator

    coordinator = QueueCoordinator(config, show_interval, console.print, carry)
    result = coordinator.run()
    sys.stdout.flush()
    return result, coordinator.carry()


# -- many runs -------------------------------------------------------------------------


def sweep_and_report(
    console: Console,
    config: RunConfig,
    axis: str,
    levels: list[float],
    slo: str | None,
    outputs: Outputs,
    unit_rates: bool = False,
) -> int:
    """Run a sweep, save its runs, print its table, knee and SLO level, write its files.

    ``unit_rates``: the live lines give ops per interval and so far, and the rate per
    second, minute and hour (cli/live.py).

    Returns:
        The exit code of the sweep's status (the worst level's).
    """
    from kvbench.report.html import render_sweep
    from kvbench.runner.levels import run_sweep

    objective = parse_slo(slo) if slo else None
    with LiveView(console, config, runs=len(levels), unit_rates=unit_rates) as view:
        view.sweeping(axis)
        outcomes = run_sweep(config, axis, levels, view.interval, view.note, view.start)
    rows: list[LevelRow] = [
        level_row(o.level, o.result, o.reason, objective, INTERRUPTED if o.interrupted else FAILED)
        for o in outcomes
    ]
    runs = [o.result for o in outcomes if o.result is not None]
    unsaved = save_runs(config.report, runs)
    console.print(level_table(rows, axis, config.report.wide))
    for line in level_reasons(rows, axis):  # (wrapped between words, as the summary's)
        console.print(line, markup=False, highlight=False, soft_wrap=False)
    if unit_rates:  # the original's figure per level, in its units
        for row in rows:
            if row.throughput is not None:
                console.print(
                    unit_rates_sentence(axis, row.level, row.throughput.mean),
                    soft_wrap=not console.is_terminal,
                )
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
    _runs_unsaved(console, unsaved, len(runs), outputs)
    return EXIT_CODES[doc["status"]]


def compare_and_report(console: Console, configs: list[RunConfig], outputs: Outputs) -> int:
    """Compare the targets of ``configs`` (rounds interleaved), save their runs, print each
    target's summary and the comparison's sentences, write the files.

    Returns:
        The exit code of the comparison's status (the worst target's).
    """
    from kvbench.report.html import render
    from kvbench.runner.levels import run_comparison

    first = configs[0]
    with LiveView(console, first, runs=len(configs)) as view:
        ran = run_comparison(configs, first.load.rounds, view.interval, view.note, view.start)
    results = ran.results
    unsaved = save_runs(first.report, results)
    columns = [target_column(r) for r in results]
    for column in columns:
        print_summary(console, column.model, first.report.wide, first.report.quiet)
    doc = compare_document(columns, ran.interrupted)
    for row in doc["comparison"]:  # (folded between words on a terminal, as the summary)
        console.print(comparison_sentence(row), soft_wrap=not console.is_terminal)
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
    _runs_unsaved(console, unsaved, len(results), outputs)
    return EXIT_CODES[doc["status"]]
