"""The live view: a rich table on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from kvbench.cli import live
from kvbench.cli.live import LiveView
from kvbench.config import RunConfig, load_config
from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.runner.levels import at_level
from tests.support.servers import free_port

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


def served(connections: int) -> tuple[RunConfig, str]:
    """A config with --prometheus on a free port, and the URL it serves at."""
    port = free_port()
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "load.connections": (str(connections), "-c"),
            "report.prometheus": (f"127.0.0.1:{port}", "--prometheus"),
        },
        1,
    )
    return config, f"http://127.0.0.1:{port}/metrics"


def scrape(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_with_prometheus_it_serves_its_intervals_while_open() -> None:
    config, url = served(3)
    out = io.StringIO()
    with LiveView(Console(file=out, width=200), config) as view:
        view.interval(snap(0, 0))
        view.interval(snap(1, 0))
        samples = scrape(url)
    assert [s.value for s in samples["kvbench_intervals"]] == [2]
    assert {s.labels["outcome"]: s.value for s in samples["kvbench_ops"]} == {"hit": 2468}
    assert {s.labels["state"]: s.value for s in samples["kvbench_connections"]} == {"asked": 3}
    assert samples["kvbench_run_info"][0].labels["mode"] == "closed"
    assert f"serving Prometheus metrics at {url}" in out.getvalue()
    with pytest.raises(OSError):  # closed with the view
        urllib.request.urlopen(url, timeout=2)


def test_each_run_of_a_sweep_serves_its_own_settings() -> None:
    base, url = served(2)
    with LiveView(Console(file=io.StringIO(), width=200), base, runs=2) as view:
        view.start(at_level(base, "rate", 5000))
        view.interval(snap(0, 0))
        view.start(at_level(base, "connections", 8))
        view.interval(snap(0, 0))
        samples = scrape(url)
    assert [s.value for s in samples["kvbench_runs"]] == [2]
    assert [s.value for s in samples["kvbench_intervals"]] == [2]
    assert {s.labels["state"]: s.value for s in samples["kvbench_connections"]} == {"asked": 8}
    assert samples["kvbench_run_info"][0].labels["mode"] == "closed"


def test_a_sweeps_lines_name_the_level_each_run_starts_at() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    base = config(rounds=1)
    with LiveView(console, base) as view:  # type: ignore[arg-type]
        view.sweeping("connections")
        view.start(at_level(base, "connections", 8))  # type: ignore[arg-type]
        view.interval(snap(0, 0))
    assert out.getvalue().startswith("level 8 [   1.0s]")


def test_the_table_is_laid_out_once_an_interval_not_at_each_redraw(monkeypatch: Any) -> None:
    """The display redraws four times a second for the progress bar; laying the table out
    each time cost the coordinator 12% of the core it shared with the worker (make run)."""
    drawn: list[int] = []
    real = live.live_table

    def counted(*args: Any, **kwargs: Any) -> Any:
        drawn.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(live, "live_table", counted)
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=True, color_system=None)
    with LiveView(console, config()) as view:  # type: ignore[arg-type]
        view.interval(snap(0, 0))
        laid_out = len(drawn)
        for _ in range(20):
            console.print(view._render())  # as each redraw renders it
        assert len(drawn) == laid_out
        view.interval(snap(0, 1))
        assert len(drawn) == laid_out + 1
    assert "get p99" in out.getvalue()
