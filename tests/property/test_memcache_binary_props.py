"""Properties of MemcacheBinaryCodec: replies independent of chunking, requests parse back,
random bytes give replies or ProtocolError only."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.protocols.base import NEED_DATA, CodecOptions, Op, Reply, ReplyKind
from kvbench.protocols.memcache_binary import HEADER, MemcacheBinaryCodec
from tests.support.codec_checks import replies_or_protocol_error

K = ReplyKind
FLAGS = b"\x00\x00\x00\x07"

# Test-side expectations, written from the protocol document, not from the codec's tables:
# op -> [(status, response extras, kind)]; a status absent from the server's mapping is an
# error reply.
OUTCOMES: dict[Op, list[tuple[int, bytes, ReplyKind]]] = {
    Op.GET: [(0, FLAGS, K.HIT), (1, b"", K.MISS), (0x84, b"", K.ERROR_REPLY)],
    Op.GETS: [(0, FLAGS, K.HIT), (1, b"", K.MISS)],
    Op.SET: [
        (0, b"", K.STORED),
        (2, b"", K.EXISTS),
        (5, b"", K.NOT_STORED),
        (0x82, b"", K.ERROR_REPLY),
    ],
    Op.ADD: [(0, b"", K.STORED), (2, b"", K.NOT_STORED)],
    Op.REPLACE: [(0, b"", K.STORED), (1, b"", K.NOT_STORED), (3, b"", K.ERROR_REPLY)],
    Op.CAS: [(0, b"", K.STORED), (2, b"", K.EXISTS), (1, b"", K.NOT_FOUND)],
    Op.APPEND: [(0, b"", K.STORED), (5, b"", K.NOT_STORED)],
    Op.PREPEND: [(0, b"", K.STORED), (5, b"", K.NOT_STORED)],
    Op.DELETE: [(0, b"", K.DELETED), (1, b"", K.NOT_FOUND), (0x81, b"", K.ERROR_REPLY)],
    Op.INCR: [(0, b"", K.VALUE), (1, b"", K.NOT_FOUND), (6, b"", K.ERROR_REPLY)],
    Op.DECR: [(0, b"", K.VALUE), (1, b"", K.NOT_FOUND)],
    Op.TOUCH: [(0, FLAGS, K.TOUCHED), (1, b"", K.NOT_FOUND)],
    Op.NOOP: [(0, b"", K.OK)],
}
VALUE_OPS = {Op.SET, Op.ADD, Op.REPLACE, Op.CAS, Op.APPEND, Op.PREPEND}
QUIET_OPS = [Op.SET, Op.ADD, Op.REPLACE, Op.DELETE, Op.INCR, Op.DECR, Op.APPEND, Op.PREPEND]


def packet(
    opcode: int,
    opaque: int,
    status: int = 0,
    key: bytes = b"",
    extras: bytes = b"",
    value: bytes = b"",
) -> bytes:
    body = len(extras) + len(key) + len(value)
    return (
        HEADER.pack(0x81, opcode, len(key), len(extras), 0, status, body, opaque, 0)
        + extras
        + key
        + value
    )


@dataclass
class Request:
    opcode: int
    opaque: int
    key: bytes
    extras: bytes
    value: bytes


def read_requests(data: bytes) -> list[Request]:
    """Test-side request reader: split a request stream into packets."""
    requests = []
    pos = 0
    while pos < len(data):
        magic, opcode, keylen, extlen, dtype, vbucket, body, opaque, _cas = HEADER.unpack_from(
            data, pos
        )
        assert (magic, dtype, vbucket) == (0x80, 0, 0)
        start = pos + 24
        extras = data[start : start + extlen]
        key = data[start + extlen : start + extlen + keylen]
        value = data[start + extlen + keylen : start + body]
        requests.append(Request(opcode, opaque, key, extras, value))
        pos = start + body
    assert pos == len(data)
    return requests


@dataclass(frozen=True)
class Step:
    """One request and how the server answers it.

    ``outcome`` is an index into ``OUTCOMES[op]``, the hit flag of each multi-get key, or
    the (name, value) lines of a stats reply; ``text`` is the error text, if any.
    """

    op: Op
    key: object
    value: bytes | None
    arg: int
    outcome: Any
    text: bytes


@dataclass
class Scenario:
    steps: list[Step] = field(default_factory=list)
    noreply: bool = False


keys_st = st.binary(min_size=1, max_size=12)
values_st = st.binary(max_size=40)


@st.composite
def steps(draw: st.DrawFn) -> Step:
    op = draw(st.sampled_from([*OUTCOMES, Op.MGET, Op.STATS]))
    if op == Op.MGET:
        keys = draw(st.lists(keys_st, max_size=4))
        return Step(op, keys, None, 0, [draw(st.booleans()) for _ in keys], b"")
    if op == Op.STATS:
        return Step(
            op, b"", None, 0, draw(st.lists(st.tuples(keys_st, values_st), max_size=4)), b""
        )
    value = draw(values_st) if op in VALUE_OPS else None
    outcome = draw(st.integers(0, len(OUTCOMES[op]) - 1))
    # arg is a 32-bit touch expiry (or a 64-bit delta): 2**32 does not fit the former.
    arg = draw(st.integers(0, 2**32 - 1))
    return Step(op, draw(keys_st), value, arg, outcome, draw(values_st))


scenarios = st.builds(Scenario, st.lists(steps(), max_size=8), st.booleans())


def answer(step: Step, requests: list[Request], announced: int) -> tuple[bytes, Reply | None]:
    """Test-side server: the bytes answering one step, and the reply they must give."""
    if step.op == Op.MGET:
        stream = b"".join(
            packet(0x0D, r.opaque, key=r.key, extras=FLAGS, value=b"v" * len(r.key))
            for r, hit in zip(requests, step.outcome, strict=False)
            if hit
        ) + packet(0x0A, requests[-1].opaque)
        hits = sum(step.outcome)
        return stream, Reply(K.HIT if hits else K.MISS, len(stream), None, hits)
    if step.op == Op.STATS:
        opaque = requests[0].opaque
        lines = [packet(0x10, opaque, key=name, value=stat) for name, stat in step.outcome]
        stream = b"".join(lines) + packet(0x10, opaque)
        payload = b"".join(name + b" " + stat + b"\r\n" for name, stat in step.outcome)
        return stream, Reply(K.VALUE, len(stream), payload, 0)
    status, extras, kind = OUTCOMES[step.op][step.outcome]
    [r] = requests
    body = step.text if status else b""
    if kind == K.VALUE:
        body = struct.pack(">Q", 7)
    elif kind == K.HIT:
        body = step.text
    stream = packet(r.opcode, r.opaque, status, extras=extras, value=body)
    if announced == 0:  # a quiet op: only failures answer, and they give no reply
        return (stream if status else b""), None
    if kind == K.ERROR_REPLY:
        return stream, Reply(kind, len(stream), body or b"status 0x%04x" % status, 0)
    return stream, Reply(kind, len(stream), None, 1 if kind == K.HIT else 0)


def render(scenario: Scenario) -> tuple[bytes, list[Reply], int, bytes]:
    """Encode the requests, then write the server's answer to each, test-side.

    Returns the server's stream, the replies it must give, how many quiet-op errors it
    holds, and the request stream.
    """
    codec = MemcacheBinaryCodec(CodecOptions(noreply=scenario.noreply))
    out = bytearray()
    stream = bytearray()
    expected: list[Reply] = []
    unsolicited = 0
    for step in scenario.steps:
        before = len(out)
        announced = codec.encode(step.op, step.key, step.value, out, step.arg)
        data, reply = answer(step, read_requests(bytes(out[before:])), announced)
        stream += data
        if reply is not None:
            expected.append(reply)
        elif data:
            unsolicited += 1
    return bytes(stream), expected, unsolicited, bytes(out)


def replay(
    scenario: Scenario, stream: bytes, cuts: list[int]
) -> tuple[list[Reply], MemcacheBinaryCodec]:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=scenario.noreply))
    out = bytearray()
    for step in scenario.steps:
        codec.encode(step.op, step.key, step.value, out, step.arg)
    replies: list[Reply] = []
    bounds = [0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]
    for lo, hi in pairwise(bounds):
        codec.feed(stream[lo:hi])
        while (reply := codec.next_reply()) is not NEED_DATA:
            assert isinstance(reply, Reply)
            replies.append(reply)
    codec.feed_eof()
    assert codec.next_reply() is NEED_DATA
    return replies, codec


@settings(max_examples=150, deadline=None)
@given(scenarios, st.lists(st.integers(min_value=0), max_size=12))
def test_replies_match_the_server_writer_whatever_the_chunking(
    scenario: Scenario, cuts: list[int]
) -> None:
    stream, expected, unsolicited, _ = render(scenario)
    whole, _ = replay(scenario, stream, [])
    chunked, codec = replay(scenario, stream, cuts)
    assert whole == expected
    assert chunked == expected
    assert codec.unsolicited_errors == unsolicited
    assert codec.pending() == 0


@settings(max_examples=100, deadline=None)
@given(scenarios)
def test_requests_parse_back_with_one_opaque_each(scenario: Scenario) -> None:
    _, _, _, requests_bytes = render(scenario)
    requests = read_requests(requests_bytes)
    assert [r.opaque for r in requests] == list(range(len(requests)))
    for r in requests:
        if r.opcode in (0x01, 0x02, 0x03, 0x11, 0x12, 0x13):
            assert len(r.extras) == 8
        if r.opcode in (0x05, 0x06, 0x15, 0x16):
            assert r.extras[16:] == b"\xff\xff\xff\xff"


headers = st.builds(
    lambda magic, opcode, keylen, extlen, status, body, opaque, tail: (
        HEADER.pack(magic, opcode, keylen, extlen, 0, status, body, opaque, 0) + tail
    ),
    st.sampled_from([0x81, 0x81, 0x81, 0x80, 0x00]),
    st.sampled_from([0x00, 0x01, 0x04, 0x05, 0x0A, 0x0D, 0x10, 0x11, 0x14, 0x1C, 0xFF]),
    st.integers(0, 4),
    st.integers(0, 8),
    st.sampled_from([0, 1, 2, 5, 6, 0x81, 0xFFFF]),
    st.integers(0, 24),
    st.integers(0, 6),
    st.binary(max_size=24),
)
junk = st.lists(st.one_of(headers, st.binary(max_size=30)), max_size=8).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([Op.GET, Op.SET, Op.MGET, Op.STATS, Op.INCR, Op.DELETE]), max_size=6),
    st.booleans(),
    junk,
    st.lists(st.integers(min_value=0), max_size=6),
)
def test_random_bytes_give_replies_or_protocol_error_only(
    ops: list[Op], noreply: bool, data: bytes, cuts: list[int]
) -> None:
    codec = MemcacheBinaryCodec(CodecOptions(noreply=noreply, max_reply_bytes=64))
    out = bytearray()
    for op in ops:
        key: object = [b"a", b"b"] if op == Op.MGET else b"k"
        codec.encode(op, key, b"v" if op == Op.SET else None, out, 1)
    replies_or_protocol_error(codec, data, [c % (len(data) + 1) for c in cuts], eof=True)
