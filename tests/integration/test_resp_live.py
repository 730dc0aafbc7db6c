"""RespCodec against a real redis-server on loopback: every op pipelined, RESP2 and RESP3."""

from __future__ import annotations

import socket
import uuid

import pytest

from kvbench.protocols.base import NEED_DATA, CodecOptions, Op, Reply, ReplyKind, parse_stats_text
from kvbench.protocols.resp import RespCodec
from tests.support.servers import Server

pytestmark = pytest.mark.integration

K = ReplyKind


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> bytes:
    return f"{request.node.name[:40]}:{uuid.uuid4().hex[:8]}:".encode()


def read_replies(sock: socket.socket, codec: RespCodec, expected: int) -> list[Reply]:
    replies: list[Reply] = []
    while len(replies) < expected:
        data = sock.recv(65536)
        if not data:
            codec.feed_eof()
        else:
            codec.feed(data)
        while (reply := codec.next_reply()) is not NEED_DATA:
            assert isinstance(reply, Reply)
            replies.append(reply)
    return replies


def exchange(server: Server, codec: RespCodec, out: bytearray, expected: int) -> list[Reply]:
    """Send ``out`` on a fresh connection; read until ``expected`` replies came back."""
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(out)
        replies = read_replies(sock, codec, expected)
    assert codec.pending() == 0
    return replies


def every_op_script(
    prefix: bytes,
) -> list[tuple[Op, object, bytes | None, int, ReplyKind, bytes | None]]:
    k, n, missing, lst = prefix + b"k", prefix + b"n", prefix + b"missing", prefix + b"list"
    return [
        (Op.GET, k, None, 0, K.MISS, None),
        (Op.SET, k, b"hello", 0, K.STORED, None),
        (Op.GET, k, None, 0, K.HIT, b"hello"),
        (Op.ADD, k, b"x", 0, K.NOT_STORED, None),
        (Op.ADD, n, b"10", 0, K.STORED, None),
        (Op.REPLACE, missing, b"x", 0, K.NOT_STORED, None),
        (Op.REPLACE, k, b"hi", 0, K.STORED, None),
        (Op.APPEND, k, b"!", 0, K.STORED, None),
        (Op.GET, k, None, 0, K.HIT, b"hi!"),
        (Op.INCR, n, None, 1, K.VALUE, b"11"),
        (Op.INCR, n, None, 5, K.VALUE, b"16"),
        (Op.DECR, n, None, 1, K.VALUE, b"15"),
        (Op.DECR, n, None, 20, K.VALUE, b"-5"),
        (Op.INCR, k, None, 1, K.ERROR_REPLY, b"ERR value is not an integer or out of range"),
        (Op.MGET, [k, missing, n], None, 0, K.HIT, None),
        (Op.MGET, [missing], None, 0, K.MISS, None),
        (Op.TOUCH, k, None, 100, K.TOUCHED, None),
        (Op.TOUCH, missing, None, 100, K.NOT_FOUND, None),
        (Op.NOOP, b"", None, 0, K.OK, None),
        (Op.COMMAND, [b"RPUSH", lst, b"a", b"b"], None, 0, K.OK, None),
        (Op.GET, lst, None, 0, K.ERROR_REPLY, None),  # WRONGTYPE, checked below
        (Op.COMMAND, [b"LRANGE", lst, b"0", b"-1"], None, 0, K.OK, None),
        (Op.COMMAND, [b"SET", prefix + b"c", b"1"], None, 0, K.OK, None),
        (Op.COMMAND, [b"NO-SUCH-COMMAND"], None, 0, K.ERROR_REPLY, None),
        (Op.DELETE, k, None, 0, K.DELETED, None),
        (Op.DELETE, k, None, 0, K.NOT_FOUND, None),
    ]


def check_every_op(
    replies: list[Reply],
    script: list[tuple[Op, object, bytes | None, int, ReplyKind, bytes | None]],
) -> None:
    assert [r.kind for r in replies] == [kind for *_, kind, _ in script]
    for reply, (*_, payload) in zip(replies, script, strict=True):
        if payload is not None:
            assert reply.payload == payload
    assert replies[14].keys == 2  # MGET k missing n
    wrongtype = replies[20]
    assert (wrongtype.payload or b"").startswith(b"WRONGTYPE")
    assert replies[21].keys == 0  # LRANGE: a command's reply is ok or error, nothing more


@pytest.mark.parametrize("protocol", [2, 3])
def test_every_op_pipelined(redis_server: Server, prefix: bytes, protocol: int) -> None:
    codec = RespCodec(CodecOptions(keep_payload=True), protocol=protocol)
    out = bytearray()
    setup = codec.encode_hello(out) if protocol == 3 else 0
    script = every_op_script(prefix)
    announced = sum(codec.encode(op, key, value, out, arg) for op, key, value, arg, _, _ in script)
    replies = exchange(redis_server, codec, out, setup + announced)
    if protocol == 3:
        hello = replies.pop(0)
        assert hello.kind == K.OK
    check_every_op(replies, script)
    null = 3 if protocol == 3 else 5
    assert replies[0].nbytes == null  # GET miss
    assert replies[2].nbytes == len(b"$5\r\nhello\r\n")


def test_set_with_ttl_expires(redis_server: Server, prefix: bytes) -> None:
    codec = RespCodec(CodecOptions(ttl_s=100))
    out = bytearray()
    codec.encode(Op.SET, prefix + b"t", b"v", out)
    codec.encode(Op.ADD, prefix + b"u", b"v", out)
    codec.encode(Op.COMMAND, [b"TTL", prefix + b"t"], None, out)
    codec.encode(Op.COMMAND, [b"TTL", prefix + b"u"], None, out)
    codec2 = RespCodec(CodecOptions(keep_payload=True))
    replies = exchange(redis_server, codec, out, 4)
    assert [r.kind for r in replies] == [K.STORED, K.STORED, K.OK, K.OK]
    out = bytearray()
    codec2.encode(Op.COMMAND, [b"TTL", prefix + b"t"], None, out)
    [ttl] = exchange(redis_server, codec2, out, 1)
    assert 90 <= int(ttl.payload or b"0") <= 100


def test_setup_commands(redis_server: Server) -> None:
    codec = RespCodec()
    out = bytearray()
    codec.encode_auth(out, "secret")  # no password configured: an error reply, not a failure
    codec.encode_select(out, 1)
    codec.encode_select(out, 9999)
    auth, select, bad_select = exchange(redis_server, codec, out, 3)
    assert auth.kind == K.ERROR_REPLY
    assert select == Reply(K.OK, 5)
    assert bad_select.kind == K.ERROR_REPLY
    assert b"DB index" in (bad_select.payload or b"")


def test_hello_with_wrong_password_is_an_error_reply(redis_server: Server) -> None:
    codec = RespCodec(protocol=3)
    out = bytearray()
    codec.encode_hello(out, "nobody", "wrong")
    codec.encode(Op.NOOP, b"", None, out)
    hello, pong = exchange(redis_server, codec, out, 2)
    assert hello.kind == K.ERROR_REPLY
    assert pong.kind == K.OK


def test_info_parses_as_stats(redis_server: Server) -> None:
    for protocol in (2, 3):
        codec = RespCodec(protocol=protocol)
        out = bytearray()
        setup = codec.encode_hello(out) if protocol == 3 else 0
        codec.encode(Op.STATS, b"", None, out)
        codec.encode(Op.STATS, b"stats", None, out)
        *_, everything, section = exchange(redis_server, codec, out, setup + 2)
        stats = parse_stats_text(everything.payload or b"")
        assert stats["redis_version"].startswith("7.")
        assert "keyspace_hits" in parse_stats_text(section.payload or b"")


def test_large_value_spans_many_reads(redis_server: Server, prefix: bytes) -> None:
    codec = RespCodec(CodecOptions(keep_payload=True))
    out = bytearray()
    value = bytes(range(256)) * 8192  # 2 MiB
    codec.encode(Op.SET, prefix + b"big", memoryview(value), out)
    codec.encode(Op.GET, prefix + b"big", None, out)
    stored, hit = exchange(redis_server, codec, out, 2)
    assert stored.kind == K.STORED
    assert hit.payload == value
    assert hit.nbytes == len(b"$%d\r\n" % len(value)) + len(value) + 2


def test_resp3_push_messages_are_skipped(redis_server: Server, prefix: bytes) -> None:
    key = prefix + b"tracked"
    codec = RespCodec(protocol=3)
    with socket.create_connection((redis_server.host, redis_server.port), timeout=5) as sock:
        out = bytearray()
        codec.encode_hello(out)
        codec.encode(Op.COMMAND, [b"CLIENT", b"TRACKING", b"ON"], None, out)
        codec.encode(Op.GET, key, None, out)
        sock.sendall(out)
        hello, tracking, miss = read_replies(sock, codec, 3)
        assert (hello.kind, tracking.kind, miss.kind) == (K.OK, K.OK, K.MISS)

        other = RespCodec()
        other_out = bytearray()
        other.encode(Op.SET, key, b"changed", other_out)
        assert exchange(redis_server, other, other_out, 1)[0].kind == K.STORED

        # The invalidation push is already on its way; the PING reply comes after it.
        out = bytearray()
        codec.encode(Op.NOOP, b"", None, out)
        sock.sendall(out)
        assert read_replies(sock, codec, 1) == [Reply(K.OK, 7)]
    assert codec.push_messages == 1
