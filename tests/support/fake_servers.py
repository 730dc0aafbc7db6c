"""Servers that misbehave in ways a real one will not, on free loopback ports.

Each runs an asyncio server on a thread of its own for the length of a ``with`` block:
``silent`` takes connections and never answers; ``stats_error`` answers ``ERROR`` to
``stats`` (as some memcached proxies do) and passes every other connection through to a
real memcached; ``closing`` closes every connection on its first request; ``redirecting``
is a Redis Cluster node that sends every key elsewhere; ``doubling`` answers every request
twice (``doubling_cluster_node``: as a Redis Cluster's only master); ``admitting`` passes
connections through to a real server and, after a given number of them, stops listening
(the server gone at a point the test chooses);
``hanging_up`` answers memcached text as one that stores nothing and closes each
connection after a given number of answers (a server ending connections mid-run);
``pushing`` is a RESP3 server that sends push messages between its replies, which Redis
does only to a client that asked for them (client tracking, pub/sub).
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator

import hiredis

from tests.support.reply_grammar import packet

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.contextmanager
def serving(handler: Handler, admit: int | None = None) -> Iterator[int]:
    """Run ``handler`` for each connection to 127.0.0.1:PORT; yields PORT. With ``admit``,
    the listener closes once that many connections came: later connects are refused."""
    loop = asyncio.new_event_loop()
    ready: list[int] = []
    started = threading.Event()
    stop = asyncio.Event()
    admitted = 0

    async def admitting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal admitted
        admitted += 1
        if admitted == admit:
            server.close()  # stops listening; the connections taken go on
        await handler(reader, writer)

    async def main() -> None:
        nonlocal server
        server = await asyncio.start_server(admitting, "127.0.0.1", 0)
        ready.append(server.sockets[0].getsockname()[1])
        started.set()
        async with server:
            await stop.wait()

    server: asyncio.Server
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
        await _relay(reader, writer, backend_port, first)

    return serving(handle)


def admitting(backend_port: int, admit: int) -> contextlib.AbstractContextManager[int]:
    """The first ``admit`` connections pass through to the backend; then it stops listening,
    so the next connect is refused while the connections taken go on to their end."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _relay(reader, writer, backend_port)

    return serving(handle, admit)


async def _relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    backend_port: int,
    first: bytes = b"",
) -> None:
    """Pass one connection through to 127.0.0.1:``backend_port`` (``first`` already read)."""
    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", backend_port)
    up_writer.write(first)

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
        dst.close()

    with contextlib.suppress(ConnectionError):
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def redirecting(to_port: int | None = None) -> contextlib.AbstractContextManager[int]:
    """A Redis Cluster node that serves every slot (CLUSTER SLOTS says so: it answers
    CLUSTER SHARDS as Redis before 7.0 does) and answers every key command with ``-MOVED``
    to itself (a redirect loop no real cluster keeps up) or to 127.0.0.1:``to_port``."""

    def reply(command: list[bytes], port: int) -> bytes:
        if command[0].upper() == b"ASKING":
            return b"+OK\r\n"
        slot = binascii.crc_hqx(command[1], 0) & 16383 if len(command) > 1 else 0
        return b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, to_port or port)

    return _cluster_node(reply)


def doubling_cluster_node() -> contextlib.AbstractContextManager[int]:
    """A Redis Cluster node that serves every slot (as ``redirecting``'s), stores nothing
    and sends every key command's reply twice, in one write (as ``doubling``'s)."""

    def reply(command: list[bytes], port: int) -> bytes:
        answer, twice = _resp_answer(command)
        return answer * (2 if twice else 1)

    return _cluster_node(reply)


def _cluster_node(
    reply: Callable[[list[bytes], int], bytes],
) -> contextlib.AbstractContextManager[int]:
    """A one-node Redis Cluster on a free port: CLUSTER SLOTS names it the master of every
    slot, INFO says Redis 7.0, CONFIG and other CLUSTER commands are refused (CLUSTER
    SHARDS as Redis before 7.0 refuses it), and ``reply(command, its port)`` answers the
    rest."""
    port: list[int] = []

    def answer(command: list[bytes]) -> bytes:
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
        return reply(command, port[0])

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parser = hiredis.Reader()
        while data := await reader.read(65536):
            parser.feed(data)
            out = bytearray()
            while (command := parser.gets()) is not False:
                out += answer(command)
            writer.write(bytes(out))
            await writer.drain()

    @contextlib.contextmanager
    def started() -> Iterator[int]:
        with serving(_until_closed(handle)) as bound:
            port.append(bound)
            yield bound

    return started()


# doubling: memcached binary opcodes answered (get, set, delete, incr, decr, noop, version,
# stat, getk/getkq), and the statuses of a server that stores nothing.
_BINARY_MISS = 0x0001  # key not found
_BINARY_STORED = {0x01, 0x02, 0x03}  # set, add, replace


def _until_closed(answer: Handler) -> Handler:
    """``answer`` a connection until either side ends it: the client discarding it is no
    error of the server's."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            await answer(reader, writer)
        writer.close()

    return handle


def _binary_answer(header: bytes) -> tuple[bytes, bool]:
    """The reply to one binary request (its 24-byte header), and whether to send it twice."""
    opcode, opaque = header[1], int.from_bytes(header[12:16], "big")
    if opcode == 0x10:  # stat: one statistic, then the empty key that ends them
        return packet(0x10, opaque, key=b"pid", value=b"1") + packet(0x10, opaque), False
    if opcode == 0x0B:  # version
        return packet(0x0B, opaque, value=b"1.6.0"), False
    if opcode in _BINARY_STORED or opcode == 0x0A:  # a store, a noop
        return packet(opcode, opaque), True
    if opcode in (0x0D, 0x09):  # quiet gets: a miss is silent (not even a doubled one)
        return b"", False
    return packet(opcode, opaque, _BINARY_MISS, value=b"Not found"), True


def _text_answer(words: list[bytes]) -> tuple[bytes, bool]:
    """The reply to one memcached text or meta request line, and whether to send it twice."""
    verb = words[0]
    token = next((w for w in words[1:] if w.startswith(b"O")), None)
    echo = b" " + token if token else b""
    if verb == b"stats":
        extra = b"STAT maxconns 1024\r\n" if words[1:2] == [b"settings"] else b""
        return b"STAT pid 1\r\n" + extra + b"END\r\n", False
    if verb == b"version":
        return b"VERSION 1.6.0\r\n", False
    text = {
        b"get": b"END",
        b"gets": b"END",
        b"set": b"STORED",
        b"add": b"STORED",
        b"replace": b"STORED",
        b"delete": b"NOT_FOUND",
        b"incr": b"NOT_FOUND",
        b"decr": b"NOT_FOUND",
        b"touch": b"NOT_FOUND",
        b"mg": b"EN" + echo,
        b"ms": b"HD" + echo,
        b"md": b"NF" + echo,
        b"ma": b"NF" + echo,
        b"mn": b"MN",
    }.get(verb, b"ERROR")
    return text + b"\r\n", True


def _resp_answer(command: list[bytes]) -> tuple[bytes, bool]:
    """The reply to one RESP command, and whether to send it twice."""
    verb = command[0].upper() if command else b""
    if verb == b"INFO":
        info = b"# Server\r\nredis_version:7.0.0\r\nuptime_in_seconds:1\r\n"
        return b"$%d\r\n%b\r\n" % (len(info), info), False
    if verb == b"CONFIG":
        return b"*0\r\n", False
    if verb in (b"HELLO", b"AUTH", b"SELECT", b"CLUSTER", b"COMMAND"):
        return b"-ERR unknown command\r\n", False
    reply = {b"GET": b"$-1", b"SET": b"+OK", b"PING": b"+PONG", b"INCR": b":1"}.get(verb, b":0")
    return reply + b"\r\n", True


def _split_text(buffer: bytearray) -> list[bytes] | None:
    """The words of the first whole text/meta request in ``buffer`` (removed), or None."""
    eol = buffer.find(b"\r\n")
    if eol < 0:
        return None
    words = bytes(buffer[:eol]).split(b" ")
    end = eol + 2
    if words[0] in (b"set", b"add", b"replace", b"append", b"prepend", b"cas"):
        end += int(words[4]) + 2
    elif words[0] == b"ms":
        end += int(words[2]) + 2
    if len(buffer) < end:
        return None
    del buffer[:end]
    return words


def doubling(resp: bool = False) -> contextlib.AbstractContextManager[int]:
    """A server that stores nothing and sends every data request's reply twice (stats,
    version and connection setup once, so that the probe passes): memcached text, meta
    (tokens echoed) and binary (opaques echoed; the first byte of a connection decides),
    or RESP with ``resp``. Both copies go out in one write."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parser = hiredis.Reader()
        buffer = bytearray()
        while data := await reader.read(65536):
            out = bytearray()
            buffer += data
            answers: list[tuple[bytes, bool]] = []
            if resp:
                parser.feed(data)
                while (command := parser.gets()) is not False:
                    answers.append(_resp_answer(command))
            elif buffer[:1] == b"\x80":
                while len(buffer) >= 24 and len(buffer) >= 24 + int.from_bytes(buffer[8:12], "big"):
                    answers.append(_binary_answer(bytes(buffer[:24])))
                    del buffer[: 24 + int.from_bytes(buffer[8:12], "big")]
            else:
                while (words := _split_text(buffer)) is not None:
                    answers.append(_text_answer(words))
            for reply, twice in answers:
                out += reply * (2 if twice else 1)
            writer.write(bytes(out))
            await writer.drain()

    return serving(_until_closed(answer))


# A RESP3 push message: client tracking's invalidation of a key.
PUSH = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\nkey:1\r\n"


@contextlib.contextmanager
def pushing(every: int = 3) -> Iterator[tuple[int, dict[bytes, int]]]:
    """A RESP3 server that stores nothing (GET: a null, SET: OK) and sends a push message
    before every ``every``-th reply and after the last of each read. Yields its port and
    the commands it answered by name (``b"PUSH"``: the pushes sent), read once the block
    ends."""
    counts: dict[bytes, int] = {}

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parser = hiredis.Reader()
        while data := await reader.read(65536):
            parser.feed(data)
            out = bytearray()
            while (command := parser.gets()) is not False:
                verb = command[0].upper()
                counts[verb] = counts.get(verb, 0) + 1
                if verb == b"HELLO":  # a RESP3 map (the codec takes any as its OK)
                    out += b"%1\r\n$6\r\nserver\r\n$5\r\nredis\r\n"
                    continue
                if verb in (b"GET", b"SET") and counts[verb] % every == 0:
                    out += PUSH
                    counts[b"PUSH"] = counts.get(b"PUSH", 0) + 1
                out += {b"GET": b"_\r\n", b"SET": b"+OK\r\n"}.get(verb) or _resp_answer(command)[0]
            if out:
                out += PUSH  # (none pending after it, or the next reply not yet sent)
                counts[b"PUSH"] = counts.get(b"PUSH", 0) + 1
                writer.write(bytes(out))
                await writer.drain()

    with serving(_until_closed(answer)) as port:
        yield port, counts


def hanging_up(after: int) -> contextlib.AbstractContextManager[int]:
    """A memcached text server that stores nothing and closes each connection once it has
    answered ``after`` data requests on it (stats and version are not counted)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answered, buffer = 0, bytearray()
        with contextlib.suppress(ConnectionError):
            while answered < after and (data := await reader.read(65536)):
                buffer += data
                out = bytearray()
                while answered < after and (words := _split_text(buffer)) is not None:
                    reply, _ = _text_answer(words)
                    out += reply
                    answered += words[0] not in (b"stats", b"version")
                writer.write(bytes(out))
                await writer.drain()
        writer.close()

    return serving(handle)
