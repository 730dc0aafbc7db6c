"""``kvbench export``: a stored run as a result document, a CSV series or an HdrHistogram log.

The files are written as ``kvbench run`` writes them (cli/outputs.py).
"""

from __future__ import annotations

import click


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Result document.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Per-interval CSV.")
@click.option(
    "--hdr-log",
    "hdr_log_path",
    type=click.Path(dir_okay=False),
    help="HdrHistogram interval log (HistogramLogReader / HistogramLogProcessor).",
)
@click.option("--db", type=click.Path(dir_okay=False), help="History database.")
def export(
    run_ref: str,
    json_path: str | None,
    csv_path: str | None,
    hdr_log_path: str | None,
    db: str | None,
) -> None:
    """Write a stored run (an id, a unique prefix of one, or 'last') to files.

    \b
    Example:
        kvbench export last --csv intervals.csv
        kvbench export 20261129-2030 --json run.json --hdr-log run.hlog
    """
    if not (json_path or csv_path or hdr_log_path):
        raise click.UsageError("give at least one of --json FILE, --csv FILE, --hdr-log FILE")
    from kvbench.cli.console import make_console
    from kvbench.cli.outputs import write_exports
    from kvbench.config.load import default_db_path
    from kvbench.report import summarize
    from kvbench.results.store import Store

    with Store(db or default_db_path()) as store:
        run = store.load_run(run_ref)
    write_exports(
        make_console("-" in (json_path, csv_path, hdr_log_path)),  # a file on stdout: -
        run,
        summarize(run),
        json_path=json_path,
        csv_path=csv_path,
        hdr_log_path=hdr_log_path,
    )
