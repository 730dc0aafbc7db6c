"""Servers that misbehave in ways a real one will not, on free loopback ports.

Each runs an asyncio server on a thread of its own for the length of a ``with`` block:
``silent`` takes connections and never answers; ``stats_error`` answers ``ERROR`` to
``stats`` (as some memcached proxies do) and passes every other connection through to a
real memcached; ``closing`` closes every connection on its first request; ``redirecting``
is a Redis Cluster node that sends every key elsewhere.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator

import hiredis

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.contextmanager
def serving(handler: Handler) -> Iterator[int]:
    """Run ``handler`` for each connection to 127.0.0.1:PORT; yields PORT."""
    loop = asyncio.new_event_loop()
    ready: list[int] = []
    started = threading.Event()
    stop = asyncio.Event()

    async def main() -> None:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        ready.append(server.sockets[0].getsockname()[1])
        started.set()
        async with server:
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    started.wait(5)
    try:
        yield ready[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(5)


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await reader.read(65536):  # read what comes, answer nothing
        pass
    writer.close()


async def _closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(65536)
    writer.close()


def silent() -> contextlib.AbstractContextManager[int]:
    """Accepts connections, reads, never answers."""
    return serving(_silent)


def closing() -> contextlib.AbstractContextManager[int]:
    """Closes each connection on its first request (twemproxy on ``stats``)."""
    return serving(_closing)


def stats_error(backend_port: int) -> contextlib.AbstractContextManager[int]:
    """``ERROR`` to a connection that opens with ``stats``; the rest go to the backend."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await reader.read(65536)
        if first.startswith(b"stats"):
            data = first
            while data:
                writer.write(b"ERROR\r\n" * data.count(b"\r\n"))
                await writer.drain()
                data = await reader.read(65536)
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", backend_port)
        up_writer.write(first)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
            dst.close()

        with contextlib.suppress(ConnectionError):
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return serving(handle)


def redirecting(to_port: int | None = None) -> contextlib.AbstractContextManager[int]:
    """A Redis Cluster node that serves every slot (CLUSTER SLOTS says so: it answers
    CLUSTER SHARDS as Redis before 7.0 does) and answers every key command with ``-MOVED``
    to itself (a redirect loop no real cluster keeps up) or to 127.0.0.1:``to_port``."""
    port: list[int] = []

    def reply(command: list[bytes]) -> bytes:
        name = b" ".join(command[:2]).upper()
        if name == b"CLUSTER SLOTS":
            host = b"127.0.0.1"
            return b"*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n%s\r\n:%d\r\n$2\r\nid\r\n" % (
                host,
                port[0],
            )
        if command[0].upper() == b"INFO":
            text = b"# Server\r\nredis_version:7.0.0\r\n"
            return b"$%d\r\n%s\r\n" % (len(text), text)
        if command[0].upper() in (b"CONFIG", b"CLUSTER"):
            return b"-ERR unknown subcommand\r\n"
        if command[0].upper() == b"ASKING":
            return b"+OK\r\n"
        slot = binascii.crc_hqx(command[1], 0) & 16383 if len(command) > 1 else 0
        return b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, to_port or port[0])

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parser = hiredis.Reader()
        while data := await reader.read(65536):
            parser.feed(data)
            while (command := parser.gets()) is not False:
                writer.write(reply(command))
            await writer.drain()
        writer.close()

    @contextlib.contextmanager
    def started() -> Iterator[int]:
        with serving(handle) as bound:
            port.append(bound)
            yield bound

    return started()
