"""``kvbench replay`` on the compiled event loop held to the compiled pumps on uvloop's
transports (``KVBENCH_DRIVER=transports``) and to the Python driver (the reference).

The same trace (all eleven trace ops, stores of three TTLs, so each lane's chunks carry
their own) is replayed through the three drivers, each against a fresh real server, at
``--speed max`` (closed loop, six connections over two processes) and timed (``--speed``,
the open-loop dispatcher with one ``TraceSchedule`` per connection). Every key belongs to
one client, and a client's rows go in the trace's order on its one connection, so each
reply's outcome does not depend on how the connections' requests interleave: every op's
count by outcome is the same on every driver (timed: but ``late``, the machine's doing),
so are the trace section's counts and the server's own counters of what it was sent.
And a server that hangs up on its connections mid-replay: each connection is reopened
and its lane goes on where its stream stopped, on every driver, until every row is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from kvbench.engine import fastpath
from tests.support import fake_servers, pump_oracle, servers
from tests.support.cli import read_json, run_kvbench
from tests.support.servers import Server
from tests.support.traces import Row, owned_rows, write_trace

pytestmark = pytest.mark.e2e

# driver name -> (its environment, what the run records)
DRIVERS = {
    "loop": ({fastpath.DRIVER_ENV: fastpath.LOOP}, "compiled loop"),
    "transports": ({fastpath.DRIVER_ENV: fastpath.TRANSPORTS}, "compiled (transports)"),
    "python": ({fastpath.PURE_PYTHON_ENV: "1"}, f"python ({fastpath.PURE_PYTHON_ENV} is set)"),
}
# The server counters each run's requests move (memcached's stats, Redis's commandstats).
COUNTERS = {
    "memcached": (
        "cmd_get", "cmd_set", "get_hits", "get_misses", "delete_hits", "delete_misses",
        "incr_hits", "incr_misses", "decr_hits", "decr_misses", "cas_hits", "cas_badval",
        "cas_misses",
    ),
    "redis": ("get", "set", "append", "del", "incr", "decr", "keyspace_hits", "keyspace_misses"),
}  # fmt: skip


def replay(
    trace: Path, url: str, out: Path, driver: str, speed: str, *flags: str
) -> dict[str, Any]:
    """``kvbench replay`` of ``trace`` on ``driver``: its result document, checked to
    record the driver it ran on."""
    env, recorded = DRIVERS[driver]
    result = run_kvbench(
        "replay", str(trace), url, "--speed", speed, *flags, "--no-save", "--no-live",
        "--json", str(out), env=env,
    )  # fmt: skip
    assert result.code == 0, result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    doc = read_json(out)
    assert doc["environment"]["driver"] == recorded
    assert {w["driver"] for w in doc["workers"]} == {recorded}
    return doc


def outcomes(doc: dict[str, Any], *, late: bool = True) -> dict[str, dict[str, int]]:
    return {
        op: {name: n for name, n in row["outcomes"].items() if late or name != "late"}
        for op, row in doc["ops"].items()
    }


def trace_counts(doc: dict[str, Any]) -> dict[str, Any]:
    """The trace section: the rows read, queued, skipped and sent, by op (none of it
    depends on time: the offered rate is the trace's, a dropped row none here)."""
    return {"profile": doc["trace"]["profile"], "sent": doc["trace"]["sent"]}


SERVERS: dict[str, Callable[[], AbstractContextManager[Server]]] = {
    "memcached": servers.memcached,
    "redis": servers.redis,
}
# (scheme, --speed, flags, drivers): closed on every memcached protocol and Redis, timed on
# text and Redis; each over two processes (each its clients' lanes). uvloop's transports,
# which a replay takes only over TLS (or asked), on text and Redis: their pumps are the
# loop's, and binary's and meta's are held to the Python driver on the loop.
CLOSED = ("-c", "6", "-P", "4", "--processes", "2")
TIMED = ("-c", "4", "-P", "8", "--processes", "2", "--max-lag", "10s")
ALL, NOT_TRANSPORTS = tuple(DRIVERS), ("loop", "python")
CASES = [
    ("memcached", "max", CLOSED, ALL),
    ("memcached+meta", "max", CLOSED, NOT_TRANSPORTS),
    ("memcached+binary", "max", CLOSED, NOT_TRANSPORTS),
    ("redis", "max", CLOSED, ALL),
    ("memcached", "4", TIMED, ALL),
    ("redis", "4", TIMED, ALL),
]


@pytest.mark.parametrize(
    ("scheme", "speed", "flags", "drivers"), CASES, ids=[f"{c[0]}-speed-{c[1]}" for c in CASES]
)
def test_a_replay_counts_alike_on_the_loop_the_transports_and_the_python_driver(
    tmp_path: Path, scheme: str, speed: str, flags: tuple[str, ...], drivers: tuple[str, ...]
) -> None:
    pump_oracle.require_compiled()
    trace = write_trace(tmp_path / "t.csv", owned_rows(3000))
    family = scheme.split("+")[0]
    docs, moved = {}, {}
    for driver in drivers:
        with SERVERS[family]() as live:
            url = f"{scheme}://{live.address}"
            before = servers.counters(url)
            docs[driver] = replay(trace, url, tmp_path / f"{driver}.json", driver, speed, *flags)
            after = servers.counters(url)
        moved[driver] = {
            name: after.get(name, 0) - before.get(name, 0) for name in COUNTERS[family]
        }
    timed = speed != "max"
    reference = docs["python"]
    for driver, doc in docs.items():
        assert doc["status"] == "ok", driver
        assert doc["mode"] == ("open" if timed else "closed"), driver
        assert outcomes(doc, late=not timed) == outcomes(reference, late=not timed), driver
        assert trace_counts(doc) == trace_counts(reference), driver
        assert moved[driver] == moved["python"], driver
        assert doc["totals"]["errors"] == 0 and doc["connections"]["errors"] == 0, driver
        assert doc["totals"]["ops"] == doc["trace"]["sent"]["total"] > 2000, driver
        assert all(row["matches"] for row in doc["server"]["reconciliation"]), driver
    # the server saw every request: its counters moved by what was sent
    assert moved["loop"]["cmd_get" if family == "memcached" else "get"] > 0


@pytest.mark.parametrize("speed", ["max", "6"])
def test_a_lane_goes_on_where_it_stopped_after_the_server_hangs_up(
    tmp_path: Path, speed: str
) -> None:
    """A server that closes each connection after 150 answers: on every driver each end
    is counted, the connection reopened with its own lane's stream, and the replay ends
    with every row sent once (the ones in flight at an end counted as connection errors,
    not sent again). Timed too (the trace's 3 s in 0.5 s): a lane's requests due while
    its connection is down wait for it (max-lag 10 s: none dropped)."""
    pump_oracle.require_compiled()
    rows: list[Row] = [
        (i // 1000, f"k:{i % 300}", 5, 20 if i % 4 == 0 else 0, f"c{i % 5}",
         "set" if i % 4 == 0 else "get", 60 if i % 4 == 0 else 0)
        for i in range(3000)
    ]  # fmt: skip
    trace = write_trace(tmp_path / "t.csv", rows)
    for driver in DRIVERS:
        env, recorded = DRIVERS[driver]
        out = tmp_path / f"{driver}.json"
        with fake_servers.hanging_up(after=150) as port:
            result = run_kvbench(
                "replay", str(trace), f"memcached://127.0.0.1:{port}", "--speed", speed,
                "-c", "3", "-P", "4", "--processes", "1", "--max-error-rate", "100%",
                "--max-lag", "10s",
                "--no-save", "--no-live", "--json", str(out), env=env,
            )  # fmt: skip
        assert "Traceback" not in result.stderr, result.stderr
        doc = read_json(out)
        assert doc["environment"]["driver"] == recorded
        totals = doc["totals"]
        assert totals["ops"] == 3000 == doc["trace"]["sent"]["total"], driver
        assert doc["ops"]["get"]["count"] == 2250 and doc["ops"]["set"]["count"] == 750, driver
        # every connection ended at its 150th answer and was reopened until all was sent
        assert doc["connections"]["reconnects"] >= totals["succeeded"] // 150 - 3, driver
        assert totals["succeeded"] + totals["errors"] == 3000, driver
        # (closed, each end finds 4 in flight; timed, it may find none)
        least = 1 if speed == "max" else 0
        assert least <= totals["errors"] <= doc["connections"]["reconnects"] * 4 + 12, driver
