"""The options of ``kvbench run``, which ``sweep`` and ``compare`` take too, the files and
history options ``kvbench queue`` shares with them, and ``kvbench replay``'s.

Declared once, here, so the commands never drift apart; each command module applies them
with ``run_options`` or ``output_options`` (none imports another command module).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

# Where ``--command`` and ``--command-weight`` note each of their values, in command-line
# order (``ctx.meta``): a weight weighs the command before it, as memtier's
# ``--command-ratio`` does, an order click's per-option lists do not keep.
_COMMAND_ITEMS = "kvbench.command_items"


class _InOrder(click.Option):
    """A repeatable option whose every value is also noted, with its option's name, in
    ``ctx.meta[_COMMAND_ITEMS]`` in the order given."""

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        parsed = parser._long_opt[self.opts[0]]  # the parser's entry for this option
        process, kind = parsed.process, "weight" if self.name == "command_weight" else "command"

        def noted(value: Any, state: Any) -> None:
            process(value, state)
            ctx.meta.setdefault(_COMMAND_ITEMS, []).append((kind, value))

        parsed.process = noted


def _commands(ctx: click.Context, param: click.Parameter, value: Any) -> list[tuple[str, str]]:
    """The (command, weight) pairs of ``--command``/``--command-weight`` (none: [])."""
    from kvbench.config.commands import pair_weights  # on use: --help needs no config code

    return pair_weights(ctx.meta.get(_COMMAND_ITEMS, []), "--command-weight")


# The files a run writes: (flag, parameter, help). ``kvbench queue`` writes them too.
OUTPUT_FILES = (
    ("--json", "json_path", "Write the result document here."),
    ("--csv", "csv_path", "Write the per-interval series (CSV)."),
    ("--hdr-log", "hdr_log_path", "Write the interval histograms as an HdrHistogram log."),
    ("--report", "report_path", "Write the self-contained HTML report here."),
)
# Where a run is stored, and whether its intervals are shown as they come.
_STORE: list[Callable[[Any], Any]] = [
    click.option(
        "--db",
        type=click.Path(dir_okay=False),
        help="History database. [~/.local/share/kvbench/history.db]",
    ),
    click.option("--no-save", is_flag=True, help="Do not store the run in the history."),
    click.option(
        "-q",
        "--quiet",
        is_flag=True,
        help="No live line; the summary is one line per op (ops/s, p50, p99), the "
        "warnings and the status.",
    ),
    click.option(
        "--no-live",
        is_flag=True,
        help="No live line per interval; the whole summary at the end.",
    ),
    click.option(
        "--wide",
        is_flag=True,
        help="Print every column of the tables whatever the terminal's width, and let it "
        "wrap. [the columns that fit]",
    ),
]

# Options ``kvbench replay`` shares with ``run``.
_CONNECTIONS = click.option(
    "-c", "--connections", help="Connections in total, shared across processes. [50]"
)
_SEED = click.option("--seed", help="Seed of the workload (recorded with the run). [random]")
_MAX_LAG = click.option(
    "--max-lag", help="Open loop: drop (count, never send) a request this far behind. [1s]"
)
_TIMEOUT = click.option("--timeout", help="Per-request timeout, e.g. 500ms. [5s]")
_BUSY_POLL = click.option(
    "--busy-poll",
    help="Compiled loop: poll this long for replies before sleeping, e.g. 50us (costs client "
    "CPU; spares a server on the same host waking the client). [0: sleep at once]",
)
_MAX_ERROR_RATE = click.option(
    "--max-error-rate",
    help="Errors above this share of the ops make the run failed (exit 1): 1%, 0.1% or 0.01. [1%]",
)
_INTERVAL = click.option("--interval", help="Live line and snapshot period. [1s]")
_FILES = [
    click.option(flag, name, type=click.Path(dir_okay=False), help=text)
    for flag, name, text in OUTPUT_FILES
]

_OPTIONS: list[Callable[[Any], Any]] = [
    click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        help="TOML scenario file; flags override it.",
    ),
    _CONNECTIONS,
    click.option("--processes", help="Worker processes, one event loop each. [all cores]"),
    click.option("-P", "--pipeline", help="Requests in flight per connection. [1]"),
    click.option("--duration", help="Measured window, e.g. 10s, 2m. [10s]"),
    click.option(
        "-n",
        "--requests",
        "--requests-per-round",
        "requests",
        help="Send exactly N requests in each round's window instead of a duration.",
    ),
    click.option(
        "--preset", help="Run a classic experiment (see kvbench presets); flags override it."
    ),
    click.option("--rounds", help="Repeat the measurement N times (fresh processes each). [1]"),
    click.option("--warmup", help="Load before the window, excluded from every figure. [0s]"),
    click.option(
        "--ratio",
        help="SET:GET (1:10), op=weight,... over set/get/delete/incr/mget/rmw (rmw: a get "
        "then a set of one key, timed as one op), or set-then-get (a set, then a get of the "
        "same key: a miss is an error). [1:10]",
    ),
    click.option(
        "--op-order",
        help="random (each op drawn with its weight) or cycle (the ratio's ops in turn: "
        "1:10 is a set, then ten gets, as memtier_benchmark sends them). [random]",
    ),
    click.option("--keys", help="Keyspace size. [100000]"),
    click.option("--key-prefix", help="Prefix of every key. [kvbench:]"),
    click.option(
        "--key-pattern",
        help="sequential, uniform, zipf[:S] (S=0.99), gaussian[:MEAN,STDDEV] "
        "(fractions of the keyspace below 1, else keys) or latest[:S] (YCSB's: sets insert "
        "new keys, reads favour the newest). [uniform]",
    ),
    click.option(
        "--key-size",
        help="Keys of exactly N bytes (prefix + zero-padded number), or fb-etc (a size per "
        "key from Facebook's ETC model).",
    ),
    click.option(
        "--key-template", help="number, random:N (N-byte random keys) or float-counter. [number]"
    ),
    click.option(
        "--value-size",
        help="Value bytes: 100, a range 100-1000, weights 100:70,1000:30, or fb-etc "
        "(Facebook's ETC model). [100]",
    ),
    click.option(
        "--value-kind", help="random, compressible (~3:1 zlib) or timestamp (8-byte ms). [random]"
    ),
    click.option(
        "--allow-oversize",
        is_flag=True,
        default=None,
        help="Send values larger than the server stores (memcached -I, Redis "
        "proto-max-bulk-len): each such store is an error reply. Refused without it.",
    ),
    click.option("--multiget", help="Keys per mget op. [10]"),
    click.option(
        "--placement",
        help="Keys over several memcached servers: ketama (twemproxy) or modula-crc32 "
        "(python-memcached). [ketama]",
    ),
    click.option(
        "--command",
        "commands",
        cls=_InOrder,
        multiple=True,
        callback=_commands,
        help="Send this command too (repeatable): memcached text or Redis words with "
        "__key__ (a key) and __data__ (a value), e.g. 'HSET __key__ f __data__'. "
        "Alone, commands make the mix; with --ratio they join it.",
    ),
    click.option(
        "--command-weight",
        cls=_InOrder,
        multiple=True,
        expose_value=False,
        help="The weight of the --command before it in the mix. [1]",
    ),
    click.option(
        "--ttl",
        help="Expiry in seconds sent with stores; a range 60-120 gives each connection "
        "its own. [0: none]",
    ),
    click.option(
        "--verify",
        is_flag=True,
        default=None,
        help="Store values derived from their key; check every get hit, count mismatches.",
    ),
    click.option(
        "--preload", is_flag=True, default=None, help="Store every key once before measuring."
    ),
    _SEED,
    click.option(
        "--rate",
        help="Open loop: requests/s offered in total (10k); latency from intended send times.",
    ),
    click.option(
        "--arrival",
        help="Open loop: uniform, poisson or fb-etc (Facebook ETC's Pareto) gaps. [uniform]",
    ),
    _MAX_LAG,
    _TIMEOUT,
    _BUSY_POLL,
    _MAX_ERROR_RATE,
    _INTERVAL,
    click.option(
        "--prometheus",
        help="Serve the running figures for Prometheus at HOST:PORT/metrics "
        "(needs kvbench[prometheus]).",
    ),
    click.option(
        "--cluster",
        help="Run the load workers on a Dask cluster: tcp://SCHEDULER:8786, one per Dask worker.",
    ),
    click.option(
        "--cluster-listen",
        help="HOST:PORT the Dask workers connect back to. [scheduler-facing address, any port]",
    ),
    *_FILES,
    *_STORE,
]
# ``kvbench replay``: the trace decides keys, values, ops and how long; these decide how.
_REPLAY: list[Callable[[Any], Any]] = [
    click.option(
        "--speed",
        default="1",
        show_default=True,
        help="max: as fast as the server answers (closed loop); or N: at the trace's "
        "times, N times as fast (open loop).",
    ),
    click.option(
        "--format",
        "format_",
        default="auto",
        show_default=True,
        help="What TRACE is: cache-trace (Twitter's or kvbench's CSV), redis-monitor "
        "(redis-cli monitor output), or auto (told by its first line).",
    ),
    click.option(
        "--value-size",
        "replay_value_size",
        help="A redis-monitor capture: resend the writes' values at this size (1KiB). "
        "[as captured]",
    ),
    click.option("--limit", help="Replay at most N rows (of the slice). [all]"),
    click.option("--from", "from_", help="Replay rows from this trace time on (3600, 1h). [start]"),
    click.option("--to", help="Replay rows before this trace time (7200, 2h). [end]"),
    _CONNECTIONS,
    click.option("--processes", help="Worker processes; each reads the whole trace. [1]"),
    click.option(
        "-P",
        "--pipeline",
        help="Requests in flight per connection. [1 at --speed max; 64 at the trace's times, but 1 to an HTTP gateway]",
    ),
    _SEED,
    _MAX_LAG,
    _TIMEOUT,
    _BUSY_POLL,
    _MAX_ERROR_RATE,
    _INTERVAL,
    *_FILES,
    *_STORE,
]


def run_options(command: F) -> F:
    """Add every option of ``kvbench run`` to ``command``, in this order."""
    return _apply(_OPTIONS, command)


def replay_options(command: F) -> F:
    """Add the options of ``kvbench replay`` to ``command``."""
    return _apply(_REPLAY, command)


def output_options(command: F) -> F:
    """Add the files a run writes and where it is stored (``kvbench queue``)."""
    return _apply(_OPTIONS[-len(OUTPUT_FILES) - len(_STORE) :], command)


def _apply(options: list[Callable[[Any], Any]], command: F) -> F:
    for option in reversed(options):
        command = option(command)
    return command
