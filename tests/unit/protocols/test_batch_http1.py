"""HttpMemcCodec's batch path: encode_many and read_kinds against encode and next_reply."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.errors import ProtocolError
from kvbench.protocols.base import KEYS_SHIFT, NEED_DATA, CodecOptions, Op, Reply, ReplyKind
from kvbench.protocols.http1 import KEY_SAFE, HttpMemcCodec
from tests.unit.protocols.test_http1 import MISS, response

K = ReplyKind


def code(kind: ReplyKind, keys: int = 0) -> int:
    return int(kind) | keys << KEYS_SHIFT


def make(**options: Any) -> HttpMemcCodec:
    return HttpMemcCodec(CodecOptions(**options), path="memc", host="127.0.0.1:8080")


# Ops encode_many sends (with arg 1 for incr/decr, 0 else).
BATCH_OPS = [
    Op.GET, Op.SET, Op.DELETE, Op.INCR, Op.DECR, Op.ADD, Op.REPLACE, Op.APPEND, Op.PREPEND,
    Op.STATS,
]  # fmt: skip
keys_st = st.text(KEY_SAFE.decode(), min_size=1, max_size=20).map(str.encode)
values_st = st.one_of(st.binary(max_size=40), st.binary(max_size=40).map(memoryview))


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, Any, Any]:
    """(int(op), key, value) as the engine passes them; a value for every op."""
    return int(draw(st.sampled_from(BATCH_OPS))), draw(keys_st), draw(values_st)


def step(op: int) -> int:
    return 1 if op in (Op.INCR, Op.DECR) else 0


@settings(max_examples=200, deadline=None)
@given(st.lists(requests(), max_size=40), st.sampled_from([0, 300]), st.data())
def test_encode_many_is_byte_identical_to_encode(
    batch: list[tuple[int, Any, Any]], ttl_s: int, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(batch)))
    stop = data.draw(st.integers(start, len(batch)))
    reference = make(ttl_s=ttl_s)
    expected = bytearray(b"..")
    for op, key, value in batch[start:stop]:
        assert reference.encode(Op(op), key, value, expected, step(op)) == 1
    codec = make(ttl_s=ttl_s)
    out = bytearray(b"..")
    ops = [op for op, _, _ in batch]
    keys = [key for _, key, _ in batch]
    values = [value for _, _, value in batch]
    assert codec.encode_many(ops, keys, values, start, stop, out) == stop - start
    assert out == expected
    assert codec.pending() == reference.pending() == stop - start


def test_encode_many_requests() -> None:
    codec = make()
    out = bytearray()
    ops = [int(Op.GET), int(Op.SET), int(Op.DELETE), int(Op.INCR), int(Op.STATS)]
    keys: list[Any] = [b"a", b"b", b"c", b"d", b""]
    values: list[Any] = [None, memoryview(b"x y"), None, None, None]
    assert codec.encode_many(ops, keys, values, 0, 5, out) == 5
    tail = b" HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
    assert bytes(out) == (
        b"GET /memc?cmd=get&key=a"
        + tail
        + b"GET /memc?cmd=set&key=b&val=xgy"
        + tail
        + b"GET /memc?cmd=delete&key=c"
        + tail
        + b"GET /memc?cmd=incr&key=d&val=1"
        + tail
        + b"GET /memc?cmd=stats"
        + tail
    )


def test_empty_range_encodes_nothing() -> None:
    codec = make()
    out = bytearray(b"x")
    assert codec.encode_many([int(Op.GET)], [b"k"], [None], 1, 1, out) == 0
    assert out == b"x" and codec.pending() == 0


@pytest.mark.parametrize(
    "ops, keys",
    [([int(Op.GET), int(Op.MGET)], [b"a", (b"b",)]),
     ([int(Op.GET), int(Op.SET)], [b"a", b"b c"]),
     ([int(Op.SET), int(Op.ADD)], [b"a", b"b"])],  # ADD with a None value
)  # fmt: skip
def test_a_refused_request_leaves_buffer_and_fifo_as_they_were(
    ops: list[int], keys: list[Any]
) -> None:
    codec = make()
    out = bytearray(b"before")
    with pytest.raises(ValueError):
        codec.encode_many(ops, keys, [b"v", None], 0, 2, out)
    assert out == b"before" and codec.pending() == 0


# -- read_kinds -------------------------------------------------------------------------------

REPLIES: dict[Op, list[bytes]] = {
    Op.GET: [response(200, body=b"v"), MISS, response(200, chunks=[b"a", b"b"])],
    Op.SET: [response(201, "Created", b"STORED\r\n"), response(200, body=b"STORED\r\n")],
    Op.ADD: [response(200, body=b"NOT_STORED\r\n"), response(201, "Created", b"STORED\r\n")],
    Op.DELETE: [response(200, body=b"DELETED\r\n"), MISS],
    Op.INCR: [response(201, "Created", b"7\r\n"), MISS],
    Op.STATS: [response(200, body=b"STAT pid 1\r\nEND\r\n")],
}
ERRORS = [
    response(502, "Bad Gateway", b"<html></html>"),
    response(504, "Gateway Time-out", b"<html></html>"),
    response(400, "Bad Request", b"x"),
]


@st.composite
def exchanges(draw: st.DrawFn) -> tuple[Op, bytes]:
    op = draw(st.sampled_from(list(REPLIES)))
    wire = draw(st.sampled_from(REPLIES[op] + ERRORS if draw(st.booleans()) else REPLIES[op]))
    return op, wire


def feed_in_chunks(
    codec: HttpMemcCodec, stream: bytes, bounds: list[int], batch: bool
) -> tuple[list[int], bool]:
    """The reply codes over the chunks, and whether ProtocolError was raised."""
    codes: list[int] = []
    try:
        for lo, hi in pairwise(bounds):
            codec.feed(stream[lo:hi])
            if batch:
                codec.read_kinds(codes)
            else:
                while (reply := codec.next_reply()) is not NEED_DATA:
                    assert isinstance(reply, Reply)
                    codes.append(code(reply.kind, reply.keys))
    except ProtocolError:
        return codes, True
    return codes, False


@settings(max_examples=300, deadline=None)
@given(st.lists(exchanges(), min_size=1, max_size=12), st.data())
def test_read_kinds_equals_next_reply(
    exchange: list[tuple[Op, bytes]], data: st.DataObject
) -> None:
    stream = b"".join(wire for _, wire in exchange)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    bounds = [0, *sorted(cuts), len(stream)]
    results = []
    for batch in (False, True):
        codec = make()
        for op, _ in exchange:
            codec.encode(op, b"k", b"v", bytearray(), 1)
        results.append(feed_in_chunks(codec, stream, bounds, batch))
        assert codec.pending() == 0
    assert results[0] == results[1]
    assert results[0][1] is False
    assert len(results[0][0]) == len(exchange)


def test_read_kinds_values() -> None:
    codec = make()
    ops = [Op.GET, Op.GET, Op.SET, Op.ADD, Op.DELETE, Op.INCR, Op.GET]
    for op in ops:
        codec.encode(op, b"k", b"v", bytearray(), 1)
    codec.feed(
        response(200, body=b"v") + MISS + response(201, "Created", b"STORED\r\n")
        + response(200, body=b"NOT_STORED\r\n") + MISS + response(201, "Created", b"2\r\n")
        + response(502, "Bad Gateway", b"x")
    )  # fmt: skip
    kinds = [-1]
    assert codec.read_kinds(kinds) == 7
    assert kinds == [
        -1,
        code(K.HIT, 1),
        code(K.MISS),
        code(K.STORED),
        code(K.NOT_STORED),
        code(K.NOT_FOUND),
        code(K.VALUE),
        code(K.ERROR_REPLY),
    ]
    assert codec.read_kinds(kinds) == 0


def test_read_kinds_records_the_version_server() -> None:
    codec = make()
    codec.encode_version(bytearray())
    codec.feed(response(200, body=b"VERSION 1.6.18\r\n"))
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 1 and kinds == [code(K.VALUE)]
    assert codec.server_software == "nginx/1.22.1"


def test_many_replies_compact_the_fifo() -> None:
    codec = make()
    n = 3000
    codec.encode_many([int(Op.GET)] * n, [b"k"] * n, [None] * n, 0, n, bytearray())
    codec.feed(MISS * n)
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == n
    assert codec.pending() == 0
