"""``kvbench report``: the self-contained HTML report of stored runs."""

from __future__ import annotations

import click
from rich.console import Console

from kvbench.cli.console import make_console
from kvbench.cli.export import write_text
from kvbench.config.load import default_db_path
from kvbench.report.html import render
from kvbench.results.store import Store


def save_report(console: Console, path: str, html: str, flag: str = "--report") -> None:
    """Write the page and say where, with its size.

    Raises:
        ConfigError: the file cannot be written (one line naming ``flag``, exit 2).
    """
    write_text(flag, path, html)
    console.print(f"HTML report written to {path} ({len(html.encode()) / 1024:,.0f} KiB)")


@click.command()
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN...")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default="report.html",
    show_default=True,
    help="Where to write the HTML file.",
)
@click.option("--db", type=click.Path(dir_okay=False), help="History database.")
def report(run_refs: tuple[str, ...], output: str, db: str | None) -> None:
    """Write one self-contained HTML report of stored runs (opens offline).

    RUN is an id, a unique prefix of one, or 'last'. With several runs the report puts
    them side by side, with throughput and p99 ratios against the first.

    \b
    Example:
        kvbench report last -o report.html
        kvbench report 20261129-2030 20261129-2045 -o compare.html
    """
    with Store(db or default_db_path()) as store:
        runs = [store.load_run(ref) for ref in run_refs]
    save_report(make_console(), output, render(runs), "--output")
