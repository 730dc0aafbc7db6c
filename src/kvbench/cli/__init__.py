"""The ``kvbench`` command: a click group, global error handling, exit codes.

Exit codes: 0 ok, 1 failed (no op succeeded, errors above --max-error-rate, lost or
duplicated messages, a regression), 2 usage or config error, 3 target unreachable, 4 run
aborted or partial, 5 history database error, 130 interrupted (partial result kept; 143
after SIGTERM, 129 after SIGHUP). A run's code follows its status (results/status.py:
EXIT_CODES).
Library errors become one line on stderr here, and only here; anything else is a bug and
keeps its traceback.

A command module imports at its top only click and the option declarations; its body
imports what it runs (cli/session.py, the runner, report/). So ``kvbench --help``, ``kvbench
run --help`` and a mistyped flag answer without importing the engine, numpy, jinja2 or
rich, about a fifth of a second sooner (tests/unit/cli/test_startup.py lists what must
stay out).
"""

from __future__ import annotations

import sys

import click

from kvbench import __version__
from kvbench.cli.console import fitted
from kvbench.cli.diff import diff
from kvbench.cli.export import export
from kvbench.cli.history import history, show
from kvbench.cli.levels import compare, sweep
from kvbench.cli.presets import presets
from kvbench.cli.queue import queue
from kvbench.cli.replay import replay
from kvbench.cli.report import report
from kvbench.cli.run import run
from kvbench.cli.search import search
from kvbench.cli.suggestions import SuggestingGroup
from kvbench.errors import KvbenchError, exit_code
from kvbench.runner import interrupts


@click.group(
    cls=SuggestingGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="kvbench")
def cli() -> None:
    """Load generator and benchmark harness for memcached (text, binary, meta; one server
    or many with ketama), Redis (RESP2/3, TLS), memcache-protocol queues and HTTP gateways.

    \b
    Example:
        kvbench run                                  # a throwaway local memcached, 10 s
        kvbench run memcached://127.0.0.1:11211 -c 50 -P 16 --ratio 1:10
        kvbench run redis://127.0.0.1:6379 --processes 2 --json out.json
        kvbench sweep memcached://127.0.0.1:11211 --connections 64:512:64 --rounds 3
        kvbench search memcached://127.0.0.1:11211 --slo 'p99<1ms'
        kvbench replay trace.csv.zst memcached://127.0.0.1:11211 --speed 2
        kvbench presets
        kvbench history
    """


cli.add_command(run)
cli.add_command(history)
cli.add_command(show)
cli.add_command(diff)
cli.add_command(export)
cli.add_command(sweep)
cli.add_command(search)
cli.add_command(compare)
cli.add_command(presets)
cli.add_command(queue)
cli.add_command(report)
cli.add_command(replay)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``kvbench`` console script.

    SIGINT, SIGTERM and SIGHUP end a run alike (runner/interrupts.py): what was measured
    is kept, and the exit code is 128 + the signal's number (130, 143, 129).
    """
    with interrupts.catching():
        code = interrupts.exit_code(_run(argv))
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    """Run the command; its exit code, library errors printed as one line."""
    try:
        interrupts.deliver_held()  # (a signal held since the start raises here, handled)
        code = cli.main(args=argv, prog_name="kvbench", standalone_mode=False)
    except click.exceptions.Abort:  # click's own Ctrl-C (an interrupt outside a run)
        click.echo("kvbench: interrupted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KvbenchError as exc:
        click.echo(fitted(f"kvbench: error: {exc}"), err=True)
        return exit_code(exc)
    except KeyboardInterrupt:
        click.echo("kvbench: interrupted before the measurement started; nothing to save", err=True)
        return 130
    return code if isinstance(code, int) else 0
