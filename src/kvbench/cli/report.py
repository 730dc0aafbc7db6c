"""``kvbench report``: the self-contained HTML report of stored runs."""

from __future__ import annotations

import click


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
    them side by side, with throughput and p99 ratios against the first. A search
    (search-ID, search-last) gets its own page: its answer, steps and curve.

    \b
    Example:
        kvbench report last -o report.html
        kvbench report 20261129-2030 20261129-2045 -o compare.html
        kvbench report search-last -o search.html
    """
    from kvbench.cli.console import make_console
    from kvbench.cli.outputs import save_report
    from kvbench.config.load import default_db_path
    from kvbench.report.html import render
    from kvbench.report.search_page import render_search
    from kvbench.results.store import SEARCH_PREFIX, Store

    if len(run_refs) == 1 and run_refs[0].startswith(SEARCH_PREFIX):
        with Store(db or default_db_path()) as store:
            found = store.load_search(run_refs[0])
        save_report(make_console(output == "-"), output, render_search(found), "--output")
        return
    with Store(db or default_db_path()) as store:
        runs = [store.load_run(ref) for ref in run_refs]
    save_report(make_console(output == "-"), output, render(runs), "--output")
