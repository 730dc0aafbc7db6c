"""``kvbench replay``: send a production cache trace to a server, as a run."""

from __future__ import annotations

from typing import Any

import click

from kvbench.cli.options import replay_options


@click.command()
@click.argument("trace", metavar="TRACE")
@click.argument("targets", nargs=-1, required=True, metavar="TARGET")
@replay_options
def replay(
    trace: str,
    targets: tuple[str, ...],
    speed: str,
    limit: str | None,
    from_: str | None,
    to: str | None,
    format_: str,
    replay_value_size: str | None,
    **options: Any,
) -> int:
    """Replay the cache trace TRACE against TARGET (docs/replay.md).

    TRACE is a Twitter cache trace (CSV rows timestamp, key, key_size, value_size,
    client_id, operation, ttl; plain or zstd) or a kvbench CSV of the same columns. Keys
    are sent at the trace's key sizes, values at its value sizes, writes with their TTLs;
    one client's requests go in order on one connection (a new client goes to the
    connection with the fewest rows so far). Each process reads the trace once before the
    clock starts, into a temporary file in TMPDIR about the size of the trace's CSV. The
    result is a run (stored, shown, exported, reported) with the trace's profile beside
    it. A bad row stops the replay before anything is sent, with its file and line (exit
    2).

    TRACE may also be a Redis MONITOR capture (``redis-cli monitor > capture.log``; told
    by its first line, or --format redis-monitor): each captured client gets a connection
    of its own and its commands in captured order; SELECT, MULTI/EXEC as captured; AUTH,
    blocking commands and a script's own commands skipped and counted; keys and values as
    captured (--value-size resizes the writes' values).

    \b
    Example:
        kvbench replay cluster52.0.zst memcached://127.0.0.1:11211 --speed max -c 50 -P 8
        kvbench replay trace.csv memcached://127.0.0.1:11211 --speed 2 --from 1h --to 2h
        kvbench replay trace.csv redis://127.0.0.1:6379 --limit 1000000 --json out.json
        kvbench replay monitor.log redis://127.0.0.1:6379 --speed max
    """
    from kvbench.cli import session
    from kvbench.cli.console import make_console
    from kvbench.cli.outputs import Outputs
    from kvbench.config.replay import replay_config

    outputs = Outputs.pop_from(options)
    options["json_path"] = outputs.json_path
    section = replay_config(trace, speed, from_, to, limit, format_, replay_value_size)
    settings = session.settings_from_options(targets, options)
    return session.replay_once(make_console(outputs.to_stdout()), settings, section, outputs)
