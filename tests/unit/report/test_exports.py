"""Exports of fixed RunResults: the HdrHistogram log (read back by ``hdrh``) and the CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.report.exports import CSV_COLUMNS, LOG_LEGEND, hdr_log, interval_csv
from kvbench.report.summary import summarize
from kvbench.results.model import RunResult

S = 1_000_000_000
T0 = 5 * S  # the first round's window start on the monotonic clock
ROUND_GAP = 3 * S


def hist(*values_counts: tuple[int, int]) -> Histogram:
    h = Histogram()
    for value, count in values_counts:
        h.record(value, count)
    return h


def snap(round_: int, index: int, *, service: bool = False, **ops: int) -> IntervalSnapshot:
    """One second of ``ops`` (op -> hits) with latencies 100 us .. 2 ms."""
    start = T0 + round_ * ROUND_GAP + index * S
    latency = {op: hist((100_000, n - 1), (2_000_000, 1)) for op, n in ops.items()}
    return IntervalSnapshot(
        "measure",
        index,
        start,
        start + S,
        {op: {"hit": n, "timeout": 1} if op == "get" else {"stored": n} for op, n in ops.items()},
        latency,
        service={op: hist((50_000, n)) for op, n in ops.items()} if service else {},
        stats={"cpu_ns": 250_000_000},
        round=round_,
    )


def two_round_run(mode: str = "closed") -> RunResult:
    open_loop = mode == "open"
    intervals = [
        snap(r, i, service=open_loop, get=1000 + 10 * r + i, set=100 + r)
        for r in range(2)
        for i in range(2)
    ]
    rounds = [
        {
            "round": r,
            "window_start_ns": T0 + r * ROUND_GAP,
            "window_end_ns": T0 + r * ROUND_GAP + 2 * S,
            "status": "ok",
        }
        for r in range(2)
    ]
    return RunResult(
        run_id="20261129-203000-1a2b",
        started_at="2026-11-29T20:30:00+00:00",
        status="ok",
        mode=mode,
        kvbench_version="0.1.0",
        config={},
        targets=[{"url": "memcached://127.0.0.1:11211", "protocol": "memcache-text"}],
        window_start_ns=T0,
        window_end_ns=T0 + ROUND_GAP + 2 * S,
        intervals=intervals,
        rounds=rounds,
    )


def read_log(path: Path) -> list[HdrHistogram]:
    reader = HistogramLogReader(str(path), HdrHistogram(1, 60 * S, 3))
    out = []
    while (h := reader.get_next_interval_histogram()) is not None:
        out.append(h)
    reader.close()
    return out


def test_hdr_log_header_follows_the_log_format() -> None:
    lines = hdr_log(two_round_run()).splitlines()
    assert "#[Histogram log format version 1.3]" in lines
    start = next(line for line in lines if line.startswith("#[StartTime: "))
    assert start.startswith("#[StartTime: 1795984200.000 (seconds since epoch), 2026-11-29")
    assert "#[BaseTime: 1795984200.000 (seconds since epoch)]" in lines
    assert any("nanoseconds" in line for line in lines if line.startswith("#"))
    legend = lines.index(LOG_LEGEND)
    assert all(line.startswith("#") for line in lines[:legend])
    assert all(line.startswith("Tag=") for line in lines[legend + 1 :])


def test_hdr_log_has_a_line_per_interval_per_op_with_relative_times_and_max_in_ms() -> None:
    lines = [line for line in hdr_log(two_round_run()).splitlines() if line.startswith("Tag=")]
    fields = [line.split(",") for line in lines]
    assert [(f[0], f[1], f[2], f[3]) for f in fields] == [
        ("Tag=get", "0.000", "1.000", "2.000"),
        ("Tag=set", "0.000", "1.000", "2.000"),
        ("Tag=get", "1.000", "1.000", "2.000"),
        ("Tag=set", "1.000", "1.000", "2.000"),
        # round 2 began ROUND_GAP after round 1: times keep increasing across rounds
        ("Tag=get", "3.000", "1.000", "2.000"),
        ("Tag=set", "3.000", "1.000", "2.000"),
        ("Tag=get", "4.000", "1.000", "2.000"),
        ("Tag=set", "4.000", "1.000", "2.000"),
    ]


def test_hdr_log_reads_back_with_hdrh_and_the_counts_add_up(tmp_path: Path) -> None:
    run = two_round_run()
    path = tmp_path / "run.hlog"
    path.write_text(hdr_log(run))
    histograms = read_log(path)
    assert len(histograms) == 8
    by_tag: dict[str, int] = {}
    for h in histograms:
        by_tag[h.get_tag()] = by_tag.get(h.get_tag(), 0) + h.get_total_count()
    total = run.total()
    assert total is not None
    assert by_tag == {op: h.total_count for op, h in total.latency.items()}
    first = histograms[0]
    assert first.get_value_at_percentile(50) == total.latency["get"].value_at_percentile(50)
    # absolute times: StartTime + offset (the reader keeps milliseconds)
    assert histograms[-1].get_start_time_stamp() == (1795984200 + 4) * 1000


def test_open_loop_logs_service_time_under_its_own_tag(tmp_path: Path) -> None:
    path = tmp_path / "open.hlog"
    path.write_text(hdr_log(two_round_run("open")))
    tags = [h.get_tag() for h in read_log(path)]
    assert tags[:4] == ["get", "set", "get.service", "set.service"]


def test_csv_has_one_row_per_interval_per_op_from_the_summary() -> None:
    run = two_round_run()
    model = summarize(run)
    text = interval_csv(run)
    assert text == interval_csv(run, model)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(csv.reader(io.StringIO(text)).__next__()) == CSV_COLUMNS
    assert len(rows) == 8
    assert [(r["round"], r["t_s"], r["op"]) for r in rows[:4]] == [
        ("0", "1.0", "get"),
        ("0", "1.0", "set"),
        ("0", "2.0", "get"),
        ("0", "2.0", "set"),
    ]
    for row, (interval, op) in zip(
        rows, [(i, op) for i in model.intervals for op in sorted(i["ops"])], strict=True
    ):
        vals = interval["ops"][op]
        assert int(row["count"]) == vals["count"]
        assert float(row["per_s"]) == round(vals["per_s"], 1)
        assert float(row["p50_us"]) == round(vals["p50_us"], 3)
        # the interval's own figures, repeated on each op's row
        assert int(row["errors"]) == interval["errors"] == 1
        assert float(row["cpu_s"]) == 0.25
        assert row["offered_per_s"] == ""  # closed loop: nothing offered


def open_loop_run(late: list[dict[str, int]]) -> RunResult:
    """``two_round_run("open")`` with an offered rate, and ``late[i]`` (op -> requests
    sent late) noted in its i-th interval."""
    run = two_round_run("open")
    for interval, noted in zip(run.intervals, late, strict=True):
        interval.stats["offered"] = 1200
        for op, n in noted.items():
            interval.counts[op]["late"] = n
    return run


def test_an_open_loops_late_sends_are_in_each_interval_and_add_up_to_the_runs() -> None:
    late = [{"get": 7, "set": 1}, {}, {"get": 1_500}, {"set": 2}]
    run = open_loop_run(late)
    model = summarize(run)
    assert [row["late"] for row in model.intervals] == [8, 0, 1_500, 2]
    assert sum(row["late"] or 0 for row in model.intervals) == sum(
        op.outcomes.get("late", 0) for op in model.ops
    )
    rows = list(csv.DictReader(io.StringIO(interval_csv(run, model))))
    # the whole interval's, repeated on each op's row, as errors are
    assert [r["late"] for r in rows] == ["8", "8", "0", "0", "1500", "1500", "2", "2"]
    closed = summarize(two_round_run())
    assert all(row["late"] is None for row in closed.intervals)
    assert {r["late"] for r in csv.DictReader(io.StringIO(interval_csv(two_round_run())))} == {""}


def test_csv_leaves_a_percentile_with_too_few_samples_empty() -> None:
    rows = list(csv.DictReader(io.StringIO(interval_csv(two_round_run()))))
    sets = [r for r in rows if r["op"] == "set"]
    assert sets and all(r["p99_us"] == "" for r in sets)  # ~100 samples: p99 needs 1,000
    gets = [r for r in rows if r["op"] == "get"]
    assert all(float(r["p99_us"]) > 0 for r in gets)


def test_csv_counts_add_up_to_the_run_totals() -> None:
    run = two_round_run()
    rows = list(csv.DictReader(io.StringIO(interval_csv(run))))
    model = summarize(run)
    for op_row in model.ops:
        assert sum(int(r["count"]) for r in rows if r["op"] == op_row.op) == op_row.count


def test_running_totals_restart_each_round_and_average_over_elapsed() -> None:
    from kvbench.report.summary import Running

    running = Running()
    rows = [
        {"round": 0, "t_s": 1.0, "ops": {"set": {"succeeded": 10}}},
        {"round": 0, "t_s": 2.0, "ops": {"set": {"succeeded": 30}, "get": {"succeeded": 4}}},
        {"round": 1, "t_s": 0.5, "ops": {"set": {"succeeded": 5}}},
    ]
    out = [running.add(r) for r in rows]
    assert [r["total"] for r in out] == [10, 44, 5]
    assert [r["avg_per_s"] for r in out] == [10.0, 22.0, 10.0]
    assert out[1]["ops"]["set"]["total"] == 40 and out[1]["ops"]["get"]["avg_per_s"] == 2.0
