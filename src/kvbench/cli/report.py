"""``kvbench report``: the self-contained HTML report of stored runs."""

from __future__ import annotations

import click
from rich.console import Console

from kvbench.cli.console import make_console
from kvbench.config.load import default_db_path
from kvbench.report.html import render
from kvbench.results.store import Store


def write_report(path: str, html: str) -> int:
    """Write the page; returns its size in bytes.

    Raises:
        click.ClickException: the file cannot be written (one line, exit 1).
    """
    data = html.encode("utf-8")
    try:
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise click.ClickException(f"cannot write the report to {path}: {exc.strerror}") from None
    return len(data)


def save_report(console: Console, path: str, html: str) -> None:
    """Write the page (``write_report``) and say where, with its size."""
    size = write_report(path, html)
    console.print(f"HTML report written to {path} ({size / 1024:,.0f} KiB)")


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
    save_report(make_console(), output, render(runs))
