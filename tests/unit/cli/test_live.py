"""The live view: a rich table on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

from rich.console import Console

from kvbench.cli.live import LiveView
from kvbench.config import load_config
from kvbench.metrics import Histogram, IntervalSnapshot

S = 1_000_000_000


def config(rounds: int = 2) -> object:
    return load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "load.duration": ("2s", "-d"),
            "load.rounds": (str(rounds), "--rounds"),
        },
        1,
    )


def snap(index: int, round_: int) -> IntervalSnapshot:
    hist = Histogram()
    hist.record(250_000)
    return IntervalSnapshot(
        "measure",
        index,
        index * S,
        (index + 1) * S,
        {"get": {"hit": 1234}},
        {"get": hist},
        round=round_,
    )


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    with LiveView(console, config()) as view:  # type: ignore[arg-type]
        view.interval(snap(0, 0))
        view.interval(snap(0, 1))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("round 1 [") and "1,234 ops/s" in lines[0]
    assert lines[1].startswith("round 2 [")


def test_live_table_and_progress_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=True, color_system=None)
    with LiveView(console, config()) as view:  # type: ignore[arg-type]
        view.interval(snap(0, 0))
        view.interval(snap(1, 0))
        view.note("round 2 of 2")
    text = out.getvalue()
    assert "get p99" in text and "250.1us" in text  # p50 of one 250 us sample (HDR bucket top)
    assert "round 1/2" in text and "50%" in text  # 2 of 4 seconds
    assert "round 2 of 2" in text


def test_progress_covers_every_level_of_a_sweep() -> None:
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=True, color_system=None)
    with LiveView(console, config(rounds=1), runs=4) as view:  # type: ignore[arg-type]
        view.interval(snap(0, 0))  # 1 s of 4 levels x 2 s
    assert "12%" in out.getvalue() or "13%" in out.getvalue()


def test_each_level_restarts_the_clock_and_names_its_level() -> None:
    """Was: the second level's clock went on from the first's (one origin per round)."""
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    with LiveView(console, config(rounds=1)) as view:  # type: ignore[arg-type]
        view.start_level("connections", 2)
        view.interval(snap(0, 0))
        view.interval(snap(1, 0))
        view.start_level("connections", 4)
        later = IntervalSnapshot("measure", 0, 50 * S, 51 * S, {"get": {"hit": 7}}, {}, round=0)
        view.interval(later)
    lines = out.getvalue().splitlines()
    assert [line.split("]")[0] for line in lines] == [
        "level 2 [   1.0s",
        "level 2 [   2.0s",
        "level 4 [   1.0s",
    ]


def test_unit_rates_lines_add_up() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    with LiveView(console, config(rounds=1), unit_rates=True) as view:  # type: ignore[arg-type]
        view.interval(snap(0, 0))
        view.interval(snap(1, 0))
    first, second = out.getvalue().splitlines()
    assert "ops 1,234  total 1,234  per s 1,234  per min 74,040  per hour 4,442,400" in first
    assert "ops 1,234  total 2,468" in second


def test_the_live_table_has_a_level_column_in_a_sweep() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True, color_system=None)
    with LiveView(console, config(rounds=1), runs=2) as view:  # type: ignore[arg-type]
        view.start_level("connections", 64)
        view.interval(snap(0, 0))
    assert "level" in out.getvalue() and " 64 " in out.getvalue()
