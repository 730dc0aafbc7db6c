"""--prometheus: the figures served are the summary's, scraped over real HTTP."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from kvbench.cli.prometheus import prometheus_server
from kvbench.config import load_config
from kvbench.config import prometheus as prometheus_config
from kvbench.errors import ConfigError
from kvbench.metrics.histogram import Histogram
from kvbench.metrics.snapshot import IntervalSnapshot, merge_snapshots
from kvbench.report.latency import latency_summary
from kvbench.report.prometheus import LiveFigures
from kvbench.report.summary import interval_row
from tests.support.servers import free_port

S = 10**9


def snapshot(index: int, gets: int, latency_us: int) -> IntervalSnapshot:
    hist = Histogram()
    hist.record_many([latency_us * 1000 + i for i in range(gets)])
    return IntervalSnapshot(
        "measure",
        index,
        index * S,
        (index + 1) * S,
        {"get": {"hit": gets, "timeout": 1, "late": 5}, "hset": {"ok": 3, "error_reply": 2}},
        {"get": hist},
        stats={"connections_live_min": 4, "offered": 2 * gets},
    )


def scrape(figures: LiveFigures) -> dict[str, list[Any]]:
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(figures)
    text = generate_latest(registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def values(samples: list[Any], *label_names: str) -> dict[tuple[str, ...], float]:
    return {tuple(s.labels[n] for n in label_names): s.value for s in samples}


def test_counters_add_up_the_intervals_and_gauges_are_the_latest_ones() -> None:
    figures = LiveFigures()
    figures.start_run("redis://127.0.0.1:6379", "open", 8)
    snaps = [snapshot(0, 2000, 100), snapshot(1, 12000, 300)]
    for snap in snaps:
        figures.interval(snap)
    got = scrape(figures)
    merged = merge_snapshots(snaps)
    ops = values(got["kvbench_ops"], "op", "outcome")
    counted = {(op, o): n for op, outs in merged.counts.items() for o, n in outs.items()}
    # late is a note on ops counted under their outcome: summing by op gives the ops
    assert ops == {k: n for k, n in counted.items() if k[1] != "late"}
    assert sum(n for (op, _), n in ops.items() if op == "get") == merged.ops("get")
    assert values(got["kvbench_ops_noted"], "op", "note") == {("get", "late"): 10}
    row = interval_row(snaps[1], 0)
    assert got["kvbench_errors"][0].value == sum(interval_row(s, 0)["errors"] for s in snaps)
    assert values(got["kvbench_throughput_ops_per_second"], "op") == {
        ("all",): row["per_s"],
        ("get",): row["ops"]["get"]["per_s"],
        ("hset",): row["ops"]["hset"]["per_s"],
    }
    assert got["kvbench_offered_ops_per_second"][0].value == row["offered_per_s"]
    assert got["kvbench_errors_per_second"][0].value == row["errors_per_s"]
    assert values(got["kvbench_connections"], "state") == {("asked",): 8, ("live",): 4}
    summary = latency_summary(snaps[1].latency["get"])
    assert values(got["kvbench_latency_seconds"], "op", "quantile") == {
        ("get", "0.5"): summary["p50"] / 1e6,  # type: ignore[operator]
        ("get", "0.9"): summary["p90"] / 1e6,  # type: ignore[operator]
        ("get", "0.99"): summary["p99"] / 1e6,  # type: ignore[operator]
        ("get", "0.999"): summary["p99_9"] / 1e6,  # type: ignore[operator]
    }
    assert values(got["kvbench_run_info"], "target", "mode") == {
        ("redis://127.0.0.1:6379", "open"): 1
    }


def test_quantiles_with_too_few_samples_are_left_out() -> None:
    figures = LiveFigures()
    figures.start_run("memcached://h:1", "closed", 1)
    figures.interval(snapshot(0, 2000, 100))  # p99.9 needs 10,000 samples
    quantiles = values(scrape(figures)["kvbench_latency_seconds"], "quantile")
    assert set(quantiles) == {("0.5",), ("0.9",), ("0.99",)}


def test_a_new_run_keeps_the_counters_and_clears_the_gauges() -> None:
    figures = LiveFigures()
    figures.start_run("memcached://a:1", "closed", 2)
    figures.interval(snapshot(0, 100, 10))
    figures.start_run("memcached://b:1", "closed", 4)
    got = scrape(figures)
    assert values(got["kvbench_ops"], "op", "outcome")[("get", "hit")] == 100
    assert got["kvbench_runs"][0].value == 2
    assert "kvbench_throughput_ops_per_second" not in got
    assert values(got["kvbench_connections"], "state") == {("asked",): 4}


def test_the_server_answers_get_metrics_where_asked_and_stops_with_the_block() -> None:
    port = free_port()
    with prometheus_server(f"127.0.0.1:{port}", Console(file=None, quiet=True)) as figures:
        assert figures is not None
        figures.start_run("memcached://h:1", "closed", 1)
        figures.interval(snapshot(0, 10, 10))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        assert answer.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["kvbench_ops"].type == "counter"
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_an_address_in_use_is_a_config_error() -> None:
    port = free_port()
    with (
        prometheus_server(f"127.0.0.1:{port}", Console(quiet=True)),
        pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"),
        prometheus_server(f"127.0.0.1:{port}", Console(quiet=True)),
    ):
        pass


def test_without_the_package_the_flag_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prometheus_config, "installed", lambda module: False)
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"report.prometheus": ("127.0.0.1:9100", "--prometheus")}, 1)
    assert str(caught.value) == (
        "--prometheus: needs prometheus-client: pip install 'kvbench[prometheus]'"
    )


@pytest.mark.parametrize("address", ["9100", "127.0.0.1", "h:port", "h:70000"])
def test_a_bad_address_names_the_flag(address: str) -> None:
    with pytest.raises(ConfigError, match=r"--prometheus: .*HOST:PORT"):
        load_config(None, {"report.prometheus": (address, "--prometheus")}, 1)
