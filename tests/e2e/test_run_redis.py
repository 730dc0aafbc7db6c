"""``kvbench run`` end to end against a real redis-server: counts equal INFO commandstats."""

from __future__ import annotations

import socket
from pathlib import Path

import hiredis
import pytest

from kvbench.config.targets import parse_target
from kvbench.engine import fastpath
from kvbench.runner.probe import fetch_stats
from tests.support import fake_servers, pump_oracle, servers
from tests.support.cli import all_phase_counts, read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration


def command_calls(url: str) -> dict[str, int]:
    """``cmdstat_get:calls=12,...`` -> {"get": 12}."""
    stats = fetch_stats(parse_target(url))
    calls = {}
    for name, value in stats.items():
        if name.startswith("cmdstat_"):
            fields = dict(part.split("=") for part in value.split(","))
            calls[name.removeprefix("cmdstat_")] = int(fields["calls"])
    return calls


@pytest.mark.parametrize(
    ("query", "pure", "driver"),
    [
        ("", False, "compiled loop"),
        ("", True, "python (KVBENCH_PURE_PYTHON is set)"),
        ("?resp=3", False, "compiled loop"),
        ("?resp=3", True, "python (KVBENCH_PURE_PYTHON is set)"),
    ],
)
def test_client_counts_equal_commandstats(
    fresh_redis: Server, tmp_path: Path, query: str, pure: bool, driver: str
) -> None:
    if driver.startswith("compiled") and not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    url = f"redis://{fresh_redis.address}/0{query}"
    before = command_calls(url)
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run",
        url,
        "--duration",
        "1s",
        "-c",
        "4",
        "--processes",
        "2",
        "-P",
        "8",
        "--ratio",
        "set=1,get=2,delete=1,incr=1",
        "--keys",
        "300",
        "--json",
        str(out),
        "--no-save",
        env={fastpath.PURE_PYTHON_ENV: "1"} if pure else {},
    )
    assert result.code == 0, result.stderr
    after = command_calls(url)
    doc = read_json(out)
    assert doc["totals"]["errors"] == 0
    for op, command in (("get", "get"), ("set", "set"), ("delete", "del"), ("incr", "incrby")):
        client = all_phase_counts(doc, op)
        server = after.get(command, 0) - before.get(command, 0)
        if command == "incrby" and server == 0:  # INCR when the delta is 1
            server = after.get("incr", 0) - before.get("incr", 0)
        assert client == server, (op, client, server)
    assert doc["ops"]["get"]["hit_ratio"] is not None
    assert doc["targets"][0]["server_version"].startswith("7.")
    assert doc["environment"]["driver"] == driver


def test_database_number_is_selected(fresh_redis: Server, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run",
        f"redis://{fresh_redis.address}/3",
        "-n",
        "200",
        "--ratio",
        "1:0",
        "--keys",
        "50",
        "-c",
        "2",
        "--processes",
        "1",
        "--json",
        str(out),
        "--no-save",
    )
    assert result.code == 0, result.stderr
    info = fetch_stats(parse_target(f"redis://{fresh_redis.address}"))
    assert "db3" in info and "db0" not in info


def test_password_is_used_and_never_stored(tmp_path: Path) -> None:
    with servers.redis("--requirepass", "s3cret") as server:
        out = tmp_path / "run.json"
        db = tmp_path / "h.db"
        result = run_kvbench(
            "run",
            f"redis://:s3cret@{server.address}",
            "--duration",
            "1s",
            "-c",
            "2",
            "--processes",
            "1",
            "--json",
            str(out),
            "--db",
            str(db),
        )
        assert result.code == 0, result.stderr
        assert "s3cret" not in out.read_text()
        assert b"s3cret" not in db.read_bytes()
        assert "s3cret" not in result.stdout
        wrong = run_kvbench(
            "run", f"redis://:nope@{server.address}", "--duration", "1s", "--no-save"
        )
        assert wrong.code == 3
        assert len(wrong.stderr.strip().splitlines()) == 1
        assert "WRONGPASS" in wrong.stderr or "invalid" in wrong.stderr
        missing = run_kvbench("run", f"redis://{server.address}", "--duration", "1s", "--no-save")
        assert missing.code == 3
        assert "NOAUTH" in missing.stderr


def test_redis_keys_are_not_held_to_memcached_limits(fresh_redis: Server) -> None:
    """A 300-byte prefix with a space: fine for Redis (memcached's 250 bytes do not apply)."""
    prefix = "k " + "x" * 298
    result = run_kvbench(
        "run",
        f"redis://{fresh_redis.address}",
        "--key-prefix",
        prefix,
        "--keys",
        "50",
        "--ratio",
        "set=1,incr=1",
        "--requests",
        "200",
        "-c",
        "2",
        "--processes",
        "1",
        "--no-save",
        "--no-live",
    )
    assert result.code == 0, result.stderr
    with socket.create_connection((fresh_redis.host, fresh_redis.port), timeout=5) as sock:
        sock.sendall(hiredis.pack_command(("KEYS", "*")))  # type: ignore[arg-type]
        reader = hiredis.Reader()
        while (keys := reader.gets()) is False:
            reader.feed(sock.recv(65536))
    assert keys and all(key.startswith(prefix.encode()) for key in keys)
    assert any(key.startswith(prefix.encode() + b"counter:") for key in keys)  # incr's keys


def test_open_loop_after_a_preload_counts_every_reply(fresh_redis: Server, tmp_path: Path) -> None:
    # The preload's requests stay listed in the FIFO (closed loop, no intended times);
    # the open loop's intended times must line up with the ops after them. They did not
    # once: the worker died folding more ops than latencies.
    url = f"redis://{fresh_redis.address}"
    before = command_calls(url)
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run", url, "--preload", "--keys", "100", "--rate", "2000", "--duration", "1s",
        "-c", "4", "--processes", "2", "--json", str(out), "--no-save", "--no-live",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    doc = read_json(out)
    after = command_calls(url)
    assert all_phase_counts(doc, "get") == after["get"] - before.get("get", 0)
    assert all_phase_counts(doc, "set") == after["set"] - before.get("set", 0)
    hist = sum(op["count"] for op in doc["ops"].values())
    assert hist == doc["totals"]["ops"] > 0


@pytest.mark.parametrize("driver", ["compiled", "python"])
def test_resp3_push_messages_answer_no_request(tmp_path: Path, driver: str) -> None:
    """A RESP3 server may push a message at any time, between replies: both drivers skip
    it, attribute no reply to the wrong request, and count every reply the server sent
    (only a fake server pushes to a client that did not ask)."""
    if driver == "compiled":
        pump_oracle.require_compiled()
    out = tmp_path / "run.json"
    with fake_servers.pushing() as (port, counts):
        result = run_kvbench(
            "run",
            f"redis://127.0.0.1:{port}/0?resp=3",
            *("--duration", "1s", "-c", "2", "-P", "4", "--processes", "1", "--ratio", "1:1"),
            *("--no-save", "--json", str(out)),
            env={fastpath.PURE_PYTHON_ENV: "1"} if driver == "python" else {},
        )
    assert result.code == 0, result.stderr + result.stdout
    doc = read_json(out)
    assert doc["environment"]["driver"].startswith(
        "compiled loop" if driver == "compiled" else "python"
    )
    assert doc["status"] == "ok" and doc["totals"]["errors"] == 0
    # (the fake's rule: a push before every third GET and SET, and after each read)
    assert counts[b"GET"] >= 3 and counts[b"PUSH"] >= counts[b"GET"] // 3
    assert all_phase_counts(doc, "get", "miss") == all_phase_counts(doc, "get") == counts[b"GET"]
    assert all_phase_counts(doc, "set", "stored") == all_phase_counts(doc, "set") == counts[b"SET"]


def test_a_run_failing_on_error_replies_says_what_the_server_said(
    fresh_redis: Server, tmp_path: Path
) -> None:
    """Redis at its maxmemory refuses every SET: the run fails on error replies and says
    the server's words once for the workers that read them (it said only 'error_reply
    35,825', and a user went to redis-cli to learn why)."""
    from tests.support.redis_cluster import Node

    pump_oracle.require_compiled()
    Node(fresh_redis).call("CONFIG", "SET", "maxmemory", "1mb")
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run", f"redis://{fresh_redis.address}", "--duration", "1s", "--value-size", "10000",
        "-c", "2", "--processes", "2", "--no-save", "--json", str(out),
    )  # fmt: skip
    assert result.code == 1, result.stdout
    doc = read_json(out)
    assert doc["ops"]["set"]["outcomes"]["error_reply"] > 0
    [said] = [e for e in doc["errors"] if "the server's first error reply" in e]
    assert said.startswith("worker 0, worker 1: the server's first error reply, to a set: OOM ")
    assert said in result.stdout  # on the terminal as a warning
