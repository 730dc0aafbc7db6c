"""``kvbench run``: one measurement against one target (or a throwaway memcached)."""

from __future__ import annotations

from typing import Any

import click

from kvbench.cli.options import run_options
from kvbench.errors import ConfigError


@click.command()
@click.argument("targets", nargs=-1, metavar="[TARGET]...")
@run_options
@click.option(
    "--data-dir",
    help="With the queue preset: the server's data directory; its size after each phase.",
)
def run(targets: tuple[str, ...], config_path: str | None, **options: Any) -> int:
    """Benchmark TARGET (a throwaway local memcached when none is given).

    TARGET is a URL: memcached://HOST:11211 (text protocol), memcached+binary://,
    memcached+meta://, redis://[USER:PASS@]HOST:6379/DB (add ?resp=3 for RESP3),
    rediss://...?ca=PATH (TLS), http+memc://HOST:PORT/PATH (nginx memc gateway);
    memcached+unix:///PATH and redis+unix:///PATH for Unix sockets, [::1] for IPv6.
    Several memcached TARGETs are sharded with ketama, as twemproxy places keys.
    redis+cluster://HOST:PORT (rediss+cluster:// with TLS) is a seed node of a Redis
    Cluster: keys go to the master of their hash slot, MOVED and ASK are followed.

    Runs on memcached (text, binary, meta), Redis (RESP2, RESP3, Redis Cluster) and
    HTTP gateways, closed or open loop (--rate), --verify, --ttl ranges, rmw and
    --command included, use the compiled driver; the rest (an rmw on a Redis Cluster,
    and every run with KVBENCH_PURE_PYTHON=1) the Python one. Each run records which,
    and why.

    \b
    Example:
        kvbench run
        kvbench run memcached://127.0.0.1:11211 -c 50 -P 16 --duration 10s --ratio 1:10 \\
            --keys 100000 --value-size 100
        kvbench run redis://127.0.0.1:6379 --processes 2 --json out.json
        kvbench run redis://127.0.0.1:6379 --command 'HSET h:__key__ f __data__' \\
            --command 'LPUSH l:__key__ __data__' --command-weight 2
        kvbench run memcached+unix:///run/memcached.sock --prometheus 127.0.0.1:9464
        kvbench run --preset memcached-storm memcached://127.0.0.1:11211
    """
    from kvbench.cli import session
    from kvbench.cli.console import make_console
    from kvbench.cli.outputs import Outputs

    preset = options.pop("preset", None)
    data_dir = options.pop("data_dir", None)
    # --json arrives as the report.json setting; the other files are written after the run
    outputs = Outputs.pop_from(options)
    options["json_path"] = outputs.json_path  # a setting (report.json): the file may set it
    if preset:
        from kvbench.cli import preset_runs

        flags = session.settings_from_options((), options)
        if data_dir is not None:
            flags[preset_runs.DATA_DIR] = (data_dir, "--data-dir")
        return preset_runs.run_preset(
            preset, targets, flags, config_path, session.default_processes(), outputs
        )
    if data_dir is not None:
        raise ConfigError(
            "--data-dir", "only for queue runs (kvbench queue, or --preset queue-producer-consumer)"
        )
    settings = session.settings_from_options(targets, options)
    return session.run_once(make_console(outputs.to_stdout()), settings, config_path, outputs)
