"""``kvbench queue``: producers and consumers on a memcacheq queue or a Redis list."""

from __future__ import annotations

from typing import Any

import click

from kvbench.cli.options import output_options

# Flags passed to build_queue_config as they were typed (None: not given).
QUEUE_OPTIONS = (
    "producers",
    "consumers",
    "messages",
    "message_size",
    "pipeline",
    "consumers_start_after",
    "duration",
    "grace",
    "poll_interval",
    "timeout",
    "interval",
    "data_dir",
)


@click.command()
@click.argument("target", metavar="TARGET")
@click.option(
    "--producers", help="Producer processes, one connection each; 0: a drain of the queue. [1]"
)
@click.option("--consumers", help="Consumer processes, one connection each; 0: write only. [1]")
@click.option("-n", "--messages", help="Messages sent in total, shared across producers. [100000]")
@click.option("--message-size", help="Bytes per message, its 28-byte header included. [100]")
@click.option("-P", "--pipeline", help="Requests in flight per connection. [1]")
@click.option(
    "--consumers-start-after", help="Consumers start once this many messages are stored. [0]"
)
@click.option("--duration", help="Stop everything after this long, drained or not. [no limit]")
@click.option(
    "--grace", help="After the producers finish, an empty queue this long ends the run. [1s]"
)
@click.option(
    "--poll-interval", help="After an empty answer a consumer asks again this much later. [1ms]"
)
@click.option("--timeout", help="Per-request timeout. [5s]")
@click.option("--interval", help="Live line and snapshot period. [1s]")
@click.option(
    "--data-dir",
    help="A local server's data directory (memcacheq's -H): its size is reported at the end.",
)
@output_options
def queue(target: str, db: str | None, no_save: bool, quiet: bool, **options: Any) -> int:
    """Produce and consume messages through TARGET; check that none was lost.

    TARGET is memcacheq://HOST:22201/QUEUE (set enqueues, get dequeues) or
    redis-queue://[USER:PASS@]HOST:6379/LIST (LPUSH / RPOP; add ?block=100ms for BRPOP).
    Every message carries its producer, sequence number and send time: the run reports
    puts/s, gets/s, end-to-end latency, the backlog, and per producer the lost,
    duplicated and out-of-order messages. Exit 1 when a message was duplicated, or lost
    in a run that drained the queue, or when the server refused every put. --consumers 0
    writes only (the messages stay queued); --producers 0 drains the queue until it is
    empty, confirmed by an empty read --grace after the first. A queue run is stored as
    any run: kvbench show, export, diff and report read it.

    \b
    Example:
        kvbench queue memcacheq://127.0.0.1:22201/q --producers 2 --consumers 2 \\
            --messages 1000000 --message-size 100 -P 16
        kvbench queue redis-queue://127.0.0.1:6379/jobs?block=100ms --consumers-start-after 100000
        kvbench queue memcacheq://127.0.0.1:22201/q --json q.json --report q.html
        kvbench queue memcacheq://127.0.0.1:22201/q --producers 0 --consumers 2 \\
            --data-dir /var/lib/memcacheq
    """
    from kvbench.cli import session
    from kvbench.cli.console import make_console
    from kvbench.cli.outputs import Outputs
    from kvbench.config.load import default_db_path
    from kvbench.config.model import ReportConfig
    from kvbench.config.queue import build_queue_config

    outputs = Outputs.pop_from(options)
    report = ReportConfig(
        json_path=outputs.json_path,
        db_path=db or default_db_path(),
        save=not no_save,
        live=not (quiet or options.pop("no_live", False)),
        wide=bool(options.pop("wide", False)),
        quiet=quiet,
    )
    config = build_queue_config(target, {k: options.get(k) for k in QUEUE_OPTIONS}, report)
    return session.queue_once(make_console(outputs.to_stdout()), config, outputs)
