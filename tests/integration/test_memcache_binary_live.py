"""MemcacheBinaryCodec against a real memcached on loopback: every op, pipelined."""

from __future__ import annotations

import uuid

import pytest

from kvbench.protocols.base import CodecOptions, Op, ReplyKind, parse_stats_text
from kvbench.protocols.memcache_binary import MemcacheBinaryCodec
from tests.support.codec_checks import exchange
from tests.support.servers import Server

pytestmark = pytest.mark.integration

K = ReplyKind


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> bytes:
    return f"{request.node.name[:40]}:{uuid.uuid4().hex[:8]}:".encode()


def test_every_op_pipelined(memcached_server: Server, prefix: bytes) -> None:
    codec = MemcacheBinaryCodec(CodecOptions(keep_payload=True))
    out = bytearray()
    k, n, missing = prefix + b"k", prefix + b"n", prefix + b"missing"
    script: list[tuple[Op, object, bytes | None, int, ReplyKind, bytes | None]] = [
        (Op.GET, k, None, 0, K.MISS, None),
        (Op.SET, k, b"hello", 0, K.STORED, None),
        (Op.GET, k, None, 0, K.HIT, b"hello"),
        (Op.GETS, k, None, 0, K.HIT, b"hello"),
        (Op.ADD, k, b"x", 0, K.NOT_STORED, None),
        (Op.ADD, n, b"10", 0, K.STORED, None),
        (Op.REPLACE, missing, b"x", 0, K.NOT_STORED, None),
        (Op.REPLACE, k, b"hi", 0, K.STORED, None),
        (Op.APPEND, k, b"!", 0, K.STORED, None),
        (Op.PREPEND, k, b">", 0, K.STORED, None),
        (Op.PREPEND, missing, b">", 0, K.NOT_STORED, None),
        (Op.GET, k, None, 0, K.HIT, b">hi!"),
        (Op.CAS, k, b"x", 1, K.EXISTS, None),
        (Op.CAS, missing, b"x", 1, K.NOT_FOUND, None),
        (Op.INCR, n, None, 5, K.VALUE, b"15"),
        (Op.DECR, n, None, 20, K.VALUE, b"0"),  # memcached clamps decr at 0
        (Op.INCR, missing, None, 1, K.NOT_FOUND, None),  # not created: expiry 0xffffffff
        (Op.INCR, k, None, 1, K.ERROR_REPLY, b"Non-numeric server-side value for incr or decr"),
        (Op.TOUCH, k, None, 100, K.TOUCHED, None),
        (Op.TOUCH, missing, None, 100, K.NOT_FOUND, None),
        (Op.NOOP, b"", None, 0, K.OK, None),
        (Op.DELETE, k, None, 0, K.DELETED, None),
        (Op.DELETE, k, None, 0, K.NOT_FOUND, None),
        (Op.GET, missing, None, 0, K.MISS, None),
    ]
    announced = sum(codec.encode(op, key, value, out, arg) for op, key, value, arg, _, _ in script)
    replies = exchange(memcached_server, codec, out, announced)
    assert [(r.kind, r.payload) for r in replies] == [(kind, p) for *_, kind, p in script]


def test_mget_counts_hits(memcached_server: Server, prefix: bytes) -> None:
    codec = MemcacheBinaryCodec()
    out = bytearray()
    keys = [prefix + b"%d" % i for i in range(10)]
    for key in keys[::2]:
        codec.encode(Op.SET, key, b"v" * 100, out)
    codec.encode(Op.MGET, keys, None, out)
    codec.encode(Op.MGET, [prefix + b"none1", prefix + b"none2"], None, out)
    replies = exchange(memcached_server, codec, out, 7)
    assert [r.kind for r in replies[:5]] == [K.STORED] * 5
    hit, miss = replies[5:]
    assert (hit.kind, hit.keys) == (K.HIT, 5)
    assert hit.nbytes == 5 * (24 + 4 + len(keys[0]) + 100) + 24  # getkq hits + noop
    assert (miss.kind, miss.keys, miss.nbytes) == (K.MISS, 0, 24)


def test_large_value_spans_many_reads(memcached_server: Server, prefix: bytes) -> None:
    codec = MemcacheBinaryCodec(CodecOptions(keep_payload=True))
    out = bytearray()
    value = bytes(range(256)) * 2000  # 512 000 bytes, under memcached's 1 MiB item limit
    codec.encode(Op.SET, prefix + b"big", value, out)
    codec.encode(Op.GET, prefix + b"big", None, out)
    stored, hit = exchange(memcached_server, codec, out, 2)
    assert stored.kind == K.STORED
    assert (hit.kind, hit.payload, hit.nbytes) == (K.HIT, value, 24 + 4 + len(value))


def test_quiet_ops_answer_only_failures(memcached_server: Server, prefix: bytes) -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True, keep_payload=True))
    out = bytearray()
    k = prefix + b"k"
    assert codec.encode(Op.SET, k, b"1", out) == 0
    assert codec.encode(Op.ADD, k, b"2", out) == 0  # fails: exists
    assert codec.encode(Op.DELETE, prefix + b"missing", None, out) == 0  # fails: not found
    assert codec.encode(Op.INCR, k, None, out, 4) == 0  # succeeds silently
    assert codec.encode(Op.REPLACE, prefix + b"missing", b"x", out) == 0  # fails
    assert codec.encode(Op.APPEND, k, b"0", out) == 0
    assert codec.encode(Op.GET, k, None, out) == 1
    [reply] = exchange(memcached_server, codec, out, 1)
    assert (reply.kind, reply.payload) == (K.HIT, b"50")
    assert codec.unsolicited_errors == 3


def test_stats_reply_parses(memcached_server: Server) -> None:
    codec = MemcacheBinaryCodec()
    out = bytearray()
    codec.encode(Op.STATS, b"", None, out)
    codec.encode(Op.STATS, b"settings", None, out)
    general, settings = exchange(memcached_server, codec, out, 2)
    stats = parse_stats_text(general.payload or b"")
    assert general.kind == K.VALUE
    assert stats["version"].startswith("1.6")
    assert int(stats["pid"]) > 0
    assert "cmd_get" in stats
    assert parse_stats_text(settings.payload or b"")["maxbytes"] == str(64 * 1024 * 1024)


def test_unknown_stats_group_is_an_error_reply(memcached_server: Server) -> None:
    codec = MemcacheBinaryCodec()
    out = bytearray()
    codec.encode(Op.STATS, b"no-such-group", None, out)
    codec.encode(Op.NOOP, b"", None, out)
    error, ok = exchange(memcached_server, codec, out, 2)
    assert error.kind == K.ERROR_REPLY
    assert error.payload
    assert ok.kind == K.OK
