"""MemcacheTextCodec against a real memcached on loopback: every op in one pipeline."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from kvbench.protocols.base import (
    KEYS_SHIFT,
    NEED_DATA,
    CodecOptions,
    Op,
    Reply,
    ReplyKind,
    parse_stats_text,
)
from kvbench.protocols.memcache_text import MemcacheTextCodec
from tests.support.servers import Server

pytestmark = pytest.mark.integration

K = ReplyKind
Request = tuple[Op, bytes | Sequence[bytes], bytes | None, int]


@pytest.fixture
def prefix() -> bytes:
    """A key prefix no other test uses: the server is shared by the whole session."""
    return b"text:%s:" % uuid.uuid4().hex[:12].encode()


def run_pipeline(server: Server, codec: MemcacheTextCodec, requests: list[Request]) -> list[Reply]:
    """Send every request in one write, read until every announced reply is parsed."""
    out = bytearray()
    announced = sum(codec.encode(op, key, value, out, arg) for op, key, value, arg in requests)
    replies: list[Reply] = []
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(out)
        while len(replies) < announced:
            data = sock.recv(65536)
            if not data:
                codec.feed_eof()
            else:
                codec.feed(data)
            while (reply := codec.next_reply()) is not NEED_DATA:
                assert isinstance(reply, Reply)
                replies.append(reply)
            assert data, "server closed the connection early"
    assert codec.pending() == 0
    return replies


def cas_unique(server: Server, key: bytes) -> int:
    """Read the cas unique of ``key`` with a test-side ``gets`` (Reply does not carry it)."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"gets %s\r\n" % key)
        data = b""
        while not data.endswith(b"END\r\n"):
            data += sock.recv(4096)
    header = data.split(b"\r\n", 1)[0].split(b" ")
    assert header[:2] == [b"VALUE", key]
    return int(header[4])


def test_pipeline_of_every_op(memcached_server: Server, prefix: bytes) -> None:
    a, b, n, missing = prefix + b"a", prefix + b"b", prefix + b"n", prefix + b"missing"
    requests: list[Request] = [
        (Op.SET, a, b"hello", 0),
        (Op.GET, a, None, 0),
        (Op.GET, missing, None, 0),
        (Op.ADD, a, b"again", 0),
        (Op.ADD, b, b"bee", 0),
        (Op.REPLACE, missing, b"x", 0),
        (Op.APPEND, a, b"!", 0),
        (Op.PREPEND, a, b">", 0),
        (Op.GETS, a, None, 0),
        (Op.CAS, a, b"lost", 2**63),
        (Op.CAS, missing, b"x", 1),
        (Op.SET, n, b"10", 0),
        (Op.INCR, n, None, 5),
        (Op.DECR, n, None, 20),
        (Op.INCR, missing, None, 1),
        (Op.INCR, a, None, 1),
        (Op.TOUCH, a, None, 300),
        (Op.TOUCH, missing, None, 300),
        (Op.DELETE, b, None, 0),
        (Op.DELETE, b, None, 0),
        (Op.MGET, [a, missing, n, b], None, 0),
        (Op.STATS, b"", None, 0),
    ]
    replies = run_pipeline(
        memcached_server, MemcacheTextCodec(CodecOptions(keep_payload=True)), requests
    )
    kinds = [r.kind for r in replies]
    assert kinds == [
        K.STORED,
        K.HIT,
        K.MISS,
        K.NOT_STORED,
        K.STORED,
        K.NOT_STORED,
        K.STORED,
        K.STORED,
        K.HIT,
        K.EXISTS,
        K.NOT_FOUND,
        K.STORED,
        K.VALUE,
        K.VALUE,
        K.NOT_FOUND,
        K.ERROR_REPLY,
        K.TOUCHED,
        K.NOT_FOUND,
        K.DELETED,
        K.NOT_FOUND,
        K.HIT,
        K.VALUE,
    ]
    assert replies[1].payload == b"hello"
    assert replies[8].payload == b">hello!"
    assert (replies[12].payload, replies[13].payload) == (b"15", b"0")
    assert replies[15].payload is not None and replies[15].payload.startswith(b"CLIENT_ERROR")
    # protocol.txt: a decr that shortens the number "MAY be space-padded at the end".
    assert (replies[20].keys, replies[20].payload) == (2, b">hello!0 ")
    stats = parse_stats_text(replies[21].payload or b"")
    assert int(stats["pid"]) == memcached_server.proc.pid
    assert sum(r.nbytes for r in replies) > 0


def test_cas_with_the_current_unique_stores(memcached_server: Server, prefix: bytes) -> None:
    key = prefix + b"cas"
    codec = MemcacheTextCodec(CodecOptions(keep_payload=True))
    assert [r.kind for r in run_pipeline(memcached_server, codec, [(Op.SET, key, b"1", 0)])] == [
        K.STORED
    ]
    unique = cas_unique(memcached_server, key)
    replies = run_pipeline(
        memcached_server,
        codec,
        [(Op.CAS, key, b"2", unique), (Op.CAS, key, b"3", unique), (Op.GET, key, None, 0)],
    )
    assert [r.kind for r in replies] == [K.STORED, K.EXISTS, K.HIT]
    assert replies[2].payload == b"2"


def test_noreply_pipeline_keeps_replies_aligned(memcached_server: Server, prefix: bytes) -> None:
    x, y, n = prefix + b"x", prefix + b"y", prefix + b"n"
    codec = MemcacheTextCodec(CodecOptions(keep_payload=True, noreply=True))
    requests: list[Request] = [
        (Op.SET, x, b"one", 0),
        (Op.SET, y, b"two", 0),
        (Op.ADD, x, b"not stored, silently", 0),
        (Op.SET, n, b"1", 0),
        (Op.INCR, n, None, 41),
        (Op.DELETE, y, None, 0),
        (Op.TOUCH, x, None, 300),
        (Op.MGET, [x, y, n], None, 0),
        (Op.GET, y, None, 0),
    ]
    replies = run_pipeline(memcached_server, codec, requests)
    assert [(r.kind, r.keys, r.payload) for r in replies] == [
        (K.HIT, 2, b"one42"),
        (K.MISS, 0, None),
    ]


def test_large_value_arrives_over_many_reads(memcached_server: Server, prefix: bytes) -> None:
    key = prefix + b"big"
    value = bytes(range(256)) * 2000  # 512000 bytes: many recv() calls
    codec = MemcacheTextCodec(CodecOptions(keep_payload=True))
    replies = run_pipeline(
        memcached_server, codec, [(Op.SET, key, value, 0), (Op.GET, key, None, 0)]
    )
    assert [r.kind for r in replies] == [K.STORED, K.HIT]
    assert replies[1].payload == value
    assert replies[1].nbytes == len(b"VALUE %s 0 %d\r\n" % (key, len(value))) + len(value) + 7


def run_batches(
    server: Server, codec: MemcacheTextCodec, ops: list[Op], keys: list[Any], values: list[Any]
) -> list[int]:
    """The engine's path: encode_many per batch of 5, one write, read_kinds per recv()."""
    out = bytearray()
    for start in range(0, len(ops), 5):
        stop = min(start + 5, len(ops))
        codec.encode_many([int(op) for op in ops], keys, values, start, stop, out)
    kinds: list[int] = []
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(out)
        while len(kinds) < len(ops):
            data = sock.recv(4096)
            assert data, "server closed the connection early"
            codec.feed(data)
            codec.read_kinds(kinds)
    assert codec.pending() == 0
    return kinds


def test_batch_paths_against_the_server(memcached_server: Server, prefix: bytes) -> None:
    a, n, missing = prefix + b"a", prefix + b"n", prefix + b"missing"
    big = memoryview(bytes(range(256)) * 400)  # 102400 bytes: hits arrive over many reads
    ops = [Op.SET, Op.GET, Op.GET, Op.SET, Op.INCR, Op.INCR, Op.DECR, Op.MGET, Op.SET]
    ops += [Op.GET, Op.GET, Op.DELETE, Op.DELETE, Op.GET, Op.ADD, Op.TOUCH]
    keys: list[Any] = [a, a, missing, n, n, missing, n, (a, missing, n), a, a, a, a, a, a]
    keys += [missing, missing]
    values: list[Any] = [memoryview(b"hello"), None, None, memoryview(b"10"), None, None]
    values += [None, None, big, None, None, None, None, None, b"bytes", None]
    kinds = run_batches(memcached_server, MemcacheTextCodec(), ops, keys, values)
    hit = K.HIT | 1 << KEYS_SHIFT
    assert kinds == [
        K.STORED,
        hit,
        K.MISS,
        K.STORED,
        K.VALUE,  # incr by one step
        K.NOT_FOUND,
        K.VALUE,
        K.HIT | 2 << KEYS_SHIFT,
        K.STORED,
        hit,
        hit,
        K.DELETED,
        K.NOT_FOUND,
        K.MISS,
        K.STORED,
        K.TOUCHED,
    ]
    codec = MemcacheTextCodec(CodecOptions(keep_payload=True))
    replies = run_pipeline(memcached_server, codec, [(Op.GET, n, None, 0)])
    assert replies[0].payload == b"10"  # +1 -1
