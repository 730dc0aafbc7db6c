"""Presets end to end against real servers, shortened with flags."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kvbench.results.store import Store
from tests.support.cli import all_phase_counts, read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration


def test_memcached_storm_sets_then_gets_the_same_keys(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    result = run_kvbench(
        "run",
        "--preset",
        "memcached-storm",
        f"memcached://{fresh_memcached.address}",
        "--duration",
        "1s",
        "-c",
        "8",
        "--processes",
        "1",
        "--json",
        str(tmp_path / "storm.json"),
        "--csv",
        str(tmp_path / "storm.csv"),
        "--no-save",
        "-q",
    )
    assert result.code == 0, result.stderr
    doc = read_json(tmp_path / "storm.json")  # both steps' runs, each under its label
    assert doc["preset"] == "memcached-storm"
    assert [run["step"] for run in doc["runs"]] == ["set-only", "get-only"]
    assert [set(run["document"]["ops"]) for run in doc["runs"]] == [{"set"}, {"get"}]
    with open(tmp_path / "storm.csv", newline="") as handle:
        assert {row["step"] for row in csv.DictReader(handle)} == {"set-only", "get-only"}
    assert (
        "memcached-storm: set-only" in result.stdout
        and "memcached-storm: get-only" in result.stdout
    )
    # Both steps share the seed, so the gets ask for the keys the sets stored, in order:
    # the first min(sets, gets) all hit, whichever step did more (the compiled driver's
    # gets outrun its sets); a later get hits where the chooser drew its key before.
    # Random keys would hit about half.
    sets_doc, gets_doc = (run["document"] for run in doc["runs"])
    sets, gets = all_phase_counts(sets_doc, "set"), all_phase_counts(gets_doc, "get")
    errors = sets_doc["totals"]["errors"] + gets_doc["totals"]["errors"]
    assert min(sets, gets) - errors <= all_phase_counts(gets_doc, "get", "hit") <= gets
    assert "memcached+binary://" in result.stdout


def test_single_key_readers_sweeps_readers(fresh_redis: Server) -> None:
    result = run_kvbench(
        "run",
        "--preset",
        "single-key-readers",
        f"redis://{fresh_redis.address}",
        "--connections",
        "2,4",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--interval",
        "1s",
        "--processes",
        "1",
        "--no-save",
        "-q",
    )
    assert result.code == 0, result.stderr
    assert "sweep over connections" in result.stdout
    assert "knee:" in result.stdout


def test_preset_with_the_wrong_number_of_targets() -> None:
    result = run_kvbench("run", "--preset", "gateway-vs-native", "memcached://127.0.0.1:1")
    assert result.code == 2 and "takes 2 target(s), got 1" in result.stderr


def test_queue_preset_runs_its_three_phases_without_loss(tmp_path: Path) -> None:
    """Against the memcacheq STAND-IN of tests/support, standing in for memcacheq 0.2.1
    (not packaged).

    Its steps (write, drain, mixed) are queue runs like any: stored with their step's label, and written, each
    labelled, into the preset's files (was: refused, as it ran ``kvbench queue`` through
    click with its options as strings)."""
    from tests.support.memcacheq_standin import MemcacheqStandin

    server = MemcacheqStandin()
    server.start()
    db = str(tmp_path / "h.db")
    try:
        result = run_kvbench(
            "run",
            "--preset",
            "queue-producer-consumer",
            f"memcacheq://127.0.0.1:{server.port}/q",
            "-n",
            "20000",
            "--json",
            str(tmp_path / "steps.json"),
            "--csv",
            str(tmp_path / "steps.csv"),
            "--report",
            str(tmp_path / "steps.html"),
            "--db",
            db,
            "-q",
        )
    finally:
        server.stop()
    assert result.code == 0, result.stderr + result.stdout
    for step in ("write", "drain", "mixed"):
        assert f"queue-producer-consumer: {step}" in result.stdout
    doc = read_json(tmp_path / "steps.json")
    assert [run["step"] for run in doc["runs"]] == ["write", "drain", "mixed"]
    assert all(run["document"]["queue"]["lost"] == 0 for run in doc["runs"])
    with open(tmp_path / "steps.csv", newline="") as handle:
        assert {row["step"] for row in csv.DictReader(handle)} == {"write", "drain", "mixed"}
    assert (tmp_path / "steps.html").stat().st_size > 0
    with Store(db) as store:
        labels = [row["label"] for row in store.list_runs()]
    assert labels == [
        "queue-producer-consumer: mixed",
        "queue-producer-consumer: drain",
        "queue-producer-consumer: write",
    ]
    assert "queue-producer-consumer: mixed" in run_kvbench("history", "--db", db).stdout


def test_gateway_vs_native_compares_at_each_level(fresh_memcached: Server, tmp_path: Path) -> None:
    from tests.support import servers

    with servers.nginx_memc(fresh_memcached) as gateway:
        result = run_kvbench(
            "run",
            "--preset",
            "gateway-vs-native",
            f"http+memc://{gateway.address}/memc",
            f"memcached://{fresh_memcached.address}",
            "--connections",
            "2,4",
            "--rounds",
            "2",
            "--duration",
            "1s",
            "--processes",
            "1",
            "--json",
            str(tmp_path / "gw.json"),
            "--no-save",
            "-q",
        )
    assert result.code == 0, result.stderr
    assert f"A = http+memc://{gateway.address}/memc" in result.stdout
    doc = read_json(tmp_path / "gw.json")  # each level's pair of runs and its comparison
    assert [row["connections"] for row in doc["comparison"]] == [2.0, 4.0]
    assert len(doc["runs"]) == 4 and doc["runs"][0]["connections_target"].startswith("2 http")
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in result.stdout.splitlines()
        if line.startswith("│")
    ]
    assert [row[0] for row in rows] == ["2", "4"]
    for row in rows:
        assert row[1] != "0" and row[2] != "0" and row[3].endswith("%") and row[-1] == "ok"
