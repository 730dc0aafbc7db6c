"""``kvbench run`` over Unix sockets and IPv6 against real memcached and redis-server:
counts equal the server's counter deltas, the URL is printed and stored as given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvbench.config.targets import parse_target
from kvbench.runner.probe import fetch_stats
from tests.support import servers
from tests.support.cli import all_phase_counts, read_json, run_kvbench

pytestmark = pytest.mark.integration


def run(url: str, out: Path, *args: str, pure: bool = False) -> tuple[dict[str, Any], str]:
    result = run_kvbench(
        "run", url, "--duration", "1s", "-c", "4", "--processes", "2", "-P", "4",
        "--ratio", "set=1,get=2", "--keys", "200", "--json", str(out), "--no-save", *args,
        env={"KVBENCH_PURE_PYTHON": "1"} if pure else {},
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    return read_json(out), result.stdout


def run_memcached(url: str, tmp_path: Path) -> dict[str, Any]:
    """A run against memcached at ``url``: its sets and gets equal the server's counter
    deltas, its URL is printed and stored as given."""
    before = servers.counters(url)
    doc, stdout = run(url, tmp_path / "run.json")
    after = servers.counters(url)
    assert all_phase_counts(doc, "set") == after["cmd_set"] - before["cmd_set"]
    assert all_phase_counts(doc, "get") == after["cmd_get"] - before["cmd_get"]
    assert doc["targets"][0]["url"] == url and url in stdout
    return doc


@pytest.mark.parametrize(
    "scheme", ["memcached+unix", "memcached+binary+unix", "memcached+unix+meta"]
)
def test_memcached_on_a_unix_socket(tmp_path: Path, scheme: str) -> None:
    with servers.memcached_unix() as server:
        doc = run_memcached(f"{scheme}://{server.socket_path}", tmp_path)
    assert doc["targets"][0]["server_version"]  # preflight asked over the socket
    assert all(row["matches"] for row in doc["server"]["reconciliation"])
    assert doc["totals"]["errors"] == 0


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_redis_on_a_unix_socket_in_its_database(tmp_path: Path, pure: bool) -> None:
    with servers.redis_unix() as server:
        url = f"redis+unix://{server.socket_path}?db=3"
        before = servers.counters(url)
        doc, _ = run(url, tmp_path / "run.json", pure=pure)
        after = servers.counters(url)
        keyspace = fetch_stats(parse_target(url))
    assert all_phase_counts(doc, "set") == after["set"] - before.get("set", 0)
    assert all_phase_counts(doc, "get") == after["get"] - before.get("get", 0)
    assert "db3" in keyspace and "db0" not in keyspace  # SELECT 3 on every connection
    assert doc["targets"][0]["url"] == url


def test_memcached_on_ipv6(tmp_path: Path) -> None:
    servers.require_ipv6()
    with servers.memcached(host="::1") as server:
        run_memcached(f"memcached://[::1]:{server.port}", tmp_path)


def test_redis_on_ipv6(tmp_path: Path) -> None:
    servers.require_ipv6()
    with servers.redis(host="::1") as server:
        url = f"redis://[::1]:{server.port}/0?resp=3"
        before = servers.counters(url)
        doc, _ = run(url, tmp_path / "run.json")
        after = servers.counters(url)
    assert all_phase_counts(doc, "set") == after["set"] - before.get("set", 0)
    assert all_phase_counts(doc, "get") == after["get"] - before.get("get", 0)


def test_a_socket_nobody_listens_on_is_exit_3_in_one_line(tmp_path: Path) -> None:
    url = f"memcached+unix://{tmp_path}/missing.sock"
    result = run_kvbench("run", url, "--duration", "1s", "--no-save")
    assert result.code == 3, result.stdout + result.stderr
    assert f"cannot connect to {url}: no such file or directory" in result.stderr
    assert "Traceback" not in result.stderr
