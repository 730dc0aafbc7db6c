"""``--command`` against Redis on both drivers: the Python one (the reference: hiredis
parses the replies) and the compiled pump (it sends each command's rendered request and
reads any RESP value in reply: _pump_resp.c's ``scan_value``).

A fresh redis-server for each run, one connection and one seed, so that the server sees
the same sequence from each driver: every command's count by outcome is the same, and so
are Redis's own call counts (commandstats) and the bytes each way. The commands are
chosen for their replies' types: integers, bulk strings and nulls, status replies, error
replies (WRONGTYPE, decided by the sequence), and arrays, which RESP3 sends as maps, sets
and doubles; closed loop and open loop, RESP2 and RESP3; commands of one key at most,
whose chunks go packed and which the compiled stream renders itself, and with a command
of two keys, whose chunks are lists of requests rendered in Python.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvbench.config.targets import parse_target
from kvbench.engine import fastpath
from kvbench.runner.probe import fetch_stats
from tests.support import servers
from tests.support.cli import read_json, run_kvbench

pytestmark = pytest.mark.integration

REQUESTS = 1500
PYTHON = "python (KVBENCH_PURE_PYTHON is set)"
COMMANDS = (
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
# A command of two keys draws its second per request: such a mix's chunks are lists,
# each request rendered in Python; the others' go packed, rendered by the stream in C.
TWO_KEYS = "EXISTS __key__ h:__key__"


def command_calls(url: str) -> dict[str, int]:
    """Redis's call count of each command (``cmdstat_hset:calls=12,...``)."""
    calls = {}
    for name, value in fetch_stats(parse_target(url)).items():
        if name.startswith("cmdstat_"):
            fields = dict(part.split("=") for part in value.split(","))
            calls[name.removeprefix("cmdstat_")] = int(fields["calls"])
    return calls


def names_of(texts: tuple[str, ...]) -> set[str]:
    return {text.split()[0].lower() for text in texts} | {"get"}


def run_both(
    tmp_path: Path, resp: int, texts: tuple[str, ...], *args: str
) -> list[tuple[dict[str, Any], dict[str, int]]]:
    """The commands on the Python driver, then on the compiled one, each against a fresh
    redis-server: (result document, Redis's call count deltas) of each."""
    commands = [arg for text in texts for arg in ("--command", text)]
    runs = []
    for pure in (True, False):
        out = tmp_path / f"{'python' if pure else 'compiled'}.json"
        with servers.redis() as server:
            url = f"redis://{server.address}/0?resp={resp}"
            before = command_calls(url)
            result = run_kvbench(
                "run", url, *commands, "--ratio", "get=1", "--requests", str(REQUESTS),
                "-c", "1", "--processes", "1", "--keys", "60", "--value-size", "24",
                "--seed", "11", "--json", str(out), "--no-save", "--no-live",
                "--max-error-rate", "100%", *args,
                env={fastpath.PURE_PYTHON_ENV: "1"} if pure else {},
            )  # fmt: skip
            after = command_calls(url)
        assert result.code == 0, result.stderr
        deltas = {name: after.get(name, 0) - before.get(name, 0) for name in names_of(texts)}
        runs.append((read_json(out), deltas))
    return runs


def outcomes_but_late(doc: dict[str, Any]) -> dict[str, dict[str, int]]:
    """How late an open loop's sends went is the machine's doing, not the driver's."""
    return {
        op: {name: n for name, n in row["outcomes"].items() if name != "late"}
        for op, row in doc["ops"].items()
    }


@pytest.mark.parametrize("chunks", ["packed", "lists"])
@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("loop", ["closed", "open"])
def test_both_drivers_count_the_same_commands_alike(
    tmp_path: Path, resp: int, loop: str, chunks: str
) -> None:
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    pace = ["--rate", "3000", "--max-lag", "10s"] if loop == "open" else []
    texts = COMMANDS if chunks == "packed" else (*COMMANDS, TWO_KEYS)
    names = names_of(texts)
    (py_doc, py_calls), (c_doc, c_calls) = run_both(tmp_path, resp, texts, *pace)
    assert py_doc["environment"]["driver"] == PYTHON
    assert c_doc["environment"]["driver"] == "compiled loop"
    assert set(c_doc["ops"]) == names
    assert outcomes_but_late(c_doc) == outcomes_but_late(py_doc)
    assert c_calls == py_calls and all(c_calls[name] > 0 for name in names), c_calls
    for doc in (py_doc, c_doc):
        assert doc["totals"]["ops"] == REQUESTS and doc["status"] == "ok"
        rows = doc["server"]["reconciliation"]
        assert rows and all(row["matches"] for row in rows), rows
        # the sequence decides which INCRBYs meet a hash (and which hash commands then
        # meet the string it made): some do, some do not
        incrby = doc["ops"]["incrby"]["outcomes"]
        assert incrby.get("error_reply", 0) > 0 and incrby.get("ok", 0) > 0, incrby
        refused = sum(row["outcomes"].get("error_reply", 0) for row in doc["ops"].values())
        assert doc["totals"]["errors"] == refused
    # The same requests and replies, byte for byte in number. The pump counts each
    # reply's bytes as they arrived; the codec recomputes them from hiredis's value, which
    # is the same but for a status reply other than +OK: "+PONG" (7 bytes) is a bytes
    # object like "$4 PONG" (10), so the Python driver's replies add up to 3 bytes a PING
    # more than arrived (resp.wire_nbytes), and its unattributed remainder goes below 0.
    py_net, c_net = py_doc["totals"]["network"], c_doc["totals"]["network"]
    pings = c_doc["ops"]["ping"]["count"]
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
        assert c_doc["mode"] == "open"
