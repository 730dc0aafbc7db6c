"""Throughput counts successes only, errors have their own rate, and every output (summary,
document, intervals, rounds, CSV, terminal, history, HTML) shows the same status."""

from __future__ import annotations

import csv
import io
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.report import document, summarize
from kvbench.report.exports import interval_csv
from kvbench.report.html import render
from kvbench.report.terminal import print_summary
from kvbench.results import RunResult, Store

S = 1_000_000_000


def snap(round_: int, gets: int, errors: int) -> IntervalSnapshot:
    """Round ``round_``'s one 2 s interval: ``gets`` hits and ``errors`` error replies."""
    hist = Histogram()
    hist.record(100_000, gets + errors)
    start = round_ * 10 * S
    counts = {"get": {"hit": gets, "error_reply": errors}, "set": {"stored": 100}}
    latency = {"get": hist, "set": hist.copy()}
    return IntervalSnapshot("measure", 0, start, start + 2 * S, counts, latency, round=round_)


def gateway_run(rounds: list[tuple[int, int]], status: str = "ok") -> RunResult:
    """Like the nginx whose memcached died: a gateway answering 502s fast."""
    return RunResult(
        run_id="r1",
        started_at="2026-11-29T20:30:00+00:00",
        status=status,
        mode="closed",
        kvbench_version="0.1.0",
        config={"load": {"max_error_rate": 0.01}},
        targets=[{"url": "http+memc://h:8080/memc", "protocol": "http1"}],
        window_start_ns=0,
        window_end_ns=(len(rounds) - 1) * 10 * S + 2 * S,
        intervals=[snap(i, gets, errors) for i, (gets, errors) in enumerate(rounds)],
        rounds=[
            {
                "round": i,
                "window_start_ns": i * 10 * S,
                "window_end_ns": i * 10 * S + 2 * S,
                "status": "ok",
            }
            for i in range(len(rounds))
        ],
    )


def test_error_replies_are_not_throughput() -> None:
    """Seen: 94,717 502s reported as 15,786 ops/s, status ok, exit 0."""
    model = summarize(gateway_run([(1_900, 94_717)]))
    get = next(r for r in model.ops if r.op == "get")
    assert get.count == 96_617 and get.completed == 96_617 and get.succeeded == 1_900
    assert get.throughput_per_s == 950.0  # 1,900 hits / 2 s, not 96,617 / 2 s
    assert get.errors == 94_717 and get.errors_per_s == pytest.approx(47_358.5)
    assert get.error_rate == pytest.approx(94_717 / 96_617)
    assert model.throughput_per_s == (1_900 + 100) / 2
    assert model.errors_per_s == pytest.approx(94_717 / 2)
    assert model.status.name == "failed"
    (interval,) = model.intervals
    assert interval["per_s"] == 1_000.0 and interval["ops"]["get"]["per_s"] == 950.0
    assert interval["errors_per_s"] == pytest.approx(47_358.5)
    (round_,) = model.rounds
    assert round_["throughput_per_s"] == 1_000.0 and round_["succeeded"] == 2_000


def test_the_document_figures_recompute_from_each_other() -> None:
    doc = document(summarize(gateway_run([(1_900, 94_717)])))
    totals, window_s = doc["totals"], doc["window_s"]
    succeeded = sum(
        n
        for op in doc["ops"].values()
        for name, n in op["outcomes"].items()
        if name in ("hit", "miss", "stored")
    )
    assert totals["succeeded"] == succeeded == 2_000
    assert totals["throughput_per_s"] == round(succeeded / window_s, 1)
    assert totals["errors"] == sum(totals["error_kinds"].values()) == 94_717
    assert totals["errors_per_s"] == round(totals["errors"] / window_s, 1)
    assert totals["error_rate"] == round(totals["errors"] / totals["ops"], 6)
    assert totals["completed"] == totals["succeeded"] + totals["error_kinds"]["error_reply"]
    assert doc["status"] == "failed" and doc["process_status"] == "ok"
    assert doc["status_reasons"] == [
        "errors were 97.93% of 96,717 ops, above the 1% allowed (--max-error-rate): "
        "error_reply 94,717"
    ]
    (verdict,) = [v for v in doc["verdicts"] if v["id"] == "errors.rate"]
    assert verdict["level"] == "error" and "error_reply 94,717" in verdict["message"]


def test_the_csv_series_counts_successes() -> None:
    rows = list(csv.DictReader(io.StringIO(interval_csv(gateway_run([(1_900, 94_717)])))))
    get = next(r for r in rows if r["op"] == "get")
    assert float(get["per_s"]) == 950.0 and int(get["errors"]) == 94_717


def terminal(run: RunResult) -> str:
    out = io.StringIO()
    print_summary(Console(file=out, width=160, color_system=None), summarize(run))
    return out.getvalue()


def test_the_terminal_says_the_status_and_the_errors() -> None:
    text = terminal(gateway_run([(1_900, 94_717)]))
    assert "(2.00s window, failed)" in text
    assert "errors: 94,717 (47.4k/s, 97.93% of 96,717 ops)" in text
    assert text.rstrip().splitlines()[-1].startswith("status: failed - errors were 97.93%")
    # the table's ops/s is the document's: successes over the window
    (get_row,) = [line for line in text.splitlines() if line.startswith("│ get ")]
    assert get_row.split("│")[3].strip() == "950"
    clean = terminal(gateway_run([(2_000, 0)]))
    assert "(2.00s window, ok)" in clean and clean.rstrip().endswith("status: ok")


def test_a_round_ci_needs_three_rounds_and_is_never_negative() -> None:
    two = terminal(gateway_run([(2_000, 0), (2_200, 0)]))
    assert "95% CI needs 3 rounds" in two
    assert "95% CI needs 3 rounds" in render([gateway_run([(2_000, 0), (2_200, 0)])])
    assert (
        document(summarize(gateway_run([(2_000, 0), (2_200, 0)])))["throughput_ci95_per_s"] is None
    )
    wild = gateway_run([(100, 0), (20_000, 0), (300, 0)])
    doc = document(summarize(wild))
    assert doc["throughput_ci95_per_s"][0] == 0.0 < doc["throughput_ci95_per_s"][1]
    assert "95% CI 0 (clamped) .." in terminal(wild)


def test_the_history_lists_the_status_and_keeps_what_happened_to_the_processes(
    tmp_path: Path,
) -> None:
    run = gateway_run([(1_900, 94_717)], status="partial")
    with Store(str(tmp_path / "h.db")) as store:
        store.save_run(run, document(summarize(run)))
        (row,) = store.list_runs()
        loaded = store.load_run("last")
    assert row["status"] == "failed"  # failed outranks partial
    assert row["throughput_per_s"] == 1_000.0
    assert loaded.status == "partial"
    assert document(summarize(loaded)) == document(summarize(run))


def test_a_run_saved_without_its_document_is_listed_with_its_status(tmp_path: Path) -> None:
    with Store(str(tmp_path / "h.db")) as store:
        store.save_run(gateway_run([(1_900, 94_717)]))
        (row,) = store.list_runs()
    assert row["status"] == "failed"


def test_runs_stored_before_the_status_split_load_as_they_were(tmp_path: Path) -> None:
    path = str(tmp_path / "h.db")
    run = gateway_run([(2_000, 0)], status="interrupted")
    with Store(path) as store:
        store.save_run(run, document(summarize(run)))
    with sqlite3.connect(path) as db:  # as an older kvbench wrote it: no process_status
        db.execute("UPDATE runs SET process_status = NULL")
    with Store(path) as store:
        assert store.load_run("last").status == "interrupted"


def test_the_html_report_shows_the_status() -> None:
    html = render([gateway_run([(1_900, 94_717)])])
    assert "<dt>status</dt><dd>failed</dd>" in html
    assert "no op succeeded" not in html and "above the 1% allowed" in html
