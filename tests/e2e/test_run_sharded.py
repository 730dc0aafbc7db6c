"""Several memcached servers in one run (ketama), and nutcracker as a target of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbench.config.targets import parse_target
from kvbench.runner.probe import fetch_stats
from kvbench.workload.ketama import KetamaRing
from kvbench.workload.keys import build_key_table
from tests.support import servers
from tests.support.cli import all_phase_counts, read_json, run_kvbench

pytestmark = pytest.mark.integration


def stats(server: servers.Server) -> dict[str, int]:
    raw = fetch_stats(parse_target(f"memcached://{server.address}"))
    return {k: int(v) for k, v in raw.items() if v.isdigit()}


def test_keys_land_where_ketama_places_them_and_counts_reconcile(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    with servers.memcached() as a, servers.memcached() as b:
        before = [stats(a), stats(b)]
        result = run_kvbench(
            "run",
            f"memcached://{a.address}",
            f"memcached://{b.address}",
            "--preload",
            "--keys",
            "1000",
            "--key-prefix",
            "shard:",
            "--ratio",
            "1:3",
            "--duration",
            "1s",
            "-c",
            "4",
            "--processes",
            "2",
            "--json",
            str(out),
            "--no-save",
            "--no-live",
        )
        assert result.code == 0, result.stderr
        after = [stats(a), stats(b)]
    # The run's header line names both servers (was: only the first).
    assert f"kvbench: memcached://{a.address}, memcached://{b.address}  4 conn" in result.stdout
    doc = read_json(out)
    ring = KetamaRing([a.address, b.address])
    placed = [len(g) for g in ring.partition(build_key_table("shard:", 1000))]
    assert [after[i]["curr_items"] for i in range(2)] == placed  # each holds exactly its keys
    assert doc["ops"]["get"]["hit_ratio"] == 1.0  # every get went to the server holding its key
    sets = sum(after[i]["cmd_set"] - before[i]["cmd_set"] for i in range(2))
    gets = sum(after[i]["cmd_get"] - before[i]["cmd_get"] for i in range(2))
    assert all_phase_counts(doc, "set") == sets and all_phase_counts(doc, "get") == gets
    shares = {s["url"]: s["completed"] for s in doc["servers"]}
    assert sum(shares.values()) == doc["totals"]["completed"] and min(shares.values()) > 0
    assert all(r["matches"] for r in doc["server"]["reconciliation"])


def test_nutcracker_is_a_target_of_its_own(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    with servers.memcached() as a, servers.memcached() as b, servers.nutcracker([a, b]) as proxy:
        result = run_kvbench(
            "run",
            f"memcached://{proxy.address}",
            "--preload",
            "--keys",
            "500",
            "--ratio",
            "0:1",
            "--duration",
            "1s",
            "-c",
            "2",
            "--processes",
            "1",
            "--json",
            str(out),
            "--no-save",
            "--no-live",
        )
        assert result.code == 0, result.stderr
        items = [stats(a)["curr_items"], stats(b)["curr_items"]]
    doc = read_json(out)
    assert doc["ops"]["get"]["hit_ratio"] == 1.0
    assert sum(items) == 500 and min(items) > 0  # the proxy spread them over both


def test_several_redis_targets_are_refused() -> None:
    result = run_kvbench("run", "redis://127.0.0.1:1", "redis://127.0.0.1:2")
    assert result.code == 2 and "memcached targets only" in result.stderr
