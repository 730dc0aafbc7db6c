"""A STAND-IN for memcacheq, which Debian does not package: an asyncio TCP server on a
free loopback port, run in a thread, that answers as memcacheq 0.2.1 does.

It is not memcacheq. It follows memcacheq 0.2.1's replies (its memcacheq.c) exactly as far
as kvbench uses them:

- ``set <queue> <flags> <exptime> <bytes>`` + data block enqueues and answers ``STORED``
  (memcacheq has no ``noreply``: a sixth token is an ``ERROR``);
- ``get <queue>`` dequeues the oldest message: ``VALUE <queue> <flags> <bytes>`` + data
  + ``END``; an empty or unknown queue answers just ``END``;
- ``stats`` answers general ``STAT`` lines then ``END``; ``stats queue`` answers
  ``STAT <queue> <enqueued>/<dequeued>`` per queue then ``END``;
- ``delete <queue>`` removes a queue (``DELETED`` / ``NOT_FOUND``); ``version``;
- anything else (``gets``, ``add``, ``incr``, ``replace`` ...) is ``ERROR``;
- ``max_message_bytes=n`` is memcacheq's ``-B n`` (the message body length, 1024 by
  default there; no limit here unless given): a ``set`` of a longer message gets
  ``SERVER_ERROR out of memory storing object`` and its data block is swallowed, as
  memcacheq 0.2.1's ``process_update_command`` does when the item cannot be allocated.

``drop_every=k`` makes it lose every k-th enqueued message (still answering ``STORED``)
and remember the dropped data blocks, so tests can check that kvbench finds exactly those.
``port`` and ``pid`` let a test restart it on the same port as another process (hand the
old one's ``persisted()`` queues over, as memcacheq's BerkeleyDB would: the messages stay,
the ``stats queue`` counts start again). ``extra_reply_every=k`` makes it answer every k-th enqueue with two ``STORED`` lines: a
reply to no request, a fault no real server commits (the client must call it a protocol
error, not crash).

``stall_at_get=k, stall_s=x`` makes it stall as memcacheq did under a Berkeley DB
checkpoint: the connection whose request holds the k-th ``get`` answers nothing for ``x``
seconds from then, while the gets it reads meanwhile still dequeue; then it writes every
answer held (``held_hits`` counts the messages they carry). A client that closes the
connection first never gets them: those messages are dequeued and gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

VERSION = "0.2.1-kvbench-standin"
# memcacheq's default item size limit is far above what tests send; bound the buffer.
MAX_LINE_BYTES = 2048
# memcacheq 0.2.1's reply to a set whose item it cannot allocate (a message over -B).
TOO_LARGE_REPLY = b"SERVER_ERROR out of memory storing object\r\n"


@dataclass
class QueueState:
    """Messages and counters of one queue."""

    messages: deque[tuple[bytes, bytes]] = field(default_factory=deque)  # (flags, data)
    enqueued: int = 0
    dequeued: int = 0


class MemcacheqStandin:
    """The stand-in server. ``start()`` returns its port; ``stop()`` ends it.

    Args:
        drop_every: lose every n-th message enqueued (0: lose none).
        extra_reply_every: answer every n-th enqueue twice (0: never).
        max_message_bytes: memcacheq's ``-B``: refuse longer messages (None: no limit).
        stall_at_get, stall_s: stall the connection of the k-th get this long (0: never).
    """

    def __init__(
        self,
        drop_every: int = 0,
        extra_reply_every: int = 0,
        port: int = 0,
        pid: int | None = None,
        queues: dict[bytes, QueueState] | None = None,
        max_message_bytes: int | None = None,
        stall_at_get: int = 0,
        stall_s: float = 0.0,
    ) -> None:
        self.drop_every = drop_every
        self.stall_at_get = stall_at_get
        self.stall_s = stall_s
        self.held_hits = 0  # messages in answers held by a stall
        self.stalls_ended = 0
        self.max_message_bytes = max_message_bytes
        self.refused = 0
        self.extra_reply_every = extra_reply_every
        self.extra_replies = 0
        self.pid = os.getpid() if pid is None else pid
        self.queues: dict[bytes, QueueState] = queues or {}
        self.dropped: list[bytes] = []
        self.sets = 0
        self.gets = 0
        self.get_hits = 0
        self.connections = 0
        self._started = time.time()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._transports: set[asyncio.Transport] = set()
        self.port = port

    def start(self) -> int:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        self.port = future.result(timeout=10)
        return self.port

    async def _listen(self) -> int:
        self._server = await self._loop.create_server(
            lambda: _Session(self), "127.0.0.1", self.port, reuse_address=True
        )
        return int(self._server.sockets[0].getsockname()[1])

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for transport in list(self._transports):
                transport.abort()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def persisted(self) -> dict[bytes, QueueState]:
        """The queues' messages as a restarted memcacheq finds them: counts from zero."""
        return {name: QueueState(deque(state.messages)) for name, state in self.queues.items()}

    # -- commands (called on the server's loop) ----------------------------------------

    def enqueue(self, queue: bytes, flags: bytes, data: bytes) -> None:
        state = self.queues.setdefault(queue, QueueState())
        state.enqueued += 1
        self.sets += 1
        if self.drop_every and state.enqueued % self.drop_every == 0:
            self.dropped.append(data)
            return
        state.messages.append((flags, data))

    def dequeue(self, queue: bytes) -> tuple[bytes, bytes] | None:
        self.gets += 1
        state = self.queues.get(queue)
        if state is None or not state.messages:
            return None
        state.dequeued += 1
        self.get_hits += 1
        return state.messages.popleft()

    def stats(self) -> bytes:
        lines = [
            ("pid", self.pid),
            ("uptime", int(time.time() - self._started)),
            ("time", int(time.time())),
            ("version", VERSION),
            ("curr_connections", self.connections),
            ("cmd_get", self.gets),
            ("cmd_set", self.sets),
            ("get_hits", self.get_hits),
            ("get_misses", self.gets - self.get_hits),
        ]
        return b"".join(b"STAT %s %s\r\n" % (k.encode(), str(v).encode()) for k, v in lines)

    def stats_queue(self) -> bytes:
        return b"".join(
            b"STAT %s %d/%d\r\n" % (name, state.enqueued, state.dequeued)
            for name, state in self.queues.items()
        )


@contextlib.contextmanager
def running_standin(**options: Any) -> Iterator[MemcacheqStandin]:
    """A started stand-in (``MemcacheqStandin(**options)``), stopped on the way out."""
    server = MemcacheqStandin(**options)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class _Session(asyncio.Protocol):
    """One client connection: parse pipelined commands, answer in one write per read."""

    def __init__(self, server: MemcacheqStandin) -> None:
        self._server = server
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._held: bytearray | None = None  # answers held while stalled

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._server._transports.add(self._transport)  # type: ignore[arg-type]
        self._server.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self._server._transports.discard(self._transport)  # type: ignore[arg-type]
        self._server.connections -= 1

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        out = bytearray()
        while True:
            consumed = self._command(out)
            if consumed == 0:
                break
            del self._buffer[:consumed]
        if len(self._buffer) > MAX_LINE_BYTES and b"\r\n" not in self._buffer:
            out += b"CLIENT_ERROR line too long\r\n"
            self._buffer.clear()
        if self._held is not None:
            self._held += out
        elif out and self._transport is not None:
            self._transport.write(bytes(out))

    def _stall(self, out: bytearray) -> None:
        """Hold every answer from now on for ``stall_s``, then write them at once (the
        answers before it, in ``out``, go now)."""
        if out and self._transport is not None:
            self._transport.write(bytes(out))
        out.clear()
        self._held = bytearray()
        asyncio.get_running_loop().call_later(self._server.stall_s, self._unstall)

    def _unstall(self) -> None:
        held, self._held = self._held, None
        self._server.stalls_ended += 1
        if held and self._transport is not None and not self._transport.is_closing():
            self._transport.write(bytes(held))

    def _command(self, out: bytearray) -> int:
        """Answer the command at the buffer's start; return the bytes it took (0: need more)."""
        buffer = self._buffer
        end = buffer.find(b"\r\n")
        if end < 0:
            return 0
        tokens = bytes(buffer[:end]).split()
        taken = end + 2
        server = self._server
        verb = tokens[0] if tokens else b""
        if verb == b"set" and len(tokens) == 5 and tokens[4].isdigit():
            size = int(tokens[4])
            if len(buffer) < taken + size + 2:
                return 0
            data = bytes(buffer[taken : taken + size])
            if buffer[taken + size : taken + size + 2] != b"\r\n":
                out += b"CLIENT_ERROR bad data chunk\r\n"
                return taken + size + 2
            if server.max_message_bytes is not None and size > server.max_message_bytes:
                server.refused += 1  # not enqueued: the stats queue counts stay
                out += TOO_LARGE_REPLY
                return taken + size + 2
            server.enqueue(tokens[1], tokens[2], data)
            out += b"STORED\r\n"
            if server.extra_reply_every and server.sets % server.extra_reply_every == 0:
                server.extra_replies += 1
                out += b"STORED\r\n"
            return taken + size + 2
        if verb == b"get" and len(tokens) >= 2:
            if server.stall_at_get and server.gets + 1 == server.stall_at_get:
                self._stall(out)
            for queue in tokens[1:]:
                message = server.dequeue(queue)
                if message is not None:
                    if self._held is not None:
                        server.held_hits += 1
                    flags, data = message
                    out += b"VALUE %s %s %d\r\n%s\r\n" % (queue, flags, len(data), data)
            out += b"END\r\n"
        elif tokens == [b"stats"]:
            out += server.stats() + b"END\r\n"
        elif tokens == [b"stats", b"queue"]:
            out += server.stats_queue() + b"END\r\n"
        elif verb == b"delete" and len(tokens) == 2:
            out += b"DELETED\r\n" if server.queues.pop(tokens[1], None) else b"NOT_FOUND\r\n"
        elif tokens == [b"version"]:
            out += b"VERSION %s\r\n" % VERSION.encode()
        elif tokens == [b"quit"]:
            if self._transport is not None:
                self._transport.close()
        else:
            out += b"ERROR\r\n"
        return taken
