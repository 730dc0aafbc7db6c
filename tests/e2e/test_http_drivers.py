"""A memc HTTP gateway on both drivers: the Python one (the reference) and the compiled pump.

nginx with the memc module in front of a real memcached, a fresh pair for each run. The
same schedule (seed, request count, one connection, so that the gateway sees the same
sequence) runs through each driver, closed and open loop: every op's count by outcome is
the same, and so are memcached's own counters of what the gateway sent it and the bytes
the client sent. With nginx closing each connection after a few requests (``Connection:
close``), both drivers reopen it and lose nothing. And a trace replay (every trace op a
gateway takes, three TTLs; each key one client's, so that each reply's outcome does not
depend on how the connections interleave), at full speed and timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvbench.engine import fastpath
from tests.support import servers
from tests.support.cli import outcomes_but_late, read_json, run_kvbench
from tests.support.traces import owned_rows, write_trace

pytestmark = pytest.mark.integration

REQUESTS = 1500
# memcached's counters of what the gateway asked of it (servers.counters' names).
COUNTERS = (
    "cmd_get", "cmd_set", "get_hits", "get_misses", "delete_hits", "delete_misses",
    "incr_hits", "incr_misses", "decr_hits", "decr_misses",
)  # fmt: skip
PYTHON = "python (KVBENCH_PURE_PYTHON is set)"
# One connection over 300 keys, so that the gateway sees the same sequence from each driver.
MIX = ("-c", "1", "--processes", "1", "--keys", "300", "--ratio", "set=2,get=3,delete=1")


def run_both(
    tmp_path: Path, *args: str, keepalive_requests: int = 1_000_000, command: str = "run"
) -> list[Any]:
    """``kvbench run <gateway> args`` (``replay``: ``kvbench replay args[0] <gateway>
    args[1:]``) on the Python driver, then on the compiled one, each against a fresh
    memcached behind a fresh nginx: (result document, memcached's counter deltas) of each."""
    head, rest = ((), args) if command == "run" else (args[:1], args[1:])
    runs = []
    for pure in (True, False):
        out = tmp_path / f"{'python' if pure else 'compiled'}.json"
        with (
            servers.memcached() as memcached,
            servers.nginx_memc(memcached, keepalive_requests) as gateway,
        ):
            url = f"http+memc://{gateway.address}/memc?stats=memcached://{memcached.address}"
            before = servers.counters(f"memcached://{memcached.address}")
            result = run_kvbench(
                command, *head, url, *rest, "--seed", "11", "--json", str(out), "--no-save",
                "--no-live", env={fastpath.PURE_PYTHON_ENV: "1"} if pure else {},
            )  # fmt: skip
            after = servers.counters(f"memcached://{memcached.address}")
        assert result.code == 0, result.stderr
        deltas = {name: after.get(name, 0) - before.get(name, 0) for name in COUNTERS}
        runs.append((read_json(out), deltas))
    return runs


def assert_alike(python: tuple[Any, Any], compiled: tuple[Any, Any]) -> None:
    (py_doc, py_sent), (c_doc, c_sent) = python, compiled
    assert py_doc["environment"]["driver"] == PYTHON
    assert c_doc["environment"]["driver"] == "compiled loop"
    assert outcomes_but_late(c_doc) == outcomes_but_late(py_doc)
    assert c_sent == py_sent and c_sent["cmd_get"] > 0 and c_sent["cmd_set"] > 0
    for doc in (py_doc, c_doc):
        assert doc["totals"]["errors"] == 0 and doc["status"] == "ok"
        rows = doc["server"]["reconciliation"]
        assert rows and all(row["matches"] for row in rows), rows
    # the same requests and responses, byte for byte in number, each counted once
    assert c_doc["totals"]["network"] == py_doc["totals"]["network"] | {
        key: c_doc["totals"]["network"][key] for key in ("in_per_s", "out_per_s")
    }


@pytest.mark.parametrize("loop", ["closed", "open"])
def test_both_drivers_count_the_same_requests_alike(tmp_path: Path, loop: str) -> None:
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    pace = ["--rate", "3000", "--max-lag", "10s"] if loop == "open" else []
    python, compiled = run_both(tmp_path, *pace, "--requests", str(REQUESTS), *MIX)
    assert_alike(python, compiled)
    assert compiled[0]["totals"]["ops"] == REQUESTS
    if loop == "open":
        assert compiled[0]["mode"] == "open"


@pytest.mark.parametrize("loop", ["closed", "open"])
def test_both_drivers_reopen_a_connection_the_gateway_closes_and_lose_nothing(
    tmp_path: Path, loop: str
) -> None:
    """nginx answers every 25th request of a connection with ``Connection: close``: the
    compiled pump stops there (CLOSING, as the Python driver's codec), the connection is
    reopened, and every request is answered; in an open loop the schedule sends nothing
    on the closing connection and waits for the new one (--max-lag 10s: none dropped)."""
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    pace = ["--rate", "2000", "--max-lag", "10s"] if loop == "open" else []
    python, compiled = run_both(tmp_path, *pace, "--requests", "1000", *MIX, keepalive_requests=25)
    assert_alike(python, compiled)
    for doc, _ in (python, compiled):
        assert doc["totals"]["ops"] == 1000
        assert sum(row["reconnects"] for row in doc["intervals"]) >= 1000 // 25 - 2


@pytest.mark.parametrize("speed", ["max", "4"])
def test_a_replay_counts_alike_on_both_drivers(tmp_path: Path, speed: str) -> None:
    """Six connections over two processes, each client's rows on its connection in the
    trace's order; gets go as get, cas is skipped (a gateway has neither), the rest as
    themselves, each store with its row's TTL."""
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    trace = write_trace(tmp_path / "t.csv", owned_rows(1500))
    timed = ("--max-lag", "10s") if speed != "max" else ()
    python, compiled = run_both(
        tmp_path, str(trace), "--speed", speed, "-c", "6", "--processes", "2", *timed,
        command="replay",
    )  # fmt: skip
    assert_alike(python, compiled)
    for doc, sent in (python, compiled):
        assert doc["trace"]["sent"] == compiled[0]["trace"]["sent"]
        assert doc["totals"]["ops"] == doc["trace"]["sent"]["total"] > 1000
        assert sent["incr_hits"] > 0 and sent["delete_hits"] > 0
