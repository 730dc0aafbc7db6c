"""One reconnect routine for every worker: load connections and a queue's links alike.

Scripted transports (no sockets). A server over its connection limit accepts, writes one
error line and closes; a queue's producer meets it as a load connection does.
"""

from __future__ import annotations

import asyncio
import ssl

import pytest

from kvbench.config.load import load_config
from kvbench.config.model import ReportConfig
from kvbench.config.queue import build_queue_config
from kvbench.engine import reconnect
from kvbench.engine.link import Link
from kvbench.engine.queue_worker import QueueWorker, QueueWorkerSpec
from kvbench.engine.reconnect import RECONNECT_FIRST_NS, backoff, connect_error_text
from kvbench.engine.setup import codec_factory_for, setup_for
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.errors import SetupRefused, TargetUnreachable
from tests.unit.engine.test_connection import ScriptedTransport


def test_one_connect_error_text_for_every_driver() -> None:
    assert connect_error_text(ConnectionRefusedError()) == "connection refused"
    assert connect_error_text(TimeoutError()) == "timed out"
    assert connect_error_text(SetupRefused("WRONGPASS invalid password")) == (
        "the server refused the connection setup: WRONGPASS invalid password"
    )
    tls = ssl.SSLError(1, "certificate verify failed")
    assert connect_error_text(tls).startswith("TLS handshake failed")


def test_a_refused_setup_is_a_target_unreachable() -> None:
    """Before a run it ends the run with exit 3, like any unreachable target."""
    assert issubclass(SetupRefused, TargetUnreachable)


def test_the_backoff_doubles_up_to_its_cap() -> None:
    waits = [RECONNECT_FIRST_NS]
    for _ in range(6):
        waits.append(backoff(waits[-1]))
    assert waits[:3] == [RECONNECT_FIRST_NS, 2 * RECONNECT_FIRST_NS, 4 * RECONNECT_FIRST_NS]
    assert waits[-1] == 1_000_000_000


def _producer() -> QueueWorker:
    config = build_queue_config("memcacheq://127.0.0.1:1/q", {}, ReportConfig())
    return QueueWorker(QueueWorkerSpec(config, "producer", 0, 100, 7), lambda report: None)


def test_a_queue_link_refused_at_accept_is_counted_and_backs_off_as_a_load_connection() -> None:
    async def scenario() -> tuple[dict[str, float], list[int], int]:
        worker = _producer()
        link, transport = worker.link, ScriptedTransport()
        link.connection_made(transport)
        worker._running = True
        worker.restart_live_min()
        delays = []
        for _ in range(3):  # reopened, and refused again at once
            link.data_received(b"ERROR Too many open connections\r\n")
            link.connection_lost(None)
            delays.append(link.reconnect_delay_ns)
            link.connection_made(transport)
        worker._running = False  # the reopening tasks end at their next wake-up
        live = worker.live_connections
        worker.recorder.add_stat("connections_live_min", worker.take_live_min())
        return worker.recorder.cut("measure", 0, 0, 1).stats, delays, live

    stats, delays, live = asyncio.run(scenario())
    assert delays == [2 * RECONNECT_FIRST_NS, 4 * RECONNECT_FIRST_NS, 8 * RECONNECT_FIRST_NS]
    assert (stats["connect_resets"], stats["reconnects"], stats["connects"]) == (3, 3, 4)
    assert stats["connections_live_min"] == 0 and live == 1


def test_a_worker_opens_its_links_a_few_hundred_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 connects at once overflowed the server's listen backlog and timed out."""
    in_flight, most, opened = 0, 0, []

    async def fake_open(link: object, timeout_ns: int) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        for _ in range(3):
            await asyncio.sleep(0)
        in_flight -= 1
        opened.append(link)

    monkeypatch.setattr(reconnect, "open_link", fake_open)
    links = [object() for _ in range(3 * reconnect.CONNECTS_IN_FLIGHT + 5)]
    asyncio.run(reconnect.open_links(links, 10**9))  # type: ignore[arg-type]
    assert most == reconnect.CONNECTS_IN_FLIGHT
    assert sorted(map(id, opened)) == sorted(map(id, links))


def test_the_workers_of_a_run_share_each_servers_connects_in_flight() -> None:
    """256 connects in flight at each server from all workers together: one worker to one
    server keeps 256, six workers 42 each (six at 256 overflowed memcached's backlog), six
    workers over six servers 256 each (a sixth of them at each server), never below 16."""
    assert reconnect.connects_in_flight(1, 1) == 256
    assert reconnect.connects_in_flight(1, 6) == 42
    assert reconnect.connects_in_flight(6, 6) == 256
    assert reconnect.connects_in_flight(1, 64) == reconnect.CONNECTS_IN_FLIGHT_MIN


def test_links_open_to_their_servers_in_turn() -> None:
    a, b, c = ["a1", "a2", "a3"], ["b1"], ["c1", "c2"]
    order = reconnect.interleaved([a, b, c])
    assert order == ["a1", "b1", "c1", "a2", "c2", "a3"]


def test_a_link_lost_before_its_reopening_returns_is_reopened_once() -> None:
    """The first reply read on a reopened connection can break the protocol before the
    attempt that opened it has returned. That loss starts the next reopening, and the
    one that opened the link is done: when it went on too, two reopenings each opened
    a connection for the one link, and a reply read on one was taken for the other's
    request (a fault counted twice, under load, in the hostile-replies e2e test)."""
    worker = _producer()
    link = worker.link
    opened: list[bool] = []  # per attempt: was the link connected already?

    async def opener(link: Link) -> None:
        opened.append(link.connected)
        link.connection_made(ScriptedTransport())
        if len(opened) < 3:  # lost at once, before this attempt returns
            link.connection_lost(None)

    async def scenario() -> None:
        link.opener = opener
        link.connection_made(ScriptedTransport())
        worker._running = True
        link.connection_lost(None)
        async with asyncio.timeout(10):
            while len(opened) < 3 or worker._reopening:
                await asyncio.sleep(0.01)
        worker._running = False

    asyncio.run(scenario())
    assert opened == [False, False, False] and link.connected
    stats = worker.recorder.cut("measure", 0, 0, 1).stats
    assert (stats["reconnects"], stats["reconnect_attempts"], stats["connects"]) == (3, 3, 4)


def test_an_attempt_that_fails_after_connecting_closes_its_connection() -> None:
    """A connection whose setup is not answered in time is closed by the attempt that
    made it, before the next attempt makes another for the same link."""
    config = load_config(None, {"target.urls": (["redis://127.0.0.1:1/0?resp=3"], "T")}, 1)
    target = config.targets[0]
    worker = Worker(WorkerSpec(config, 0, 1, 1, None), lambda snap: None)
    link = worker.make_connection(codec_factory_for(target), setup_for(target), 1, worker.shards[0])
    transport = ScriptedTransport()

    async def opener(link: Link) -> None:
        link.connection_made(transport)  # HELLO 3 written; never answered

    async def scenario() -> None:
        link.opener = opener
        with pytest.raises(TimeoutError):
            await reconnect.open_link(link, 20_000_000)

    asyncio.run(scenario())
    assert transport.written.startswith(b"*2\r\n$5\r\nHELLO")
    assert transport.aborted


def test_a_link_lost_before_it_was_live_is_left_to_the_attempt_that_opened_it() -> None:
    """Lost during its setup (refused there, or its socket closed): the attempt that
    opened it counts the failure and tries again; the loss starts no second reopening
    and is no reconnect."""
    worker = _producer()

    async def scenario() -> int:
        worker._running = True
        worker.connection_broken(worker.link, announced=False, was_live=False, refused=True)
        reopenings = len(worker._reopening)
        worker._running = False
        return reopenings

    assert asyncio.run(scenario()) == 0
    assert worker.recorder.cut("measure", 0, 0, 1).stats.get("reconnects", 0) == 0
