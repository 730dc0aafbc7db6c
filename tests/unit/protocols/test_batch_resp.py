"""RespCodec's batch path: encode_many and read_kinds against encode and next_reply."""

from __future__ import annotations

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
from kvbench.protocols.resp import RespCodec

K = ReplyKind


def code(kind: ReplyKind, keys: int = 0) -> int:
    return int(kind) | keys << KEYS_SHIFT


def codes_of(replies: list[Reply]) -> list[int]:
    return [code(r.kind, r.keys) for r in replies]


def test_resp_codec_is_a_client_codec() -> None:
    codec: ClientCodec = RespCodec()  # mypy checks the Protocol, encode_many included
    assert codec.pending() == 0


# -- encode_many ------------------------------------------------------------------------------

# Ops encode_many can send with arg 0 (TOUCH needs an expiry; GETS, CAS, PREPEND have no
# Redis form).
BATCH_OPS = [
    Op.GET,
    Op.SET,
    Op.DELETE,
    Op.INCR,
    Op.DECR,
    Op.MGET,
    Op.ADD,
    Op.REPLACE,
    Op.APPEND,
    Op.NOOP,
    Op.STATS,
    Op.COMMAND,
]
keys_st = st.binary(min_size=0, max_size=20)
values_st = st.one_of(st.binary(max_size=40), st.binary(max_size=40).map(lambda b: memoryview(b)))


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, Any, Any]:
    """(int(op), key, value) as the engine passes them; a value for every op."""
    op = draw(st.sampled_from(BATCH_OPS))
    key: Any
    if op == Op.MGET:
        key = tuple(draw(st.lists(keys_st, min_size=1, max_size=4)))
    elif op == Op.COMMAND:
        key = (b"ECHO", draw(keys_st))
    elif op == Op.STATS:
        key = draw(st.sampled_from([b"", b"stats"]))
    else:
        key = draw(keys_st)
    return int(op), key, draw(values_st)


def step(op: int) -> int:
    """The arg encode_many uses: one step for incr/decr, 0 for everything else."""
    return 1 if op in (Op.INCR, Op.DECR) else 0


def per_op(codec: RespCodec, batch: list[tuple[int, Any, Any]], out: bytearray) -> None:
    for op, key, value in batch:
        assert codec.encode(Op(op), key, value, out, step(op)) == 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(requests(), max_size=40),
    st.sampled_from([0, 300]),
    st.binary(max_size=8),
    st.data(),
)
def test_encode_many_is_byte_identical_to_encode(
    batch: list[tuple[int, Any, Any]], ttl_s: int, prefix: bytes, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(batch)))
    stop = data.draw(st.integers(start, len(batch)))
    reference = RespCodec(CodecOptions(ttl_s=ttl_s))
    expected = bytearray(prefix)
    per_op(reference, batch[start:stop], expected)
    codec = RespCodec(CodecOptions(ttl_s=ttl_s))
    out = bytearray(prefix)
    ops = [op for op, _, _ in batch]
    keys: list[Any] = [key for _, key, _ in batch]
    values: list[Any] = [value for _, _, value in batch]
    assert codec.encode_many(ops, keys, values, start, stop, out) == stop - start
    assert out == expected
    assert codec.pending() == stop - start
    # Twice: the second batch reads the request heads cached by the first.
    assert codec.encode_many(ops, keys, values, start, stop, out) == stop - start
    per_op(reference, batch[start:stop], expected)
    assert out == expected
    assert codec.pending() == reference.pending() == 2 * (stop - start)


def test_encode_many_requests() -> None:
    codec = RespCodec(CodecOptions(ttl_s=60))
    out = bytearray(b"..")
    ops = [int(Op.GET), int(Op.SET), int(Op.DELETE), int(Op.INCR), int(Op.NOOP)]
    keys: list[Any] = [b"a", b"bc", b"d", b"n", b""]
    values: list[Any] = [None, memoryview(b"xyz"), None, None, None]
    assert codec.encode_many(ops, keys, values, 0, 5, out) == 5
    assert bytes(out) == (
        b".."
        b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n"
        b"*5\r\n$3\r\nSET\r\n$2\r\nbc\r\n$3\r\nxyz\r\n$2\r\nEX\r\n$2\r\n60\r\n"
        b"*2\r\n$3\r\nDEL\r\n$1\r\nd\r\n"
        b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"  # one step, as the workload means
        b"*1\r\n$4\r\nPING\r\n"
    )
    assert codec.pending() == 5


def test_empty_range_encodes_nothing() -> None:
    codec = RespCodec()
    out = bytearray(b"x")
    assert codec.encode_many([int(Op.GET)], [b"k"], [None], 1, 1, out) == 0
    assert out == b"x"
    assert codec.pending() == 0


@pytest.mark.parametrize("bad", [int(Op.GETS), int(Op.TOUCH)])
def test_a_refused_op_leaves_buffer_and_fifo_as_they_were(bad: int) -> None:
    codec = RespCodec()
    out = bytearray(b"before")
    codec.encode(Op.GET, b"k", None, out)
    ops = [int(Op.GET), int(Op.MGET), bad, int(Op.SET)]
    keys: list[Any] = [b"a", (b"b",), b"c", b"d"]
    with pytest.raises(ValueError, match=r"GETS|EXPIRE"):
        codec.encode_many(ops, keys, [None, None, None, b"v"], 0, 4, out)
    assert out == b"before*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
    assert codec.pending() == 1
    codec.feed(b"$-1\r\n")
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 1
    assert kinds == [code(K.MISS)]


def test_a_wrong_value_type_leaves_buffer_and_fifo_as_they_were() -> None:
    codec = RespCodec()
    out = bytearray()
    with pytest.raises(TypeError):
        codec.encode_many([int(Op.GET), int(Op.SET)], [b"a", b"b"], [None, None], 0, 2, out)
    assert out == b""
    assert codec.pending() == 0


# -- read_kinds -------------------------------------------------------------------------------

# (op, key, wire reply, read_kinds value)
KIND_CASES: list[tuple[Op, Any, bytes, int]] = [
    (Op.GET, b"k", b"$3\r\nabc\r\n", code(K.HIT, 1)),
    (Op.GET, b"k", b"$-1\r\n", code(K.MISS)),
    (Op.GET, b"k", b"-WRONGTYPE x\r\n", code(K.ERROR_REPLY)),
    (Op.SET, b"k", b"+OK\r\n", code(K.STORED)),
    (Op.SET, b"k", b"-OOM x\r\n", code(K.ERROR_REPLY)),
    (Op.ADD, b"k", b"$-1\r\n", code(K.NOT_STORED)),
    (Op.DELETE, b"k", b":1\r\n", code(K.DELETED)),
    (Op.DELETE, b"k", b":0\r\n", code(K.NOT_FOUND)),
    (Op.INCR, b"k", b":41\r\n", code(K.VALUE)),
    (Op.INCR, b"k", b"-ERR not an integer\r\n", code(K.ERROR_REPLY)),
    (Op.DECR, b"k", b":-1\r\n", code(K.VALUE)),
    (Op.MGET, (b"a", b"b", b"c"), b"*3\r\n$1\r\nx\r\n$-1\r\n$0\r\n\r\n", code(K.HIT, 2)),
    (Op.MGET, (b"a",), b"*1\r\n$-1\r\n", code(K.MISS)),
    (Op.APPEND, b"k", b":4\r\n", code(K.STORED)),
    (Op.NOOP, b"", b"+PONG\r\n", code(K.OK)),
    (Op.COMMAND, (b"X",), b"*2\r\n:1\r\n:2\r\n", code(K.OK)),
]


@pytest.mark.parametrize(("op", "key", "wire", "expected"), KIND_CASES)
def test_read_kinds_values(op: Op, key: Any, wire: bytes, expected: int) -> None:
    codec = RespCodec()
    codec.encode_many([int(op)], [key], [b"v"], 0, 1, bytearray())
    codec.feed(wire)
    kinds = [-1]  # appended to, not replaced
    assert codec.read_kinds(kinds) == 1
    assert kinds == [-1, expected]
    assert codec.pending() == 0
    assert codec.read_kinds(kinds) == 0


def write(value: Any, protocol: int) -> bytes:
    """A reply as a server writes it: bytes are bulk strings, str statuses, ints integers,
    Exception errors, lists arrays, tuples push messages."""
    if value is None:
        return b"_\r\n" if protocol == 3 else b"$-1\r\n"
    if isinstance(value, bytes):
        return b"$%d\r\n%b\r\n" % (len(value), value)
    if isinstance(value, str):
        return b"+%b\r\n" % value.encode()
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, Exception):
        return b"-%b\r\n" % str(value).encode()
    head = b">" if isinstance(value, tuple) else b"*"
    return head + b"%d\r\n" % len(value) + b"".join(write(item, protocol) for item in value)


bulks = st.binary(max_size=30)
errors = st.just(Exception("ERR no"))
# Mostly what the server sends for each op, sometimes a reply that cannot answer it.
REPLY_SHAPES: dict[Op, st.SearchStrategy[Any]] = {
    Op.GET: st.one_of(bulks, st.none(), errors),
    Op.SET: st.one_of(st.just("OK"), errors),
    Op.ADD: st.one_of(st.just("OK"), st.none(), errors),
    Op.DELETE: st.one_of(st.sampled_from([0, 1]), errors),
    Op.INCR: st.one_of(st.integers(-(2**63), 2**63 - 1), errors),
    Op.MGET: st.lists(st.one_of(bulks, st.none()), max_size=4),
    Op.NOOP: st.just("PONG"),
    Op.COMMAND: st.one_of(bulks, st.integers(), st.lists(bulks, max_size=3), errors),
}
WRONG = st.one_of(st.just("OK"), st.integers(0, 3), bulks, st.just([b"a", 1]), st.none())


@st.composite
def exchanges(draw: st.DrawFn) -> tuple[Op, Any, Any]:
    op = draw(st.sampled_from(list(REPLY_SHAPES)))
    key: Any = (b"a", b"b") if op == Op.MGET else ((b"X",) if op == Op.COMMAND else b"k")
    reply = draw(
        st.one_of(REPLY_SHAPES[op], WRONG) if draw(st.integers(0, 15)) == 0 else REPLY_SHAPES[op]
    )
    return op, key, reply


def reference_codes(codec: RespCodec, stream: bytes, bounds: list[int]) -> tuple[list[int], bool]:
    """next_reply over the chunks: the codes, and whether it raised ProtocolError."""
    codes: list[int] = []
    try:
        for lo, hi in pairwise(bounds):
            codec.feed(stream[lo:hi])
            while (reply := codec.next_reply()) is not NEED_DATA:
                assert isinstance(reply, Reply)
                codes.append(code(reply.kind, reply.keys))
    except ProtocolError:
        return codes, True
    return codes, False


def batch_codes(codec: RespCodec, stream: bytes, bounds: list[int]) -> tuple[list[int], bool]:
    codes: list[int] = []
    try:
        for lo, hi in pairwise(bounds):
            codec.feed(stream[lo:hi])
            before = len(codes)
            assert codec.read_kinds(codes) == len(codes) - before
    except ProtocolError:
        return codes, True
    return codes, False


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([2, 3]),
    st.lists(exchanges(), max_size=20),
    st.lists(st.integers(0, 20), max_size=3),
    st.lists(st.integers(min_value=0), max_size=10),
    st.lists(st.booleans(), min_size=20, max_size=20),
)
def test_read_kinds_gives_what_next_reply_gives_whatever_the_chunking(
    protocol: int,
    found: list[tuple[Op, Any, Any]],
    pushes: list[int],
    cuts: list[int],
    batched: list[bool],
) -> None:
    parts = []
    for i, (_op, _key, reply) in enumerate(found):
        parts.append(write((b"invalidate", b"k"), 3) * pushes.count(i) if protocol == 3 else b"")
        parts.append(write(reply, protocol))
    stream = b"".join(parts)
    bounds = [0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]
    reference = RespCodec(protocol=protocol)
    codec = RespCodec(protocol=protocol)
    out = bytearray()
    i = 0
    # The codec under test announces runs of requests with encode_many and single ones with
    # encode, interleaved; the reference uses encode only.
    while i < len(found):
        run = 3 if batched[i] else 1
        chunk = found[i : i + run]
        ops = [int(op) for op, _, _ in chunk]
        keys = [key for _, key, _ in chunk]
        if batched[i]:
            codec.encode_many(ops, keys, [b"v"] * len(chunk), 0, len(chunk), out)
        else:
            codec.encode(chunk[0][0], chunk[0][1], b"v", out)
        for op, key, _ in chunk:
            reference.encode(op, key, b"v", bytearray())
        i += run
    expected, expected_failure = reference_codes(reference, stream, bounds)
    got, failed = batch_codes(codec, stream, bounds)
    assert got == expected
    assert failed == expected_failure
    if failed:
        assert_dead(codec)
    else:
        assert codec.pending() == reference.pending() == 0
        assert codec.push_messages == reference.push_messages


def assert_dead(codec: RespCodec) -> None:
    with pytest.raises(ProtocolError):
        codec.read_kinds([])
    with pytest.raises(ProtocolError):
        codec.next_reply()
    with pytest.raises(ProtocolError):
        codec.feed(b"+OK\r\n")


def test_protocol_error_mid_batch_keeps_the_replies_before_it() -> None:
    codec = RespCodec()
    ops = [int(Op.GET), int(Op.SET), int(Op.GET), int(Op.GET)]
    codec.encode_many(ops, [b"a", b"b", b"c", b"d"], [None, b"v", None, None], 0, 4, bytearray())
    codec.feed(b"$1\r\nx\r\n+OK\r\n?garbage\r\n$-1\r\n")
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="RESP protocol error"):
        codec.read_kinds(kinds)
    assert kinds == [code(K.HIT, 1), code(K.STORED)]
    assert_dead(codec)


def test_reply_that_cannot_answer_its_request_mid_batch() -> None:
    codec = RespCodec()
    codec.encode_many([int(Op.SET), int(Op.DELETE)], [b"a", b"b"], [b"v", None], 0, 2, bytearray())
    codec.feed(b"+OK\r\n+OK\r\n")
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="cannot answer DEL"):
        codec.read_kinds(kinds)
    assert kinds == [code(K.STORED)]
    assert_dead(codec)


def test_reply_with_nothing_pending_mid_batch() -> None:
    codec = RespCodec()
    codec.encode(Op.NOOP, b"", None, bytearray())
    codec.feed(b"+PONG\r\n+PONG\r\n")
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="no request pending"):
        codec.read_kinds(kinds)
    assert kinds == [code(K.OK)]
    assert_dead(codec)


def test_push_messages_are_skipped_with_or_without_requests_pending() -> None:
    codec = RespCodec(protocol=3)
    push = b">2\r\n$10\r\ninvalidate\r\n$1\r\nk\r\n"
    codec.feed(push)
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 0
    codec.encode_many([int(Op.GET), int(Op.SET)], [b"a", b"b"], [None, b"v"], 0, 2, bytearray())
    codec.feed(push + b"_\r\n" + push + b"+OK\r\n" + push)
    assert codec.read_kinds(kinds) == 2
    assert kinds == [code(K.MISS), code(K.STORED)]
    assert codec.push_messages == 4
    assert codec.pending() == 0


def test_read_kinds_bounds_an_unfinished_reply() -> None:
    codec = RespCodec(CodecOptions(max_reply_bytes=100))
    codec.encode_many([int(Op.GET)] * 2, [b"a", b"b"], [None, None], 0, 2, bytearray())
    codec.feed(b"$-1\r\n$1000\r\n" + b"x" * 50)
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 1
    codec.feed(b"x" * 60)  # bytes are counted per feed from the last complete reply
    assert codec.read_kinds(kinds) == 0
    codec.feed(b"x" * 101)
    with pytest.raises(ReplyTooLarge):
        codec.read_kinds(kinds)
    assert kinds == [code(K.MISS)]
    assert_dead(codec)


def test_read_kinds_at_eof() -> None:
    codec = RespCodec()
    codec.encode_many([int(Op.GET)] * 2, [b"a", b"b"], [None, None], 0, 2, bytearray())
    codec.feed(b"$-1\r\n")
    codec.feed_eof()
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="EOF with 1 replies pending"):
        codec.read_kinds(kinds)
    assert kinds == [code(K.MISS)]


def test_long_pipelines_through_both_paths() -> None:
    # Past the point where the pending FIFO drops its answered front.
    codec = RespCodec()
    out = bytearray()
    kinds: list[int] = []
    for rounds in range(30):
        ops = [int(Op.GET), int(Op.SET)] * 50
        codec.encode_many(ops, [b"k"] * 100, [b"v"] * 100, 0, 100, out)
        codec.encode(Op.DELETE, b"k", None, out)
        codec.feed(b"$1\r\nv\r\n+OK\r\n" * 40)
        assert codec.read_kinds(kinds) == 80
        codec.feed(b"$1\r\nv\r\n+OK\r\n" * 10 + b":1\r\n")
        for _ in range(20 if rounds % 2 else 0):
            assert isinstance(codec.next_reply(), Reply)
        codec.read_kinds(kinds)
        assert codec.pending() == 0
    assert kinds.count(code(K.DELETED)) == 30
    assert len(kinds) == 30 * 101 - 15 * 20
