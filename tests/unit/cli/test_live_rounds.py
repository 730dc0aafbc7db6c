"""A comparison's rounds are runs of one round each: the live view names the round in
progress (every line said ``round 1`` under the ``round 3/5`` header), on a terminal and
in plain lines; and plain lines fit the console's width, per-op parts collapsed."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from kvbench.cli.live import LiveView
from kvbench.config import RunConfig
from tests.unit.cli.test_live import config, snap


def test_a_comparisons_lines_name_the_round_in_progress() -> None:
    out = io.StringIO()
    base: RunConfig = config(rounds=3)  # type: ignore[assignment]
    single = replace(base, load=replace(base.load, rounds=1))
    with LiveView(Console(file=out, width=200, force_terminal=False), base, runs=2) as view:
        for round_index in range(3):
            for _target in ("A", "B"):
                view.start(single, round_index)
                view.interval(snap(0, 0))  # each round's run counts its own from 0
    rounds = [line.split(" [")[0] for line in out.getvalue().splitlines()]
    assert rounds == ["round 1", "round 1", "round 2", "round 2", "round 3", "round 3"]


def test_the_progress_names_the_round_in_progress_on_a_terminal() -> None:
    out = io.StringIO()
    base: RunConfig = config(rounds=5)  # type: ignore[assignment]
    single = replace(base, load=replace(base.load, rounds=1))
    console = Console(file=out, width=120, force_terminal=True, color_system=None)
    with LiveView(console, base) as view:
        view.start(single, 2)
        view.interval(snap(0, 0))
        rendered = io.StringIO()
        Console(file=rendered, width=120, color_system=None).print(view._render())
    text = rendered.getvalue()
    assert "round 3/5" in text
    row = next(line for line in text.splitlines() if "1,234" in line)
    assert row.split()[0] == "3"  # the table's round column


def test_plain_lines_fit_the_console() -> None:
    out = io.StringIO()
    base: RunConfig = config(rounds=1)  # type: ignore[assignment]
    with LiveView(Console(file=out, width=60, force_terminal=False), base) as view:
        view.interval(snap(0, 0))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 60 for line in lines), lines
    assert "1,234 ops/s" in lines[0] and "get 1,234/s" not in out.getvalue()
