"""MemcacheBinaryCodec: byte-exact requests, every reply kind, incrementality, failures."""

from __future__ import annotations

import struct
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
from kvbench.protocols.memcache_binary import HEADER, MemcacheBinaryCodec
from tests.support.codec_checks import drain, feed_bytewise, feed_whole

K = ReplyKind


def request(
    opcode: int,
    opaque: int,
    key: bytes = b"",
    extras: bytes = b"",
    value: bytes = b"",
    cas: int = 0,
) -> bytes:
    body = len(extras) + len(key) + len(value)
    return (
        HEADER.pack(0x80, opcode, len(key), len(extras), 0, 0, body, opaque, cas)
        + extras
        + key
        + value
    )


def response(
    opcode: int,
    opaque: int,
    status: int = 0,
    key: bytes = b"",
    extras: bytes = b"",
    value: bytes = b"",
    cas: int = 0,
    magic: int = 0x81,
) -> bytes:
    body = len(extras) + len(key) + len(value)
    header = HEADER.pack(magic, opcode, len(key), len(extras), 0, status, body, opaque, cas)
    return header + extras + key + value


def feed_with_trailing(codec: MemcacheBinaryCodec, data: bytes) -> list[Reply]:
    # The start of a further response (a header cut short) must not disturb the replies.
    codec.feed(data + response(0x0A, 0xFFFF)[:10])
    return drain(codec)


FEEDERS = [feed_whole, feed_bytewise, feed_with_trailing]
Feeder = Callable[[MemcacheBinaryCodec, bytes], list[Reply]]


def announce(
    codec: MemcacheBinaryCodec, op: Op, key: object = b"k", value: bytes | None = None, arg: int = 0
) -> bytearray:
    out = bytearray()
    codec.encode(op, key, value, out, arg)
    return out


# -- encoding ---------------------------------------------------------------------------------


def test_get_and_gets_encode_as_get_with_consecutive_opaques() -> None:
    codec = MemcacheBinaryCodec()
    out = bytearray()
    assert codec.encode(Op.GET, b"foo", None, out) == 1
    assert codec.encode(Op.GETS, b"bar", None, out) == 1
    assert bytes(out) == request(0x00, 0, b"foo") + request(0x00, 1, b"bar")
    assert codec.pending() == 2


@pytest.mark.parametrize(("op", "opcode"), [(Op.SET, 0x01), (Op.ADD, 0x02), (Op.REPLACE, 0x03)])
def test_storage_requests_carry_flags_and_expiry_extras(op: Op, opcode: int) -> None:
    codec = MemcacheBinaryCodec(CodecOptions(flags=7, ttl_s=300))
    out = bytearray()
    assert codec.encode(op, b"key", memoryview(b"value"), out) == 1
    assert bytes(out) == request(opcode, 0, b"key", struct.pack(">II", 7, 300), b"value")


def test_cas_is_a_set_with_the_cas_unique_in_the_header() -> None:
    out = announce(MemcacheBinaryCodec(), Op.CAS, b"key", b"v", arg=0xDEADBEEF01)
    assert bytes(out) == request(0x01, 0, b"key", struct.pack(">II", 0, 0), b"v", cas=0xDEADBEEF01)


@pytest.mark.parametrize(("op", "opcode"), [(Op.APPEND, 0x0E), (Op.PREPEND, 0x0F)])
def test_append_and_prepend_have_no_extras(op: Op, opcode: int) -> None:
    assert bytes(announce(MemcacheBinaryCodec(), op, b"key", b"tail")) == request(
        opcode, 0, b"key", value=b"tail"
    )


def test_delete_request() -> None:
    assert bytes(announce(MemcacheBinaryCodec(), Op.DELETE, b"key")) == request(0x04, 0, b"key")


@pytest.mark.parametrize(("op", "opcode"), [(Op.INCR, 0x05), (Op.DECR, 0x06)])
def test_counter_requests_never_create_a_missing_key(op: Op, opcode: int) -> None:
    extras = struct.pack(">QQI", 42, 0, 0xFFFFFFFF)
    assert bytes(announce(MemcacheBinaryCodec(), op, b"n", arg=42)) == request(
        opcode, 0, b"n", extras
    )


def test_touch_request_carries_the_expiry() -> None:
    out = announce(MemcacheBinaryCodec(), Op.TOUCH, b"key", arg=60)
    assert bytes(out) == request(0x1C, 0, b"key", struct.pack(">I", 60))


def test_noop_and_stats_requests() -> None:
    codec = MemcacheBinaryCodec()
    out = bytearray()
    codec.encode(Op.NOOP, b"", None, out)
    codec.encode(Op.STATS, b"", None, out)
    codec.encode(Op.STATS, b"items", None, out)
    assert bytes(out) == request(0x0A, 0) + request(0x10, 1) + request(0x10, 2, b"items")


def test_mget_is_getkq_per_key_then_noop_and_one_reply() -> None:
    codec = MemcacheBinaryCodec()
    out = bytearray()
    assert codec.encode(Op.MGET, [b"a", b"bb", b"ccc"], None, out) == 1
    expected = request(0x0D, 0, b"a") + request(0x0D, 1, b"bb") + request(0x0D, 2, b"ccc")
    assert bytes(out) == expected + request(0x0A, 3)
    assert codec.pending() == 1


@pytest.mark.parametrize(
    ("op", "quiet_opcode", "value", "extras"),
    [
        (Op.SET, 0x11, b"v", struct.pack(">II", 0, 0)),
        (Op.ADD, 0x12, b"v", struct.pack(">II", 0, 0)),
        (Op.REPLACE, 0x13, b"v", struct.pack(">II", 0, 0)),
        (Op.DELETE, 0x14, None, b""),
        (Op.INCR, 0x15, None, struct.pack(">QQI", 3, 0, 0xFFFFFFFF)),
        (Op.DECR, 0x16, None, struct.pack(">QQI", 3, 0, 0xFFFFFFFF)),
        (Op.APPEND, 0x19, b"v", b""),
        (Op.PREPEND, 0x1A, b"v", b""),
    ],
)
def test_noreply_uses_quiet_opcodes_and_announces_no_reply(
    op: Op, quiet_opcode: int, value: bytes | None, extras: bytes
) -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    out = bytearray()
    assert codec.encode(op, b"key", value, out, 3) == 0
    assert bytes(out) == request(quiet_opcode, 0, b"key", extras, value or b"")
    assert codec.pending() == 0


def test_noreply_leaves_gets_touch_and_cas_replying() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    out = bytearray()
    assert codec.encode(Op.GET, b"k", None, out) == 1
    assert codec.encode(Op.TOUCH, b"k", None, out, 5) == 1
    assert codec.encode(Op.CAS, b"k", b"v", out, 9) == 1
    assert codec.pending() == 3


def test_command_cannot_be_encoded() -> None:
    with pytest.raises(ValueError, match="COMMAND"):
        announce(MemcacheBinaryCodec(), Op.COMMAND, [b"x"])


# -- replies ----------------------------------------------------------------------------------

FLAGS = b"\x00\x00\x00\x00"
# (op, request opcode, status, response body parts (extras, value), expected kind)
STATUS_CASES = [
    (Op.GET, 0x00, 0x0000, FLAGS, b"hello", K.HIT),
    (Op.GET, 0x00, 0x0001, b"", b"Not found", K.MISS),
    (Op.GETS, 0x00, 0x0000, FLAGS, b"hello", K.HIT),
    (Op.SET, 0x01, 0x0000, b"", b"", K.STORED),
    (Op.SET, 0x01, 0x0005, b"", b"Not stored.", K.NOT_STORED),
    (Op.ADD, 0x02, 0x0000, b"", b"", K.STORED),
    (Op.ADD, 0x02, 0x0002, b"", b"Data exists for key.", K.NOT_STORED),
    (Op.REPLACE, 0x03, 0x0000, b"", b"", K.STORED),
    (Op.REPLACE, 0x03, 0x0001, b"", b"Not found", K.NOT_STORED),
    (Op.CAS, 0x01, 0x0000, b"", b"", K.STORED),
    (Op.CAS, 0x01, 0x0002, b"", b"Data exists for key.", K.EXISTS),
    (Op.CAS, 0x01, 0x0001, b"", b"Not found", K.NOT_FOUND),
    (Op.APPEND, 0x0E, 0x0000, b"", b"", K.STORED),
    (Op.PREPEND, 0x0F, 0x0005, b"", b"Not stored.", K.NOT_STORED),
    (Op.DELETE, 0x04, 0x0000, b"", b"", K.DELETED),
    (Op.DELETE, 0x04, 0x0001, b"", b"Not found", K.NOT_FOUND),
    (Op.INCR, 0x05, 0x0000, b"", struct.pack(">Q", 15), K.VALUE),
    (Op.DECR, 0x06, 0x0001, b"", b"Not found", K.NOT_FOUND),
    (Op.TOUCH, 0x1C, 0x0000, FLAGS, b"", K.TOUCHED),
    (Op.TOUCH, 0x1C, 0x0001, b"", b"Not found", K.NOT_FOUND),
    (Op.NOOP, 0x0A, 0x0000, b"", b"", K.OK),
    (Op.SET, 0x01, 0x0081, b"", b"Unknown command", K.ERROR_REPLY),
    (Op.SET, 0x01, 0x0082, b"", b"Out of memory", K.ERROR_REPLY),
    (Op.INCR, 0x05, 0x0006, b"", b"Non-numeric server-side value for incr or decr", K.ERROR_REPLY),
    (Op.GET, 0x00, 0x0004, b"", b"Invalid arguments", K.ERROR_REPLY),
]


@pytest.mark.parametrize("feeder", FEEDERS)
@pytest.mark.parametrize(("op", "opcode", "status", "extras", "value", "kind"), STATUS_CASES)
def test_every_status_maps_to_its_reply_kind(
    feeder: Feeder, op: Op, opcode: int, status: int, extras: bytes, value: bytes, kind: ReplyKind
) -> None:
    codec = MemcacheBinaryCodec()
    announce(
        codec,
        op,
        b"k",
        b"v" if op in (Op.SET, Op.ADD, Op.REPLACE, Op.CAS, Op.APPEND, Op.PREPEND) else None,
    )
    data = response(opcode, 0, status, extras=extras, value=value)
    [reply] = feeder(codec, data)
    assert reply.kind == kind
    assert reply.nbytes == len(data)
    if kind == K.ERROR_REPLY:
        assert reply.payload == value
    else:
        assert reply.payload is None
    assert reply.keys == (1 if kind == K.HIT else 0)
    assert codec.pending() == 0


def test_keep_payload_returns_value_bytes_without_extras_or_key() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(keep_payload=True))
    announce(codec, Op.GET)
    [reply] = feed_whole(codec, response(0x00, 0, key=b"k", extras=FLAGS, value=b"payload"))
    assert reply == Reply(K.HIT, 24 + 4 + 1 + 7, b"payload", 1)


def test_keep_payload_gives_counter_text() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(keep_payload=True))
    announce(codec, Op.INCR, arg=1)
    [reply] = feed_whole(codec, response(0x05, 0, value=struct.pack(">Q", 2**64 - 1)))
    assert reply == Reply(K.VALUE, 32, b"18446744073709551615", 0)


def test_counter_value_must_be_eight_bytes() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.INCR, arg=1)
    with pytest.raises(ProtocolError, match="8"):
        feed_whole(codec, response(0x05, 0, value=b"1234"))


def test_error_reply_without_text_names_the_status() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.DELETE)
    [reply] = feed_whole(codec, response(0x04, 0, status=0x0084))
    assert reply == Reply(K.ERROR_REPLY, 24, b"status 0x0084", 0)


def test_error_reply_keeps_the_connection_usable() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.SET, b"k", b"v")
    announce(codec, Op.GET)
    data = response(0x01, 0, 0x0082, value=b"Out of memory") + response(
        0x00, 1, 1, value=b"Not found"
    )
    assert [r.kind for r in feed_whole(codec, data)] == [K.ERROR_REPLY, K.MISS]


@pytest.mark.parametrize("feeder", FEEDERS)
def test_pipelined_replies_come_back_in_order(feeder: Feeder) -> None:
    codec = MemcacheBinaryCodec()
    for op in (Op.GET, Op.SET, Op.DELETE, Op.NOOP):
        announce(codec, op, b"k", b"v" if op == Op.SET else None)
    data = (
        response(0x00, 0, extras=FLAGS, value=b"x" * 100)
        + response(0x01, 1)
        + response(0x04, 2, 1, value=b"Not found")
        + response(0x0A, 3)
    )
    replies = feeder(codec, data)
    assert [r.kind for r in replies] == [K.HIT, K.STORED, K.NOT_FOUND, K.OK]
    assert sum(r.nbytes for r in replies) == len(data)


# -- multi-get --------------------------------------------------------------------------------


@pytest.mark.parametrize("feeder", FEEDERS)
def test_mget_counts_getkq_hits_until_the_noop(feeder: Feeder) -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.MGET, [b"a", b"b", b"c"])
    data = (
        response(0x0D, 0, key=b"a", extras=FLAGS, value=b"1")
        + response(0x0D, 2, key=b"c", extras=FLAGS, value=b"333")
        + response(0x0A, 3)
    )
    assert feeder(codec, data) == [Reply(K.HIT, len(data), None, 2)]


def test_mget_without_hits_is_a_miss() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.MGET, [b"a", b"b"])
    assert feed_whole(codec, response(0x0A, 2)) == [Reply(K.MISS, 24, None, 0)]


def test_mget_of_no_keys_is_a_lone_noop() -> None:
    codec = MemcacheBinaryCodec()
    assert bytes(announce(codec, Op.MGET, [])) == request(0x0A, 0)
    assert feed_whole(codec, response(0x0A, 0)) == [Reply(K.MISS, 24, None, 0)]


def test_mget_getkq_failure_counts_as_unsolicited_error() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.MGET, [b"a", b"b"])
    data = response(0x0D, 0, 0x0082, value=b"Out of memory") + response(0x0A, 2)
    [reply] = feed_whole(codec, data)
    assert (reply.kind, reply.keys, reply.nbytes) == (K.MISS, 0, len(data))
    assert codec.unsolicited_errors == 1


def test_getkq_response_outside_the_multiget_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.GET)  # opaque 0
    announce(codec, Op.MGET, [b"a"])  # getkq opaque 1, noop opaque 2
    codec.feed(response(0x0D, 1, key=b"a", extras=FLAGS, value=b"1"))
    with pytest.raises(ProtocolError):
        codec.next_reply()


def test_getkq_response_for_a_quiet_op_opaque_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    announce(codec, Op.DELETE)  # opaque 0, quiet
    announce(codec, Op.MGET, [b"a"])  # getkq opaque 1, noop opaque 2
    codec.feed(response(0x0D, 0, key=b"a", extras=FLAGS, value=b"1"))
    with pytest.raises(ProtocolError, match="no multi-get key"):
        codec.next_reply()


def test_keep_payload_mget_reports_count_not_values() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(keep_payload=True))
    announce(codec, Op.MGET, [b"a"])
    data = response(0x0D, 0, key=b"a", extras=FLAGS, value=b"1") + response(0x0A, 1)
    assert feed_whole(codec, data) == [Reply(K.HIT, len(data), None, 1)]


# -- stats ------------------------------------------------------------------------------------


@pytest.mark.parametrize("feeder", FEEDERS)
def test_stats_packets_become_one_value_reply(feeder: Feeder) -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.STATS, b"")
    data = (
        response(0x10, 0, key=b"pid", value=b"42")
        + response(0x10, 0, key=b"version", value=b"1.6.18")
        + response(0x10, 0)
    )
    [reply] = feeder(codec, data)
    assert reply == Reply(K.VALUE, len(data), b"pid 42\r\nversion 1.6.18\r\n", 0)
    assert parse_stats_text(reply.payload or b"") == {"pid": "42", "version": "1.6.18"}


def test_stats_error_is_an_error_reply() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.STATS, b"bogus")
    assert feed_whole(codec, response(0x10, 0, 1, value=b"Not found")) == [
        Reply(K.ERROR_REPLY, 33, b"Not found", 0)
    ]


def test_stats_larger_than_the_bound_raises() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(max_reply_bytes=100))
    announce(codec, Op.STATS, b"")
    codec.feed(response(0x10, 0, key=b"a", value=b"1" * 40) * 3)
    with pytest.raises(ReplyTooLarge):
        codec.next_reply()


# -- quiet ops --------------------------------------------------------------------------------


def test_quiet_error_is_counted_not_returned() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    announce(codec, Op.ADD, b"k", b"v")  # opaque 0: fails, answers
    announce(codec, Op.SET, b"k", b"v")  # opaque 1: succeeds, silent
    announce(codec, Op.GET)  # opaque 2
    data = response(0x12, 0, 0x0002, value=b"Data exists for key.") + response(
        0x00, 2, extras=FLAGS, value=b"v"
    )
    replies = feed_bytewise(codec, data)
    assert [r.kind for r in replies] == [K.HIT]
    assert codec.unsolicited_errors == 1
    assert codec.pending() == 0


def test_quiet_error_with_nothing_pending_is_accepted() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    announce(codec, Op.DELETE)
    assert feed_whole(codec, response(0x14, 0, 1, value=b"Not found")) == []
    assert codec.unsolicited_errors == 1


def test_quiet_response_for_a_request_never_sent_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    announce(codec, Op.DELETE)  # opaque 0
    codec.feed(response(0x14, 7, 1))
    with pytest.raises(ProtocolError, match="no request pending"):
        codec.next_reply()


def test_quiet_errors_must_come_in_request_order() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    announce(codec, Op.DELETE)  # opaque 0
    announce(codec, Op.DELETE)  # opaque 1
    codec.feed(response(0x14, 1, 1) + response(0x14, 0, 1))
    with pytest.raises(ProtocolError):
        drain(codec)


# -- protocol errors --------------------------------------------------------------------------


def assert_dead(codec: MemcacheBinaryCodec) -> None:
    with pytest.raises(ProtocolError):
        codec.next_reply()
    with pytest.raises(ProtocolError):
        codec.feed(response(0x0A, 0))


def test_bad_magic_is_a_protocol_error_and_kills_the_codec() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.GET)
    codec.feed(response(0x00, 0, magic=0x80))
    with pytest.raises(ProtocolError, match="magic"):
        codec.next_reply()
    assert_dead(codec)


def test_garbage_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.GET)
    codec.feed(b"VALUE k 0 1\r\nx\r\nEND\r\n" + b"\0" * 8)
    with pytest.raises(ProtocolError):
        codec.next_reply()
    assert_dead(codec)


def test_response_with_nothing_pending_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    codec.feed(response(0x0A, 0))
    with pytest.raises(ProtocolError, match="no request pending"):
        codec.next_reply()
    assert_dead(codec)


def test_opaque_mismatch_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.GET)
    announce(codec, Op.GET)
    codec.feed(response(0x00, 1, extras=FLAGS, value=b"v"))
    with pytest.raises(ProtocolError, match="opaque"):
        codec.next_reply()


def test_opcode_mismatch_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.GET)
    codec.feed(response(0x01, 0))
    with pytest.raises(ProtocolError, match="opcode"):
        codec.next_reply()


def test_key_and_extras_longer_than_body_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.GET)
    codec.feed(HEADER.pack(0x81, 0x00, 10, 4, 0, 0, 8, 0, 0) + b"\0" * 8)
    with pytest.raises(ProtocolError, match="exceed"):
        codec.next_reply()


def test_body_larger_than_the_bound_raises_reply_too_large_from_the_header() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(max_reply_bytes=1000))
    announce(codec, Op.GET)
    codec.feed(HEADER.pack(0x81, 0x00, 0, 4, 0, 0, 1001, 0, 0))
    with pytest.raises(ReplyTooLarge):
        codec.next_reply()
    assert_dead(codec)


def test_body_at_the_bound_is_accepted() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(max_reply_bytes=1000))
    announce(codec, Op.GET)
    [reply] = feed_whole(codec, response(0x00, 0, extras=FLAGS, value=b"x" * 996))
    assert reply.kind == K.HIT


def test_opaques_wrap_around_at_32_bits() -> None:
    codec = MemcacheBinaryCodec()
    codec._next_opaque = 0xFFFFFFFF  # jump to the end of the opaque space
    out = bytearray()
    codec.encode(Op.GET, b"a", None, out)
    codec.encode(Op.GET, b"b", None, out)
    assert bytes(out) == request(0x00, 0xFFFFFFFF, b"a") + request(0x00, 0, b"b")
    data = response(0x00, 0xFFFFFFFF, 1, value=b"Not found") + response(
        0x00, 0, 1, value=b"Not found"
    )
    assert [r.kind for r in feed_whole(codec, data)] == [K.MISS, K.MISS]


# -- EOF --------------------------------------------------------------------------------------


def test_eof_mid_response_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.GET)
    codec.feed(response(0x00, 0, extras=FLAGS, value=b"hello")[:30])
    assert codec.next_reply() is NEED_DATA
    codec.feed_eof()
    with pytest.raises(ProtocolError, match="EOF"):
        codec.next_reply()


def test_eof_mid_header_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    codec.feed(response(0x0A, 0)[:5])
    codec.feed_eof()
    with pytest.raises(ProtocolError, match="EOF"):
        codec.next_reply()


def test_eof_with_replies_pending_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.GET)
    codec.feed_eof()
    with pytest.raises(ProtocolError, match="pending"):
        codec.next_reply()


def test_replies_buffered_before_eof_still_come_out() -> None:
    codec = MemcacheBinaryCodec()
    announce(codec, Op.NOOP)
    codec.feed(response(0x0A, 0))
    codec.feed_eof()
    assert codec.next_reply() == Reply(K.OK, 24, None, 0)
    assert codec.next_reply() is NEED_DATA


def test_feed_after_eof_is_a_protocol_error() -> None:
    codec = MemcacheBinaryCodec()
    codec.feed_eof()
    with pytest.raises(ProtocolError, match="EOF"):
        codec.feed(b"x")
