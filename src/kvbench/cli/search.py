"""``kvbench search``: the most load a server takes within an objective.

Takes every option of ``kvbench run`` (cli/options.py); --rate is the first step's rate.
What it does is cli/capacity.py's ``search_and_report``.
"""

from __future__ import annotations

from typing import Any

import click

from kvbench.cli.options import run_options
from kvbench.errors import ConfigError

# A step of 3 rounds of this: long enough for a p99 of some thousands of requests at the
# lowest rates, short enough that a search of 15 steps takes about 2 minutes.
DEFAULT_STEP_DURATION = "2s"
DEFAULT_ROUNDS = 3
DEFAULT_START_RATE = 1000


@click.command()
@click.argument("target")
@click.option(
    "--slo",
    "slos",
    multiple=True,
    required=True,
    help="An objective every step must meet: p99<1ms, p99.9<=250us, error_rate<0.1% (repeatable).",
)
@click.option(
    "--precision",
    default="2%",
    show_default=True,
    help="Stop when the lowest failing rate is within this of the highest passing one.",
)
@click.option("--max-steps", default="20", show_default=True, help="Steps at most.")
@click.option(
    "--max-time",
    default="10m",
    show_default=True,
    help="Begin no step that would end the search after this long.",
)
@run_options
def search(
    target: str,
    slos: tuple[str, ...],
    precision: str,
    max_steps: str,
    max_time: str,
    config_path: str | None = None,
    **options: Any,
) -> int:
    """Find the highest open-loop rate TARGET serves within every --slo.

    Each step offers a rate (--rate to begin, 1000/s by default) for --rounds rounds
    (3) of --duration (2s), latency from intended send times; it passes when every
    objective holds over its rounds. The rate doubles until a step fails, then is bisected
    between the highest pass and the lowest fail to --precision. A step whose rate the
    client did not offer, or that missed an objective while the client was late (its CPU,
    late sends with free connections), ends the search: the answer is then "at least",
    and says the client was the limit. Prints each
    step's verdict, the curve, and the answer with its interval (docs/search.md); stored
    in the history (kvbench show search-...). Exit: 0 with an answer, 4 when a bound
    ended it first, 1 when no rate met the objectives, 2 for a bad --slo, 3 when the
    target takes no connection.

    \b
    Example:
        kvbench search memcached://127.0.0.1:11211 --slo 'p99<1ms'
        kvbench search redis://127.0.0.1:6379 --slo 'p99.9<2ms' --slo 'error_rate<0.1%' --rate 20k
    """
    from kvbench.cli.capacity import SearchPlan, search_and_report
    from kvbench.cli.console import make_console
    from kvbench.cli.outputs import Outputs, check_history
    from kvbench.cli.session import default_processes, settings_from_options
    from kvbench.config import load_config
    from kvbench.report.search import parse_objective
    from kvbench.units import parse_count, parse_duration_ns, parse_fraction

    objectives = [parse_objective(text) for text in slos]
    plan = SearchPlan(
        objectives=objectives,
        precision=parse_fraction(precision, "--precision"),
        max_steps=parse_count(max_steps, "--max-steps", minimum=1),
        max_time_s=parse_duration_ns(max_time, "--max-time", minimum_ns=1) / 1e9,
    )
    if not 0 < plan.precision < 1:
        raise ConfigError("--precision", f"{precision!r} must be above 0% and below 100%")
    outputs = Outputs.pop_from(options)
    if options.get("requests"):
        raise ConfigError("--requests", "a search's steps last --duration, not a count")
    if config_path is None:  # a scenario file's own values stand
        options["duration"] = options.get("duration") or DEFAULT_STEP_DURATION
        options["rounds"] = options.get("rounds") or str(DEFAULT_ROUNDS)
    settings = settings_from_options((target,), options)
    config = load_config(config_path, settings, default_processes())
    if config.load.rate_per_s is None:
        settings["load.rate"] = (DEFAULT_START_RATE, "--rate")
        config = load_config(config_path, settings, default_processes())
    if config.load.duration_ns is None:
        raise ConfigError("--duration", "a search's steps last --duration, not a count of requests")
    outputs.check()
    check_history(config.report)
    return search_and_report(make_console(outputs.to_stdout()), config, plan, outputs)
