"""The HTML report of a sweep and of a comparison, rendered from fixed LevelRows/RunResults:
the figures shown equal the sweep/compare result documents, the knee and a failed level
are shown where they belong, and compared runs carry the paired per-round ratios."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest

from kvbench.report import document, summarize
from kvbench.report.html import render, render_sweep
from kvbench.report.levels import (
    LevelRow,
    compare_document,
    comparison,
    comparison_sentence,
    level_row,
    parse_slo,
    sweep_document,
    target_column,
)
from kvbench.results.model import RunResult
from tests.support.report_page import Figures, parse, resolve
from tests.support.runs import make_run

US = 1000
TARGET = "memcached://h:11211"
REFUSED = "preflight: memcached://h:11211: connection refused <errno 111>"


def level_run(run_id: str, rates: list[int], p99_us: int) -> RunResult:
    """A level's run: one 1 s round per rate, gets only, p99 at ``p99_us``."""
    return make_run(run_id, [{"get": (rate, p99_us * US)} for rate in rates])


def sweep_fixture(slo: str | None = "p99<1ms") -> tuple[list[LevelRow], list[RunResult]]:
    """pipeline 1, 2, 4 ran (throughput flattens and p99 climbs after 2); 8 failed."""
    runs = [
        level_run("20261129-1", [10_000, 11_000, 10_500], 200),
        level_run("20261129-2", [20_000, 21_000, 20_500], 250),
        level_run("20261129-4", [21_000, 21_500, 21_250], 600),
    ]
    objective = parse_slo(slo) if slo else None
    rows = [
        level_row(level, run, None, objective)
        for level, run in zip((1.0, 2.0, 4.0), runs, strict=True)
    ]
    rows.append(level_row(8.0, None, REFUSED, objective))
    return rows, runs


def sweep_page(slo: str | None = "p99<1ms") -> tuple[str, Figures, dict[str, Any]]:
    rows, runs = sweep_fixture(slo)
    html = render_sweep("pipeline", TARGET, rows, runs, slo)
    page = parse(html)
    return html, page, json.loads(page.data_text)


def test_the_sweep_figures_equal_the_sweep_document_and_the_level_rows() -> None:
    rows, runs = sweep_fixture()
    _, page, data = sweep_page()
    expected = json.loads(json.dumps(sweep_document("pipeline", TARGET, rows, "p99<1ms")))
    assert data["sweep"] == expected
    shown = {pointer: json.loads(value) for pointer, value, _ in page.refs}
    for pointer, value in shown.items():
        assert value == resolve(data, pointer), pointer
    for i, row in enumerate(rows[:3]):
        assert row.throughput is not None and row.throughput.ci95 is not None
        at = f"/sweep/levels/{i}"
        assert shown[f"{at}/throughput_per_s"] == round(row.throughput.mean, 1)
        assert shown[f"{at}/throughput_ci95_per_s"] == [round(v, 1) for v in row.throughput.ci95]
        assert shown[f"{at}/latency_us/p99"] == row.latency_us["p99"]
        assert shown[f"{at}/latency_us/p50"] == row.latency_us["p50"]
        assert shown[f"{at}/errors"] == row.errors == 0
    assert shown["/sweep/levels/0/throughput_per_s"] == 10_500.0
    assert shown["/sweep/best_level"] == 4.0  # p99 600 us < 1 ms; level 8 did not run
    # the level runs' own sections: every figure equals that run's result document
    docs = [document(summarize(r)) for r in runs]
    assert len(page.cells) > 30
    for pointer, value, _ in page.cells:
        assert json.loads(value) == resolve(docs, pointer), pointer


def test_the_knee_is_marked_at_its_level() -> None:
    html, page, data = sweep_page()
    assert data["sweep"]["knee"] == 2.0
    assert ("/sweep/knee", "2.0", "2") in page.refs
    knee_rows = re.findall(r'<tr class="knee[^"]*">\s*<td[^>]*data-value="([^"]+)"', html)
    assert knee_rows == ["2.0"]
    assert html.count('<span class="badge knee">knee</span>') == 1
    assert html.count('<span class="badge best">best</span>') == 1
    assert data["sweep_chart"] == {"slo_percentile": "p99", "slo_limit_us": 1000.0}


def test_a_failed_level_is_shown_with_its_reason() -> None:
    html, page, data = sweep_page()
    # the status in one word; why, on a row of its own under the level
    assert ("/sweep/levels/3/status", '"failed"', "failed") in page.refs
    assert ("/sweep/levels/3/reason", json.dumps(REFUSED), REFUSED) in page.refs
    assert re.search(r'<tr class="reason-row"><td></td><td class="bad" colspan="8"', html)
    assert "&lt;errno 111&gt;" in html and "<errno" not in html
    failed = re.search(r'<tr class=" failed">(.*?)</tr>', html, re.S)
    assert failed is not None and "no run" in failed.group(1)
    assert data["sweep"]["levels"][3]["throughput_per_s"] is None
    assert len(data["runs"]) == 3  # only the levels that ran have a run section


def test_each_level_run_is_a_collapsed_section_linked_from_its_row() -> None:
    html, _, data = sweep_page(slo=None)
    assert html.count('<details class="level-run">') == 3
    assert '<details class="level-run" open' not in html
    for i, run_id in enumerate(("20261129-1", "20261129-2", "20261129-4")):
        assert f'<a href="#run-{i}">{run_id}</a>' in html
        assert f'id="run-{i}"' in html
        assert data["runs"][i]["label"] == f"pipeline {2**i}"
    assert data["sweep"]["slo"] is None and data["sweep"]["best_level"] is None
    assert "badge best" not in html
    assert {f.get("data-chart") for f in parse(html).figures} >= {
        "sweep-throughput",
        "sweep-latency",
    }


def test_a_sweep_whose_every_level_failed_still_renders() -> None:
    rows = [level_row(level, None, REFUSED) for level in (1.0, 2.0)]
    page = parse(render_sweep("connections", TARGET, rows, []))
    data = json.loads(page.data_text)
    assert data["runs"] == [] and data["sweep"]["knee"] is None
    assert [ref for ref in page.refs if ref[0].endswith(("/status", "/reason"))] == [
        ("/sweep/levels/0/status", '"failed"', "failed"),
        ("/sweep/levels/0/reason", json.dumps(REFUSED), REFUSED),
        ("/sweep/levels/1/status", '"failed"', "failed"),
        ("/sweep/levels/1/reason", json.dumps(REFUSED), REFUSED),
    ]


def compared_runs() -> list[RunResult]:
    """Three interleaved rounds per target; B's rounds vary so the ratio has a real CI."""
    a = make_run("a", [{"get": (10_000, 200 * US)}, {"get": (20_000, 200 * US)}] * 2)
    b = make_run("b", [{"get": (5_000, 300 * US)}, {"get": (12_000, 500 * US)}] * 2)
    b.targets = [{"url": "memcached+meta://h:11211", "protocol": "memcache-meta"}]
    return [a, b]


def test_compared_runs_show_the_paired_per_round_ratios_of_compare() -> None:
    runs = compared_runs()
    rows = comparison([target_column(r) for r in runs])
    html = render(runs)
    page = parse(html)
    data = json.loads(page.data_text)
    assert data["comparison"] == json.loads(json.dumps(rows))
    assert data["comparison"] == compare_document([target_column(r) for r in runs])["comparison"]
    shown = {pointer: json.loads(value) for pointer, value, _ in page.refs}
    (row,) = rows
    assert shown["/comparison/0/throughput_ratio"] == row["throughput_ratio"]
    assert shown["/comparison/0/throughput_ratio_ci95"] == row["throughput_ratio_ci95"]
    assert shown["/comparison/0/p99_ratio"] == row["p99_ratio"]
    assert shown["/comparison/0/p99_ratio_ci95"] == row["p99_ratio_ci95"]
    # the geometric mean of per-round ratios (0.5, 0.6, ...), not the ratio of the means
    assert row["throughput_ratio"] == pytest.approx(math.sqrt(0.5 * 0.6))
    assert row["throughput_ratio"] != pytest.approx(17_000 / 30_000)
    assert row["throughput_ratio_ci95"] is not None
    assert comparison_sentence(row) in html
    assert html.index(comparison_sentence(row)) < html.index('<table class="figures">')
    assert "baseline" in html


def test_single_round_runs_compare_as_one_round_each() -> None:
    runs = [
        make_run("a", [{"get": (10_000, 200 * US)}]),
        make_run("b", [{"get": (8_000, 400 * US)}]),
    ]
    for run in runs:
        run.rounds = []  # as a run of one round is stored
    (row,) = comparison([target_column(r) for r in runs])
    assert row["throughput_ratio"] == pytest.approx(0.8)
    assert row["p99_ratio"] == pytest.approx(2.0, rel=1e-3)
    assert row["throughput_ratio_ci95"] is None
    page = parse(render(runs))
    assert [json.loads(v) for v in page.ratios] == [row["throughput_ratio"], row["p99_ratio"]]


def test_a_report_of_runs_with_different_workloads_says_which_settings_differ() -> None:
    """kvbench report of memcached GETs beside Redis HSETs said '203% of ... throughput'
    without a word that the workloads differed."""
    from kvbench.report.html import render, settings_caveat
    from tests.support.runs import make_run

    ops = {"get": (1000, 100_000)}
    gets = make_run("20261201-120000-aaaaaa", [ops] * 3,
                    config={"load": {"connections": 50}, "workload": {"seed": 1, "ratio": {"set": 1, "get": 10}}})  # fmt: skip
    hsets = make_run("20261201-120100-bbbbbb", [ops] * 3,
                     config={"load": {"connections": 4}, "workload": {"seed": 2, "ratio": {"get": 1}}})  # fmt: skip
    caveat = settings_caveat(gets, hsets, 2)
    assert caveat is not None
    assert caveat.startswith("#2 ran another workload than #1, so its ratio compares the workloads")
    assert "load.connections (50 vs 4)" in caveat and "workload.ratio.set (1 vs -)" in caveat
    assert "seed" not in caveat
    assert caveat in render([gets, hsets])
    again = make_run("20261201-120200-cccccc", [ops] * 3,
                     config={"load": {"connections": 50}, "workload": {"seed": 7, "ratio": {"set": 1, "get": 10}}})  # fmt: skip
    assert settings_caveat(gets, again, 2) is None  # another seed is no other workload


def test_a_reason_keeps_each_hyphenated_word_on_one_line_and_escaped() -> None:
    """A browser breaks after a hyphen: at 1280 px a sweep's reason read "(--" and
    "max-error-rate)" on two lines."""
    from kvbench.report.html import unbroken_words

    html = str(unbroken_words("above the 1% allowed (--max-error-rate): <b> & co"))
    assert html == (
        'above the 1% allowed <span class="word">(--max-error-rate):</span> &lt;b&gt; &amp; co'
    )


def test_a_level_that_is_not_ok_is_never_judged_against_the_slo_nor_the_best() -> None:
    """A level whose run failed (here: a worker lost, partial) had p99 200 us, under the
    1 ms objective: it was "met" and the sweep's best level, though a failed run's
    percentiles are not an answer (seen: a level whose server went down at its end)."""
    from dataclasses import replace

    from kvbench.report.levels import best_level

    objective = parse_slo("p99<1ms")
    ok = level_row(1.0, level_run("20261129-1", [10_000], 200), None, objective)
    lost = replace(level_run("20261129-2", [20_000], 200), status="partial")
    failed = level_row(2.0, lost, None, objective)
    assert (ok.status, ok.slo_met) == ("ok", True)
    assert (failed.status, failed.slo_met) == ("partial", None)
    assert best_level([ok, failed]) == 1.0
