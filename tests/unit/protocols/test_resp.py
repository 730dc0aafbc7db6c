"""RespCodec: byte-exact requests, every reply kind (RESP2 and RESP3), incrementality, failures."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols.base import (
    NEED_DATA,
    CodecOptions,
    Op,
    Reply,
    ReplyKind,
    parse_stats_text,
)
from kvbench.protocols.resp import RespCodec, info_as_stats_text, wire_nbytes
from tests.support.codec_checks import drain, feed_bytewise, feed_whole

K = ReplyKind


def feed_with_trailing(codec: RespCodec, data: bytes) -> list[Reply]:
    # The start of a further reply must not disturb the replies before it.
    codec.feed(data + b"$10\r\nabc")
    return drain(codec)


FEEDERS = [feed_whole, feed_bytewise, feed_with_trailing]
Feeder = Callable[[RespCodec, bytes], list[Reply]]


def encoded(
    op: Op,
    key: object = b"k",
    value: bytes | memoryview | None = None,
    arg: int = 0,
    **options: object,
) -> bytes:
    codec = RespCodec(CodecOptions(**options))  # type: ignore[arg-type]
    out = bytearray()
    assert codec.encode(op, key, value, out, arg) == 1
    assert codec.pending() == 1
    return bytes(out)


# -- encoding ---------------------------------------------------------------------------------


def test_get_request() -> None:
    assert encoded(Op.GET, b"foo") == b"*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n"


def test_set_request_with_and_without_ttl() -> None:
    assert encoded(Op.SET, b"k", b"val") == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nval\r\n"
    assert encoded(Op.SET, b"k", memoryview(b"val"), ttl_s=300) == (
        b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nval\r\n$2\r\nEX\r\n$3\r\n300\r\n"
    )


def test_add_and_replace_are_set_nx_and_set_xx() -> None:
    assert encoded(Op.ADD, b"k", b"v") == b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n"
    assert encoded(Op.REPLACE, b"k", b"v", ttl_s=5) == (
        b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nXX\r\n$2\r\nEX\r\n$1\r\n5\r\n"
    )


def test_delete_request() -> None:
    assert encoded(Op.DELETE, b"key") == b"*2\r\n$3\r\nDEL\r\n$3\r\nkey\r\n"


def test_counters_use_incr_for_one_and_incrby_otherwise() -> None:
    assert encoded(Op.INCR, b"n", arg=1) == b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"
    assert encoded(Op.INCR, b"n", arg=25) == b"*3\r\n$6\r\nINCRBY\r\n$1\r\nn\r\n$2\r\n25\r\n"
    assert encoded(Op.DECR, b"n", arg=1) == b"*2\r\n$4\r\nDECR\r\n$1\r\nn\r\n"
    assert encoded(Op.DECR, b"n", arg=-3) == b"*3\r\n$6\r\nDECRBY\r\n$1\r\nn\r\n$2\r\n-3\r\n"


def test_mget_request() -> None:
    assert encoded(Op.MGET, [b"a", b"bc"]) == b"*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$2\r\nbc\r\n"


def test_touch_is_expire() -> None:
    assert encoded(Op.TOUCH, b"k", arg=60) == b"*3\r\n$6\r\nEXPIRE\r\n$1\r\nk\r\n$2\r\n60\r\n"


@pytest.mark.parametrize("expiry", [0, -1])
def test_touch_without_positive_expiry_is_refused(expiry: int) -> None:
    with pytest.raises(ValueError, match="EXPIRE"):
        encoded(Op.TOUCH, b"k", arg=expiry)


def test_append_ping_and_info_requests() -> None:
    assert encoded(Op.APPEND, b"k", b"xy") == b"*3\r\n$6\r\nAPPEND\r\n$1\r\nk\r\n$2\r\nxy\r\n"
    assert encoded(Op.NOOP, b"") == b"*1\r\n$4\r\nPING\r\n"
    assert encoded(Op.STATS, b"") == b"*1\r\n$4\r\nINFO\r\n"
    assert encoded(Op.STATS, b"stats") == b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n"


def test_command_argv_as_sequence_or_words() -> None:
    expected = b"*3\r\n$4\r\nHGET\r\n$1\r\nh\r\n$5\r\nf o o\r\n"
    assert encoded(Op.COMMAND, [b"HGET", "h", b"f o o"]) == expected
    assert encoded(Op.COMMAND, b"LRANGE l 0 -1") == (
        b"*4\r\n$6\r\nLRANGE\r\n$1\r\nl\r\n$1\r\n0\r\n$2\r\n-1\r\n"
    )
    with pytest.raises(ValueError, match="argv"):
        encoded(Op.COMMAND, [])


@pytest.mark.parametrize("op", [Op.GETS, Op.CAS, Op.PREPEND])
def test_ops_without_a_redis_form_are_refused(op: Op) -> None:
    with pytest.raises(ValueError, match=op.name):
        encoded(op, b"k", b"v")


def test_setup_requests() -> None:
    codec = RespCodec(protocol=3)
    out = bytearray()
    assert codec.encode_hello(out) == 1
    assert codec.encode_hello(out, password="pw") == 1
    assert codec.encode_hello(out, b"user", b"pw") == 1
    assert codec.encode_auth(out, "pw") == 1
    assert codec.encode_auth(out, "pw", "user") == 1
    assert codec.encode_select(out, 3) == 1
    assert bytes(out) == (
        b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"
        b"*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$7\r\ndefault\r\n$2\r\npw\r\n"
        b"*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$4\r\nuser\r\n$2\r\npw\r\n"
        b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
        b"*3\r\n$4\r\nAUTH\r\n$4\r\nuser\r\n$2\r\npw\r\n"
        b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"
    )
    assert codec.pending() == 6


def test_protocol_must_be_2_or_3() -> None:
    with pytest.raises(ValueError, match="2 or 3"):
        RespCodec(protocol=4)


# -- replies ----------------------------------------------------------------------------------

# (op, arg, wire reply, expected reply)
REPLY_CASES = [
    (Op.GET, 0, b"$5\r\nhello\r\n", Reply(K.HIT, 11, None, 1)),
    (Op.GET, 0, b"$0\r\n\r\n", Reply(K.HIT, 6, None, 1)),
    (Op.GET, 0, b"$-1\r\n", Reply(K.MISS, 5)),
    (Op.SET, 0, b"+OK\r\n", Reply(K.STORED, 5)),
    (Op.ADD, 0, b"+OK\r\n", Reply(K.STORED, 5)),
    (Op.ADD, 0, b"$-1\r\n", Reply(K.NOT_STORED, 5)),
    (Op.REPLACE, 0, b"$-1\r\n", Reply(K.NOT_STORED, 5)),
    (Op.DELETE, 0, b":1\r\n", Reply(K.DELETED, 4)),
    (Op.DELETE, 0, b":0\r\n", Reply(K.NOT_FOUND, 4)),
    (Op.INCR, 1, b":12\r\n", Reply(K.VALUE, 5)),
    (Op.DECR, 4, b":-3\r\n", Reply(K.VALUE, 5)),
    (Op.MGET, 0, b"*2\r\n$1\r\na\r\n$-1\r\n", Reply(K.HIT, 16, None, 1)),
    (Op.MGET, 0, b"*2\r\n$-1\r\n$-1\r\n", Reply(K.MISS, 14, None, 0)),
    (Op.TOUCH, 5, b":1\r\n", Reply(K.TOUCHED, 4)),
    (Op.TOUCH, 5, b":0\r\n", Reply(K.NOT_FOUND, 4)),
    (Op.APPEND, 0, b":10\r\n", Reply(K.STORED, 5)),
    (Op.NOOP, 0, b"+PONG\r\n", Reply(K.OK, 7)),
    (
        Op.SET,
        0,
        b"-OOM command not allowed\r\n",
        Reply(K.ERROR_REPLY, 26, b"OOM command not allowed"),
    ),
    (Op.GET, 0, b"-WRONGTYPE Operation\r\n", Reply(K.ERROR_REPLY, 22, b"WRONGTYPE Operation")),
    (Op.INCR, 1, b"-ERR not an integer\r\n", Reply(K.ERROR_REPLY, 21, b"ERR not an integer")),
    (Op.COMMAND, 0, b"+OK\r\n", Reply(K.OK, 5)),
    (Op.COMMAND, 0, b":7\r\n", Reply(K.OK, 4)),
    (Op.COMMAND, 0, b"*2\r\n$1\r\na\r\n:1\r\n", Reply(K.OK, 15)),
    (Op.COMMAND, 0, b"$-1\r\n", Reply(K.OK, 5)),
    (Op.COMMAND, 0, b"-ERR unknown command\r\n", Reply(K.ERROR_REPLY, 22, b"ERR unknown command")),
]


def value_for(op: Op) -> bytes | None:
    return b"v" if op in (Op.SET, Op.ADD, Op.REPLACE, Op.APPEND) else None


def key_for(op: Op) -> object:
    return {Op.MGET: [b"a", b"b"], Op.COMMAND: [b"X"]}.get(op, b"k")


@pytest.mark.parametrize("feeder", FEEDERS)
@pytest.mark.parametrize(("op", "arg", "wire", "expected"), REPLY_CASES)
def test_every_reply_shape_maps_to_its_reply(
    feeder: Feeder, op: Op, arg: int, wire: bytes, expected: Reply
) -> None:
    codec = RespCodec()
    codec.encode(op, key_for(op), value_for(op), bytearray(), arg)
    assert feeder(codec, wire) == [expected]
    assert expected.nbytes == len(wire)
    assert codec.pending() == 0


# RESP3-only shapes: null is "_", maps, doubles, booleans.
RESP3_CASES = [
    (Op.GET, b"_\r\n", Reply(K.MISS, 3)),
    (Op.ADD, b"_\r\n", Reply(K.NOT_STORED, 3)),
    (Op.MGET, b"*2\r\n$1\r\na\r\n_\r\n", Reply(K.HIT, 14, None, 1)),
    (Op.COMMAND, b"%1\r\n$1\r\na\r\n:1\r\n", Reply(K.OK, 15)),
    (Op.COMMAND, b",2.5\r\n", Reply(K.OK, 6)),
    (Op.COMMAND, b"#t\r\n", Reply(K.OK, 4)),
    (Op.COMMAND, b"~2\r\n:1\r\n:2\r\n", Reply(K.OK, 12)),
]


@pytest.mark.parametrize("feeder", FEEDERS)
@pytest.mark.parametrize(("op", "wire", "expected"), RESP3_CASES)
def test_resp3_reply_shapes(feeder: Feeder, op: Op, wire: bytes, expected: Reply) -> None:
    codec = RespCodec(protocol=3)
    codec.encode(op, key_for(op), value_for(op), bytearray(), 1)
    assert feeder(codec, wire) == [expected]
    assert expected.nbytes == len(wire)


def test_keep_payload_returns_values_and_numbers() -> None:
    codec = RespCodec(CodecOptions(keep_payload=True))
    out = bytearray()
    codec.encode(Op.GET, b"k", None, out)
    codec.encode(Op.INCR, b"n", None, out, 1)
    codec.encode(Op.COMMAND, [b"ECHO", b"x"], None, out)
    codec.encode(Op.COMMAND, [b"DBSIZE"], None, out)
    replies = feed_whole(codec, b"$3\r\nabc\r\n:42\r\n$1\r\nx\r\n:9\r\n")
    assert [r.payload for r in replies] == [b"abc", b"42", b"x", b"9"]
    assert replies[0] == Reply(K.HIT, 9, b"abc", 1)


def test_info_becomes_stats_lines() -> None:
    info = b"# Server\r\nredis_version:7.0.15\r\nuptime:3\r\n\r\n# Stats\r\nkeyspace_hits:10\r\n"
    codec = RespCodec()
    codec.encode(Op.STATS, b"", None, bytearray())
    wire = b"$%d\r\n%b\r\n" % (len(info), info)
    [reply] = feed_bytewise(codec, wire)
    assert reply.kind == K.VALUE
    assert reply.nbytes == len(wire)
    assert parse_stats_text(reply.payload or b"") == {
        "redis_version": "7.0.15",
        "uptime": "3",
        "keyspace_hits": "10",
    }


def test_info_as_stats_text_keeps_colons_in_values() -> None:
    assert info_as_stats_text(b"db0:keys=1,expires=0\r\n") == b"db0 keys=1,expires=0\r\n"


@pytest.mark.parametrize(
    ("wire", "protocol"),
    [
        (b"$3\r\nabc\r\n", 2),
        (b"$-1\r\n", 2),
        (b"_\r\n", 3),
        (b":-12345\r\n", 2),
        (b"-ERR x\r\n", 2),
        (b"*3\r\n$1\r\na\r\n*1\r\n:1\r\n$-1\r\n", 2),
        (b"%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n#f\r\n", 3),
        (b"*0\r\n", 2),
        # as deep as hiredis reads (1,024 nested), past Python's recursion limit
        (b"*1\r\n" * 1023 + b"*2\r\n:1\r\n$-1\r\n", 2),
    ],
)
def test_wire_nbytes_is_exact_for_bulk_null_integer_error_and_aggregates(
    wire: bytes, protocol: int
) -> None:
    import hiredis

    reader = hiredis.Reader()
    reader.feed(wire)
    assert wire_nbytes(reader.gets(), 3 if protocol == 3 else 5) == len(wire)


def test_setup_replies() -> None:
    codec = RespCodec(protocol=3)
    out = bytearray()
    codec.encode_hello(out)
    codec.encode_auth(out, "pw")
    codec.encode_select(out, 1)
    hello = b"%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n"
    replies = feed_whole(codec, hello + b"-WRONGPASS invalid\r\n+OK\r\n")
    assert replies == [
        Reply(K.OK, len(hello)),
        Reply(K.ERROR_REPLY, 20, b"WRONGPASS invalid"),
        Reply(K.OK, 5),
    ]


def test_setup_reply_of_the_wrong_shape_is_a_protocol_error() -> None:
    codec = RespCodec()
    codec.encode_select(bytearray(), 1)
    codec.feed(b":1\r\n")
    with pytest.raises(ProtocolError, match="connection setup"):
        codec.next_reply()


def test_wire_nbytes_of_an_unknown_value_is_zero() -> None:
    assert wire_nbytes(object(), 5) == 0


@pytest.mark.parametrize("feeder", FEEDERS)
def test_resp3_push_messages_are_skipped(feeder: Feeder) -> None:
    codec = RespCodec(protocol=3)
    codec.encode(Op.GET, b"k", None, bytearray())
    push = b">3\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n$-1\r\n"
    assert feeder(codec, push + b"$1\r\nv\r\n" + push) == [Reply(K.HIT, 7, None, 1)]
    assert codec.push_messages == 2


@pytest.mark.parametrize("feeder", FEEDERS)
def test_pipelined_replies_come_back_in_order(feeder: Feeder) -> None:
    codec = RespCodec()
    out = bytearray()
    for op in (Op.SET, Op.GET, Op.GET, Op.DELETE, Op.NOOP):
        codec.encode(op, b"k", value_for(op), out)
    wire = b"+OK\r\n$3\r\nabc\r\n$-1\r\n:1\r\n+PONG\r\n"
    replies = feeder(codec, wire)
    assert [r.kind for r in replies] == [K.STORED, K.HIT, K.MISS, K.DELETED, K.OK]
    assert sum(r.nbytes for r in replies) == len(wire)


# -- protocol errors --------------------------------------------------------------------------


def assert_dead(codec: RespCodec) -> None:
    with pytest.raises(ProtocolError):
        codec.next_reply()
    with pytest.raises(ProtocolError):
        codec.feed(b"+OK\r\n")


def test_garbage_is_a_protocol_error_and_kills_the_codec() -> None:
    codec = RespCodec()
    codec.encode(Op.GET, b"k", None, bytearray())
    codec.feed(b"?what\r\n")
    with pytest.raises(ProtocolError, match="RESP"):
        codec.next_reply()
    assert_dead(codec)


@pytest.mark.parametrize(
    "wire",
    [
        b"%1\r\n*1\r\n:1\r\n:1\r\n",  # a map keyed by an array: hiredis raises TypeError
        b",abc\r\n",
        b":99999999999999999999999\r\n",
        b"$-2\r\n",
        b"=3\r\nabc\r\n",
    ],
)
def test_every_parser_failure_is_a_protocol_error(wire: bytes) -> None:
    codec = RespCodec(protocol=3)
    codec.encode(Op.COMMAND, [b"X"], None, bytearray())
    codec.feed(wire)
    with pytest.raises(ProtocolError):
        codec.next_reply()
    assert_dead(codec)


def test_reply_with_nothing_pending_is_a_protocol_error() -> None:
    codec = RespCodec()
    codec.feed(b"+OK\r\n")
    with pytest.raises(ProtocolError, match="no request pending"):
        codec.next_reply()
    assert_dead(codec)


@pytest.mark.parametrize(
    ("op", "wire"),
    [
        (Op.GET, b":1\r\n"),
        (Op.SET, b":1\r\n"),
        (Op.DELETE, b"+OK\r\n"),
        (Op.INCR, b"$1\r\n1\r\n"),
        (Op.MGET, b"$1\r\na\r\n"),
        (Op.TOUCH, b"+OK\r\n"),
        (Op.APPEND, b"+OK\r\n"),
        (Op.NOOP, b"+OK\r\n"),
        (Op.STATS, b":1\r\n"),
        (Op.MGET, b"*2\r\n$1\r\na\r\n:1\r\n"),
        (Op.MGET, b"*1\r\n*0\r\n"),
    ],
)
def test_reply_that_cannot_answer_its_request_is_a_protocol_error(op: Op, wire: bytes) -> None:
    codec = RespCodec()
    codec.encode(op, key_for(op), value_for(op), bytearray(), 1)
    codec.feed(wire)
    with pytest.raises(ProtocolError, match="cannot answer"):
        codec.next_reply()
    assert_dead(codec)


def test_unparsed_bytes_beyond_the_bound_raise_reply_too_large() -> None:
    codec = RespCodec(CodecOptions(max_reply_bytes=100))
    codec.encode(Op.GET, b"k", None, bytearray())
    codec.feed(b"$1000\r\n" + b"x" * 50)
    assert codec.next_reply() is NEED_DATA
    codec.feed(b"x" * 60)
    with pytest.raises(ReplyTooLarge):
        codec.next_reply()
    assert_dead(codec)


def test_many_small_replies_do_not_add_up_to_too_large() -> None:
    codec = RespCodec(CodecOptions(max_reply_bytes=100))
    out = bytearray()
    for _ in range(50):
        codec.encode(Op.SET, b"k", b"v", out)
    assert len(feed_whole(codec, b"+OK\r\n" * 50)) == 50


def test_eof_mid_reply_is_a_protocol_error() -> None:
    codec = RespCodec()
    codec.encode(Op.GET, b"k", None, bytearray())
    codec.feed(b"$5\r\nhel")
    assert codec.next_reply() is NEED_DATA
    codec.feed_eof()
    with pytest.raises(ProtocolError, match="EOF"):
        codec.next_reply()


def test_eof_with_replies_pending_is_a_protocol_error() -> None:
    codec = RespCodec()
    codec.encode(Op.NOOP, b"", None, bytearray())
    codec.feed_eof()
    with pytest.raises(ProtocolError, match="pending"):
        codec.next_reply()


def test_replies_buffered_before_eof_still_come_out() -> None:
    codec = RespCodec()
    codec.encode(Op.NOOP, b"", None, bytearray())
    codec.feed(b"+PONG\r\n")
    codec.feed_eof()
    assert codec.next_reply() == Reply(K.OK, 7)
    assert codec.next_reply() is NEED_DATA
    with pytest.raises(ProtocolError, match="EOF"):
        codec.feed(b"+OK\r\n")
