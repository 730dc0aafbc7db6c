"""Connection events as the worker counts them: opened, live, refused at accept, lost.

Scripted transports (no sockets), both drivers. A server over its connection limit
accepts, writes one error line and closes (memcached ``-c``, Redis ``maxclients``).
"""

from __future__ import annotations

import asyncio

import pytest

from kvbench.engine.reconnect import RECONNECT_FIRST_NS
from kvbench.engine.worker import Worker
from kvbench.metrics.snapshot import IntervalSnapshot
from tests.unit.engine.test_connection import cut, make


def stats(worker: Worker) -> dict[str, float]:
    return {k: v for k, v in cut(worker).stats.items() if k.startswith("conn")}


@pytest.mark.parametrize(
    "refusal", [b"ERROR Too many open connections\r\n", b"-ERR max number of clients reached\r\n"]
)
def test_an_error_line_then_a_close_is_a_refusal_not_a_protocol_error(
    driver: str, refusal: bytes
) -> None:
    worker, conn, _ = make(driver, pipeline=2, ratio="0:1")
    assert worker.live_connections == 1
    conn.data_received(refusal)
    conn.connection_lost(None)
    assert worker.live_connections == 0
    assert stats(worker) == {"connects": 1, "connect_resets_before": 1}
    assert "protocol_error" not in worker.errors


def test_a_close_before_any_reply_is_a_refusal(driver: str) -> None:
    worker, conn, _ = make(driver, pipeline=2, ratio="0:1")
    conn.connection_lost(ConnectionResetError())
    assert stats(worker) == {"connects": 1, "connect_resets_before": 1}


def test_an_idle_connection_the_server_closed_was_lost_not_refused(driver: str) -> None:
    """Nothing sent, nothing read (a replay's lane with no rows): the server's close is a
    lost connection. Counted as a refusal, a server killed mid-replay read as one over its
    connection limit ("refused 1 right after accepting them (its limit: maxconns 1024)")."""
    worker, conn, transport = make(driver, pipeline=2, ratio="0:1", budget=0)
    assert conn.inflight == 0 and not transport.written
    conn.connection_lost(None)
    assert stats(worker) == {"connects": 1}
    assert worker.errors == {"conn_lost": 1}
    assert worker.last_error == "memcached://127.0.0.1:1: connection lost: closed by the server"


def test_a_connection_that_answered_and_then_broke_was_not_refused(driver: str) -> None:
    worker, conn, _ = make(driver, pipeline=2, ratio="0:1")
    conn.data_received(b"ERROR\r\n")  # an error reply to a request, and the next ones
    conn.data_received(b"END\r\n")
    conn.connection_lost(ConnectionResetError())
    assert stats(worker) == {"connects": 1}


def test_our_own_close_is_not_a_refusal(driver: str) -> None:
    worker, conn, _ = make(driver, pipeline=2, ratio="0:1")
    conn.close()
    conn.connection_lost(None)
    assert stats(worker) == {"connects": 1}
    assert worker.live_connections == 0


def test_refusals_while_running_are_counted_and_back_off(driver: str) -> None:
    async def scenario() -> tuple[dict[str, float], list[int]]:
        worker, conn, transport = make(driver, pipeline=2, ratio="0:1")
        worker._running = True
        worker.restart_live_min()
        delays = []
        for _ in range(3):  # reopened, and refused again at once
            conn.connection_lost(None)
            delays.append(conn.reconnect_delay_ns)
            conn.connection_made(transport)
        worker._running = False  # the reconnect tasks end at their next wake-up
        snapshots: list[IntervalSnapshot] = []
        worker._emit = snapshots.append
        worker._emit_interval(1)
        return snapshots[0].stats, delays

    counted, delays = asyncio.run(scenario())
    assert delays == [2 * RECONNECT_FIRST_NS, 4 * RECONNECT_FIRST_NS, 8 * RECONNECT_FIRST_NS]
    assert (counted["connect_resets"], counted["reconnects"], counted["connects"]) == (3, 3, 4)
    # Live at the start, down to 0 at each refusal, and live again (the last one still is).
    assert counted["connections_live_min"] == 0
