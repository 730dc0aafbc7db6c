"""The compiled event loop's Python side (engine/loop.py): connections whose sockets the
worker's ``Poller`` owns, seen by their link as a transport.

On the event loops kvbench runs on (uvloop, asyncio's own, and the ``PollerLoop`` a
compiled-loop worker runs on, which waits in the poller), against a loopback
listener in the same loop: the link's transport is made once connected, reads reach its
``data_received`` and writes the peer; the peer's close and an abort each end in one
``connection_lost``; once the driver is closed nothing more is opened; a refused connect
is the error ``open_link`` counts.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from kvbench.config.targets import parse_target
from kvbench.engine import fastpath
from kvbench.engine.loop import LoopDriver, LoopTransport, PollerLoop
from tests.support import pump_oracle, servers
from tests.support.waits import until

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

pytestmark = pytest.mark.unit

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
    "poller": PollerLoop,
}


class FakeLink(asyncio.Protocol):
    """What LoopDriver.open asks of a link: its target, and a protocol's events."""

    def __init__(self, url: str) -> None:
        self.target = parse_target(url)
        self.transport: LoopTransport | None = None
        self.reads: list[bytes] = []
        self.lost: list[Exception | None] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, LoopTransport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reads.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


def on_each_loop(name: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    loop = LOOPS[name]()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.parametrize("name", LOOPS)
def test_a_link_talks_through_the_poller_and_hears_its_end(name: str) -> None:
    async def main() -> None:
        peers: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peers.append((reader, writer))

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        driver = LoopDriver()
        link = FakeLink(f"memcached://127.0.0.1:{port}")
        await driver.open(link)  # type: ignore[arg-type]
        assert link.transport is not None and driver.poller.live == 1
        await until(lambda: bool(peers), "the accept")
        reader, writer = peers[0]
        link.transport.write(b"ping")
        assert await reader.readexactly(4) == b"ping"
        writer.write(b"pong")
        await until(lambda: link.reads == [b"pong"], "the read")
        writer.close()  # the peer ends it: one connection_lost, the socket closed there
        await until(lambda: bool(link.lost), "the end")
        assert link.lost == [None] and driver.poller.live == 0
        assert link.transport.is_closing()
        link.transport.abort()  # (ended already: nothing more)
        link.transport.write(b"late")

        second = FakeLink(f"memcached://127.0.0.1:{port}")
        await driver.open(second)  # type: ignore[arg-type]
        assert second.transport is not None
        second.transport.abort()  # ended here: one connection_lost too
        await until(lambda: bool(second.lost), "the abort's connection_lost")
        assert second.lost == [None] and driver.poller.live == 0

        driver.close()
        with pytest.raises(ConnectionAbortedError):
            await driver.open(FakeLink(f"memcached://127.0.0.1:{port}"))  # type: ignore[arg-type]
        server.close()
        await server.wait_closed()

    on_each_loop(name, main)


@pytest.mark.parametrize("name", LOOPS)
def test_a_refused_connect_is_an_oserror_and_leaves_nothing_open(name: str) -> None:
    async def main() -> None:
        driver = LoopDriver()
        link = FakeLink(f"memcached://127.0.0.1:{servers.free_port()}")
        with pytest.raises(ConnectionRefusedError):
            await driver.open(link)  # type: ignore[arg-type]
        assert link.transport is None and driver.poller.live == 0
        driver.close()

    on_each_loop(name, main)


def test_a_poller_loop_runs_its_timers_and_readers_while_it_waits_in_the_poller() -> None:
    """The loop's own events end a wait in the poller: a timer when it is due, a reader
    when its descriptor is readable (the selector's epoll fd is the poller's wake fd), and
    a connection's read reaches its link meanwhile; after ``close`` the selector waits
    alone again."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, PollerLoop)
        peers: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peers.append((reader, writer))

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        driver = LoopDriver()
        link = FakeLink(f"memcached://127.0.0.1:{port}")
        await driver.open(link)  # type: ignore[arg-type]
        await until(lambda: bool(peers), "the accept")
        peers[0][1].write(b"pong")
        await until(lambda: link.reads == [b"pong"], "the read")
        fired = asyncio.Event()
        loop.call_later(0.01, fired.set)
        await asyncio.wait_for(fired.wait(), 30)  # a timer ends the poller's wait
        r, w = socket.socketpair()
        with r, w:
            readable = asyncio.Event()
            loop.add_reader(r.fileno(), readable.set)
            w.send(b"x")  # the selector's epoll fd turns readable: the wait ends
            await asyncio.wait_for(readable.wait(), 30)
            loop.remove_reader(r.fileno())
        driver.close()
        server.close()
        await server.wait_closed()

    on_each_loop("poller", main)


@pytest.mark.parametrize("name", LOOPS)
def test_what_a_callback_raises_inside_the_poller_reaches_on_error(name: str) -> None:
    """A read's callback that raises goes to the driver's ``on_error`` (the worker ends the
    run failed), whichever loop runs: not only to the event loop's log."""

    class RaisingLink(FakeLink):
        def data_received(self, data: bytes) -> None:
            raise ValueError("from the reader")

    async def main() -> None:
        peers: list[asyncio.StreamWriter] = []

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peers.append(writer)

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        errors: list[Exception] = []
        driver = LoopDriver(errors.append)
        await driver.open(RaisingLink(f"memcached://127.0.0.1:{port}"))  # type: ignore[arg-type]
        await until(lambda: bool(peers), "the accept")
        peers[0].write(b"x")
        await until(lambda: bool(errors), "the error")
        assert isinstance(errors[0], ValueError) and "from the reader" in str(errors[0])
        driver.close()
        server.close()
        await server.wait_closed()

    on_each_loop(name, main)
