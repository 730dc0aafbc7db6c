"""Properties of MemcacheMetaCodec: request reader, reply writer, chunking, random input."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.protocols.base import (
    DEFAULT_MAX_REPLY_BYTES,
    NEED_DATA,
    CodecOptions,
    Op,
    Reply,
    ReplyKind,
)
from kvbench.protocols.memcache_meta import MemcacheMetaCodec
from tests.support.codec_checks import (
    batch_arguments,
    code_of,
    encode_in_windows,
    messages,
    outcome,
    parse_all,
    read_in_pieces,
    replies_or_protocol_error,
    step_of,
    values,
)
from tests.support.codec_checks import memcache_keys as keys

K = ReplyKind
STORAGE = {Op.SET: b"", Op.ADD: b"ME", Op.REPLACE: b"MR", Op.APPEND: b"MA", Op.PREPEND: b"MP"}
STORE_CODES = {b"HD": K.STORED, b"NS": K.NOT_STORED, b"EX": K.EXISTS, b"NF": K.NOT_FOUND}
DELETE_CODES = {b"HD": K.DELETED, b"NF": K.NOT_FOUND, b"EX": K.EXISTS}


@dataclass(frozen=True)
class Exchange:
    """One request and what the server does with it (rendered once tokens are known)."""

    op: Op
    key: bytes | tuple[bytes, ...]
    value: bytes | None
    arg: int
    outcome: object


@st.composite
def exchanges(draw: st.DrawFn, noreply: bool) -> Exchange:
    op = draw(st.sampled_from([op for op in Op if op is not Op.COMMAND]))
    key: bytes | tuple[bytes, ...] = draw(keys)
    if op is Op.MGET:
        key = tuple(draw(st.lists(keys, min_size=1, max_size=5)))
    value = draw(values) if op in STORAGE or op is Op.CAS else None
    arg = draw(st.integers(0, 2**64 - 1)) if op in (Op.CAS, Op.INCR, Op.DECR, Op.TOUCH) else 0
    if draw(st.integers(0, 9)) == 0 and (not noreply or op in (Op.GET, Op.MGET, Op.NOOP)):
        line = draw(st.sampled_from([b"ERROR", b"CLIENT_ERROR ", b"SERVER_ERROR "]))
        outcome: object = ("error", line + draw(messages) if line != b"ERROR" else line)
    elif op in (Op.GET, Op.GETS):
        outcome = draw(st.none() | st.tuples(values, st.integers(0, 2**64 - 1)))
    elif op is Op.TOUCH:
        outcome = draw(st.booleans())
    elif op is Op.MGET:
        outcome = [draw(st.none() | values) for _ in key]
    elif op in STORAGE or op is Op.CAS:
        outcome = draw(st.sampled_from(list(STORE_CODES)))
    elif op is Op.DELETE:
        outcome = draw(st.sampled_from(list(DELETE_CODES)))
    elif op in (Op.INCR, Op.DECR):
        outcome = draw(st.none() | st.integers(0, 2**64 - 1))
    elif op is Op.STATS:
        outcome = draw(st.lists(st.tuples(keys, messages.filter(bool)), max_size=5))
    else:
        outcome = None
    return Exchange(op, key, value, arg, outcome)


def read_requests(stream: bytes) -> list[tuple[bytes, bytes, list[bytes], bytes | None]]:
    """Test-side request reader: (command, key, flags, data block or None) per line."""
    requests = []
    pos = 0
    while pos < len(stream):
        eol = stream.index(b"\r\n", pos)
        command, *rest = stream[pos:eol].split(b" ")
        pos = eol + 2
        key, flags = (rest[0], rest[1:]) if rest else (b"", [])
        block = None
        if command == b"ms":
            size = int(flags.pop(0))
            block = stream[pos : pos + size]
            assert stream[pos + size : pos + size + 2] == b"\r\n"
            pos += size + 2
        requests.append((command, key, flags, block))
    return requests


def tokens_of(request: bytes) -> list[bytes]:
    return [f[1:] for _, _, flags, _ in read_requests(request) for f in flags if f[:1] == b"O"]


def render(e: Exchange, request: bytes, keep: bool, noreply: bool) -> tuple[bytes, Reply | None]:
    """The reply memcached writes for ``e`` (protocol.txt "Meta Commands"); None when quiet."""
    tokens = tokens_of(request)
    token = tokens[0] if tokens else b""
    quiet = noreply and e.op in (*STORAGE, Op.CAS, Op.DELETE, Op.INCR, Op.DECR)
    outcome: Any = e.outcome  # its shape depends on the op, see exchanges()
    if isinstance(outcome, tuple) and outcome[0] == "error":
        wire = outcome[1] + b"\r\n"
        if e.op is Op.MGET:  # the error answers one mg; the closing mn still answers MN
            wire += b"MN\r\n"
        return wire, Reply(K.ERROR_REPLY, len(wire), outcome[1], 0)
    if e.op in (Op.GET, Op.GETS):
        if outcome is None:
            return b"EN O%s\r\n" % token, Reply(K.MISS, 6 + len(token))
        value, cas = outcome
        cas_flag = b" c%d" % cas if e.op is Op.GETS else b""
        wire = b"VA %d%s O%s\r\n%s\r\n" % (len(value), cas_flag, token, value)
        return wire, Reply(K.HIT, len(wire), value if keep else None, 1)
    if e.op is Op.TOUCH:
        code, kind = (b"HD", K.TOUCHED) if outcome else (b"EN", K.NOT_FOUND)
        return b"%s O%s\r\n" % (code, token), Reply(kind, 6 + len(token))
    if e.op is Op.MGET:
        hits = [(v, t) for v, t in zip(outcome, tokens, strict=True) if v is not None]
        wire = b"".join(b"VA %d O%s\r\n%s\r\n" % (len(v), t, v) for v, t in hits) + b"MN\r\n"
        if not hits:
            return wire, Reply(K.MISS, len(wire))
        payload = b"".join(v for v, _ in hits) if keep else None
        return wire, Reply(K.HIT, len(wire), payload, len(hits))
    if e.op in (Op.INCR, Op.DECR):
        if outcome is None:
            return b"NF O%s\r\n" % token, None if quiet else Reply(K.NOT_FOUND, 6 + len(token))
        if quiet:
            return b"", None
        text = b"%d" % outcome
        wire = b"VA %d O%s\r\n%s\r\n" % (len(text), token, text)
        return wire, Reply(K.VALUE, len(wire), text if keep else None)
    if e.op is Op.NOOP:
        return b"MN\r\n", Reply(K.OK, 4)
    if e.op is Op.STATS:
        wire = b"".join(b"STAT %s %s\r\n" % pair for pair in outcome) + b"END\r\n"
        payload = b"".join(b"%s %s\r\n" % pair for pair in outcome)
        return wire, Reply(K.VALUE, len(wire), payload)
    table = DELETE_CODES if e.op is Op.DELETE else STORE_CODES
    status = b"%s O%s\r\n" % (outcome, token)
    if quiet:
        return (b"", None) if outcome == b"HD" else (status, None)
    return status, Reply(table[outcome], len(status))


@settings(deadline=None)
@given(data=st.data(), keep=st.booleans(), noreply=st.booleans())
def test_written_replies_parse_back_in_any_chunking(
    data: st.DataObject, keep: bool, noreply: bool
) -> None:
    plan = data.draw(st.lists(exchanges(noreply), min_size=1, max_size=10))
    codec = MemcacheMetaCodec(CodecOptions(keep_payload=keep, noreply=noreply))
    wire = b""
    expected: list[Reply] = []
    quiet_failures = 0
    for e in plan:
        request = bytearray()
        announced = codec.encode(e.op, e.key, e.value, request, e.arg)
        reply_wire, reply = render(e, bytes(request), keep, noreply)
        assert announced == (reply is not None)
        wire += reply_wire
        if reply is not None:
            expected.append(reply)
        elif reply_wire:
            quiet_failures += 1
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=12))
    assert parse_all(codec, wire, cuts) == expected
    assert codec.pending() == 0
    assert codec.quiet_failures == quiet_failures
    codec.feed_eof()
    assert codec.next_reply() is NEED_DATA


@settings(deadline=None)
@given(
    data=st.data(),
    noreply=st.booleans(),
    flags=st.integers(0, 2**32 - 1),
    ttl=st.integers(0, 2**31),
)
def test_requests_read_back_with_their_flags_and_consecutive_tokens(
    data: st.DataObject, noreply: bool, flags: int, ttl: int
) -> None:
    plan = data.draw(st.lists(exchanges(noreply), min_size=1, max_size=10))
    codec = MemcacheMetaCodec(CodecOptions(noreply=noreply, flags=flags, ttl_s=ttl))
    out = bytearray()
    for e in plan:
        codec.encode(e.op, e.key, e.value, out, e.arg)
    lines = iter(read_requests(bytes(out)))
    tokens = itertools.count()
    q = [b"q"] if noreply else []
    for e in plan:
        if e.op is Op.MGET:
            for key in e.key:
                assert next(lines) == (b"mg", key, [b"v", b"q", b"O%d" % next(tokens)], None)
            assert next(lines) == (b"mn", b"", [], None)
            continue
        line = next(lines)
        if e.op in (Op.NOOP, Op.STATS):
            assert line == ({Op.NOOP: b"mn", Op.STATS: b"stats"}[e.op], b"", [], None)
            continue
        token = [b"O%d" % next(tokens)]
        if e.op in (Op.GET, Op.GETS):
            expected = [b"v", b"c"] if e.op is Op.GETS else [b"v"]
            assert line == (b"mg", e.key, expected + token, None)
        elif e.op is Op.TOUCH:
            assert line == (b"mg", e.key, [b"T%d" % e.arg, *token], None)
        elif e.op is Op.DELETE:
            assert line == (b"md", e.key, q + token, None)
        elif e.op in (Op.INCR, Op.DECR):
            mode = [b"MD"] if e.op is Op.DECR else []
            assert line == (b"ma", e.key, [*mode, b"D%d" % e.arg, *(q or [b"v"]), *token], None)
        else:
            mode = [b"C%d" % e.arg] if e.op is Op.CAS else [STORAGE[e.op]] if STORAGE[e.op] else []
            assert line == (
                b"ms",
                e.key,
                [b"T%d" % ttl, b"F%d" % flags, *mode, *q, *token],
                e.value,
            )
    assert next(lines, None) is None


TOKENS = [
    b"VA ",
    b"EN",
    b"HD",
    b"NS",
    b"EX",
    b"NF",
    b"MN\r\n",
    b" O0",
    b" O1",
    b" O2",
    b" O3",
    b" c5",
    b" ",
    b"1",
    b"0",
    b"\r\n",
    b"\r",
    b"ERROR",
    b"CLIENT_ERROR x",
    b"STAT ",
    b"END\r\n",
]
noise = st.lists(st.binary(max_size=12) | st.sampled_from(TOKENS), max_size=40).map(b"".join)


@settings(deadline=None, max_examples=300)
@given(
    requests=st.lists(st.sampled_from([op for op in Op if op is not Op.COMMAND]), max_size=6),
    wire=noise,
    cuts=st.lists(st.integers(0, 400), max_size=8),
    eof=st.booleans(),
    keep=st.booleans(),
    noreply=st.booleans(),
    bound=st.sampled_from([16, 64, DEFAULT_MAX_REPLY_BYTES]),
)
def test_random_bytes_give_replies_or_protocol_error_only(
    requests: list[Op],
    wire: bytes,
    cuts: list[int],
    eof: bool,
    keep: bool,
    noreply: bool,
    bound: int,
) -> None:
    codec = MemcacheMetaCodec(
        CodecOptions(keep_payload=keep, noreply=noreply, max_reply_bytes=bound)
    )
    for op in requests:
        key: bytes | list[bytes] = [b"k", b"a"] if op is Op.MGET else b"k"
        codec.encode(op, key, b"v" if op in STORAGE or op is Op.CAS else None, bytearray(), 1)
    replies_or_protocol_error(codec, wire, cuts, eof)
    quietable = (*STORAGE, Op.CAS, Op.DELETE, Op.INCR, Op.DECR)
    assert codec.quiet_failures <= (sum(op in quietable for op in requests) if noreply else 0)


# -- batch paths: encode_many and read_kinds against encode and next_reply ---------------


@settings(deadline=None)
@given(data=st.data(), keep=st.booleans())
def test_batch_paths_write_and_read_what_the_per_op_paths_do(
    data: st.DataObject, keep: bool
) -> None:
    plan = data.draw(st.lists(exchanges(False), min_size=1, max_size=12))
    ops, keys, values = batch_arguments(data.draw, [(e.op, e.key, e.value) for e in plan])
    options = CodecOptions(keep_payload=keep, ttl_s=9, flags=3)
    one, many = MemcacheMetaCodec(options), MemcacheMetaCodec(options)
    out_one, out_many = bytearray(), bytearray()
    wire = b""
    expected: list[int] = []
    for e, op, key, value in zip(plan, ops, keys, values, strict=True):
        request = bytearray()
        one.encode(Op(op), key, value, request, step_of(op))
        out_one += request
        reply_wire, reply = render(e, bytes(request), keep, False)
        assert reply is not None
        wire += reply_wire
        expected.append(code_of(reply))
    encode_in_windows(data, many, ops, keys, values, out_many)
    assert bytes(out_many) == bytes(out_one)
    assert many.pending() == one.pending() == len(plan)

    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    assert [code_of(r) for r in parse_all(one, wire, cuts)] == expected
    assert read_in_pieces(data, many, wire) == expected
    assert many.pending() == 0


BATCH_TOKENS = [*TOKENS, b"VA 1 O0\r\n", b"HD O1\r\n", b"EN O2\r\n", b" O1\r\n", b"+", b"_"]
batch_noise = st.lists(st.binary(max_size=8) | st.sampled_from(BATCH_TOKENS), max_size=40).map(
    b"".join
)


@settings(deadline=None, max_examples=400)
@given(
    requests=st.lists(
        st.tuples(st.sampled_from([op for op in Op if op is not Op.COMMAND]), st.booleans()),
        max_size=8,
    ),
    wire=batch_noise,
    cuts=st.lists(st.integers(0, 400), max_size=8),
    eof=st.booleans(),
    noreply=st.booleans(),
    bound=st.sampled_from([16, 40, 64, DEFAULT_MAX_REPLY_BYTES]),
    mixed=st.lists(st.booleans(), min_size=1, max_size=6),
)
def test_read_kinds_accepts_and_rejects_exactly_what_next_reply_does(
    requests: list[tuple[Op, bool]],
    wire: bytes,
    cuts: list[int],
    eof: bool,
    noreply: bool,
    bound: int,
    mixed: list[bool],
) -> None:
    results = []
    for batch in ([False], [True], mixed):
        codec = MemcacheMetaCodec(CodecOptions(noreply=noreply, max_reply_bytes=bound))
        for op, in_batch in requests:
            key: bytes | list[bytes] = [b"k", b"a"] if op is Op.MGET else b"k"
            value = b"v" if op in STORAGE or op is Op.CAS else None
            if in_batch and not noreply:
                codec.encode_many([int(op)], [key], [value], 0, 1, bytearray())
            else:
                codec.encode(op, key, value, bytearray(), 1)
        cut = sorted(c for c in cuts if c <= len(wire))
        results.append((*outcome(codec, wire, cut, eof, batch), codec.quiet_failures))
    assert results[1] == results[0]
    assert results[2] == results[0]
