"""Connections accounted and server restarts told, against real servers.

memcached over its ``-c`` limit accepts a connection, writes ``ERROR Too many open
connections`` and closes it; a server killed mid-run refuses reconnects until it is back,
as another process whose counters start from zero (memcached: another pid; Redis: another
run_id).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import Any

import pytest

from kvbench.engine import fastpath
from tests.support import servers
from tests.support.cli import read_json, read_until, run_kvbench, start_kvbench

pytestmark = pytest.mark.integration


def stat(doc: dict[str, Any], when: str, name: str) -> int:
    return int(doc["server"][when]["stats"].get(name, 0))


@pytest.mark.parametrize(
    ("start", "limit", "scheme"),
    [
        (lambda: servers.memcached("-c", "64"), 64, "memcached"),
        (lambda: servers.redis("--maxclients", "40"), 40, "redis"),
    ],
    ids=["memcached", "redis"],
)
def test_connections_over_the_servers_limit_are_counted_and_a_verdict(
    start: Callable[[], AbstractContextManager[servers.Server]],
    limit: int,
    scheme: str,
    tmp_path: Path,
) -> None:
    out = tmp_path / "run.json"
    with start() as server:
        result = run_kvbench(
            "run",
            f"{scheme}://{server.address}",
            "-c",
            "200",
            "--processes",
            "2",
            "--duration",
            "2s",
            "--json",
            str(out),
            "--no-save",
        )
    # A run that could not open the connections it was asked for did not measure what
    # was asked: failed, with the count and the server's own limit.
    assert result.code == 1, result.stderr
    doc = read_json(out)
    assert doc["status"] == "failed"
    [status] = [line for line in result.stdout.splitlines() if line.startswith("status:")]
    name = "maxconns" if scheme == "memcached" else "maxclients"
    assert "of the 200 connections asked for were live" in status
    assert f"(its limit: {name} {limit})" in status
    connections = doc["connections"]
    refused = connections["connect_resets"] + connections["connect_resets_before"]
    assert connections["asked"] == 200 and connections["connects"] >= 200
    assert 0 < connections["live_min"] <= limit
    assert refused >= 200 - connections["live_min"]
    # The server's own count of the connections it refused: ours, and the side
    # connection's interval samples that found it full (each a sample missing from the run).
    server_rejected = stat(doc, "after", "rejected_connections") - stat(
        doc, "before", "rejected_connections"
    )
    missing_samples = len(doc["intervals"]) - len(doc["server"]["intervals"])
    assert refused <= server_rejected <= refused + missing_samples
    [verdict] = [v for v in doc["verdicts"] if v["id"] == "connections.live"]
    assert verdict["evidence"]["asked"] == 200
    assert verdict["evidence"]["live_min"] == connections["live_min"]
    assert f"live conns {min(r['connections_live'] for r in doc['intervals'])}/200" in (
        result.stdout
    )
    assert "a reply arrived with no request pending" not in result.stdout  # a refusal, not that


def run_across_a_restart(
    start: Callable[..., AbstractContextManager[servers.Server]],
    url: str,
    tmp_path: Path,
    *flags: str,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str]:
    """Run 6 s; kill the server after the first interval, start it again 1.5 s later on
    the same port. Returns the document and the output."""
    out = tmp_path / "run.json"
    with start() as first:
        port = first.port
        proc = start_kvbench(
            "run",
            url.format(port=port),
            "--duration",
            "6s",
            "-c",
            "4",
            "--processes",
            "1",
            "-P",
            "4",
            "--json",
            str(out),
            "--no-save",
            *flags,
            env=env,
        )
        lines = read_until(proc, "ops/s")
        first.proc.kill()
        first.proc.wait()
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1.5)  # the outage: reconnects are refused
    with start(port=port):
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    return read_json(out), "".join(lines) + stdout


def check_outage_and_restart(
    doc: dict[str, Any], evidence_name: str, closed_loop: bool = True
) -> None:
    rows = doc["intervals"]
    down = [r for r in rows if r["connection_errors"]]
    assert down, rows  # refused reconnects are errors of the seconds they happened in
    assert all(r["errors"] >= r["connection_errors"] for r in rows)
    connections = doc["connections"]
    assert connections["connect_failures"] == sum(r["connection_errors"] for r in rows)
    assert connections["reconnect_attempts"] >= connections["connect_failures"] + 4
    assert connections["reconnects"] >= 4
    # each of the 4 live connections the server's death ended is noted, with its reason
    assert re.search(r"\bconn_lost 4 times(, |\))", " ".join(doc["errors"])), doc["errors"]
    op_errors = sum(op["errors"] for op in doc["ops"].values())
    # the requests in flight when the server died: conn_error (an open loop of a request
    # every 0.5 ms, answered in tens of us, may have none in flight then)
    assert op_errors > 0 or not closed_loop
    assert doc["totals"]["errors"] == op_errors + connections["errors"]
    assert rows[-1]["per_s"] > 0 and rows[-1]["connections_live"] == 4  # back at full load
    server = doc["server"]
    assert server["reconciliation"] == [] and server["not_comparable"]
    [restart] = server["restarts"]
    assert restart["evidence"].startswith(evidence_name)
    assert server["cpu_cores"] is None or server["cpu_cores"] >= 0
    assert "server.restarted" in {v["id"] for v in doc["verdicts"]}


def test_memcached_killed_and_restarted_mid_run(tmp_path: Path) -> None:
    doc, stdout = run_across_a_restart(servers.memcached, "memcached://127.0.0.1:{port}", tmp_path)
    check_outage_and_restart(doc, "pid ")
    assert "not comparable, the server restarted (pid " in stdout


def test_redis_killed_and_restarted_mid_run(tmp_path: Path) -> None:
    doc, stdout = run_across_a_restart(servers.redis, "redis://127.0.0.1:{port}", tmp_path)
    check_outage_and_restart(doc, "process_id ")
    assert "not comparable, the server restarted (process_id " in stdout


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_an_open_loop_rides_out_a_restart_on_schedule(tmp_path: Path, pure: bool) -> None:
    """Open loop on either driver: the requests that came due during the outage wait (and
    go out late) instead of being dropped, and the reconnected connections send nothing
    off schedule (they used to fill their pipelines: requests without intended times)."""
    if not pure and not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    doc, _ = run_across_a_restart(
        servers.memcached,
        "memcached://127.0.0.1:{port}",
        tmp_path,
        "--rate",
        "2000",
        "--max-lag",
        "10s",
        env={fastpath.PURE_PYTHON_ENV: "1"} if pure else {},
    )
    check_outage_and_restart(doc, "pid ", closed_loop=False)
    assert doc["environment"]["driver"].startswith("python" if pure else "compiled")
    offered = round(sum(r["offered_per_s"] * r["length_s"] for r in doc["intervals"]))
    # nothing sent but the schedule (totals.ops adds the refused reconnects: not requests)
    requests = sum(
        n for op in doc["ops"].values() for name, n in op["outcomes"].items() if name != "late"
    )
    assert requests <= offered
    # A client that caught up after the outage sent (nearly) all of it; one whose core was
    # taken by other work could not, and the run says so (it never drops in silence).
    caught_up = requests >= 0.95 * offered
    assert caught_up or "open.achieved" in {v["id"] for v in doc["verdicts"]}
    outcomes = doc["ops"]["get"]["outcomes"]
    assert outcomes.get("late", 0) > 0 and outcomes.get("dropped", 0) == 0
