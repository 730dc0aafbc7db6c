"""``--command`` on both drivers: the Python one (the reference: hiredis parses Redis's
replies, the codec memcached's) and the compiled pump (it reads any RESP value in reply,
_pump_resp.c's ``scan_value``, and any memcached reply framed by its first line,
_pump_text.c's ``text_command``).

A fresh server for each run, one connection and one seed, so that the server sees the
same sequence from each driver: every command's count by outcome is the same, and so are
the server's own counters (Redis's commandstats, memcached's stats) and the bytes each
way. The commands are chosen for their replies: against Redis integers, bulk strings and
nulls, status and error replies (WRONGTYPE, decided by the sequence), and arrays, which
RESP3 sends as maps, sets and doubles; against memcached status lines, VALUE and VA
blocks, a STAT listing, VERSION and error lines. Closed loop and open loop; commands of
one key at most, whose chunks go packed and which the compiled stream renders itself, and
with a command of two keys, whose chunks are lists of requests rendered in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from kvbench.engine import fastpath
from tests.support import servers
from tests.support.cli import outcomes_but_late, read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration

REQUESTS = 1500
PYTHON = "python (KVBENCH_PURE_PYTHON is set)"
REDIS_COMMANDS = (
    "HSET h:__key__ f __data__",  # an integer
    "HGETALL h:__key__",  # an array; a map under RESP3
    "SADD s:__key__ __data__",
    "SMEMBERS s:__key__",  # an array; a set under RESP3
    "ZADD z:__key__ 1.5 m",
    "ZSCORE z:__key__ m",  # a bulk string or a null; a double or a null under RESP3
    "INCRBY h:__key__ 1",  # WRONGTYPE once its hash exists: an error reply
    "PING",  # +PONG
    "LPUSH l:__key__ __data__",
    "LRANGE l:__key__ 0 3",
)
MEMCACHED_COMMANDS = (
    "set __key__ 0 60 __data__",  # STORED
    "gets __key__",  # VALUE ... END, or END
    "mg __key__ v t f",  # VA <size> ..., or EN
    "touch __key__ 60",  # TOUCHED or NOT_FOUND
    "incr __key__ 1",  # CLIENT_ERROR on a value that is no number: an error reply
    "delete __key__",
    "version",
    "stats settings",  # STAT lines, END
)
# A command of two keys draws its second per request: such a mix's chunks are lists,
# each request rendered in Python; the others' go packed, rendered by the stream in C.
TWO_KEYS = {"redis": "EXISTS __key__ h:__key__", "memcached": "gat 60 __key__ x:__key__"}
# memcached's counters of what the commands did (the same on both drivers).
MEMCACHED_COUNTERS = (
    "cmd_get", "cmd_set", "cmd_touch", "get_hits", "get_misses", "touch_hits",
    "touch_misses", "delete_hits", "delete_misses", "incr_misses", "curr_items",
)  # fmt: skip


def names_of(texts: tuple[str, ...]) -> set[str]:
    return {text.split()[0].lower() for text in texts} | {"get"}


def run_both(
    tmp_path: Path,
    server: Callable[[], AbstractContextManager[Server]],
    url_of: Callable[[Server], str],
    counted: Callable[[dict[str, int]], dict[str, int]],
    texts: tuple[str, ...],
    *args: str,
) -> list[tuple[dict[str, Any], dict[str, int]]]:
    """The commands on the Python driver, then on the compiled one, each against a fresh
    server: (result document, the server's counter deltas, ``counted``'s) of each."""
    commands = [arg for text in texts for arg in ("--command", text)]
    runs = []
    for pure in (True, False):
        out = tmp_path / f"{'python' if pure else 'compiled'}.json"
        with server() as started:
            url = url_of(started)
            before = servers.counters(url)
            result = run_kvbench(
                "run", url, *commands, "--ratio", "get=1", "--requests", str(REQUESTS),
                "-c", "1", "--processes", "1", "--keys", "60", "--value-size", "24",
                "--seed", "11", "--json", str(out), "--no-save", "--no-live",
                "--max-error-rate", "100%", *args,
                env={fastpath.PURE_PYTHON_ENV: "1"} if pure else {},
            )  # fmt: skip
            after = servers.counters(url)
        assert result.code == 0, result.stderr
        deltas = {name: after.get(name, 0) - before.get(name, 0) for name in after}
        runs.append((read_json(out), counted(deltas)))
    return runs


def assert_alike(
    python: tuple[dict[str, Any], dict[str, int]],
    compiled: tuple[dict[str, Any], dict[str, int]],
    names: set[str],
) -> None:
    (py_doc, py_counted), (c_doc, c_counted) = python, compiled
    assert py_doc["environment"]["driver"] == PYTHON
    assert c_doc["environment"]["driver"] == "compiled loop"
    assert set(c_doc["ops"]) == names
    assert outcomes_but_late(c_doc) == outcomes_but_late(py_doc)
    assert c_counted == py_counted
    for doc in (py_doc, c_doc):
        assert doc["totals"]["ops"] == REQUESTS and doc["status"] == "ok"
        rows = doc["server"]["reconciliation"]
        assert rows and all(row["matches"] for row in rows), rows
        refused = sum(row["outcomes"].get("error_reply", 0) for row in doc["ops"].values())
        assert doc["totals"]["errors"] == refused > 0


def redis_url(resp: int) -> Callable[[Server], str]:
    return lambda server: f"redis://{server.address}/0?resp={resp}"


@pytest.mark.parametrize("chunks", ["packed", "lists"])
@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("loop", ["closed", "open"])
def test_both_drivers_count_the_same_redis_commands_alike(
    tmp_path: Path, resp: int, loop: str, chunks: str
) -> None:
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    pace = ["--rate", "3000", "--max-lag", "10s"] if loop == "open" else []
    texts = REDIS_COMMANDS if chunks == "packed" else (*REDIS_COMMANDS, TWO_KEYS["redis"])
    names = names_of(texts)
    python, compiled = run_both(
        tmp_path, servers.redis, redis_url(resp),
        lambda deltas: {name: deltas.get(name, 0) for name in names}, texts, *pace,
    )  # fmt: skip
    assert_alike(python, compiled, names)
    assert all(compiled[1][name] > 0 for name in names), compiled[1]
    for doc, _ in (python, compiled):
        # the sequence decides which INCRBYs meet a hash (and which hash commands then
        # meet the string it made): some do, some do not
        incrby = doc["ops"]["incrby"]["outcomes"]
        assert incrby.get("error_reply", 0) > 0 and incrby.get("ok", 0) > 0, incrby
    # The same requests and replies, byte for byte in number. The pump counts each
    # reply's bytes as they arrived; the codec recomputes them from hiredis's value, which
    # is the same but for a status reply other than +OK: "+PONG" (7 bytes) is a bytes
    # object like "$4 PONG" (10), so the Python driver's replies add up to 3 bytes a PING
    # more than arrived (resp.wire_nbytes), and its unattributed remainder goes below 0.
    py_net, c_net = python[0]["totals"]["network"], compiled[0]["totals"]["network"]
    pings = compiled[0]["ops"]["ping"]["count"]
    assert c_net == py_net | {
        "in_per_s": c_net["in_per_s"],
        "out_per_s": c_net["out_per_s"],
        "bytes_in_other": py_net["bytes_in_other"] + 3 * pings,
    }
    # (all the pump's replies attributed; under RESP3 the one connection's HELLO 3 reply,
    # a map of the server's details, is the rest)
    if resp == 2:
        assert c_net["bytes_in_other"] == 0
    else:
        assert 0 < c_net["bytes_in_other"] < 1024
    if loop == "open":
        assert compiled[0]["mode"] == "open"


@pytest.mark.parametrize("chunks", ["packed", "lists"])
@pytest.mark.parametrize("loop", ["closed", "open"])
def test_both_drivers_count_the_same_memcached_commands_alike(
    tmp_path: Path, loop: str, chunks: str
) -> None:
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    pace = ["--rate", "3000", "--max-lag", "10s"] if loop == "open" else []
    texts = (
        MEMCACHED_COMMANDS if chunks == "packed" else (*MEMCACHED_COMMANDS, TWO_KEYS["memcached"])
    )
    names = names_of(texts)

    python, compiled = run_both(
        tmp_path, servers.memcached, lambda server: f"memcached://{server.address}",
        lambda deltas: {name: deltas[name] for name in MEMCACHED_COUNTERS}, texts, *pace,
    )  # fmt: skip
    assert_alike(python, compiled, names)
    sent = compiled[1]
    assert sent["cmd_set"] > 0 and sent["get_hits"] > 0 and sent["touch_hits"] > 0, sent
    for doc, _ in (python, compiled):
        # a stored value is no number (CLIENT_ERROR), a missing key NOT_FOUND (ok)
        incr = doc["ops"]["incr"]["outcomes"]
        assert incr.get("error_reply", 0) > 0 and incr.get("ok", 0) > 0, incr
        assert set(outcomes_but_late(doc)["stats"]) == {"ok"}
    # the same requests and replies, byte for byte, each reply attributed on both drivers
    py_net, c_net = python[0]["totals"]["network"], compiled[0]["totals"]["network"]
    assert c_net == py_net | {"in_per_s": c_net["in_per_s"], "out_per_s": c_net["out_per_s"]}
    assert c_net["bytes_in_other"] == 0
    if loop == "open":
        assert compiled[0]["mode"] == "open"
