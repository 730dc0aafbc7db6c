"""``kvbench sweep`` and ``kvbench compare`` end to end against real servers."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from tests.support import servers
from tests.support.cli import read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration

SHORT = ("--duration", "500ms", "--processes", "1", "--no-live")  # rounds of half a second


def test_sweep_reports_every_level_with_a_ci_and_an_slo(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    out = tmp_path / "sweep.json"
    db = str(tmp_path / "h.db")
    result = run_kvbench(
        "sweep",
        f"memcached://{fresh_memcached.address}",
        "--connections",
        "1:3:2",
        "--rounds",
        "3",
        "--slo",
        "p99<1s",
        "--json",
        str(out),
        "--csv",
        str(tmp_path / "sweep.csv"),
        "--hdr-log",
        str(tmp_path / "sweep.hlog"),
        "--db",
        db,
        *SHORT,
    )
    assert result.code == 0, result.stderr
    doc = read_json(out)
    assert doc["axis"] == "connections" and doc["status"] == "ok"
    assert [row["level"] for row in doc["levels"]] == [1.0, 3.0]
    for row in doc["levels"]:
        assert row["status"] == "ok" and row["throughput_per_s"] > 0
        lo, hi = row["throughput_ci95_per_s"]
        assert 0 <= lo <= row["throughput_per_s"] <= hi
        assert row["slo_met"] is True
    assert doc["best_level"] == 3.0
    assert "sweep over connections" in result.stdout
    listed = run_kvbench("history", "--db", db).stdout
    assert listed.count(fresh_memcached.address) == 2
    # the levels told apart (was: two identical rows)
    assert "connections 1 " in listed and "connections 3 " in listed
    # Every level's run in one CSV and one log, each row or tag labelled with its level.
    with open(tmp_path / "sweep.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["connections"] for row in rows} == {"1", "3"}
    assert len({row["run_id"] for row in rows}) == 2
    log = (tmp_path / "sweep.hlog").read_text()
    tags = {line.split(",", 1)[0] for line in log.splitlines() if line.startswith("Tag=")}
    assert tags == {"Tag=1/get", "Tag=1/set", "Tag=3/get", "Tag=3/set"}
    reader = HistogramLogReader(str(tmp_path / "sweep.hlog"), HdrHistogram(1, 60 * 10**9, 3))
    logged = 0
    while (hist := reader.get_next_interval_histogram()) is not None:
        logged += hist.get_total_count()
    reader.close()
    assert logged == sum(int(row["count"]) for row in rows) > 0


def test_a_failing_level_is_reported_not_skipped(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    port = servers.free_port()
    result = run_kvbench(
        "sweep",
        f"memcached://127.0.0.1:{port}",
        "--pipeline",
        "1,2",
        "--json",
        str(out),
        "--csv",
        str(tmp_path / "none.csv"),
        "--no-save",
        *SHORT,
    )
    doc = read_json(out)
    assert [row["status"] for row in doc["levels"]] == ["failed", "failed"]
    assert "connection refused" in doc["levels"][0]["reason"]
    # why, under the table, a line a level (in the status cell it folded over many lines)
    for level, row in zip((1, 2), doc["levels"], strict=True):
        assert f"pipeline {level}: failed - {row['reason']}" in result.stdout
    # seen: every level refused, exit 0
    assert doc["status"] == "failed" and result.code == 1
    assert "sweep status: failed" in result.stdout
    # No run to export: said, not silently skipped.
    assert f"--csv: no run completed, nothing written to {tmp_path / 'none.csv'}" in result.stdout


def test_an_unwritable_json_path_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    result = run_kvbench(
        "sweep",
        f"memcached://127.0.0.1:{servers.free_port()}",
        "--pipeline",
        "1,2",
        "--json",
        str(tmp_path / "missing-dir" / "x.json"),
        "--no-save",
        *SHORT,
    )
    assert result.code == 2
    assert "--json: cannot write" in result.stderr and "Traceback" not in result.stderr


def test_sweep_needs_exactly_one_ranged_axis() -> None:
    result = run_kvbench("sweep", "memcached://127.0.0.1:1", "--connections", "4")
    assert result.code == 2
    assert "give exactly one of --connections, --pipeline or --rate as a range" in result.stderr


def test_compare_interleaves_rounds_and_gives_ratios(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    out, db = tmp_path / "compare.json", str(tmp_path / "h.db")
    a = f"memcached://{fresh_memcached.address}"
    b = f"memcached+meta://{fresh_memcached.address}"
    result = run_kvbench(
        "compare",
        a,
        b,
        "--rounds",
        "3",
        "-c",
        "2",
        "--json",
        str(out),
        "--csv",
        str(tmp_path / "compare.csv"),
        "--db",
        db,
        *SHORT,
    )
    assert result.code == 0, result.stderr
    doc = read_json(out)
    assert doc["status"] == "ok"
    (row,) = doc["comparison"]
    assert row["baseline"] == a and row["target"] == b and row["rounds_paired"] == 3
    lo, hi = row["throughput_ratio_ci95"]
    assert 0 < lo <= row["throughput_ratio"] <= hi and 0.2 < row["throughput_ratio"] < 5
    assert [len(t["rounds"]) for t in doc["targets"]] == [3, 3]
    seeds = {t["config"]["workload"]["seed"] for t in doc["targets"]}
    assert len(seeds) == 1  # the same workload against both
    assert f"{b}: " in result.stdout and f"of {a} throughput (95% CI" in result.stdout
    with open(tmp_path / "compare.csv", newline="") as handle:
        assert {row["target"] for row in csv.DictReader(handle)} == {a, b}
    # Each target's server samples belong to its own rounds, and it is reconciled against
    # its rounds only, though both share one memcached (seen: every sample round 0, no
    # reconciliation, ~75 spurious server.* lines in diff).
    for target in doc["targets"]:
        assert {s["round"] for s in target["server"]["intervals"]} == {0, 1, 2}
        rows = target["server"]["reconciliation"]
        assert {r["name"] for r in rows} >= {"get (keys)", "set"}
        assert all(r["matches"] for r in rows), rows
    diff = run_kvbench("diff", doc["targets"][0]["run_id"], doc["targets"][1]["run_id"], "--db", db)
    assert diff.code == 0, diff.stderr
    assert "server." not in diff.stdout


def test_compare_with_a_failing_target_exits_1(fresh_memcached: Server, tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    with servers.memcached("-I", "1k", "-o", "slab_chunk_max=512") as small:
        a = f"memcached://{fresh_memcached.address}"
        b = f"memcached://{small.address}"  # refuses every 2,000-byte set
        result = run_kvbench(
            "compare", a, b, "--rounds", "1", "-c", "2", "--value-size", "2000",
            "--allow-oversize",
            "--ratio", "1:1", "--json", str(out), "--no-save", *SHORT,
        )  # fmt: skip
    assert result.code == 1, result.stderr
    doc = read_json(out)
    assert doc["status"] == "failed"
    assert [t["status"] for t in doc["targets"]] == ["ok", "failed"]
    (row,) = doc["comparison"]
    assert (row["status"], row["baseline_status"]) == ("failed", "ok")
    # B's throughput is its gets only: every set failed, and an error is never throughput
    # (how it compares with A's is the machine's to decide: A and B ran at other moments)
    base, failing = doc["targets"]
    sets, gets = failing["ops"]["set"], failing["ops"]["get"]
    assert sets["errors"] == sets["count"] > 0 and sets["succeeded"] == 0
    assert failing["totals"]["throughput_per_s"] == pytest.approx(
        gets["succeeded"] / failing["window_s"], rel=1e-3
    )
    assert row["throughput_ratio"] == pytest.approx(
        failing["totals"]["throughput_per_s"] / base["totals"]["throughput_per_s"], rel=1e-3
    )
    assert f"{b} failed" in result.stdout and "95% CI needs 3 rounds" in result.stdout
    assert "compare status: failed" in result.stdout
