"""``kvbench run --command`` end to end: results per command name, replies ok or error,
and every count equal to the server's own counter (Redis commandstats, memcached stats)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvbench.config.targets import parse_target
from kvbench.engine import fastpath
from kvbench.runner.probe import fetch_stats
from tests.support.cli import all_phase_counts, read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration

# Where the extension is not built, every run says so.
PYTHON = "python (extension not built)"


def command_calls(url: str) -> dict[str, int]:
    """``cmdstat_hset:calls=12,...`` -> {"hset": 12}."""
    calls = {}
    for name, value in fetch_stats(parse_target(url)).items():
        if name.startswith("cmdstat_"):
            fields = dict(part.split("=") for part in value.split(","))
            calls[name.removeprefix("cmdstat_")] = int(fields["calls"])
    return calls


def memcached_stats(server: Server) -> dict[str, int]:
    raw = fetch_stats(parse_target(f"memcached://{server.address}"))
    return {k: int(v) for k, v in raw.items() if v.isdigit()}


def run(url: str, out: Path, driver: str, *args: str) -> dict[str, Any]:
    result = run_kvbench(
        "run", url, "--duration", "1s", "-c", "4", "--processes", "2", "-P", "8",
        "--keys", "200", "--value-size", "32", "--json", str(out), "--no-save",
        "--max-error-rate", "100%", *args,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    doc = read_json(out)
    assert doc["environment"]["driver"] == driver
    return doc


def test_redis_commands_are_counted_per_name_and_equal_commandstats(
    fresh_redis: Server, tmp_path: Path
) -> None:
    url = f"redis://{fresh_redis.address}/0"
    before = command_calls(url)
    doc = run(
        url,
        tmp_path / "run.json",
        "compiled loop" if fastpath.compiled() else PYTHON,
        "--command", "HSET h:__key__ field __data__",
        "--command", "LPUSH l:__key__ __data__", "--command-weight", "2",
        "--command", "hset h:__key__ other x",  # the same name: one row
        "--command", "MSET s:__key__ a s:__key__ b",
        "--command", "INCRBY s:__key__ one",  # -ERR value is not an integer: an error reply
        "--ratio", "get=1",
    )  # fmt: skip
    after = command_calls(url)
    assert set(doc["ops"]) == {"get", "hset", "lpush", "mset", "incrby"}
    for name in ("hset", "lpush", "mset", "get"):
        assert set(doc["ops"][name]["outcomes"]) <= {"ok", "hit", "miss"}, name
        client = all_phase_counts(doc, name)
        assert client == after.get(name, 0) - before.get(name, 0), name
    incrby = doc["ops"]["incrby"]
    assert incrby["outcomes"] == {"error_reply": incrby["count"]}
    assert all_phase_counts(doc, "incrby") == after["incrby"] - before.get("incrby", 0)
    lpush = doc["ops"]["lpush"]["count"] / doc["ops"]["hset"]["count"]
    assert 0.7 < lpush < 1.3  # weights 2 (lpush) against 1 + 1 (the two hsets)
    assert doc["ops"]["mset"]["keys"] == 2 * doc["ops"]["mset"]["count"]
    rows = {r["name"]: r for r in doc["server"]["reconciliation"]}
    assert all(rows[name]["matches"] for name in ("hset", "lpush", "mset", "incrby", "get"))
    assert doc["totals"]["errors"] == sum(op["errors"] for op in doc["ops"].values())


def test_memcached_text_commands_meet_the_counters_memcached_keeps(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    before = memcached_stats(fresh_memcached)
    doc = run(
        f"memcached://{fresh_memcached.address}",
        tmp_path / "run.json",
        "compiled loop" if fastpath.compiled() else PYTHON,
        "--command", "set __key__ 0 60 __data__",
        "--command", "touch __key__ 60",
        "--command", "gat 0 __key__ x:__key__",
        "--command", "mg __key__ v t",
        "--command", "version",
        "--command", "no_such_command __key__",
    )  # fmt: skip
    after = memcached_stats(fresh_memcached)

    def delta(name: str) -> int:
        return after[name] - before[name]

    ops = doc["ops"]
    assert set(ops) == {"set", "touch", "gat", "mg", "version", "no_such_command"}
    assert all_phase_counts(doc, "set") == delta("cmd_set")
    touched = all_phase_counts(doc, "touch") + 2 * all_phase_counts(doc, "gat")
    assert touched == delta("cmd_touch")  # gat of two keys: two touches
    assert all_phase_counts(doc, "mg") == delta("cmd_get")
    assert ops["no_such_command"]["outcomes"] == {"error_reply": ops["no_such_command"]["count"]}
    for name in ("set", "touch", "gat", "mg", "version"):
        assert set(ops[name]["outcomes"]) == {"ok"}, name
    rows = {r["name"]: r for r in doc["server"]["reconciliation"]}
    assert rows["gat + touch"]["matches"] and rows["set"]["matches"] and rows["mg"]["matches"]


@pytest.mark.parametrize(
    ("url", "args", "message"),
    [
        ("redis://127.0.0.1:1", ["--command", "SUBSCRIBE news"], "subscribe: a subscribed"),
        ("memcached://127.0.0.1:1", ["--command", "set __key__ 0 0 5"], "byte count"),
        ("memcached+binary://127.0.0.1:1", ["--command", "touch __key__ 1"], "memcached+binary"),
        ("redis://127.0.0.1:1", ["--command-weight", "2", "--command", "PING"], "comes after"),
        ("redis://127.0.0.1:1", ["--command", 'SET "x'], "unbalanced"),
    ],
)
def test_bad_commands_are_one_line_and_exit_2_before_any_connection(
    url: str, args: list[str], message: str
) -> None:
    result = run_kvbench("run", url, "--duration", "1s", "--no-save", *args)
    assert result.code == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
