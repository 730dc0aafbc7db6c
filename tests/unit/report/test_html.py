"""The HTML report rendered from fixed RunResults: figures equal the document's, escaping,
size, the spectrum and server series it adds, and the ``kvbench report`` command."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from kvbench.cli import cli
from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.report import document, summarize
from kvbench.report.html import MAX_POINTS, render, script_json
from kvbench.report.latency import min_samples
from kvbench.report.levels import comparison, target_column
from kvbench.report.series import ALL_OPS, coarsen, run_spectrum, server_series, spectrum
from kvbench.results.model import RunResult
from kvbench.results.store import Store
from tests.support.report_page import parse, resolve

S = 1_000_000_000
EVIL_URL = "memcached://<script>alert('x')</script>&amp;@127.0.0.1:11211"


def hist(seed: int, n: int = 5000, median_us: float = 200.0) -> Histogram:
    rng = np.random.default_rng(seed)
    h = Histogram()
    h.record_many((rng.lognormal(np.log(median_us * 1000), 0.6, n)).astype(np.int64))
    return h


def memcached_stats(i: int) -> dict[str, str]:
    return {
        "cmd_get": str(9000 * i),
        "cmd_set": str(1000 * i),
        "get_hits": str(8000 * i),
        "rusage_user": f"{0.3 * i:.6f}",
        "rusage_system": f"{0.2 * i:.6f}",
        "curr_connections": "11",
        "threads": "4",
    }


def make_run(
    run_id: str = "20261129-120000-aaaa",
    *,
    intervals: int = 4,
    mode: str = "closed",
    url: str = "memcached://127.0.0.1:11211",
    shared_hists: bool = False,
    rounds: int = 1,
) -> RunResult:
    """A run of ``intervals`` 1 s intervals per round: gets and sets, server samples."""
    snaps, samples, round_records = [], [], []
    shared = {"get": hist(1), "set": hist(2, 500)}
    for r in range(rounds):
        base = r * (intervals + 1) * S
        round_records.append(
            {
                "round": r,
                "window_start_ns": base,
                "window_end_ns": base + intervals * S,
                "status": "ok",
            }
        )
        for i in range(intervals):
            seed = 10 * (r * intervals + i)
            latency = shared if shared_hists else {"get": hist(seed), "set": hist(seed + 1, 500)}
            service = (
                {op: hist(seed + 2, h.total_count, 80.0) for op, h in latency.items()}
                if mode == "open"
                else {}
            )
            snaps.append(
                IntervalSnapshot(
                    "measure",
                    i,
                    base + i * S,
                    base + (i + 1) * S,
                    {"get": {"hit": 4000, "miss": 1000}, "set": {"stored": 498, "timeout": 2}},
                    latency,
                    service=service,
                    keys={"get": 5000},
                    stats={"cpu_ns": 0.5 * S, **({"offered": 6000} if mode == "open" else {})},
                    round=r,
                )
            )
            samples.append(
                {
                    "round": r,
                    "index": i,
                    "taken_ns": base + (i + 1) * S,
                    "stats": memcached_stats(r * intervals + i + 1),
                }
            )
    return RunResult(
        run_id=run_id,
        started_at="2026-11-29T12:00:00+00:00",
        status="ok",
        mode=mode,
        kvbench_version="0.1.0",
        config={
            "load": {"connections": 8, "pipeline": 2, "processes": 1, "rounds": rounds},
            "workload": {"ratio": {"set": 1, "get": 10}, "keys": 1000, "seed": 7},
        },
        targets=[{"url": url, "protocol": "memcache-text", "server_version": "1.6.18"}],
        window_start_ns=0,
        window_end_ns=intervals * S,
        intervals=snaps,
        errors=["worker 0: <b>garbage</b> from the server"],
        environment={"host": "test", "python": "3.11"},
        server={
            "before": {"taken_ns": 0, "stats": memcached_stats(0)},
            "after": {"taken_ns": (intervals + 1) * S, "stats": memcached_stats(intervals)},
            "intervals": samples,
        },
        rounds=round_records if rounds > 1 else [],
    )


def test_every_figure_in_the_tables_equals_the_documents() -> None:
    runs = [make_run(), make_run("20261129-130000-bbbb", mode="open")]
    docs = [document(summarize(r)) for r in runs]
    page = parse(render(runs))
    assert len(page.cells) > 60
    pointers = {p for p, _, _ in page.cells}
    for i in (0, 1):
        for op in ("get", "set"):
            for name in ("p50", "p90", "p99", "p99_9", "max", "mean", "count"):
                key = f"/{i}/ops/{op}/{'latency_us/' if name != 'count' else ''}{name}"
                assert key in pointers
    assert "/1/ops/get/service_time_us/p99" in pointers
    for pointer, value, text in page.cells:
        assert json.loads(value) == resolve(docs, pointer), pointer
        if isinstance(resolve(docs, pointer), int):
            assert text == f"{resolve(docs, pointer):,}"


def test_a_percentile_with_too_few_samples_is_na_not_a_number() -> None:
    run = make_run(intervals=1)  # 500 sets: no p99.9
    page = parse(render([run]))
    cells = {p: (v, t) for p, v, t in page.cells}
    assert cells["/0/ops/set/latency_us/p99_9"] == ("null", "n/a")


def test_the_page_embeds_the_result_document() -> None:
    run = make_run(mode="open")
    data = json.loads(parse(render([run])).data_text)
    expected = json.loads(json.dumps(document(summarize(run))))
    del expected["server"]["intervals"]  # replaced by the derived server series
    assert data["runs"][0]["document"] == expected
    assert data["runs"][0]["server"] == server_series(run)
    assert data["runs"][0]["spectrum"] == json.loads(json.dumps(run_spectrum(run)))


def test_everything_from_the_run_is_escaped() -> None:
    html = render([make_run(url=EVIL_URL)])
    assert "<script>alert" not in html
    assert "<b>garbage" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;amp;@127.0.0.1" in html
    assert "&lt;b&gt;garbage&lt;/b&gt;" in html
    assert html.count("<script") == 2  # the data block and the chart code, nothing else
    data = json.loads(parse(html).data_text)  # still the original text once parsed
    assert data["runs"][0]["document"]["targets"][0]["url"] == EVIL_URL


def test_script_json_cannot_end_the_script_element() -> None:
    text = str(script_json({"u": "</script><!-- & \u2028"}))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"u": "</script><!-- & \u2028"}


def test_the_page_fetches_nothing() -> None:
    html = render([make_run()])
    assert not re.search(
        r"<link|<img|<iframe|\bsrc=|@import|url\(|https?://(?!www\.w3\.org/2000/svg)", html
    )


def test_a_typical_report_is_small() -> None:
    assert len(render([make_run(intervals=10)]).encode()) < 200_000


@pytest.fixture(scope="module")
def hour_totals() -> dict[str, Any]:
    """The totals of an hour's run below (they are alike but for their ids): summarizing
    3,600 intervals takes seconds, once is enough."""
    return dict(document(summarize(make_run(intervals=3600, shared_hists=True)))["totals"])


@pytest.mark.slow
@pytest.mark.parametrize("n_runs", [1, 3])
def test_long_runs_stay_under_the_size_bound(n_runs: int, hour_totals: dict[str, Any]) -> None:
    """An hour of 1 s intervals per run: adjacent intervals are merged for the charts."""
    runs = [make_run(f"r{i}", intervals=3600, shared_hists=True) for i in range(n_runs)]
    html = render(runs)
    assert len(html.encode()) < 1_500_000
    data = json.loads(parse(html).data_text)
    for entry in data["runs"]:
        assert len(entry["document"]["intervals"]) <= MAX_POINTS // n_runs
        assert entry["interval_merge"] > 1
        assert entry["document"]["totals"] == hour_totals
    assert "adjacent intervals merged" in html


def test_comparison_gives_ratios_against_the_first_run() -> None:
    """The ratios of ``kvbench compare`` (levels.comparison); test_html_levels has more."""
    runs = [make_run("a"), make_run("b", mode="open")]
    (row,) = comparison([target_column(r) for r in runs])
    page = parse(render(runs))
    assert [json.loads(v) for v in page.ratios] == [row["throughput_ratio"], row["p99_ratio"]]


def test_spectrum_follows_the_histogram_as_far_as_its_samples_go() -> None:
    h = hist(3, n=2000)
    points = spectrum(h)
    percentiles = [p for p, _ in points]
    assert percentiles[0] == 0 and 99 in percentiles
    assert all(min_samples(p) <= 2000 for p in percentiles)
    assert max(percentiles) < 99.9  # 2,000 samples cannot support p99.9
    values = [v for _, v in points]
    assert values == sorted(values)
    assert dict(points)[99] == h.value_at_percentile(99) / 1000
    assert spectrum(Histogram()) == []


def test_run_spectrum_has_service_time_in_open_loop_and_all_ops() -> None:
    closed = {(s["op"], s["kind"]) for s in run_spectrum(make_run())}
    assert closed == {("get", "latency"), ("set", "latency"), (ALL_OPS, "latency")}
    opened = {(s["op"], s["kind"]) for s in run_spectrum(make_run(mode="open"))}
    assert ("get", "service") in opened and (ALL_OPS, "service") in opened


def test_an_open_loop_run_has_a_chart_of_its_late_sends_per_interval() -> None:
    closed, opened = make_run(), make_run("20261129-130000-bbbb", mode="open")
    for snap in opened.intervals:
        snap.counts["get"]["late"] = 30 + snap.index
    for run, late_charts in ((closed, 0), (opened, 1)):
        page = parse(render([run]))
        assert [f.get("data-chart") for f in page.figures].count("late") == late_charts
    # the chart draws the document's own per-interval figures
    embedded = document(summarize(opened))["intervals"]
    assert [row["late"] for row in embedded] == [30 + s.index for s in opened.intervals]


def test_server_series_are_counter_deltas_over_time() -> None:
    rows = server_series(make_run(intervals=3))
    assert [r["t_s"] for r in rows] == [1.0, 2.0, 3.0]
    assert rows[0]["ops_per_s"] is None  # no previous sample in the round
    assert rows[1]["ops_per_s"] == 10_000.0  # cmd_get + cmd_set grow 10,000 per second
    assert rows[1]["cpu_cores"] == 0.5
    assert rows[1]["connections"] == 11
    assert rows[2]["connections"] is None  # the round's last: the workers may be gone
    thinned = server_series(make_run(intervals=4), every=2)
    assert [r["t_s"] for r in thinned] == [2.0, 4.0]
    assert thinned[1]["ops_per_s"] == 10_000.0


def test_server_series_restart_each_round() -> None:
    rows = server_series(make_run(intervals=2, rounds=2))
    assert [(r["round"], r["t_s"], r["ops_per_s"]) for r in rows] == [
        (0, 1.0, None),
        (0, 2.0, 10_000.0),
        (1, 1.0, None),
        (1, 2.0, 10_000.0),
    ]


def test_coarsen_merges_within_rounds_only() -> None:
    run = make_run(intervals=3, rounds=2)
    merged = coarsen(run.intervals, 2)
    assert [(s.round, s.end_ns - s.start_ns) for s in merged] == [
        (0, 2 * S),
        (0, S),
        (1, 2 * S),
        (1, S),
    ]
    assert sum(s.ops() for s in merged) == sum(s.ops() for s in run.intervals)


def test_render_needs_a_run() -> None:
    with pytest.raises(ValueError):
        render([])


def test_report_command_writes_the_page_of_stored_runs(tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    with Store(db) as store:
        for run in (make_run("20261129-120000-aaaa"), make_run("20261129-130000-bbbb")):
            store.save_run(run, document(summarize(run)))
    out = tmp_path / "r.html"
    result = CliRunner().invoke(
        cli, ["report", "20261129-12", "last", "-o", str(out), "--db", db], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "20261129-120000-aaaa" in html and "20261129-130000-bbbb" in html
    assert "Comparison" in html


def test_a_run_with_nothing_measured_still_renders() -> None:
    run = make_run(intervals=1)
    run.intervals, run.server = [], {}
    html = render([run])
    assert "ops.none" in html  # the verdict says why the page is empty
    data = json.loads(parse(html).data_text)
    assert data["runs"][0]["spectrum"] == [] and data["runs"][0]["server"] == []


def test_the_page_names_the_commands_of_the_mix() -> None:
    from kvbench.report.html import _facts

    workload = {
        "ratio": {"get": 1},
        "commands": [{"command": "HSET __key__ f __data__", "weight": 2}],
        "keys": 10,
        "seed": 1,
    }
    doc = {"mode": "closed", "status": "ok", "window_s": 1.0, "config": {"workload": workload}}
    assert dict(_facts(doc))["ops"] == "get:1 'HSET __key__ f __data__':2"


def test_bytes_by_op_are_cells_of_the_summary_equal_to_the_documents() -> None:
    """TX and RX per op and in total (the compiled driver's bytes by op), each cell the
    document's figure, in the one unit rule (MB/s, KB/s below 1 MB/s)."""
    run = make_run(intervals=1)
    run.intervals[0].stats.update(
        {"bytes_in": 2_000_100, "bytes_out": 300_000, "bytes_in.get": 1_950_000,
         "bytes_in.set": 50_000, "bytes_out.get": 100_000, "bytes_out.set": 200_000}
    )  # fmt: skip
    doc = document(summarize(run))
    page = parse(render([run]))
    cells = {p: (json.loads(v), text) for p, v, text in page.cells}
    assert cells["/0/ops/get/network/in_per_s"] == (1_950_000.0, "1.95 MB/s")
    assert cells["/0/ops/set/network/out_per_s"] == (200_000.0, "200.0 KB/s")
    assert cells["/0/totals/network/in_per_s"] == (
        doc["totals"]["network"]["in_per_s"],
        "2.00 MB/s",
    )
    assert '<th class="num">TX</th>' in render([run])
