"""The compiled event loop (the default; engine/loop.py) held to the compiled driver on
asyncio transports (``KVBENCH_DRIVER=transports``), the one it replaced.

The same closed-loop workload (a fixed seed and request count, 50 connections, pipeline 1
and 16, every key preloaded so that each reply's outcome does not depend on the order the
connections' requests reach the server) runs through both drivers against one real
memcached and one real redis-server: every op's count by outcome is the same, and so are
the server's own counters of what it was sent (each run's deltas). And a server that hangs
up on its connections in the middle of a run: each end is counted as a lost connection,
and the connection is reopened and goes on until the run's requests are all sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvbench.engine import fastpath
from tests.support import fake_servers, servers
from tests.support.cli import read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.e2e

REQUESTS = 20_000
# The counters each server keeps of what it was sent (servers.counters' names).
COUNTERS = {
    "memcached": ("cmd_get", "cmd_set", "get_hits", "get_misses"),
    "redis": ("get", "set", "mget", "keyspace_hits", "keyspace_misses"),
}


@pytest.fixture(scope="module")
def live_servers() -> Iterator[dict[str, Server]]:
    with servers.memcached() as memcached, servers.redis() as redis:
        yield {"memcached": memcached, "redis": redis}


def run(tmp_path: Path, url: str, pipeline: int, loop: bool) -> dict[str, Any]:
    out = tmp_path / f"{'loop' if loop else 'compiled'}-{pipeline}.json"
    return run_mix(out, url, loop, "-n", str(REQUESTS), "-c", "50", "-P", str(pipeline))


def run_mix(out: Path, url: str, loop: bool, *head: str) -> dict[str, Any]:
    """The mix both drivers run (sets, gets, 4-key multi-gets over 500 preloaded keys,
    seed 7) after ``head``, on the loop or on the transports; its result document."""
    result = run_kvbench(
        "run", url, *head, "--processes", "1", "--ratio", "set=1,get=3,mget=1",
        "--multiget", "4", "--keys", "500", "--preload", "--seed", "7",
        "--json", str(out), "--no-save", "--no-live",
        env={fastpath.DRIVER_ENV: fastpath.LOOP if loop else fastpath.TRANSPORTS},
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return read_json(out)


def outcomes(doc: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {op: row["outcomes"] for op, row in doc["ops"].items()}


@pytest.mark.parametrize("pipeline", [1, 16])
@pytest.mark.parametrize("scheme", ["memcached", "redis"])
def test_the_loop_counts_what_the_compiled_driver_counts(
    tmp_path: Path, live_servers: dict[str, Server], scheme: str, pipeline: int
) -> None:
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    url = f"{scheme}://{live_servers[scheme].address}"
    docs, sent = {}, {}
    for loop in (False, True):
        before = servers.counters(url)
        docs[loop] = run(tmp_path, url, pipeline, loop)
        after = servers.counters(url)
        sent[loop] = {name: after.get(name, 0) - before.get(name, 0) for name in COUNTERS[scheme]}
    compiled, loop = docs[False], docs[True]
    assert compiled["environment"]["driver"] == "compiled (transports)"
    assert loop["environment"]["driver"] == "compiled loop"
    assert [w["driver"] for w in loop["workers"]] == ["compiled loop"]
    assert outcomes(loop) == outcomes(compiled)
    assert sent[True] == sent[False]
    for doc in docs.values():
        assert doc["totals"]["ops"] == REQUESTS and doc["totals"]["errors"] == 0
        rows = doc["server"]["reconciliation"]
        assert rows and all(row["matches"] for row in rows), rows


def test_a_connection_the_server_ends_is_counted_and_reopened(tmp_path: Path) -> None:
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    out = tmp_path / "run.json"
    with fake_servers.hanging_up(after=200) as port:
        result = run_kvbench(
            "run",
            f"memcached://127.0.0.1:{port}",
            "-n",
            "3000",
            "-c",
            "2",
            "-P",
            "4",
            "--processes",
            "1",
            "--json",
            str(out),
            "--no-save",
            "--no-live",
            env={fastpath.DRIVER_ENV: fastpath.LOOP},
        )
    assert "Traceback" not in result.stderr
    doc = read_json(out)
    assert doc["environment"]["driver"] == "compiled loop"
    connections = doc["connections"]
    totals = doc["totals"]
    found = re.search(r"\bconn_lost ([\d,]+)", " ".join(doc["errors"]))
    assert found, doc["errors"]
    lost = int(found.group(1).replace(",", ""))
    # each connection ends at its 200th answer (the last ones maybe as the run ends): each
    # end counted and a connection reopened in its place, until every request was sent
    assert lost >= totals["succeeded"] // 200 - 2, doc["errors"]
    assert connections["reconnects"] >= lost - 2
    assert connections["connects"] == 2 + connections["reconnect_attempts"]
    assert totals["ops"] == 3000
    assert 0 < totals["errors"] <= lost * 4  # the requests in flight at an end: a pipeline's


@pytest.mark.parametrize("scheme", ["memcached", "redis"])
def test_the_open_loop_runs_on_the_loop_alike(tmp_path: Path, scheme: str) -> None:
    """The open-loop dispatcher hands the loop's pumps their intended times as it hands
    the transports' (one connection, each run its own fresh server: the same sequence):
    the same outcomes per op (``late`` is the machine's doing), nothing dropped."""
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    docs = {}
    for loop in (False, True):
        out = tmp_path / f"open-{loop}.json"
        with (servers.memcached if scheme == "memcached" else servers.redis)() as live:
            result = run_kvbench(
                "run",
                f"{scheme}://{live.address}",
                "--rate",
                "3000",
                "-n",
                "3000",
                "--max-lag",
                "10s",
                "-c",
                "1",
                "-P",
                "32",
                "--processes",
                "1",
                "--ratio",
                "set=2,get=3,delete=1,mget=1",
                "--keys",
                "300",
                "--seed",
                "11",
                "--json",
                str(out),
                "--no-save",
                "--no-live",
                env={fastpath.DRIVER_ENV: fastpath.LOOP if loop else fastpath.TRANSPORTS},
            )
            assert result.code == 0, result.stderr
        docs[loop] = read_json(out)
    assert docs[True]["environment"]["driver"] == "compiled loop"
    assert docs[True]["mode"] == "open"
    without_late = [
        {
            op: {k: n for k, n in row["outcomes"].items() if k != "late"}
            for op, row in d["ops"].items()
        }
        for d in (docs[False], docs[True])
    ]
    assert without_late[0] == without_late[1]
    assert docs[True]["totals"]["ops"] == 3000 and docs[True]["totals"]["errors"] == 0


def run_open(tmp_path: Path, url: str, arrival: str, loop: bool) -> dict[str, Any]:
    """--rate over 8 connections: on the loop the poller runs the schedule in C
    (engine/loop_dispatch.py); on the transports the Python dispatcher does."""
    out = tmp_path / f"open-{arrival}-{'loop' if loop else 'transports'}.json"
    return run_mix(
        out, url, loop, "--rate", "3000", "--arrival", arrival, "-n", "3000",
        "--max-lag", "10s", "-c", "8", "-P", "4",
    )  # fmt: skip


@pytest.mark.parametrize("arrival", ["uniform", "poisson"])
@pytest.mark.parametrize("scheme", ["memcached", "redis"])
def test_the_pollers_schedule_counts_what_the_python_dispatcher_counts(
    tmp_path: Path, live_servers: dict[str, Server], scheme: str, arrival: str
) -> None:
    """The same schedule (seed, rate, arrival) over 8 connections, every key preloaded (an
    outcome does not depend on which connection's request reaches the server first): the
    same counts per op and outcome (``late`` is the machine's doing), nothing dropped, and
    the same server counters, whether the poller or the Python dispatcher sends."""
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    url = f"{scheme}://{live_servers[scheme].address}"
    docs, sent = {}, {}
    for loop in (False, True):
        before = servers.counters(url)
        docs[loop] = run_open(tmp_path, url, arrival, loop)
        after = servers.counters(url)
        sent[loop] = {name: after.get(name, 0) - before.get(name, 0) for name in COUNTERS[scheme]}
    assert docs[False]["environment"]["driver"] == "compiled (transports)"
    assert docs[True]["environment"]["driver"] == "compiled loop"
    without_late = [
        {
            op: {k: n for k, n in row["outcomes"].items() if k != "late"}
            for op, row in d["ops"].items()
        }
        for d in (docs[False], docs[True])
    ]
    assert without_late[0] == without_late[1]
    assert sent[True] == sent[False]
    for doc in docs.values():
        assert doc["mode"] == "open"
        assert doc["totals"]["ops"] == 3000 and doc["totals"]["errors"] == 0
        rows = doc["server"]["reconciliation"]
        assert rows and all(row["matches"] for row in rows), rows


def test_the_pollers_schedule_skips_a_connection_the_server_ended_until_reopened(
    tmp_path: Path,
) -> None:
    """An open loop on the loop against a server that hangs up on each connection after
    200 answers: each end counted, the connection reopened, and the schedule sends on
    through the others meanwhile and through the new one after, until all are sent."""
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    out = tmp_path / "run.json"
    with fake_servers.hanging_up(after=200) as port:
        result = run_kvbench(
            "run",
            f"memcached://127.0.0.1:{port}",
            "--rate",
            "3000",
            "-n",
            "3000",
            "--max-lag",
            "10s",
            "-c",
            "2",
            "-P",
            "4",
            "--processes",
            "1",
            "--json",
            str(out),
            "--no-save",
            "--no-live",
            env={fastpath.DRIVER_ENV: fastpath.LOOP},
        )
    assert "Traceback" not in result.stderr and "Exception" not in result.stderr
    doc = read_json(out)
    assert doc["environment"]["driver"] == "compiled loop" and doc["mode"] == "open"
    found = re.search(r"\bconn_lost ([\d,]+)", " ".join(doc["errors"]))
    assert found, doc["errors"]
    lost = int(found.group(1).replace(",", ""))
    assert lost >= doc["totals"]["succeeded"] // 200 - 2, doc["errors"]
    assert doc["connections"]["reconnects"] >= lost - 2
    assert doc["totals"]["ops"] == 3000  # every request sent (or failed with its connection)
    assert doc["ops"]["get"]["outcomes"].get("dropped", 0) == 0
