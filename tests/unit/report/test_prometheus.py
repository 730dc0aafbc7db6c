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
from kvbench.report.prometheus import BUCKETS_S, LiveFigures
from kvbench.report.summary import interval_row
from tests.support.prometheus import bucket_of, histogram_of, histogram_quantile
from tests.support.servers import free_port

S = 10**9
TARGET = "redis://127.0.0.1:6379"


def snapshot(index: int, gets: int, latency_us: int, misses: int = 0) -> IntervalSnapshot:
    """``gets`` hits at ``latency_us`` (+ 1 ns each), ``misses`` at 10x that, as a
    worker's recorder cuts them: by op and outcome, and by op."""
    hits, missed = Histogram(), Histogram()
    hits.record_many([latency_us * 1000 + i for i in range(gets)])
    missed.record_many([latency_us * 10_000 + i for i in range(misses)])
    outcomes = {"hit": hits, **({"miss": missed} if misses else {})}
    return IntervalSnapshot(
        "measure",
        index,
        index * S,
        (index + 1) * S,
        {
            "get": {"hit": gets, "timeout": 1, "late": 5, **({"miss": misses} if misses else {})},
            "hset": {"ok": 3, "error_reply": 2},
        },
        {"get": Histogram.merged(outcomes.values())},
        stats={"connections_live_min": 4, "offered": 2 * gets},
        latency_by_outcome={"get": outcomes},
    )


def exposition(figures: LiveFigures) -> str:
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(figures)
    return generate_latest(registry).decode()


def scrape(figures: LiveFigures) -> dict[str, list[Any]]:
    return {f.name: f.samples for f in text_string_to_metric_families(exposition(figures))}


def values(samples: list[Any], *label_names: str) -> dict[tuple[str, ...], float]:
    return {tuple(s.labels[n] for n in label_names): s.value for s in samples}


def test_counters_add_up_the_intervals_and_gauges_are_the_latest_ones() -> None:
    figures = LiveFigures()
    figures.start_run(TARGET, "open", 8)
    snaps = [snapshot(0, 2000, 100), snapshot(1, 12000, 300)]
    for snap in snaps:
        figures.interval(snap)
    got = scrape(figures)
    merged = merge_snapshots(snaps)
    ops = values(got["kvbench_ops"], "target", "op", "outcome")
    counted = {(TARGET, op, o): n for op, outs in merged.counts.items() for o, n in outs.items()}
    # late is a note on ops counted under their outcome: summing by op gives the ops
    assert ops == {k: n for k, n in counted.items() if k[2] != "late"}
    assert sum(n for (_, op, _), n in ops.items() if op == "get") == merged.ops("get")
    assert values(got["kvbench_ops_noted"], "op", "note") == {("get", "late"): 10}
    row = interval_row(snaps[1], 0)
    errors = sum(interval_row(s, 0)["errors"] for s in snaps)
    assert values(got["kvbench_errors"], "target") == {(TARGET,): errors}
    assert values(got["kvbench_throughput_ops_per_second"], "target", "op") == {
        (TARGET, "all"): row["per_s"],
        (TARGET, "get"): row["ops"]["get"]["per_s"],
        (TARGET, "hset"): row["ops"]["hset"]["per_s"],
    }
    assert got["kvbench_offered_ops_per_second"][0].value == row["offered_per_s"]
    assert got["kvbench_errors_per_second"][0].value == row["errors_per_s"]
    assert values(got["kvbench_connections"], "state") == {("asked",): 8, ("live",): 4}
    assert values(got["kvbench_run_info"], "target", "mode") == {(TARGET, "open"): 1}


def test_every_series_names_its_target_and_the_types_are_prometheus_conventions() -> None:
    figures = LiveFigures()
    figures.start_run(TARGET, "open", 8)
    figures.interval(snapshot(0, 100, 10))
    text = exposition(figures)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["kvbench_latency_seconds"].type == "histogram"
    for name in ("kvbench_ops", "kvbench_errors", "kvbench_intervals", "kvbench_runs"):
        assert families[name].type == "counter"
        assert {s.name for s in families[name].samples} <= {f"{name}_total", f"{name}_created"}
    for family in families.values():
        for sample in family.samples:
            assert sample.labels.get("target") == TARGET, sample


def test_the_latency_histogram_is_cumulative_over_the_intervals_with_its_sum_and_count() -> None:
    figures = LiveFigures()
    figures.start_run(TARGET, "closed", 1)
    snaps = [snapshot(0, 2000, 100), snapshot(1, 12000, 300)]
    for snap in snaps:
        figures.interval(snap)
    hist = histogram_of(scrape(figures), "get")
    merged = Histogram.merged(s.latency["get"] for s in snaps)
    assert hist["count"] == merged.total_count == 14000
    assert hist["sum"] == pytest.approx(merged.sum_ns / 1e9)
    counts = [n for _, n in hist["buckets"]]
    assert counts == sorted(counts)  # cumulative
    bounds = dict(hist["buckets"])
    # 2,000 gets at 100-102 us, 12,000 at 300-312 us (snapshot's values)
    assert bounds[0.0001] == 0 and bounds[0.0002] == bounds[0.0005] - 12000 == 2000
    assert bounds[float("inf")] == 14000
    assert [b for b, _ in hist["buckets"]][:-1] == list(BUCKETS_S)


@pytest.mark.parametrize("latency_us", [7, 95, 1_500, 40_000, 2_000_000])
def test_histogram_quantile_over_two_scrapes_gives_the_runs_percentiles_within_a_bucket(
    latency_us: int,
) -> None:
    """What Grafana computes, ``histogram_quantile(q, rate(..._bucket[w]))``, from the
    difference of two scrapes: the percentile of the intervals between them lies in the
    bucket that the interpolated answer lies in."""
    figures = LiveFigures()
    figures.start_run(TARGET, "closed", 1)
    figures.interval(snapshot(0, 500, latency_us * 3))
    first = histogram_of(scrape(figures), "get")
    later = [snapshot(1, 4000, latency_us), snapshot(2, 6000, latency_us * 2)]
    for snap in later:
        figures.interval(snap)
    second = histogram_of(scrape(figures), "get")
    increase = [
        (bound, n - m)
        for (bound, n), (_, m) in zip(second["buckets"], first["buckets"], strict=True)
    ]
    between = Histogram.merged(s.latency["get"] for s in later)
    for q in (0.5, 0.9, 0.99):
        answer = histogram_quantile(q, increase)
        exact = between.value_at_percentile(q * 100) / 1e9
        assert bucket_of(answer) == bucket_of(exact), (q, answer, exact)


def test_a_new_run_keeps_the_counters_and_clears_the_gauges() -> None:
    figures = LiveFigures()
    figures.start_run("memcached://a:1", "closed", 2)
    figures.interval(snapshot(0, 100, 10))
    figures.start_run("memcached://b:1", "closed", 4)
    got = scrape(figures)
    assert (
        values(got["kvbench_ops"], "target", "op", "outcome")[("memcached://a:1", "get", "hit")]
        == 100
    )
    assert values(got["kvbench_runs"], "target") == {
        ("memcached://a:1",): 1,
        ("memcached://b:1",): 1,
    }
    assert histogram_of(got, "get", "memcached://a:1")["count"] == 100
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


def test_latency_is_a_histogram_per_op_and_outcome_whose_sum_is_the_ops() -> None:
    """A get's hits and misses are series apart (labels target, op, outcome), read back
    through prometheus_client's text parser: each outcome's count is its ops, and summed
    by (le, op) they are the op's histogram, which histogram_quantile reads as before."""
    figures = LiveFigures()
    figures.start_run(TARGET, "closed", 1)
    snaps = [snapshot(0, 3000, 100, misses=1000), snapshot(1, 5000, 100, misses=1000)]
    for snap in snaps:
        figures.interval(snap)
    families = {f.name: f for f in text_string_to_metric_families(exposition(figures))}
    family = families["kvbench_latency_seconds"]
    assert family.type == "histogram"
    assert {tuple(sorted(s.labels)) for s in family.samples} == {
        ("le", "op", "outcome", "target"),
        ("op", "outcome", "target"),
    }
    got = {f.name: f.samples for f in families.values()}
    hit, miss = histogram_of(got, "get", outcome="hit"), histogram_of(got, "get", outcome="miss")
    assert (hit["count"], miss["count"]) == (8000, 2000)
    # hits at 100 us, misses at 1 ms: each outcome's p50 in its own bucket
    assert bucket_of(histogram_quantile(0.5, hit["buckets"])) == bucket_of(0.000101)
    assert bucket_of(histogram_quantile(0.5, miss["buckets"])) == bucket_of(0.001001)
    whole = histogram_of(got, "get")
    merged = Histogram.merged(s.latency["get"] for s in snaps)
    assert whole["count"] == merged.total_count == 10000
    assert whole["sum"] == pytest.approx(merged.sum_ns / 1e9)
