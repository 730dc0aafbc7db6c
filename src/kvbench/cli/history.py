"""``kvbench history`` and ``kvbench show``: the runs kept in the SQLite history."""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--target", help="Only runs whose target URL contains this text.")
@click.option("--last", default=20, show_default=True, help="How many runs to list.")
@click.option("--db", type=click.Path(dir_okay=False), help="History database.")
@click.option(
    "--wide",
    is_flag=True,
    help="Every column of the table whatever the terminal's width (it wraps).",
)
def history(target: str | None, last: int, db: str | None, wide: bool) -> None:
    """List stored runs, newest first; a sweep's levels and a preset's steps by their label;
    then stored searches (kvbench show search-ID).

    \b
    Example:
        kvbench history --last 5
        kvbench history --target redis://
    """
    from kvbench.cli.console import make_console
    from kvbench.config.load import default_db_path
    from kvbench.report.tables import history_table
    from kvbench.results.store import Store

    console = make_console()
    with Store(db or default_db_path()) as store:
        rows = store.list_runs(target, last)
        searches = store.list_searches(target, last)
    console.print(history_table(rows, wide) if rows else "no runs stored yet")
    for found in searches:  # a search's steps are among the runs, labelled "search N/s"
        console.print(
            f"{found['search_id']}  {found['status']}  {found['answer']['sentence']}",
            highlight=False,
            soft_wrap=not console.is_terminal,  # (between words on a terminal)
        )


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print the result document instead.")
@click.option("--db", type=click.Path(dir_okay=False), help="History database.")
@click.option(
    "--wide",
    is_flag=True,
    help="Every column of the table whatever the terminal's width (it wraps).",
)
@click.option(
    "--over-time",
    is_flag=True,
    help="One row per interval instead: per op its requests, p50, p99 and max, and a note "
    "of restarts, lost connections and verdicts' causes (with --json: the rows as JSON).",
)
def show(run_ref: str, as_json: bool, db: str | None, wide: bool, over_time: bool) -> None:
    """Show a stored run (an id, a unique prefix of one, or 'last'), or a stored search
    (search-ID, or search-last).

    \b
    Example:
        kvbench show last
        kvbench show 20261129-2030 --json
        kvbench show last --wide
        kvbench show last --over-time
        kvbench show search-last
    """
    from kvbench.cli.console import make_console
    from kvbench.config.load import default_db_path
    from kvbench.report import dumps, summarize
    from kvbench.report.over_time import over_time_table, rows, to_json
    from kvbench.report.search_answer import search_lines
    from kvbench.report.terminal import print_summary
    from kvbench.results.store import SEARCH_PREFIX, Store

    if run_ref.startswith(SEARCH_PREFIX):
        with Store(db or default_db_path()) as store:
            found = store.load_search(run_ref)
        if as_json:
            click.echo(json.dumps(found, indent=2))
        else:
            console = make_console()
            for line in search_lines(found):
                console.print(line, highlight=False, soft_wrap=not console.is_terminal)
        return
    with Store(db or default_db_path()) as store:
        run = store.load_run(run_ref)
    model = summarize(run)
    if over_time:
        intervals = rows(run, {v.id for v in model.verdicts})
        if as_json:
            click.echo(json.dumps([to_json(row) for row in intervals], indent=2))
        else:
            make_console().print(over_time_table(intervals, wide))
    elif as_json:
        click.echo(dumps(model), nl=False)
    else:
        print_summary(make_console(), model, wide)
