"""Properties of RespCodec: replies independent of chunking and exact in size, random bytes
give replies or ProtocolError only."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.protocols.base import NEED_DATA, CodecOptions, Op, Reply, ReplyKind
from kvbench.protocols.resp import RespCodec
from tests.support.codec_checks import replies_or_protocol_error

K = ReplyKind


# -- a test-side RESP writer ------------------------------------------------------------------


@dataclass(frozen=True)
class Status:
    text: bytes


@dataclass(frozen=True)
class Error:
    text: bytes


@dataclass(frozen=True)
class Push:
    items: tuple[bytes, ...]


def write(value: Any, protocol: int) -> bytes:
    """Render one reply value the way a Redis server would."""
    if value is None:
        return b"_\r\n" if protocol == 3 else b"$-1\r\n"
    if isinstance(value, bytes):
        return b"$%d\r\n%b\r\n" % (len(value), value)
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, Status):
        return b"+%b\r\n" % value.text
    if isinstance(value, Error):
        return b"-%b\r\n" % value.text
    if isinstance(value, Push):
        return b">%d\r\n" % len(value.items) + b"".join(write(i, protocol) for i in value.items)
    assert isinstance(value, list)
    return b"*%d\r\n" % len(value) + b"".join(write(item, protocol) for item in value)


line_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=30)
errors = line_text.map(lambda t: Error(b"ERR " + t.encode()))
bulks = st.binary(max_size=50)
integers = st.integers(-(2**63), 2**63 - 1)
nested = st.recursive(
    st.one_of(bulks, st.none(), integers), lambda inner: st.lists(inner, max_size=4), max_leaves=10
).filter(lambda v: v != b"OK")


def error_reply(e: Error, wire: bytes) -> Reply:
    return Reply(K.ERROR_REPLY, len(wire), e.text)


EXCHANGE_OPS = [
    Op.GET,
    Op.SET,
    Op.ADD,
    Op.REPLACE,
    Op.DELETE,
    Op.INCR,
    Op.DECR,
    Op.MGET,
    Op.TOUCH,
    Op.APPEND,
    Op.NOOP,
    Op.COMMAND,
]


@st.composite
def exchanges(draw: st.DrawFn, protocol: int) -> tuple[Op, Any, bytes | None, int, Any, Reply]:
    """One request and a server reply to it, with the Reply it must give."""
    op = draw(st.sampled_from(EXCHANGE_OPS))
    key: Any = b"k"
    value: bytes | None = b"v" if op in (Op.SET, Op.ADD, Op.REPLACE, Op.APPEND) else None
    null = 3 if protocol == 3 else 5
    reply: Any
    if op == Op.GET:
        reply = draw(st.one_of(bulks, st.none(), errors))
    elif op in (Op.SET, Op.ADD, Op.REPLACE):
        reply = draw(st.one_of(st.just(Status(b"OK")), st.none(), errors))
        if op == Op.SET and reply is None:
            reply = Status(b"OK")
    elif op in (Op.DELETE, Op.TOUCH):
        reply = draw(st.one_of(st.sampled_from([0, 1]), errors))
    elif op in (Op.INCR, Op.DECR, Op.APPEND):
        reply = draw(st.one_of(integers, errors))
    elif op == Op.MGET:
        reply = draw(st.lists(st.one_of(bulks, st.none()), max_size=5))
        key = [b"k%d" % i for i in range(len(reply))]
    elif op == Op.NOOP:
        reply = Status(b"PONG")
    else:
        reply = draw(st.one_of(nested, errors))
        key = [b"X"]
    wire = write(reply, protocol)
    if isinstance(reply, Error):
        return op, key, value, 1, reply, error_reply(reply, wire)
    n = len(wire)
    expected = {
        Op.GET: lambda: Reply(K.MISS, null) if reply is None else Reply(K.HIT, n, None, 1),
        Op.SET: lambda: Reply(K.STORED, 5),
        Op.ADD: lambda: Reply(K.NOT_STORED, null) if reply is None else Reply(K.STORED, 5),
        Op.DELETE: lambda: Reply(K.DELETED if reply else K.NOT_FOUND, 4),
        Op.TOUCH: lambda: Reply(K.TOUCHED if reply else K.NOT_FOUND, 4),
        Op.INCR: lambda: Reply(K.VALUE, n),
        Op.APPEND: lambda: Reply(K.STORED, n),
        Op.MGET: lambda: Reply(
            K.HIT if any(v is not None for v in reply) else K.MISS,
            n,
            None,
            sum(v is not None for v in reply),
        ),
        Op.NOOP: lambda: Reply(K.OK, 7),
        Op.COMMAND: lambda: Reply(K.OK, n),
    }
    alias = {Op.REPLACE: Op.ADD, Op.DECR: Op.INCR}
    return op, key, value, 1, reply, expected[alias.get(op, op)]()


@dataclass
class Scenario:
    protocol: int
    exchanges: list[tuple[Op, Any, bytes | None, int, Any, Reply]]
    pushes: list[int]  # push messages go before exchange i


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    protocol = draw(st.sampled_from([2, 3]))
    found = draw(st.lists(exchanges(protocol), max_size=10))
    pushes = draw(st.lists(st.integers(0, len(found)), max_size=3)) if protocol == 3 else []
    return Scenario(protocol, found, pushes)


PUSH = Push((b"invalidate", b"k"))


def stream_of(scenario: Scenario) -> bytes:
    parts = []
    for i, (*_, reply, _expected) in enumerate(scenario.exchanges):
        parts.append(write(PUSH, 3) * scenario.pushes.count(i))
        parts.append(write(reply, scenario.protocol))
    parts.append(write(PUSH, 3) * scenario.pushes.count(len(scenario.exchanges)))
    return b"".join(parts)


def replay(scenario: Scenario, stream: bytes, cuts: list[int]) -> tuple[list[Reply], RespCodec]:
    codec = RespCodec(CodecOptions(), protocol=scenario.protocol)
    out = bytearray()
    for op, key, value, arg, *_ in scenario.exchanges:
        assert codec.encode(op, key, value, out, arg) == 1
    replies: list[Reply] = []
    for lo, hi in pairwise([0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]):
        codec.feed(stream[lo:hi])
        while (reply := codec.next_reply()) is not NEED_DATA:
            assert isinstance(reply, Reply)
            replies.append(reply)
    codec.feed_eof()
    assert codec.next_reply() is NEED_DATA
    return replies, codec


@settings(max_examples=200, deadline=None)
@given(scenarios(), st.lists(st.integers(min_value=0), max_size=12))
def test_replies_match_the_server_writer_whatever_the_chunking(
    scenario: Scenario, cuts: list[int]
) -> None:
    stream = stream_of(scenario)
    expected = [e[-1] for e in scenario.exchanges]
    whole, _ = replay(scenario, stream, [])
    chunked, codec = replay(scenario, stream, cuts)
    assert whole == expected
    assert chunked == expected
    assert codec.push_messages == len(scenario.pushes)
    pushed = len(write(PUSH, 3)) * len(scenario.pushes)
    assert sum(r.nbytes for r in chunked) == len(stream) - pushed


tokens = st.one_of(
    st.sampled_from(
        [b"$", b"*", b":", b"+", b"-", b"_", b",", b"#", b"%", b">", b"~", b"=", b"(", b"|", b"!"]
    ),
    st.integers(-3, 12).map(lambda n: b"%d" % n),
    st.sampled_from([b"\r\n", b"\r", b"\n", b"OK", b"t", b"f", b"inf", b"1.5", b"txt:"]),
    st.binary(max_size=8),
)
scalar_wires = st.one_of(
    bulks.map(lambda b: write(b, 2)),
    integers.map(lambda n: write(n, 2)),
    st.sampled_from([b"+OK\r\n", b"-ERR x\r\n", b"_\r\n", b",1.5\r\n", b"#t\r\n"]),
    st.sampled_from([b"(12345678901234567890\r\n", b"=7\r\ntxt:abc\r\n", b"$-1\r\n"]),
)
# Aggregates whose announced count may disagree with what follows; maps keyed by anything.
wires = st.recursive(
    scalar_wires,
    lambda inner: st.builds(
        lambda kind, count, items: kind + b"%d\r\n" % count + b"".join(items),
        st.sampled_from([b"*", b"%", b"~", b">", b"|"]),
        st.integers(-1, 3),
        st.lists(inner, max_size=4),
    ),
    max_leaves=8,
)
junk = st.lists(st.one_of(tokens, wires), max_size=12).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from([2, 3]),
    st.lists(st.sampled_from([Op.GET, Op.SET, Op.MGET, Op.INCR, Op.COMMAND, Op.STATS]), max_size=6),
    junk,
    st.lists(st.integers(min_value=0), max_size=6),
)
def test_random_bytes_give_replies_or_protocol_error_only(
    protocol: int, ops: list[Op], data: bytes, cuts: list[int]
) -> None:
    codec = RespCodec(CodecOptions(max_reply_bytes=64), protocol=protocol)
    out = bytearray()
    for op in ops:
        key: Any = [b"a", b"b"] if op in (Op.MGET, Op.COMMAND) else b"k"
        codec.encode(op, key, b"v" if op == Op.SET else None, out, 1)
    cut = [c % (len(data) + 1) for c in cuts]
    replies_or_protocol_error(codec, data, cut, eof=True, exact_nbytes=False)
