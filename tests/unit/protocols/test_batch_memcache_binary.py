"""MemcacheBinaryCodec's batch path: encode_many and read_kinds against encode and next_reply."""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols.base import (
    KEYS_SHIFT,
    NEED_DATA,
    ClientCodec,
    CodecOptions,
    Op,
    Reply,
    ReplyKind,
)
from kvbench.protocols.memcache_binary import HEADER, MemcacheBinaryCodec

K = ReplyKind
FLAGS = b"\x00\x00\x00\x07"
MASK = 0xFFFFFFFF


def code(kind: ReplyKind, keys: int = 0) -> int:
    return int(kind) | keys << KEYS_SHIFT


def response(
    opcode: int,
    opaque: int,
    status: int = 0,
    key: bytes = b"",
    extras: bytes = b"",
    value: bytes = b"",
    magic: int = 0x81,
) -> bytes:
    body = len(extras) + len(key) + len(value)
    header = HEADER.pack(magic, opcode, len(key), len(extras), 0, status, body, opaque, 0)
    return header + extras + key + value


def requests_in(data: bytes) -> list[tuple[int, int, bytes]]:
    """Test-side request reader: (opcode, opaque, key) per packet."""
    found = []
    pos = 0
    while pos < len(data):
        _magic, opcode, keylen, extlen, _dt, _vb, body, opaque, _cas = HEADER.unpack_from(data, pos)
        key = data[pos + 24 + extlen : pos + 24 + extlen + keylen]
        found.append((opcode, opaque, key))
        pos += 24 + body
    assert pos == len(data)
    return found


def start_at(codec: MemcacheBinaryCodec, opaque: int) -> MemcacheBinaryCodec:
    """Make the codec's next request take ``opaque`` (to cross the end of the space)."""
    codec._next_opaque = opaque
    codec._answered = (opaque - 1) & MASK
    return codec


def test_binary_codec_is_a_client_codec() -> None:
    codec: ClientCodec = MemcacheBinaryCodec()  # mypy checks the Protocol
    assert codec.pending() == 0


# -- encode_many ------------------------------------------------------------------------------

BATCH_OPS = [
    Op.GET,
    Op.GETS,
    Op.SET,
    Op.ADD,
    Op.REPLACE,
    Op.CAS,
    Op.APPEND,
    Op.PREPEND,
    Op.DELETE,
    Op.INCR,
    Op.DECR,
    Op.TOUCH,
    Op.NOOP,
    Op.STATS,
    Op.MGET,
]
keys_st = st.binary(max_size=20)
values_st = st.one_of(st.binary(max_size=40), st.binary(max_size=40).map(lambda b: memoryview(b)))
# Opaques from the start of the space, and a few requests before its end.
first_opaques = st.one_of(st.just(0), st.integers(MASK - 40, MASK))


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, Any, Any]:
    """(int(op), key, value) as the engine passes them; a value for every op."""
    op = draw(st.sampled_from(BATCH_OPS))
    key: Any
    if op == Op.MGET:
        key = tuple(draw(st.lists(keys_st, max_size=5)))
    elif op in (Op.NOOP, Op.STATS):
        key = draw(st.sampled_from([b"", b"items"]))
    else:
        key = draw(keys_st)
    return int(op), key, draw(values_st)


def step(op: int) -> int:
    """The arg encode_many uses: one step for incr/decr, 0 for everything else."""
    return 1 if op in (Op.INCR, Op.DECR) else 0


def per_op(codec: MemcacheBinaryCodec, batch: list[tuple[int, Any, Any]], out: bytearray) -> None:
    for op, key, value in batch:
        assert codec.encode(Op(op), key, value, out, step(op)) == 1


def columns(batch: list[tuple[int, Any, Any]]) -> tuple[list[int], list[Any], list[Any]]:
    return [op for op, _, _ in batch], [key for _, key, _ in batch], [v for _, _, v in batch]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(requests(), max_size=40),
    st.builds(CodecOptions, flags=st.sampled_from([0, 7]), ttl_s=st.sampled_from([0, 300])),
    first_opaques,
    st.binary(max_size=8),
    st.data(),
)
def test_encode_many_is_byte_identical_to_encode(
    batch: list[tuple[int, Any, Any]],
    options: CodecOptions,
    first: int,
    prefix: bytes,
    data: st.DataObject,
) -> None:
    start = data.draw(st.integers(0, len(batch)))
    stop = data.draw(st.integers(start, len(batch)))
    reference = start_at(MemcacheBinaryCodec(options), first)
    codec = start_at(MemcacheBinaryCodec(options), first)
    expected = bytearray(prefix)
    out = bytearray(prefix)
    ops, keys, values = columns(batch)
    # Twice: the second batch reads the packers cached by the first.
    for _ in range(2):
        per_op(reference, batch[start:stop], expected)
        assert codec.encode_many(ops, keys, values, start, stop, out) == stop - start
        assert out == expected
        assert codec.pending() == reference.pending()
        assert codec._next_opaque == reference._next_opaque


def test_encode_many_requests() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(flags=7, ttl_s=60))
    out = bytearray(b"..")
    ops = [int(Op.GET), int(Op.SET), int(Op.DELETE), int(Op.INCR), int(Op.MGET), int(Op.GET)]
    keys: list[Any] = [b"a", b"bc", b"d", b"n", (b"x", b"y"), b"e"]
    values: list[Any] = [None, memoryview(b"xyz"), None, None, None, None]
    assert codec.encode_many(ops, keys, values, 0, 6, out) == 6

    def request(
        opcode: int, opaque: int, key: bytes, extras: bytes = b"", value: bytes = b""
    ) -> bytes:
        body = len(extras) + len(key) + len(value)
        header = HEADER.pack(0x80, opcode, len(key), len(extras), 0, 0, body, opaque, 0)
        return header + extras + key + value

    assert bytes(out) == (
        b".."
        + request(0x00, 0, b"a")
        + request(0x01, 1, b"bc", struct.pack(">II", 7, 60), b"xyz")
        + request(0x04, 2, b"d")
        + request(0x05, 3, b"n", struct.pack(">QQI", 1, 0, MASK))  # one step: a delta of 1
        + request(0x0D, 4, b"x")
        + request(0x0D, 5, b"y")
        + request(0x0A, 6, b"")
        + request(0x00, 7, b"e")
    )
    assert codec.pending() == 6


def test_multiget_keys_that_reach_the_end_of_the_opaque_space() -> None:
    # The batch fits before the end of the space, its getkq packets do not.
    batch: list[tuple[int, Any, Any]] = [(int(Op.MGET), (b"a", b"b", b"c", b"d", b"e"), None)]
    batch += [(int(Op.GET), b"k%d" % i, None) for i in range(6)]
    reference = start_at(MemcacheBinaryCodec(), MASK - 10)
    codec = start_at(MemcacheBinaryCodec(), MASK - 10)
    expected = bytearray()
    per_op(reference, batch, expected)
    out = bytearray()
    assert codec.encode_many(*columns(batch), 0, len(batch), out) == len(batch)
    assert out == expected
    assert [opaque for _, opaque, _ in requests_in(bytes(out))][-3:] == [MASK - 1, MASK, 0]
    assert codec._next_opaque == reference._next_opaque == 1


def test_empty_range_encodes_nothing() -> None:
    codec = MemcacheBinaryCodec()
    out = bytearray(b"x")
    assert codec.encode_many([int(Op.GET)], [b"k"], [None], 0, 0, out) == 0
    assert out == b"x"
    assert codec.pending() == 0


def test_noreply_codec_refuses_encode_many() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    out = bytearray()
    with pytest.raises(ValueError, match="noreply"):
        codec.encode_many([int(Op.SET)], [b"k"], [b"v"], 0, 1, out)
    assert out == b""
    assert codec.pending() == 0


@pytest.mark.parametrize("first", [0, MASK - 2])
def test_a_refused_op_leaves_buffer_fifo_and_opaques_as_they_were(first: int) -> None:
    codec = start_at(MemcacheBinaryCodec(), first)
    out = bytearray(b"before")
    ops = [int(Op.GET), int(Op.MGET), int(Op.SET), int(Op.COMMAND), int(Op.GET)]
    keys: list[Any] = [b"a", (b"b", b"c"), b"d", (b"X",), b"e"]
    with pytest.raises(ValueError, match="COMMAND"):
        codec.encode_many(ops, keys, [None, None, b"v", None, None], 0, 5, out)
    assert out == b"before"
    assert codec.pending() == 0
    assert codec._next_opaque == first
    assert codec._mget_keys == {}
    # The codec goes on as if the batch had not been tried.
    reference = start_at(MemcacheBinaryCodec(), first)
    expected = bytearray(b"before")
    reference.encode(Op.MGET, (b"a",), None, expected)
    codec.encode_many([int(Op.MGET)], [(b"a",)], [None], 0, 1, out)
    assert out == expected


def test_a_wrong_value_type_leaves_buffer_and_fifo_as_they_were() -> None:
    codec = MemcacheBinaryCodec()
    out = bytearray()
    with pytest.raises(TypeError):
        codec.encode_many([int(Op.GET), int(Op.SET)], [b"a", b"b"], [None, None], 0, 2, out)
    assert out == b""
    assert codec.pending() == 0
    assert codec._next_opaque == 0


# -- read_kinds -------------------------------------------------------------------------------

# (op, key, response to the request with opaque 0 (its noop's opaque for MGET), value)
KIND_CASES: list[tuple[Op, Any, bytes, int]] = [
    (Op.GET, b"k", response(0x00, 0, extras=FLAGS, value=b"abc"), code(K.HIT, 1)),
    (Op.GET, b"k", response(0x00, 0, extras=FLAGS), code(K.HIT, 1)),
    (Op.GET, b"k", response(0x00, 0, 1, value=b"Not found"), code(K.MISS)),
    (Op.GET, b"k", response(0x00, 0, 0x84, value=b"Out of memory"), code(K.ERROR_REPLY)),
    (Op.SET, b"k", response(0x01, 0), code(K.STORED)),
    (Op.SET, b"k", response(0x01, 0, 2, value=b"Data exists"), code(K.EXISTS)),
    (Op.SET, b"k", response(0x01, 0, 5), code(K.NOT_STORED)),
    (Op.ADD, b"k", response(0x02, 0, 2), code(K.NOT_STORED)),
    (Op.DELETE, b"k", response(0x04, 0), code(K.DELETED)),
    (Op.DELETE, b"k", response(0x04, 0, 1), code(K.NOT_FOUND)),
    (Op.INCR, b"k", response(0x05, 0, value=struct.pack(">Q", 9)), code(K.VALUE)),
    (Op.INCR, b"k", response(0x05, 0, 1), code(K.NOT_FOUND)),
    (Op.INCR, b"k", response(0x05, 0, 6, value=b"Non-numeric"), code(K.ERROR_REPLY)),
    (Op.TOUCH, b"k", response(0x1C, 0, extras=FLAGS), code(K.TOUCHED)),
    (Op.NOOP, b"", response(0x0A, 0), code(K.OK)),
    (
        Op.MGET,
        (b"a", b"b", b"c"),
        response(0x0D, 0, key=b"a", extras=FLAGS, value=b"1")
        + response(0x0D, 2, key=b"c", extras=FLAGS, value=b"3")
        + response(0x0A, 3),
        code(K.HIT, 2),
    ),
    (Op.MGET, (b"a",), response(0x0A, 1), code(K.MISS)),
    (
        Op.STATS,
        b"",
        response(0x10, 0, key=b"pid", value=b"1") + response(0x10, 0),
        code(K.VALUE),
    ),
]


@pytest.mark.parametrize(("op", "key", "wire", "expected"), KIND_CASES)
def test_read_kinds_values(op: Op, key: Any, wire: bytes, expected: int) -> None:
    codec = MemcacheBinaryCodec()
    codec.encode_many([int(op)], [key], [b"v"], 0, 1, bytearray())
    codec.feed(wire)
    kinds = [-1]  # appended to, not replaced
    assert codec.read_kinds(kinds) == 1
    assert kinds == [-1, expected]
    assert codec.pending() == 0
    assert codec.read_kinds(kinds) == 0


STATUSES = [0, 0, 0, 1, 2, 5, 0x81, 0x84]


@st.composite
def server_answers(draw: st.DrawFn, request_stream: bytes) -> bytes:
    """What a server could send to these requests: mostly well formed, sometimes not."""
    parts = []
    for opcode, opaque, key in requests_in(request_stream):
        if opcode == 0x0D:  # getkq: a hit, or nothing, now and then a failure
            status = draw(st.sampled_from([0, 0, 1, 0x84, None]))
            if status is not None:
                value = b"v" if status == 0 else b"Not found"
                parts.append(
                    response(0x0D, opaque, status, key, FLAGS if status == 0 else b"", value)
                )
            continue
        if opcode == 0x10:  # stat lines, then the empty one
            for i in range(draw(st.integers(0, 2))):
                parts.append(response(0x10, opaque, key=b"s%d" % i, value=b"%d" % i))
            parts.append(response(0x10, opaque))
            continue
        status = draw(st.sampled_from(STATUSES))
        extras, value = b"", b""
        if status == 0 and opcode in (0x00, 0x1C):
            extras, value = FLAGS, draw(st.binary(max_size=20))
        elif status == 0 and opcode in (0x05, 0x06):
            value = struct.pack(">Q", 5) if draw(st.integers(0, 9)) else b"12"
        elif status:
            value = b"failed"
        parts.append(response(opcode, opaque, status, extras=extras, value=value))
    stream = bytearray(b"".join(parts))
    if stream and draw(st.integers(0, 7)) == 0:  # one damaged byte
        stream[draw(st.integers(0, len(stream) - 1))] = draw(st.integers(0, 255))
    if draw(st.integers(0, 15)) == 0:  # an extra response that answers nothing
        stream += response(0x00, 12345)
    return bytes(stream)


def next_reply_codes(
    codec: MemcacheBinaryCodec, stream: bytes, bounds: list[int]
) -> tuple[list[int], bool]:
    """next_reply over the chunks: the codes, and whether it raised ProtocolError."""
    codes: list[int] = []
    try:
        for lo, hi in pairwise(bounds):
            codec.feed(stream[lo:hi])
            while (reply := codec.next_reply()) is not NEED_DATA:
                assert isinstance(reply, Reply)
                codes.append(code(reply.kind, reply.keys))
        codec.feed_eof()
        assert codec.next_reply() is NEED_DATA
    except ProtocolError:
        return codes, True
    return codes, False


def read_kinds_codes(
    codec: MemcacheBinaryCodec, stream: bytes, bounds: list[int]
) -> tuple[list[int], bool]:
    codes: list[int] = []
    try:
        for lo, hi in pairwise(bounds):
            codec.feed(stream[lo:hi])
            before = len(codes)
            assert codec.read_kinds(codes) == len(codes) - before
        codec.feed_eof()
        assert codec.read_kinds(codes) == 0
    except ProtocolError:
        return codes, True
    return codes, False


@settings(max_examples=300, deadline=None)
@given(
    st.lists(requests(), max_size=20),
    st.lists(st.booleans(), min_size=20, max_size=20),
    first_opaques,
    st.sampled_from([1 << 20, 30]),
    st.lists(st.integers(min_value=0), max_size=10),
    st.data(),
)
def test_read_kinds_gives_what_next_reply_gives_whatever_the_chunking(
    batch: list[tuple[int, Any, Any]],
    batched: list[bool],
    first: int,
    max_reply_bytes: int,
    cuts: list[int],
    data: st.DataObject,
) -> None:
    options = CodecOptions(max_reply_bytes=max_reply_bytes)
    reference = start_at(MemcacheBinaryCodec(options), first)
    codec = start_at(MemcacheBinaryCodec(options), first)
    ops, keys, values = columns(batch)
    out = bytearray()
    i = 0
    # The codec under test announces runs of requests with encode_many and single ones with
    # encode, interleaved; the reference uses encode only.
    while i < len(batch):
        run = 3 if batched[i] else 1
        if batched[i]:
            codec.encode_many(ops, keys, values, i, min(i + run, len(batch)), out)
        else:
            codec.encode(Op(ops[i]), keys[i], values[i], out, step(ops[i]))
        i += run
    expected_out = bytearray()
    per_op(reference, batch, expected_out)
    assert out == expected_out
    stream = data.draw(server_answers(bytes(out)))
    bounds = [0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]
    expected, expected_failure = next_reply_codes(reference, stream, bounds)
    got, failed = read_kinds_codes(codec, stream, bounds)
    assert got == expected
    assert failed == expected_failure
    assert codec.unsolicited_errors == reference.unsolicited_errors
    if failed:
        assert_dead(codec)
    else:
        assert codec.pending() == 0


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([Op.SET, Op.DELETE, Op.INCR, Op.GET, Op.MGET]), max_size=15),
    st.lists(st.sampled_from([0, 1, 5, 0x84]), min_size=15, max_size=15),
    st.lists(st.integers(min_value=0), max_size=6),
)
def test_read_kinds_with_quiet_requests_gives_what_next_reply_gives(
    ops: list[Op], statuses: list[int], cuts: list[int]
) -> None:
    reference = MemcacheBinaryCodec(CodecOptions(noreply=True))
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    out = bytearray()
    for op in ops:
        key: Any = (b"a", b"b") if op == Op.MGET else b"k"
        reference.encode(op, key, b"v", bytearray())
        codec.encode(op, key, b"v", out)
    parts = []
    for (opcode, opaque, key), status in zip(requests_in(bytes(out)), statuses, strict=False):
        if opcode == 0x0D:
            parts.append(response(0x0D, opaque, key=key, extras=FLAGS) if status == 0 else b"")
        elif opcode == 0x0A or opcode == 0x00:
            parts.append(response(opcode, opaque, status, value=b"x" if status else b""))
        elif status:  # a quiet request answers only when it fails
            parts.append(response(opcode, opaque, status, value=b"failed"))
    stream = b"".join(parts)
    bounds = [0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]
    assert read_kinds_codes(codec, stream, bounds) == next_reply_codes(reference, stream, bounds)
    assert codec.unsolicited_errors == reference.unsolicited_errors


def assert_dead(codec: MemcacheBinaryCodec) -> None:
    with pytest.raises(ProtocolError):
        codec.read_kinds([])
    with pytest.raises(ProtocolError):
        codec.next_reply()
    with pytest.raises(ProtocolError):
        codec.feed(response(0x0A, 0))


def test_protocol_error_mid_batch_keeps_the_replies_before_it() -> None:
    codec = MemcacheBinaryCodec()
    ops = [int(Op.GET), int(Op.SET), int(Op.GET), int(Op.GET)]
    codec.encode_many(ops, [b"a", b"b", b"c", b"d"], [None, b"v", None, None], 0, 4, bytearray())
    codec.feed(
        response(0x00, 0, extras=FLAGS, value=b"x")
        + response(0x01, 1)
        + response(0x00, 2, magic=0x80)
        + response(0x00, 3, 1)
    )
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="bad magic"):
        codec.read_kinds(kinds)
    assert kinds == [code(K.HIT, 1), code(K.STORED)]
    assert_dead(codec)


@pytest.mark.parametrize(
    ("second", "wire", "error"),
    [
        (Op.GET, response(0x01, 1), "opcode 0x01 answers a GET"),
        (Op.GET, response(0x00, 7), "out of order"),
        (Op.GET, HEADER.pack(0x81, 0, 0, 4, 0, 0, 2, 1, 0) + b"\0\0", "exceed the body"),
        (Op.INCR, response(0x05, 1, value=b"1"), "expected 8"),
    ],
)
def test_malformed_response_mid_batch(second: Op, wire: bytes, error: str) -> None:
    codec = MemcacheBinaryCodec()
    ops = [int(Op.SET), int(second), int(Op.GET)]
    codec.encode_many(ops, [b"a", b"b", b"c"], [b"v"] * 3, 0, 3, bytearray())
    codec.feed(response(0x01, 0) + wire)
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match=error):
        codec.read_kinds(kinds)
    assert kinds == [code(K.STORED)]
    assert_dead(codec)


@pytest.mark.parametrize("one_read", [True, False])
def test_a_response_to_a_request_answered_in_the_batch_is_out_of_order(one_read: bool) -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=True))
    out = bytearray()
    codec.encode(Op.GET, b"a", None, out)  # opaque 0
    codec.encode(Op.SET, b"b", b"v", out)  # opaque 1, quiet: answers only on failure
    codec.encode(Op.GET, b"c", None, out)  # opaque 2
    kinds: list[int] = []
    late = response(0x11, 0, 0x84, value=b"failed")  # a setq failure, with GET a's opaque
    if one_read:
        codec.feed(response(0x00, 0, 1) + late)
    else:
        codec.feed(response(0x00, 0, 1))
        assert codec.read_kinds(kinds) == 1
        codec.feed(late)
    with pytest.raises(ProtocolError, match="out of order"):
        codec.read_kinds(kinds)
    assert kinds == [code(K.MISS)]


def test_oversized_body_raises_before_it_arrives() -> None:
    codec = MemcacheBinaryCodec(CodecOptions(max_reply_bytes=100))
    codec.encode_many([int(Op.GET)] * 2, [b"a", b"b"], [None, None], 0, 2, bytearray())
    codec.feed(response(0x00, 0, 1) + response(0x00, 1, extras=FLAGS, value=b"x" * 200)[:40])
    kinds: list[int] = []
    with pytest.raises(ReplyTooLarge):
        codec.read_kinds(kinds)
    assert kinds == [code(K.MISS)]
    assert_dead(codec)


def test_read_kinds_at_eof() -> None:
    codec = MemcacheBinaryCodec()
    codec.encode_many([int(Op.GET)] * 2, [b"a", b"b"], [None, None], 0, 2, bytearray())
    codec.feed(response(0x00, 0, 1))
    codec.feed_eof()
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="EOF with 1 replies pending"):
        codec.read_kinds(kinds)
    assert kinds == [code(K.MISS)]


def test_long_pipelines_through_both_paths() -> None:
    # Past the point where the pending FIFO drops its answered front.
    codec = MemcacheBinaryCodec()
    out = bytearray()
    kinds: list[int] = []
    opaque = 0
    for rounds in range(30):
        ops = [int(Op.GET), int(Op.SET)] * 50
        codec.encode_many(ops, [b"k"] * 100, [b"v"] * 100, 0, 100, out)
        codec.encode(Op.DELETE, b"k", None, out)
        wire = []
        for i in range(100):
            if i % 2:
                wire.append(response(0x01, opaque + i))
            else:
                wire.append(response(0x00, opaque + i, extras=FLAGS, value=b"v"))
        wire.append(response(0x04, opaque + 100))
        opaque += 101
        codec.feed(b"".join(wire[:80]))
        assert codec.read_kinds(kinds) == 80
        codec.feed(b"".join(wire[80:]))
        for _ in range(20 if rounds % 2 else 0):
            assert isinstance(codec.next_reply(), Reply)
        codec.read_kinds(kinds)
        assert codec.pending() == 0
    assert kinds.count(code(K.DELETED)) == 30
    assert len(kinds) == 30 * 101 - 15 * 20
