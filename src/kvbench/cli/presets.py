"""``kvbench presets``: the classic experiments, listed or described.

``kvbench run --preset NAME TARGET`` runs one (cli/preset_runs.py).
"""

from __future__ import annotations

import click


@click.command()
@click.argument("name", required=False)
def presets(name: str | None) -> None:
    """List the classic experiments, or describe one.

    \b
    Example:
        kvbench presets
        kvbench presets gateway-vs-native
        kvbench run --preset memcached-storm memcached://127.0.0.1:11211
    """
    from kvbench.cli.console import make_console
    from kvbench.config.presets import PRESETS, get_preset
    from kvbench.report.tables import presets_table

    console = make_console()
    if name is None:
        rows = [
            (p.name, p.shape, f"{p.targets}{'+' if p.more_targets else ''}", p.title)
            for p in PRESETS.values()
        ]
        console.print(presets_table(rows))
        console.print("details: kvbench presets NAME; run: kvbench run --preset NAME TARGET")
        return
    preset = get_preset(name)
    console.print(f"[bold]{preset.name}[/bold]: {preset.title}")
    console.print(f"the original: {preset.original}")
    console.print(f"kvbench measures: {preset.measures}")
    settings = ", ".join(f"{k} = {v!r}" for k, v in preset.settings.items())
    console.print(f"settings: {settings}")
    if preset.steps:
        console.print("steps: " + "; then ".join(f"{s.label} ({s.settings})" for s in preset.steps))
    if preset.axis:
        console.print(f"sweeps {preset.axis} over {preset.levels}")
