"""``kvbench sweep/compare --report``: the pages of real (tiny) runs, opened in headless
Chromium as test_html_report_browser opens a run's page: no console output, every chart
drawn, the figures equal to the commands' ``--json`` documents, the knee and SLO level
marked on the charts. Needs the Debian ``chromium`` package (skips without it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvbench.report.html import render_sweep
from kvbench.report.levels import comparison_sentence
from tests.integration.test_html_report_browser import chromium, console_lines, load, png_rows
from tests.support.cli import read_json, run_kvbench
from tests.support.report_page import Figures, resolve
from tests.support.servers import Server
from tests.unit.report.test_html_levels import TARGET, sweep_fixture

pytestmark = pytest.mark.integration

SHORT = (
    "--duration",
    "500ms",
    "--processes",
    "1",
    "-c",
    "2",
    "--rounds",
    "2",
    "--no-save",
    "--no-live",
)


def marks(page: Figures, kind: str) -> list[float]:
    return [
        float(m["data-x"] or "nan") for m in page.marks if kind in (m.get("class") or "").split()
    ]


def test_sweep_report_of_a_real_sweep(fresh_memcached: Server, tmp_path: Path) -> None:
    out, html = tmp_path / "sweep.json", tmp_path / "sweep.html"
    result = run_kvbench(
        "sweep", f"memcached://{fresh_memcached.address}", "--pipeline", "1,4",
        "--slo", "p99<1s", "--json", str(out), "--report", str(html), *SHORT,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert f"HTML report written to {html}" in result.stdout
    doc = read_json(out)
    assert [row["status"] for row in doc["levels"]] == ["ok", "ok"]

    page = load(tmp_path, html)
    data = json.loads(page.data_text)
    assert data["sweep"] == doc
    assert len(page.refs) >= 12
    for pointer, value, _ in page.refs:
        assert json.loads(value) == resolve({"sweep": doc}, pointer), pointer
    assert [r["document"]["run_id"] for r in data["runs"]] == [
        row["run_id"] for row in doc["levels"]
    ]
    for pointer, value, _ in page.cells:  # the levels' run sections
        assert json.loads(value) == resolve([r["document"] for r in data["runs"]], pointer)
    charts = {f.get("data-chart") for f in page.figures}
    assert {"sweep-throughput", "sweep-latency", "throughput", "spectrum"} <= charts
    assert page.series_paths >= 3 + 2 * 4
    assert marks(page, "best") == [doc["best_level"]] * 2 == [4.0, 4.0]
    assert marks(page, "knee") == ([doc["knee"]] * 2 if doc["knee"] is not None else [])

    shot = tmp_path / "sweep.png"
    _, stderr = chromium(tmp_path, html, f"--screenshot={shot}", "--window-size=1280,1100")
    assert console_lines(stderr) == []
    _, _, rows = png_rows(shot)
    assert len(set(rows)) > 200, "the screenshot is (nearly) uniform: nothing was drawn"


def test_compare_report_of_a_real_comparison(fresh_memcached: Server, tmp_path: Path) -> None:
    out, html = tmp_path / "compare.json", tmp_path / "compare.html"
    a = f"memcached://{fresh_memcached.address}"
    b = f"memcached+meta://{fresh_memcached.address}"
    result = run_kvbench("compare", a, b, "--json", str(out), "--report", str(html), *SHORT)
    assert result.code == 0, result.stderr
    assert f"HTML report written to {html}" in result.stdout
    doc = read_json(out)

    page = load(tmp_path, html)
    data = json.loads(page.data_text)
    assert data["comparison"] == doc["comparison"]
    refs = {pointer: json.loads(value) for pointer, value, _ in page.refs}
    (row,) = doc["comparison"]
    assert refs["/comparison/0/throughput_ratio"] == row["throughput_ratio"]
    assert refs["/comparison/0/throughput_ratio_ci95"] == row["throughput_ratio_ci95"]
    assert refs["/comparison/0/p99_ratio"] == row["p99_ratio"]
    # rich folds a long sentence (one that says the comparison is unstable) at spaces
    assert " ".join(comparison_sentence(row).split()) in " ".join(result.stdout.split())
    assert comparison_sentence(row) in html.read_text()
    for pointer, value, _ in page.cells:
        assert json.loads(value) == resolve(doc["targets"], pointer), pointer
    assert {"compare-throughput", "compare-p99", "compare-spectrum"} <= {
        f.get("data-chart") for f in page.figures
    }


def test_the_charts_mark_the_knee_the_slo_level_and_failed_levels(tmp_path: Path) -> None:
    rows, runs = sweep_fixture()
    html = tmp_path / "fixed-sweep.html"
    html.write_text(render_sweep("pipeline", TARGET, rows, runs, "p99<1ms"))
    page = load(tmp_path, html)
    assert marks(page, "knee") == [2.0, 2.0]  # on both sweep charts
    assert marks(page, "best") == [4.0, 4.0]
    assert marks(page, "failed") == [8.0, 8.0]
