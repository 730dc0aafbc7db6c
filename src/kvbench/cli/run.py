"""``kvbench run``: one measurement against one target (or a throwaway memcached)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import click
from rich.console import Console

from kvbench.cli.console import make_console
from kvbench.cli.export import Outputs, check_history, saved_run_hint, write_exports
from kvbench.cli.live import LiveView
from kvbench.cli.report import save_report
from kvbench.config import RunConfig, Settings, load_config
from kvbench.report import document, summarize
from kvbench.report.html import render as render_html
from kvbench.report.terminal import print_summary
from kvbench.results.model import RunResult
from kvbench.results.status import Status
from kvbench.results.store import Store
from kvbench.runner.coordinator import Coordinator
from kvbench.runner.embedded import throwaway_memcached

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
    "keys": "workload.keys",
    "key_prefix": "workload.key_prefix",
    "key_pattern": "workload.key_pattern",
    "key_size": "workload.key_size",
    "key_template": "workload.key_template",
    "value_size": "workload.value_size",
    "value_kind": "workload.value_kind",
    "verify": "workload.verify",
    "multiget": "workload.multiget_keys",
    "ttl": "workload.ttl_s",
    "preload": "workload.preload",
    "seed": "workload.seed",
    "json_path": "report.json",
    "db": "report.db",
    "rate": "load.rate",
    "arrival": "load.arrival",
    "max_lag": "load.max_lag",
    "rounds": "load.rounds",
    "max_error_rate": "load.max_error_rate",
    "cluster": "load.cluster",
    "cluster_listen": "load.cluster_listen",
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
    if options.get("no_save"):
        settings["report.save"] = (False, "--no-save")
    if options.get("quiet"):
        settings["report.live"] = (False, "--quiet")
    if targets:
        settings["target.urls"] = (list(targets), "TARGET")
    return settings


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


def publish(
    console: Console,
    run: RunResult,
    config: RunConfig,
    csv_path: str | None = None,
    hdr_log_path: str | None = None,
    html_path: str | None = None,
) -> Status:
    """Print the summary, save to the history, write --json, --csv, --hdr-log, --report.

    The history comes first, so a file that cannot be written (a full disk) loses nothing.

    Returns:
        The run's status (``results.status``): the exit code follows it.

    Raises:
        ConfigError: a file could not be written; the message says how to write it again.
    """
    model = summarize(run)
    print_summary(console, model)
    if config.report.save:
        with Store(config.report.db_path) as store:
            store.save_run(run, document(model))
        console.print(f"saved as run {run.run_id} in {config.report.db_path}")
    with saved_run_hint(run.run_id if config.report.save else None):
        write_exports(
            console,
            run,
            model,
            json_path=config.report.json_path,
            csv_path=csv_path,
            hdr_log_path=hdr_log_path,
        )
        if html_path:
            save_report(console, html_path, render_html([run]))
    return model.status


@click.command()
@click.argument("targets", nargs=-1, metavar="[TARGET]...")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="TOML scenario file; flags override it.",
)
@click.option("-c", "--connections", help="Connections in total, shared across processes. [50]")
@click.option("--processes", help="Worker processes, one event loop each. [all cores]")
@click.option("-P", "--pipeline", help="Requests in flight per connection. [1]")
@click.option("--duration", help="Measured window, e.g. 10s, 2m. [10s]")
@click.option(
    "-n", "--requests", help="Send exactly N requests in the window instead of a duration."
)
@click.option("--preset", help="Run a classic experiment (see kvbench presets); flags override it.")
@click.option("--rounds", help="Repeat the measurement N times (fresh processes each). [1]")
@click.option("--warmup", help="Load before the window, excluded from every figure. [0s]")
@click.option(
    "--ratio", help="SET:GET (1:10), or op=weight,... over set/get/delete/incr/mget. [1:10]"
)
@click.option("--keys", help="Keyspace size. [100000]")
@click.option("--key-prefix", help="Prefix of every key. [kvbench:]")
@click.option(
    "--key-pattern",
    help="sequential, uniform, zipf[:S] (S=0.99) or gaussian[:MEAN,STDDEV] "
    "(fractions of the keyspace below 1, else keys). [uniform]",
)
@click.option("--key-size", help="Keys of exactly N bytes (prefix + zero-padded number).")
@click.option(
    "--key-template", help="number, random:N (N-byte random keys) or float-counter. [number]"
)
@click.option(
    "--value-size", help="Value bytes: 100, a range 100-1000, or weights 100:70,1000:30. [100]"
)
@click.option(
    "--value-kind", help="random, compressible (~3:1 zlib) or timestamp (8-byte ms). [random]"
)
@click.option("--multiget", help="Keys per mget op. [10]")
@click.option(
    "--ttl",
    help="Expiry in seconds sent with stores; a range 60-120 gives each connection "
    "its own. [0: none]",
)
@click.option(
    "--verify",
    is_flag=True,
    default=None,
    help="Store values derived from their key; check every get hit, count mismatches.",
)
@click.option(
    "--preload", is_flag=True, default=None, help="Store every key once before measuring."
)
@click.option("--seed", help="Seed of the workload (recorded with the run). [random]")
@click.option(
    "--rate", help="Open loop: requests/s offered in total (10k); latency from intended send times."
)
@click.option("--arrival", help="Open loop: uniform or poisson gaps. [uniform]")
@click.option(
    "--max-lag", help="Open loop: drop (count, never send) a request this far behind. [1s]"
)
@click.option("--timeout", help="Per-request timeout, e.g. 500ms. [5s]")
@click.option(
    "--max-error-rate",
    help="Errors above this share of the ops make the run failed (exit 1): 1%, 0.1% or 0.01. [1%]",
)
@click.option("--interval", help="Live line and snapshot period. [1s]")
@click.option(
    "--cluster",
    help="Run the load workers on a Dask cluster: tcp://SCHEDULER:8786, one per Dask worker.",
)
@click.option(
    "--cluster-listen",
    help="HOST:PORT the Dask workers connect back to. [scheduler-facing address, any port]",
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), help="Write the result document here."
)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False),
    help="Write the per-interval series (CSV).",
)
@click.option(
    "--hdr-log",
    "hdr_log_path",
    type=click.Path(dir_okay=False),
    help="Write the interval histograms as an HdrHistogram log.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    help="Write the self-contained HTML report here.",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="History database. [~/.local/share/kvbench/history.db]",
)
@click.option("--no-save", is_flag=True, help="Do not store the run in the history.")
@click.option("-q", "--quiet", is_flag=True, help="No live line per interval.")
def run(targets: tuple[str, ...], config_path: str | None, **options: Any) -> int:
    """Benchmark TARGET (a throwaway local memcached when none is given).

    TARGET is a URL: memcached://HOST:11211 (text protocol), memcached+binary://,
    memcached+meta://, redis://[USER:PASS@]HOST:6379/DB (add ?resp=3 for RESP3),
    rediss://...?ca=PATH (TLS), http+memc://HOST:PORT/PATH (nginx memc gateway). Several
    memcached TARGETs are sharded with ketama, as twemproxy places keys.

    Closed-loop runs on memcached (text, binary, meta) and Redis RESP2 use the compiled
    driver; the rest (RESP3, HTTP, --rate, --verify, --ttl ranges, and every run with
    KVBENCH_PURE_PYTHON=1) the Python one. Each run records which, and why.

    \b
    Example:
        kvbench run
        kvbench run memcached://127.0.0.1:11211 -c 50 -P 16 --duration 10s --ratio 1:10 \\
            --keys 100000 --value-size 100
        kvbench run redis://127.0.0.1:6379 --processes 2 --json out.json
        kvbench run --preset memcached-storm memcached://127.0.0.1:11211
    """
    preset = options.pop("preset", None)
    if preset:
        from kvbench.cli.presets import run_preset

        # --json arrives as the report.json setting; the other files are the preset's to write
        outputs = Outputs(
            csv_path=options.pop("csv_path", None),
            hdr_log_path=options.pop("hdr_log_path", None),
            report_path=options.pop("report_path", None),
        )
        return run_preset(
            preset,
            targets,
            settings_from_options((), options),
            config_path,
            default_processes(),
            outputs,
        )
    console = make_console()
    settings = settings_from_options(targets, options)
    config = load_config(config_path, settings, default_processes())
    Outputs(
        config.report.json_path,
        options.get("csv_path"),
        options.get("hdr_log_path"),
        options.get("report_path"),
    ).check()
    check_history(config.report)
    with _targets(len(config.targets), console) as url:
        if url is not None:
            settings["target.urls"] = ([url], "TARGET")
            config = load_config(config_path, settings, default_processes())
        result = measure(console, config)
    status = publish(
        console,
        result,
        config,
        options.get("csv_path"),
        options.get("hdr_log_path"),
        html_path=options.get("report_path"),
    )
    return status.exit_code


def measure(console: Console, config: RunConfig) -> RunResult:
    """Run one measurement with the live view; return its result."""
    load = config.load
    span = (
        f"{load.duration_ns / 1e9:g}s"
        if load.duration_ns is not None
        else f"{load.requests:,} requests"
    )
    console.print(
        f"kvbench: {config.targets[0].url}  {load.connections} connections x pipeline {load.pipeline}"
        + (
            f" on the Dask cluster at {load.cluster}, {span}"
            if load.cluster
            else f" on {load.processes} process(es), {span}"
        )
        + (f" x {load.rounds} rounds" if load.rounds > 1 else "")
        + (f", open loop {load.rate_per_s:,.0f}/s" if load.rate_per_s else "")
        + f", seed {config.workload.seed}",
    )
    with LiveView(console, config) as view:
        result = Coordinator(config, view.interval, view.note).run()
    sys.stdout.flush()
    if load.cluster:
        console.print(
            "workers: "
            + "  ".join(
                f"{w.get('host', '?')} pid {w.get('pid', '?')} {w['share']:.1%} ({w['status']})"
                for w in result.workers
            )
        )
    return result
