"""Latency over time: the heatmap's columns and the --over-time rows are the run's own
figures, recomputable: shares add up to 1, counts to the interval's and the run's, the
max to the run's max; restarts, lost connections and verdicts are marked where they were."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from kvbench.cli import main
from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.report.heatmap import EDGES_NS, band_counts, run_heatmap
from kvbench.report.json_report import document
from kvbench.report.over_time import over_time_table, rows
from kvbench.report.summary import summarize
from kvbench.results.model import RunResult
from kvbench.results.store import Store
from tests.support.runs import make_run

S = 1_000_000_000
# Interval k: gets at 100 us, and from interval 3 on a tail; interval 5 is the slow one.
SLOW = 5


def snap(
    k: int, errors: dict[str, int] | None = None, stats: dict[str, float] | None = None
) -> IntervalSnapshot:
    get, put = Histogram(), Histogram()
    get.record(100_000 + k, 2000)
    if k >= 3:
        get.record(2_000_000 + 1000 * k, 30)
    if k == SLOW:
        get.record(75_000_000, 5)
    put.record(150_000, 300)
    put.record(40_000, 1)
    counts = {"get": {"hit": get.total_count}, "set": {"stored": put.total_count}}
    for outcome, n in (errors or {}).items():
        counts["get"][outcome] = n
    return IntervalSnapshot(
        "measure", k, k * S, (k + 1) * S, counts, {"get": get, "set": put}, stats=stats or {}
    )


def varied_run(intervals: int = 8, **changes: Any) -> RunResult:
    run = make_run("20261202-040000-abcdef", [{}])
    run.intervals = [snap(k) for k in range(intervals)]
    run.window_end_ns = intervals * S
    run.rounds = [
        {"round": 0, "window_start_ns": 0, "window_end_ns": intervals * S, "status": "ok"}
    ]
    return dataclasses.replace(run, **changes)


def fired(run: RunResult) -> set[str]:
    return {v.id for v in summarize(run).verdicts}


def test_a_columns_shares_add_up_to_1_and_its_counts_to_its_intervals_requests() -> None:
    run = varied_run()
    heat = run_heatmap(run, fired(run))
    assert heat["merged"] == 1
    for op in heat["ops"]:
        assert len(op["columns"]) == len(run.intervals)
        for column, interval in zip(op["columns"], run.intervals, strict=True):
            counts = [n for _, n in column["bands"]]
            assert sum(counts) == column["n"] == interval.latency[op["op"]].total_count
            assert column["ops"] == interval.ops(op["op"])  # no errors: every request timed
            assert sum(n / column["n"] for n in counts) == pytest.approx(1, abs=1e-12)
            assert column["max_us"] == interval.latency[op["op"]].max_ns / 1000
    doc = document(summarize(run))
    for op in heat["ops"]:
        assert sum(c["n"] for c in op["columns"]) == doc["ops"][op["op"]]["count"]


def test_each_value_counts_in_the_band_whose_edges_hold_it() -> None:
    run = varied_run()
    heat = run_heatmap(run, set())
    edges, first = heat["edges_us"], heat["first_band"]
    slow = heat["ops"][0]["columns"][SLOW]  # get: 5 requests at 75 ms
    band, n = slow["bands"][-1]
    assert n == 5 and edges[band - first] <= 75_000 < edges[band - first + 1]
    assert 0 < edges[band - first + 1] / edges[band - first] < 10 ** (1 / 10) + 1e-3
    assert all(b < band for b, _ in heat["ops"][0]["columns"][SLOW - 1]["bands"])
    # below 1 us is one band; a value on an edge opens the band it is the edge of
    hist = Histogram()
    for value in (0, 999, int(EDGES_NS[1]), int(EDGES_NS[2]) - 1, int(EDGES_NS[2])):
        hist.record(value)
    assert band_counts(hist) == {0: 2, 1: 2, 2: 1}


def test_a_long_run_has_adjacent_intervals_merged_exactly() -> None:
    run = varied_run(intervals=10)
    heat = run_heatmap(run, set(), max_columns=4)  # at least 60 columns: nothing merged
    assert heat["merged"] == 1
    run = varied_run(intervals=130)
    heat = run_heatmap(run, set(), max_columns=60)
    assert heat["merged"] == 3
    columns = heat["ops"][0]["columns"]
    assert len(columns) == 44  # 43 of 3 intervals and the last one alone
    assert columns[1]["n"] == sum(s.latency["get"].total_count for s in run.intervals[3:6])
    assert (columns[1]["t0"], columns[1]["t1"]) == (3.0, 6.0)
    assert sum(c["n"] for c in columns) == run.total().latency["get"].total_count  # type: ignore[union-attr]


def restarted_server() -> dict[str, Any]:
    """pid 10 in the samples after intervals 0 and 1; pid 11 from the one after 2."""

    def sample(k: int, pid: str) -> dict[str, Any]:
        return {"taken_ns": (k + 1) * S + 1000, "round": 0, "index": k, "stats": {"pid": pid}}

    return {"intervals": [sample(0, "10"), sample(1, "10"), sample(2, "11"), sample(3, "11")]}


def test_restarts_lost_connections_and_verdicts_are_marked_where_they_happened() -> None:
    run = varied_run(server=restarted_server())
    run.intervals[4] = snap(4, {"conn_error": 3}, {"reconnects": 2, "connect_failures": 1})
    run.intervals[6] = snap(6, {"timeout": 2})
    said = fired(run)
    assert {"server.restarted", "errors.rate"} <= said
    notes = {row.position: [(m.kind, m.text) for m in row.markers] for row in rows(run, said)}
    assert notes[2] == [("restart", "server restarted (pid 10 -> 11)")]
    assert notes[4] == [
        ("connection", "conn lost: 3 in flight, 1 connects failed, 2 reconnects"),
        ("verdict", "errors.rate 4 errors"),
    ]
    assert notes[6] == [("verdict", "errors.rate 2 errors")]
    assert [p for p, found in notes.items() if found] == [2, 4, 6]
    # a verdict that did not fire marks nothing
    quiet = {row.position: row.markers for row in rows(run, said - {"errors.rate"})}
    assert [k for k, _ in [(m.kind, m) for m in quiet[6]]] == []
    heat = run_heatmap(run, said)
    assert [(m["kind"], m["t0"], m["t1"]) for m in heat["markers"]] == [
        ("restart", 2.0, 3.0),
        ("connection", 4.0, 5.0),
        ("verdict", 4.0, 5.0),
        ("verdict", 6.0, 7.0),
    ]
    # timed-out requests have a latency (the timeout), lost ones none
    lost = heat["ops"][0]["columns"][4]
    assert lost["ops"] == lost["n"] + 3


def test_the_rows_add_up_to_the_run_and_their_max_is_the_runs_max() -> None:
    run = varied_run()
    run.intervals[6] = snap(6, {"timeout": 2})
    doc = document(summarize(run))
    intervals = rows(run, fired(run))
    for op, figures in doc["ops"].items():
        assert sum(r.ops[op].ops for r in intervals) == figures["count"]
        assert max(r.ops[op].max_us or 0 for r in intervals) == figures["latency_us"]["max"]
    # each row's percentiles are its own interval's, not the run's
    slow = intervals[SLOW].ops["get"]
    assert slow.p99_us == pytest.approx(
        run.intervals[SLOW].latency["get"].value_at_percentile(99) / 1000
    )
    assert intervals[0].ops["get"].p99_us != slow.p99_us
    assert intervals[0].ops["set"].p99_us is None  # 301 samples: too few for a p99


def printed(run: RunResult, width: int, wide: bool = False) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(over_time_table(rows(run, fired(run)), wide))
    return str(console.file.getvalue())  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_the_table_fits_the_terminal_with_every_figure_whole(width: int) -> None:
    run = varied_run(server=restarted_server())
    text = printed(run, width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    header = next(line for line in text.splitlines() if line.startswith("┃"))
    names = [c.strip() for c in header.strip("┃").split("┃")]
    assert names[:1] == ["t"] and "get ops" in names  # the first op's figures come first
    body = [line for line in text.splitlines() if line.startswith("│")]
    first = [c.strip() for c in body[0].strip("│").split("│")]
    assert first[names.index("get ops")] == "2,000"
    assert re.fullmatch(r"\d+(\.\d+)?(ns|us|ms|s)", first[names.index("get max")])
    if "set ops" not in names:
        assert "left out at" in text and "set ops/p50/p99/max" in text
    if width >= 120:  # the note wraps between its words at 120 columns
        assert "note" in names and "server restarted" in text
    if width >= 200:
        assert "server restarted (pid 10 -> 11)" in text


def test_show_over_time_prints_the_rows_and_their_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.db")
    run = varied_run(server=restarted_server())
    with Store(db) as store:
        store.save_run(run)
    with pytest.raises(SystemExit) as exited:
        main(["show", run.run_id, "--over-time", "--db", db])
    out = capsys.readouterr().out
    assert exited.value.code in (0, None)
    assert "Latency over time" in out and "server restarted (pid 10 -> 11)" in out
    assert out.count("\n│") + out.startswith("│") >= len(run.intervals)
    with pytest.raises(SystemExit):
        main(["show", run.run_id, "--over-time", "--json", "--db", db])
    data = json.loads(capsys.readouterr().out)
    assert len(data) == len(run.intervals)
    assert sum(r["ops"]["get"]["ops"] for r in data) == run.total().ops("get")  # type: ignore[union-attr]
    assert data[2]["markers"] == [{"kind": "restart", "text": "server restarted (pid 10 -> 11)"}]


def test_rounds_follow_each_other_on_the_heatmaps_time_line() -> None:
    run = make_run("20261202-043000-abcdef", [{"get": (1000, 200_000)}] * 3)
    heat = run_heatmap(run, set())
    columns = heat["ops"][0]["columns"]
    assert [(c["t0"], c["t1"]) for c in columns] == [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]
    assert heat["rounds_s"] == [1.0, 2.0]
    assert [r.round for r in rows(run, set())] == [0, 1, 2]
