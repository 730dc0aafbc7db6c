"""The seam between the event loop and a pump (engine/connection.py ``PumpReader``).

A connection hands its reads to its pump by giving the transport a protocol whose
``data_received`` is the pump's own callable (``transport.set_protocol``). These tests
run the event loops kvbench runs on (uvloop, and asyncio's own) over a socket pair: the
bytes that arrive after the switch reach the pump, and never the old protocol's method;
the other events still reach the connection. Should a loop stop honouring the protocol it
was handed (or keep calling the one it had), they fail.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import pytest
import uvloop

from kvbench.engine.connection import PumpReader
from tests.support.waits import until

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}


class Old(asyncio.Protocol):
    """The connection, as the transport knew it before the switch."""

    def __init__(self) -> None:
        self.reads: list[bytes] = []
        self.lost: list[Exception | None] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reads.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


async def exchange() -> None:
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    old = Old()
    transport, _ = await loop.create_connection(lambda: old, sock=ours)
    await loop.sock_sendall(theirs, b"before")
    await until(lambda: old.reads == [b"before"], "the read before the switch")
    pumped: list[bytes] = []
    conn: Any = old  # the reader passes the connection's events on to it
    transport.set_protocol(PumpReader(conn, pumped.append))
    await loop.sock_sendall(theirs, b"after")
    await until(lambda: b"".join(pumped) == b"after", "the pump's read")
    await loop.sock_sendall(theirs, b"again")
    await until(lambda: b"".join(pumped) == b"afteragain", "the pump's second read")
    assert old.reads == [b"before"]  # nothing reached the old method after the switch
    theirs.close()
    await until(lambda: bool(old.lost), "the close, passed on to the connection")
    transport.close()


@pytest.mark.parametrize("name", LOOPS)
def test_reads_after_the_switch_reach_the_pump_and_not_the_old_protocol(name: str) -> None:
    loop = LOOPS[name]()
    try:
        loop.run_until_complete(asyncio.wait_for(exchange(), 30))
    finally:
        loop.close()
