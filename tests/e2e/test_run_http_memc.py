"""``kvbench run http+memc://`` end to end: nginx + memc in front of a real memcached."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvbench.config.targets import parse_target
from kvbench.runner.probe import fetch_stats
from tests.support import servers
from tests.support.agreement import assert_outputs_agree
from tests.support.cli import Result, all_phase_counts, kvbench_argv, read_json, run_kvbench
from tests.support.servers import Server, counters

pytestmark = pytest.mark.integration


@pytest.fixture
def gateway(fresh_memcached: Server) -> Iterator[Server]:
    with servers.nginx_memc(fresh_memcached) as server:
        yield server


def memcached_stats(server: Server) -> dict[str, int]:
    raw = fetch_stats(parse_target(f"memcached://{server.address}"))
    return {k: int(v) for k, v in raw.items() if v.isdigit()}


def test_client_counts_equal_the_backing_memcached_deltas(gateway: Server, tmp_path: Path) -> None:
    memcached = gateway.extra["memcached"]
    assert isinstance(memcached, Server)
    before = memcached_stats(memcached)
    out = tmp_path / "run.json"
    url = f"http+memc://{gateway.address}/memc?stats=memcached://{memcached.address}"
    result = run_kvbench(
        "run", url, "--duration", "2s", "-c", "4", "-P", "1", "--processes", "1",
        "--ratio", "1:3", "--keys", "500", "--seed", "7", "--json", str(out), "--no-save",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    after = memcached_stats(memcached)
    doc = read_json(out)
    assert doc["status"] == "ok"
    assert doc["totals"]["ops"] > 500
    assert doc["totals"]["errors"] == 0
    assert doc["ops"]["get"]["outcomes"].get("hit", 0) > 0
    assert doc["ops"]["set"]["outcomes"]["stored"] > 0
    assert all_phase_counts(doc, "get") == after["cmd_get"] - before["cmd_get"]
    assert all_phase_counts(doc, "set") == after["cmd_set"] - before["cmd_set"]
    assert all_phase_counts(doc, "get", "hit") == after["get_hits"] - before["get_hits"]
    # ?stats= makes the run reconcile against the backing memcached by itself.
    rows = doc["server"]["reconciliation"]
    assert {row["name"] for row in rows} >= {"get (keys)", "set"}
    assert all(row["matches"] for row in rows)
    version = doc["targets"][0]["server_version"]
    assert version.startswith("nginx/") and ", memcached 1." in version


def test_without_stats_there_is_no_reconciliation(gateway: Server, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run", f"http+memc://{gateway.address}/memc", "--duration", "1s", "-c", "2",
        "--processes", "1", "--ratio", "set=1,get=4,delete=1,incr=1", "--json", str(out),
        "--no-save",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    doc = read_json(out)
    assert doc["totals"]["errors"] == 0
    assert set(doc["ops"]) == {"get", "set", "delete", "incr"}
    assert doc["server"]["reconciliation"] == []


def test_stopping_memcached_mid_run_fails_the_run_with_its_502s(
    gateway: Server, tmp_path: Path
) -> None:
    """Seen: 94,717 502s reported as 15,786 ops/s, status ok, exit 0."""
    memcached = gateway.extra["memcached"]
    assert isinstance(memcached, Server)
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    proc = subprocess.Popen(
        kvbench_argv(
            "run", f"http+memc://{gateway.address}/memc", "--duration", "4s", "-c", "4",
            "-P", "1", "--processes", "1", "--json", str(out), "--db", db, "--no-live",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    # stop memcached once the load reaches it (the window is open), not after a sleep
    url, deadline = f"memcached://{memcached.address}", time.monotonic() + 60
    while counters(url).get("cmd_get", 0) < 200 and proc.poll() is None:
        assert time.monotonic() < deadline, "the run's gets never reached memcached"
        time.sleep(0.02)
    memcached.stop()
    stdout, stderr = proc.communicate(timeout=60)
    doc = read_json(out)
    errors = sum(doc["ops"][op]["outcomes"].get("error_reply", 0) for op in doc["ops"])
    assert errors > 0 and doc["totals"]["error_kinds"]["error_reply"] == errors
    assert doc["ops"]["get"]["outcomes"].get("conn_error", 0) == 0  # 502s keep the connection
    # the 502s are errors with their own rate, not throughput
    assert doc["totals"]["completed"] == doc["totals"]["succeeded"] + errors
    assert_outputs_agree(Result(proc.returncode, stdout, stderr), doc, db, "failed")
    assert "error_reply" in doc["status_reasons"][0]


def test_pipeline_above_one_is_refused_with_exit_2() -> None:
    result = run_kvbench("run", "http+memc://127.0.0.1:1/memc", "-P", "4", "--no-save")
    assert result.code == 2
    assert "--pipeline" in result.stderr and "?pipeline=1" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unreachable_gateway_is_one_line_and_exit_3() -> None:
    port = servers.free_port()
    result = run_kvbench(
        "run", f"http+memc://127.0.0.1:{port}/memc", "--duration", "1s", "--no-save"
    )
    assert result.code == 3
    assert result.stderr.strip() == (
        f"kvbench: error: cannot connect to http+memc://127.0.0.1:{port}/memc: connection refused"
    )


def test_a_gateway_closing_keepalive_connections_costs_no_errors(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """nginx closes each connection after 100 requests (Connection: close): the engine sends
    nothing more on it and reopens it at once, so no request is lost to the close."""
    out = tmp_path / "run.json"
    with servers.nginx_memc(fresh_memcached, keepalive_requests=100) as gateway:
        result = run_kvbench(
            "run",
            f"http+memc://{gateway.address}/memc",
            "--duration",
            "2s",
            "-c",
            "2",
            "--processes",
            "1",
            "-P",
            "1",
            "--json",
            str(out),
            "--no-save",
            "--no-live",
        )
    assert result.code == 0, result.stderr
    doc = read_json(out)
    assert doc["totals"]["errors"] == 0
    assert doc["totals"]["completed"] > 1000
    assert (
        sum(row["reconnects"] for row in doc["intervals"]) >= doc["totals"]["completed"] // 100 - 4
    )
