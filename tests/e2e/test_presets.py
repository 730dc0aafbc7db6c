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
        "--no-live",
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


def test_single_key_readers_reports_as_the_original(fresh_redis: Server, tmp_path: Path) -> None:
    """Each line: time since the warm-up, the interval's ops and the cumulative ops, and
    the rate per second, minute and hour; the clock and the count restart per level; the
    warm-up's ops printed; every reply checked (bad values 0) and Redis agrees."""
    import re

    from kvbench.config.targets import parse_target
    from kvbench.runner.probe import fetch_stats

    def redis_info() -> dict[str, str]:
        return fetch_stats(parse_target(f"redis://{fresh_redis.address}"))

    before = redis_info()
    result = run_kvbench(
        "run", "--preset", "single-key-readers", f"redis://{fresh_redis.address}",
        "--connections", "2,4", "--duration", "2s", "--warmup", "0.5s", "--interval", "1s",
        "--processes", "1", "--json", str(tmp_path / "skr.json"), "--no-save",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    line = re.compile(
        r"^level (\d+) \[\s*([\d.]+)s\]  ops ([\d,]+)  total ([\d,]+)  per s ([\d,]+)  "
        r"per min ([\d,]+)  per hour ([\d,]+)  err 0$"
    )
    lines = [m.groups() for m in map(line.match, result.stdout.splitlines()) if m]
    measured = 0
    for level in ("2", "4"):
        mine = [[float(x.replace(",", "")) for x in g[1:]] for g in lines if g[0] == level]
        assert [t for t, *_ in mine] == [1.0, 2.0]  # the clock restarts per level
        running = 0.0
        for _t, ops, total, per_s, per_min, per_h in mine:
            running += ops
            assert total == running  # cumulative = sum of the intervals
            assert per_min == 60 * per_s and per_h == 3600 * per_s
            assert abs(per_s - ops) <= 0.02 * ops + 1  # 1 s intervals
        warmup = re.search(rf"level {level}: warm-up ([\d,]+) ops \(excluded\)", result.stdout)
        assert warmup and int(warmup.group(1).replace(",", "")) > 0
        measured += int(running) + int(warmup.group(1).replace(",", ""))
    assert "bad values" in result.stdout
    doc = read_json(tmp_path / "skr.json")
    assert [lv["bad_values"] for lv in doc["levels"]] == [0, 0]
    # The original's figure per level: the mean rate per s, min and hour.
    for lv in doc["levels"]:
        found = re.search(
            rf"connections {lv['level']:g}: ([\d,]+) ops per s = ([\d,]+) per min = "
            r"([\d,]+) per hour",
            result.stdout,
        )
        assert found
        per_s, per_min, per_h = (int(x.replace(",", "")) for x in found.groups())
        assert abs(per_s - lv["throughput_per_s"]) <= 1  # the document's, to 0.1
        assert per_min == 60 * per_s and per_h == 3600 * per_s
    # Redis served every get the lines count, the warm-ups' and the preload's too.
    after = redis_info()
    hits = int(after["keyspace_hits"]) - int(before["keyspace_hits"])
    assert hits >= measured and int(after["keyspace_misses"]) == int(before["keyspace_misses"])


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
            "2000",
            "--json",
            str(tmp_path / "steps.json"),
            "--csv",
            str(tmp_path / "steps.csv"),
            "--report",
            str(tmp_path / "steps.html"),
            "--db",
            db,
            "--no-live",
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


def _table_rows(stdout: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in stdout.splitlines()
        if line.startswith("│")
    ]


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_gateway_vs_native_prints_the_gateway_as_a_share_of_native(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """The original's figure, recomputable from the printed means; every round printed;
    set-then-get pairs with zero misses; nginx's own request count equals the document's
    (the load's requests and kvbench's side requests); one --connections value, one level."""
    from kvbench.config.targets import parse_target
    from kvbench.runner.probe import fetch_stats
    from tests.support import servers

    rounds, per_round = 3, 400
    native = f"memcached://{fresh_memcached.address}"
    with servers.nginx_memc(fresh_memcached, log_requests=True) as gateway:
        url = f"http+memc://{gateway.address}/memc"
        result = run_kvbench(
            "run", "--preset", "gateway-vs-native", url, native,
            "--connections", "2", "--rounds", str(rounds),
            "--requests-per-round", str(per_round), "--processes", "1",
            "--json", str(tmp_path / "gw.json"), "--no-save", "--no-live",
        )  # fmt: skip
        nginx_requests = len(Path(gateway.extra["access_log"]).read_text().splitlines())
    assert result.code == 0, result.stderr + result.stdout
    doc = read_json(tmp_path / "gw.json")
    assert [row["connections"] for row in doc["comparison"]] == [2.0]  # one level only
    (row,) = doc["comparison"]
    table = _table_rows(result.stdout)
    a, b = (r for r in table if r[1] in ("A", "B"))
    (share,) = (r for r in table if r[1].endswith("%"))
    assert a[0] == share[0] == "2"
    for printed, side in ((a, row["first"]), (b, row["second"])):
        rates = [_number(x) for x in printed[2].split()]
        assert rates == side["rounds_per_s"] and len(rates) == rounds
        mean, low, high = (_number(x) for x in printed[3:6])
        assert abs(mean - sum(rates) / rounds) <= 0.5 and (low, high) == (min(rates), max(rates))
        assert printed[6] == "0" and side["failed_requests"] == 0
    assert side is row["second"] and row["first"]["url"] == url and side["url"] == native
    pct = float(share[1].rstrip("%"))
    assert abs(pct - 100 * _number(a[3]) / _number(b[3])) <= 0.1
    assert pct == row["first_pct_of_second"]
    sentence = f"connections 2: {url} = {pct:.1f}% of {native} ({a[3]} / {b[3]} ops/s)"
    assert sentence in result.stdout
    assert f"A = {url}" in result.stdout and f"B = {native}" in result.stdout
    assert "paired-ratio CI" in result.stdout
    # Each op a set then a get of the same key: every get hit and returned the value set.
    gateway_doc, native_doc = (run["document"] for run in doc["runs"])
    assert native_doc["environment"]["driver"] == "compiled loop"  # (exact checks in C)
    assert gateway_doc["environment"]["driver"] == "compiled loop"  # (mapped checks in C)
    for run_doc in (gateway_doc, native_doc):
        sets, gets = all_phase_counts(run_doc, "set"), all_phase_counts(run_doc, "get")
        # A round ends after its request count: a connection may end on a set whose get
        # would have been the next request (2 connections, so 2 sets per round at most).
        assert sets + gets == rounds * per_round and 0 <= sets - gets <= 2 * rounds
        assert all_phase_counts(run_doc, "get", "miss") == 0
        assert run_doc["verify"]["mismatches"] == 0
        assert run_doc["verify"]["checked"] == all_phase_counts(run_doc, "get", "hit")
    assert fetch_stats(parse_target(native))["get_misses"] == "0"
    # nginx counted the load's requests and kvbench's side requests (its ?cmd=version).
    side = gateway_doc["server"]["side_requests"].get(url, 0)
    assert side >= rounds
    assert nginx_requests == rounds * per_round + side
