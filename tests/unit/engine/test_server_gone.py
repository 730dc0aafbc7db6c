"""A server gone for good: no live connection for twice ``--timeout``, reconnects failing.

Scripted transports (no sockets), both drivers. The worker decides from what it counted
(how long the server has had no live connection against its limit, set to 0 here so that
the first failed reconnect decides): a run that ends when its work is done (a replay,
``--requests``) ends then, failed; a run with a window marks the server and goes on.
Before, a replay of a server killed mid-run reopened its connections for ever.
"""

from __future__ import annotations

import asyncio

from kvbench.engine.clock import NEVER
from kvbench.engine.worker import Worker
from kvbench.metrics.snapshot import IntervalSnapshot
from tests.unit.engine.test_connection import make

URL = "memcached://127.0.0.1:1"


def lose_the_server(
    driver: str, window_end_ns: int, gone_ns: int
) -> tuple[Worker, list[IntervalSnapshot]]:
    """A measuring worker whose one connection the server closed, then a reconnect refused."""
    worker, conn, _ = make(driver, pipeline=2, ratio="0:1")
    snapshots: list[IntervalSnapshot] = []
    worker._emit = snapshots.append

    async def scenario() -> None:
        worker._finished = asyncio.Event()
        worker.phase, worker._measure_end_ns = "measure", window_end_ns
        worker._gone_ns = gone_ns
        conn.data_received(b"END\r\nEND\r\n")  # answered: live, then lost
        conn.connection_lost(None)  # (not running: no reopening task; the test fails one)
        assert worker._down_since_ns.keys() == {URL}
        worker._reopen_failed(conn, "connection refused")

    asyncio.run(scenario())
    return worker, snapshots


def stat(snapshots: list[IntervalSnapshot], name: str) -> float:
    return sum(s.stats.get(name, 0) for s in snapshots)


def test_a_run_with_no_window_ends_when_its_server_is_gone(driver: str) -> None:
    worker, snapshots = lose_the_server(driver, NEVER, gone_ns=0)
    assert worker.phase == "done" and worker._finished is not None and worker._finished.is_set()
    assert [s.phase for s in snapshots] == ["measure", "drain"]
    assert stat(snapshots, "server0_lost") == 1
    assert worker.errors == {"conn_lost": 1, "target_lost": 1}
    summary = worker.summary_fields()
    assert summary["status"] == "ok"  # the process did its part: the run's status says failed
    assert summary["last_error"].startswith(f"{URL}: no connection to it for ")
    assert summary["last_error"].endswith(
        "reconnects failing (connection refused: nothing listens there): gave up on it, "
        "the run ends here"
    )


def test_a_run_with_a_window_marks_the_server_gone_and_goes_on(driver: str) -> None:
    worker, snapshots = lose_the_server(driver, 10**18, gone_ns=0)
    assert worker.phase == "measure" and not snapshots
    worker._emit_interval(1)
    assert stat(snapshots, "server0_lost") == 1
    assert worker.errors == {"conn_lost": 1, "target_lost": 1}


def test_a_server_down_for_less_than_the_limit_is_not_gone(driver: str) -> None:
    worker, snapshots = lose_the_server(driver, NEVER, gone_ns=10**15)
    assert worker.phase == "measure" and not snapshots
    assert "target_lost" not in worker.errors


def test_a_window_that_ends_with_its_server_down_counts_it_down_at_the_end(driver: str) -> None:
    """Not yet gone (its limit far off), the server is down when the window ends: its
    last interval counts it, with how long it had been down (was: a short run whose server
    died and stayed down ended ``ok``)."""
    worker, snapshots = lose_the_server(driver, 10**18, gone_ns=10**15)
    since = worker._down_since_ns[URL]
    worker._measure_end_ns = since + 2_000_000_000
    worker._emit_interval(worker._measure_end_ns)
    assert stat(snapshots, "server0_down_at_end") == 1
    assert stat(snapshots, "server0_down_at_end_ns") == 2_000_000_000
    assert stat(snapshots, "server0_lost") == 0


def test_an_interval_before_the_windows_end_counts_no_server_down(driver: str) -> None:
    worker, snapshots = lose_the_server(driver, 10**18, gone_ns=10**15)
    worker._emit_interval(worker._down_since_ns[URL] + 1)
    assert stat(snapshots, "server0_down_at_end") == 0


def test_a_link_lost_whose_reopening_has_not_failed_is_not_down(driver: str) -> None:
    """A link lost a moment before the window's end, its reopening not yet tried, is a
    connection being reopened, not a server down; one live again is not down either."""
    worker, conn, _ = make(driver, pipeline=2, ratio="0:1")

    async def scenario() -> None:
        conn.data_received(b"END\r\nEND\r\n")
        conn.connection_lost(None)
        assert worker._down_since_ns.keys() == {URL}
        assert worker.servers_down(worker._down_since_ns[URL] + 5) == {}
        worker._reopen_failed(conn, "connection refused")
        assert worker.servers_down(worker._down_since_ns[URL] + 5) == {URL: 5}
        worker.connection_ready(conn)
        assert worker.servers_down(10**18) == {}

    asyncio.run(scenario())
