"""Properties of HttpMemcCodec: replies independent of chunking and exact in size, random bytes
give replies or ProtocolError only."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.errors import ProtocolError
from kvbench.protocols.base import NEED_DATA, CodecOptions, Op, Reply, ReplyKind
from kvbench.protocols.http1 import HttpMemcCodec
from tests.support.codec_checks import replies_or_protocol_error

K = ReplyKind
tokens = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
field_values = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=20)


@st.composite
def responses(draw: st.DrawFn) -> tuple[Op, bytes, int, bytes]:
    """(op, wire bytes, status, body) of one response a gateway might send."""
    op = draw(st.sampled_from([Op.GET, Op.SET, Op.DELETE, Op.INCR]))
    status = draw(st.sampled_from([200, 201, 404, 500, 502, 504, 400, 301]))
    body = draw(st.binary(max_size=60))
    fields = draw(st.lists(st.tuples(tokens, field_values), max_size=3))
    lines = [f"HTTP/1.1 {status} Whatever".encode()]
    lines += [f"X-{name}: {value}".encode() for name, value in fields]
    if draw(st.booleans()):
        sizes = draw(st.lists(st.integers(1, 20), max_size=4))
        chunks, at = [], 0
        for size in sizes:
            chunks.append(body[at : at + size])
            at += size
        chunks.append(body[at:])
        wire = b"".join(b"%x\r\n%b\r\n" % (len(c), c) for c in chunks if c) + b"0\r\n\r\n"
        lines.append(b"transfer-encoding: chunked")
    else:
        wire = body
        lines.append(b"Content-Length: %d" % len(body))
    return op, b"\r\n".join(lines) + b"\r\n\r\n" + wire, status, body


def run(exchange: list[tuple[Op, bytes, int, bytes]], bounds: list[int], keep: bool) -> list[Reply]:
    codec = HttpMemcCodec(CodecOptions(keep_payload=keep))
    for op, *_ in exchange:
        codec.encode(op, b"k", b"v", bytearray(), 1)
    stream = b"".join(wire for _, wire, _, _ in exchange)
    replies: list[Reply] = []
    for lo, hi in pairwise(bounds):
        codec.feed(stream[lo:hi])
        while (reply := codec.next_reply()) is not NEED_DATA:
            assert isinstance(reply, Reply)
            replies.append(reply)
    assert codec.pending() == 0
    return replies


@settings(max_examples=300, deadline=None)
@given(st.lists(responses(), min_size=1, max_size=6), st.data())
def test_replies_do_not_depend_on_chunking(
    exchange: list[tuple[Op, bytes, int, bytes]], data: st.DataObject
) -> None:
    total = sum(len(wire) for _, wire, _, _ in exchange)
    cuts = data.draw(st.lists(st.integers(0, total), max_size=10))
    keep = data.draw(st.booleans())
    whole = run(exchange, [0, total], keep)
    assert run(exchange, [0, *sorted(cuts), total], keep) == whole
    assert [r.nbytes for r in whole] == [len(wire) for _, wire, _, _ in exchange]
    for reply, (op, _, status, body) in zip(whole, exchange, strict=True):
        if status >= 300 and status != 404:
            assert reply.kind == K.ERROR_REPLY
            assert reply.payload == f"HTTP/1.1 {status} Whatever".encode()
        elif op == Op.GET and status == 200:
            assert reply.kind == K.HIT and reply.payload == (body if keep else None)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=6), st.booleans())
def test_random_bytes_give_replies_or_protocol_error_only(
    data: bytes, cuts: list[int], eof: bool
) -> None:
    codec = HttpMemcCodec()
    for _ in range(4):
        codec.encode(Op.GET, b"k", None, bytearray())
    replies_or_protocol_error(codec, data, cuts, eof)


@settings(max_examples=300, deadline=None)
@given(st.lists(responses(), min_size=1, max_size=4), st.binary(max_size=40), st.data())
def test_valid_responses_then_garbage_give_replies_then_protocol_error_only(
    exchange: list[tuple[Op, bytes, int, bytes]], garbage: bytes, data: st.DataObject
) -> None:
    codec = HttpMemcCodec()
    for op, *_ in exchange:
        codec.encode(op, b"k", b"v", bytearray(), 1)
    codec.encode(Op.GET, b"k", None, bytearray())
    stream = b"".join(wire for _, wire, _, _ in exchange) + garbage
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=6))
    kinds: list[int] = []
    try:
        for lo, hi in pairwise([0, *sorted(cuts), len(stream)]):
            codec.feed(stream[lo:hi])
            codec.read_kinds(kinds)
    except ProtocolError:
        pass
    assert len(kinds) >= len(exchange)
