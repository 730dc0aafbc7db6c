"""Exports and history end to end: ``run --csv/--hdr-log``, ``export``, ``diff``, settings.

Three short runs against one real memcached (two of 3 rounds, one of a single round) are
shared by the tests; the database error tests need no server.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from kvbench.results.store import Store
from tests.support import servers
from tests.support.cli import read_json, run_kvbench
from tests.support.runs import make_run

pytestmark = pytest.mark.integration

SHORT = ("--duration", "400ms", "-c", "2", "--processes", "1", "--ratio", "1:4", "--no-live")


@dataclass
class Runs:
    dir: Path
    db: str
    ids: dict[str, str]  # "a", "b": 3 rounds each (a CI needs 3); "single": 1 round
    address: str


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    out = tmp_path_factory.mktemp("history")
    db = str(out / "h.db")
    ids: dict[str, str] = {}
    with servers.memcached() as server:
        url = f"memcached://{server.address}"
        for name, rounds in (("a", "3"), ("b", "3"), ("single", "1")):
            result = run_kvbench(
                "run",
                url,
                *SHORT,
                "--rounds",
                rounds,
                "--db",
                db,
                "--json",
                str(out / f"{name}.json"),
                "--csv",
                str(out / f"{name}.csv"),
                "--hdr-log",
                str(out / f"{name}.hlog"),
            )
            assert result.code == 0, result.stderr
            ids[name] = read_json(out / f"{name}.json")["run_id"]
        yield Runs(out, db, ids, server.address)


def read_hdr_log(path: Path) -> list[HdrHistogram]:
    reader = HistogramLogReader(str(path), HdrHistogram(1, 60 * 10**9, 3))
    found = []
    while (h := reader.get_next_interval_histogram()) is not None:
        found.append(h)
    reader.close()
    return found


def test_hdr_log_reads_back_with_hdrh_and_counts_equal_the_runs(runs: Runs) -> None:
    doc = read_json(runs.dir / "a.json")
    assert doc["totals"]["errors"] == 0  # so every op has exactly one latency sample
    histograms = read_hdr_log(runs.dir / "a.hlog")
    counts: dict[str, int] = {}
    for h in histograms:
        counts[h.get_tag()] = counts.get(h.get_tag(), 0) + h.get_total_count()
    assert counts == {op: vals["count"] for op, vals in doc["ops"].items()}
    assert len(histograms) == len(doc["intervals"]) * len(doc["ops"])
    starts = [h.get_start_time_stamp() for h in histograms]
    assert starts == sorted(starts)  # rounds follow each other in the log


def test_csv_series_matches_the_documents_intervals(runs: Runs) -> None:
    doc = read_json(runs.dir / "a.json")
    with open(runs.dir / "a.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    expected = [
        (interval["round"], interval["t_s"], op, vals["count"], vals["per_s"])
        for interval in doc["intervals"]
        for op, vals in sorted(interval["ops"].items())
    ]
    assert [
        (int(r["round"]), float(r["t_s"]), r["op"], int(r["count"]), float(r["per_s"]))
        for r in rows
    ] == expected
    assert {int(r["round"]) for r in rows} == {0, 1, 2}
    for op, vals in doc["ops"].items():
        assert sum(int(r["count"]) for r in rows if r["op"] == op) == vals["count"]


def test_server_settings_are_stored_with_the_run(runs: Runs) -> None:
    doc = read_json(runs.dir / "a.json")
    settings = doc["server"]["settings"]
    assert settings["maxbytes"] == str(64 * 1024 * 1024)  # the fixture's -m 64
    assert settings["num_threads"] == "2"
    with Store(runs.db) as store:
        run = store.load_run(runs.ids["a"])
    assert run.server["settings"] == settings
    assert run.environment["cpu_model"] and run.config["workload"]["seed"] is not None


def test_export_writes_the_same_files_as_the_run(runs: Runs, tmp_path: Path) -> None:
    run_id = runs.ids["a"]
    result = run_kvbench(
        "export",
        run_id[:17],  # a unique prefix
        "--db",
        runs.db,
        "--json",
        str(tmp_path / "x.json"),
        "--csv",
        str(tmp_path / "x.csv"),
        "--hdr-log",
        str(tmp_path / "x.hlog"),
    )
    assert result.code == 0, result.stderr
    assert (tmp_path / "x.csv").read_text() == (runs.dir / "a.csv").read_text()
    shown = run_kvbench("show", run_id, "--json", "--db", runs.db)
    assert json.loads(shown.stdout) == read_json(tmp_path / "x.json")

    def payloads(path: Path) -> list[tuple[str, ...]]:
        # tag, start, length and histogram; the max column of a stored (decoded)
        # histogram is its bucket's estimate, so it may differ in the last digits
        lines = path.read_text().splitlines()
        return [
            tuple(line.split(",")[i] for i in (0, 1, 2, 4)) for line in lines if line[:4] == "Tag="
        ]

    assert payloads(tmp_path / "x.hlog") == payloads(runs.dir / "a.hlog")


def test_export_needs_a_file_to_write(runs: Runs) -> None:
    result = run_kvbench("export", "last", "--db", runs.db)
    assert result.code == 2
    assert "--json" in result.stderr and "Traceback" not in result.stderr


def test_diff_of_runs_with_rounds_has_a_confidence_interval(runs: Runs) -> None:
    result = run_kvbench("diff", runs.ids["a"], runs.ids["b"], "--db", runs.db)
    assert result.code == 0, result.stderr
    assert "95% CI: Welch's t over 3 and 3 rounds" in result.stdout
    assert "no confidence interval" not in result.stdout
    as_json = run_kvbench("diff", runs.ids["a"], runs.ids["b"], "--db", runs.db, "--json")
    doc = json.loads(as_json.stdout)
    total = next(
        c for c in doc["changes"] if c["op"] == "total" and c["metric"] == "throughput_per_s"
    )
    assert total["ci95"][0] <= total["change"] <= total["ci95"][1]
    assert total["flag"] in ("within noise", "regression", "improvement")
    assert doc["complete_rounds"] == {"a": 3, "b": 3}


def test_diff_with_a_single_round_run_says_no_ci_is_possible(runs: Runs) -> None:
    result = run_kvbench("diff", runs.ids["a"], runs.ids["single"], "--db", runs.db)
    assert result.code == 0, result.stderr
    assert "no confidence interval is possible" in result.stdout
    assert "config.load.rounds: 3 -> 1" in result.stdout
    assert "regression beyond the noise" not in result.stdout


def test_diff_fails_on_a_regression_when_asked(tmp_path: Path) -> None:
    """Fixed runs stored directly: B's throughput is 20% lower in every round."""
    db = str(tmp_path / "h.db")
    with Store(db) as store:
        a = [{"get": (10_000, 500_000)}, {"get": (10_100, 500_000)}, {"get": (10_050, 500_000)}]
        b = [{"get": (8_000, 500_000)}, {"get": (8_010, 500_000)}, {"get": (8_005, 500_000)}]
        store.save_run(make_run("r-a", a))
        store.save_run(make_run("r-b", b))
    plain = run_kvbench("diff", "r-a", "r-b", "--db", db)
    assert plain.code == 0 and "regression beyond the noise" in plain.stdout
    strict = run_kvbench("diff", "r-a", "r-b", "--db", db, "--fail-on-regression")
    assert strict.code == 1
    assert run_kvbench("diff", "r-b", "r-a", "--db", db, "--fail-on-regression").code == 0


def assert_one_line_error(stderr: str) -> None:
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvbench: error:"), stderr


def test_a_database_from_a_newer_kvbench_is_one_line_exit_5(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    Store(str(db)).close()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO migrations (name, applied_at) VALUES ('9999_from_the_future', 'x')"
        )
    result = run_kvbench("history", "--db", str(db))
    assert result.code == 5
    assert_one_line_error(result.stderr)
    assert "newer kvbench" in result.stderr


def test_a_corrupt_database_file_is_one_line_exit_5(tmp_path: Path) -> None:
    db = tmp_path / "corrupt.db"
    db.write_bytes(b"this is not an SQLite database\n" * 100)
    for args in (("history",), ("show", "last"), ("diff", "a", "b"), ("export", "a", "--csv", "x")):
        result = run_kvbench(*args, "--db", str(db))
        assert result.code == 5, (args, result.stderr)
        assert_one_line_error(result.stderr)
