"""``kvbench sweep`` and ``kvbench compare``: many runs, one answer.

Both take every option of ``kvbench run`` (cli/options.py, so they never drift apart); the
swept axis is the one of --connections, --pipeline or --rate given as a range. What they
do is cli/session.py's ``sweep_and_report`` and ``compare_and_report``.
"""

from __future__ import annotations

from typing import Any

import click

from kvbench.cli.options import run_options
from kvbench.errors import ConfigError


def _split_axis(options: dict[str, Any]) -> tuple[str, list[float]]:
    from kvbench.runner.levels import AXES, parse_levels

    ranged = [
        a
        for a in AXES
        if isinstance(options.get(a), str) and (":" in options[a] or "," in options[a])
    ]
    if len(ranged) != 1:
        raise ConfigError(
            "sweep",
            "give exactly one of --connections, --pipeline or --rate as a range, e.g. --connections 64:2048:64",
        )
    axis = ranged[0]
    levels = parse_levels(options.pop(axis), f"--{axis}")
    return axis, levels


@click.command()
@click.argument("target")
@click.option(
    "--slo", help="A latency objective, e.g. 'p99<1ms': report the highest level meeting it."
)
@run_options
def sweep(
    target: str, config_path: str | None = None, slo: str | None = None, **options: Any
) -> int:
    """Run TARGET at each level of one axis and find where it saturates.

    Give one of --connections, --pipeline or --rate as START:STOP:STEP or a list.
    Per level: status, throughput mean with a 95% CI over --rounds (3 or more), p50/p99,
    errors; then the knee (the first level within 5% of the highest throughput, when p99
    climbs after it) and, with --slo, the highest level that meets it. A level that fails is reported as failed, never skipped; the exit
    status is the worst level's (1 when one failed, 130 on Ctrl-C).

    \b
    Example:
        kvbench sweep memcached://127.0.0.1:11211 --connections 64:2048:64 --rounds 5
        kvbench sweep redis://127.0.0.1:6379 --pipeline 1,2,4,8,16,32 --slo 'p99<1ms'
    """
    from kvbench.cli import session
    from kvbench.cli.console import make_console
    from kvbench.cli.outputs import Outputs, check_history
    from kvbench.config import load_config
    from kvbench.runner.levels import at_level
    from kvbench.runner.limits import check_limits

    outputs = Outputs.pop_from(options)
    axis, levels = _split_axis(options)
    settings = session.settings_from_options((target,), options)
    config = load_config(config_path, settings, session.default_processes())
    outputs.check()
    check_history(config.report)
    for number, level in enumerate(levels):  # the server's limits do not change by level
        check_limits(at_level(config, axis, level), server=number == 0)
    console = make_console(outputs.to_stdout())
    return session.sweep_and_report(console, config, axis, levels, slo, outputs)


@click.command()
@click.argument("targets", nargs=-1, required=True, metavar="TARGET_A TARGET_B [...]")
@run_options
def compare(targets: tuple[str, ...], config_path: str | None = None, **options: Any) -> int:
    """Run the same seeded workload against each TARGET, rounds interleaved A B A B.

    Prints each target's summary and its throughput and p99 relative to the first, with
    95% confidence intervals from the paired per-round ratios (3 rounds at least; use
    --rounds 5 or more). Exit status: the worst target's (1 when one failed, 130 on Ctrl-C).

    \b
    Example:
        kvbench compare memcached://127.0.0.1:11211 memcached+binary://127.0.0.1:11211 --rounds 5
    """
    from kvbench.cli import session
    from kvbench.cli.console import make_console
    from kvbench.cli.outputs import Outputs, check_history
    from kvbench.config import load_config
    from kvbench.runner.limits import check_limits

    if len(targets) < 2:
        raise ConfigError("compare", "give at least two targets")
    outputs = Outputs.pop_from(options)
    base_settings = session.settings_from_options((targets[0],), options)
    seed_config = load_config(config_path, base_settings, session.default_processes())
    configs = []
    for url in targets:  # one seed for all: the same requests against each target
        settings = {
            **base_settings,
            "target.urls": ([url], "TARGET"),
            "workload.seed": (seed_config.workload.seed, "--seed"),
        }
        configs.append(load_config(config_path, settings, session.default_processes()))
    outputs.check()
    check_history(seed_config.report)
    for config in configs:
        check_limits(config)
    return session.compare_and_report(make_console(outputs.to_stdout()), configs, outputs)
