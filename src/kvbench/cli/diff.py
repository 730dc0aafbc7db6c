"""``kvbench diff``: two stored runs compared, with a confidence interval when they have rounds."""

from __future__ import annotations

import json

import click


@click.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when a regression beyond the noise is flagged.",
)
@click.option("--db", type=click.Path(dir_okay=False), help="History database.")
def diff(run_a: str, run_b: str, as_json: bool, fail_on_regression: bool, db: str | None) -> int:
    """Compare run B with run A: throughput and p99 change per op and in total.

    With 2 or more complete rounds in both runs, each change has a 95% confidence interval
    (Welch's t over the per-round figures) and is flagged a regression when the interval
    lies entirely on the worse side of zero; otherwise the plain change is shown.
    RUN_A and RUN_B are run ids, unique prefixes of them, or 'last'.

    \b
    Example:
        kvbench diff 20261129-2030 last
        kvbench diff 20261129-2030 20261130-0915 --json
        kvbench diff BASELINE last --fail-on-regression     # exit 1 on a regression
    """
    from kvbench.cli.console import make_console
    from kvbench.config.load import default_db_path
    from kvbench.report.diff import diff_runs, render, to_dict
    from kvbench.results.store import Store

    with Store(db or default_db_path()) as store:
        a, b = store.load_run(run_a), store.load_run(run_b)
    result = diff_runs(a, b)
    if as_json:
        click.echo(json.dumps(to_dict(result), indent=2))
    else:
        make_console().print(render(result))
    return 1 if fail_on_regression and result.regressions else 0
