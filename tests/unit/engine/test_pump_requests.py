"""The compiled pump's request encoders (engine/_pump*.c) against the Python codecs.

Requests must be the bytes the codec's ``encode_many`` writes, for every op, multi-get
width, ttl, flags and value type, opaques (binary) and tokens (meta) included, across
their 32-bit wrap; what a codec refuses to encode, the pump refuses too. Under
``CI=true`` a pump that is not built fails these tests instead of skipping them.
"""

from __future__ import annotations

import gc
import struct
import weakref
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.engine import fastpath
from kvbench.protocols.base import CodecOptions, Op
from kvbench.protocols.commands import (
    DATA,
    RESP_REFUSED,
    KeySlot,
    RequestTemplate,
    resp_template,
    text_template,
)
from kvbench.protocols.registry import CODECS
from tests.support import pump_oracle, reply_grammar

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

TEXT, RESP, BINARY, META = (
    fastpath.PROTOCOLS[name][0]
    for name in ("memcache-text", "resp2", "memcache-binary", "memcache-meta")
)
PROTOCOLS = pump_oracle.PROTOCOLS

keys = st.binary(min_size=1, max_size=12).map(lambda b: b"k" + b.hex().encode())
data = st.binary(max_size=40)
# An op is drawn as an index into the ops the pump sends on the protocol (a replay's too).
ALL_OPS = st.integers(0, len(Op) - 1)
# The attribute holding the next opaque of a fresh codec (binary opaque, meta O token).
NEXT_OPAQUE = {"memcache-binary": "_next_opaque", "memcache-meta": "_token"}


def codec_requests(
    name: str,
    options: CodecOptions,
    ops: list[int],
    names: list[Any],
    values: list[Any],
    first: int,
) -> bytes:
    """What the codec's encode_many writes for the requests, opaques numbered from ``first``."""
    codec: Any = CODECS[name].factory(options)
    if first:
        setattr(codec, NEXT_OPAQUE[name], first)
    out = bytearray()
    codec.encode_many(ops, names, values, 0, len(ops), out)
    return bytes(out)


@settings(max_examples=pump_oracle.examples(300), deadline=None)
@given(
    st.sampled_from(PROTOCOLS),
    st.lists(st.tuples(ALL_OPS, keys, data, st.integers(1, 6)), min_size=1, max_size=20),
    st.integers(0, 10**6),
    st.integers(0, 2**32 - 1),
    st.sampled_from([bytes, memoryview, bytearray]),
)
def test_requests_are_the_bytes_the_codec_writes(
    name: str, requests: Any, ttl: int, flags: int, kind: Any
) -> None:
    """Every op the pump sends on the protocol (a mix's; a replay's gets, add, replace,
    append, prepend and cas 0 where it has them), multi-gets 1 to 6 keys wide, any ttl and
    flags, every value type."""
    sent = pump_oracle.ops_of(name)
    ops = [int(sent[index % len(sent)]) for index, _, _, _ in requests]
    names = [
        tuple(key + b"%d" % i for i in range(width))
        if op == Op.MGET
        else pump_oracle.command_request(key, value, name)
        if op == Op.COMMAND
        else key
        for op, (_, key, value, width) in zip(ops, requests, strict=True)
    ]
    values = [
        kind(value) if op in pump_oracle.STORES else None
        for op, (_, _, value, _) in zip(ops, requests, strict=True)
    ]
    expected = codec_requests(name, CodecOptions(ttl_s=ttl, flags=flags), ops, names, values, 0)
    number = fastpath.PROTOCOLS[name][0]
    frame = pump_oracle.frame_args(name)
    assert _pump.encode(number, ttl, flags, ops, names, values, 0, len(ops), 0, *frame) == expected
    # and a slice, as a stream takes it from a chunk, its opaques following the first's
    first = reply_grammar.opaques_taken(name, ops[0], names[0]) if name in NEXT_OPAQUE else 0
    middle = _pump.encode(number, ttl, flags, ops, names, values, 1, len(ops), first, *frame)
    assert expected.endswith(middle)


@pytest.mark.parametrize("name", ["memcache-binary", "memcache-meta"])
@pytest.mark.parametrize("first", [2**32 - 1, 2**32 - 3, 2**32 - 8])
def test_opaques_wrap_at_32_bits_as_the_codec_wraps_them(name: str, first: int) -> None:
    ops = [int(op) for op in (Op.GET, Op.MGET, Op.SET, Op.INCR, Op.DECR, Op.DELETE, Op.GET)]
    names = [b"a", (b"b", b"c", b"d"), b"e", b"f", b"g", b"h", b"i"]
    values = [b"xyz"] * len(ops)
    expected = codec_requests(name, CodecOptions(ttl_s=7), ops, names, values, first)
    number = fastpath.PROTOCOLS[name][0]
    assert _pump.encode(number, 7, 0, ops, names, values, 0, len(ops), first) == expected
    wrapped = b" O0\r\n" if name == "memcache-meta" else b"\0\0\0\0" + b"\0" * 8
    assert wrapped in expected


def test_ops_without_a_compiled_encoding_and_bad_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="op 13 has no compiled encoding"):
        _pump.encode(TEXT, 0, 0, [int(Op.NOOP)], [b"k"], [None], 0, 1)
    with pytest.raises(TypeError, match="bytes-like, not str"):
        _pump.encode(RESP, 0, 0, [int(Op.GET)], ["k"], [None], 0, 1)
    with pytest.raises(TypeError, match="tuple or list"):
        _pump.encode(RESP, 0, 0, [int(Op.MGET)], [b"k"], [None], 0, 1)
    with pytest.raises(ValueError, match="op 13 has no compiled encoding"):
        _pump.encode(BINARY, 0, 0, [int(Op.NOOP)], [b"k"], [None], 0, 1)
    with pytest.raises(ValueError, match="op 11 has no compiled encoding"):
        _pump.encode(META, 0, 0, [int(Op.TOUCH)], [b"k"], [None], 0, 1)
    with pytest.raises(ValueError, match="op 11 has no compiled encoding"):
        _pump.encode(TEXT, 0, 0, [int(Op.TOUCH)], [b"k"], [None], 0, 1)
    # a replay's ops where the protocol's pump has no form for them (the Python driver's)
    for protocol, op in [(RESP, Op.GETS), (RESP, Op.PREPEND), (RESP, Op.CAS), (BINARY, Op.CAS)]:
        with pytest.raises(ValueError, match=f"op {int(op)} has no compiled encoding"):
            _pump.encode(protocol, 0, 0, [int(op)], [b"k"], [b"v"], 0, 1)


@pytest.mark.parametrize("key", [b"", b"a b", b"k&cmd=flush_all", b"k%20", b"\xff", b"k#"])
def test_a_key_a_gateway_url_cannot_hold_is_refused_as_the_codec_refuses_it(key: bytes) -> None:
    """memc does not URL-decode: the pump, like the codec, sends no key it would have to
    encode (nothing is written, the request is not sent)."""
    http = fastpath.PROTOCOLS["http-memc"][0]
    frame = pump_oracle.frame_args("http-memc")
    codec: Any = CODECS["http-memc"].factory(CodecOptions())
    with pytest.raises(ValueError) as refused:
        codec.encode_many([int(Op.GET)], [key], [None], 0, 1, bytearray())
    with pytest.raises(ValueError) as pumped:
        _pump.encode(
            http, 0, 0, [int(Op.SET), int(Op.GET)], [b"ok", key], [b"v", None], 0, 2, 0, *frame
        )
    assert str(pumped.value) == str(refused.value)
    assert "cannot go into a memc gateway URL" in str(pumped.value)


def test_an_http_stream_needs_its_requests_start_and_end() -> None:
    http = fastpath.PROTOCOLS["http-memc"][0]
    for frame in ({}, {"target": b"GET /memc?cmd="}, {"tail": b" HTTP/1.1\r\n\r\n"}):
        with pytest.raises(ValueError, match="an HTTP stream needs its requests' target and tail"):
            _pump.Stream(list, http, **frame)
    with pytest.raises(ValueError, match="target and tail"):
        _pump.encode(http, 0, 0, [int(Op.GET)], [b"k"], [None], 0, 1)
    with pytest.raises(TypeError, match="bytes or None"):
        _pump.Stream(list, http, target="GET /memc?cmd=", tail=b" HTTP/1.1\r\n\r\n")  # type: ignore[arg-type]


def test_a_replays_ops_are_the_codecs_bytes_with_the_chunks_ttl() -> None:
    """The ops a replay adds, as memcached text and Redis write them with a TTL and
    without: cas with unique 0 (a trace row has no token), add and replace as SET NX/XX."""
    text = _pump.encode(TEXT, 60, 0, [int(Op.CAS), int(Op.GETS)], [b"k", b"g"], [b"vv", None], 0, 2)
    assert text == b"cas k 0 60 2 0\r\nvv\r\ngets g\r\n"
    ops = [int(Op.ADD), int(Op.REPLACE), int(Op.APPEND)]
    for ttl in (0, 90):
        expected = codec_requests("resp2", CodecOptions(ttl_s=ttl), ops, [b"a", b"r", b"p"],
                                  [b"x", b"y", b"z"], 0)  # fmt: skip
        got = _pump.encode(RESP, ttl, 0, ops, [b"a", b"r", b"p"], [b"x", b"y", b"z"], 0, 3)
        assert got == expected
        assert (b"$2\r\nNX\r\n$2\r\nEX\r\n$2\r\n90\r\n" in got) == (ttl == 90)


def test_what_a_binary_header_or_meta_multi_get_cannot_hold_is_refused_as_the_codec_does() -> None:
    binary: Any = CODECS["memcache-binary"].factory(CodecOptions())
    with pytest.raises(struct.error):
        binary.encode_many([int(Op.GET)], [b"k" * 65536], [None], 0, 1, bytearray())
    with pytest.raises(ValueError, match="key of at most 65535 bytes"):
        _pump.encode(BINARY, 0, 0, [int(Op.GET)], [b"k" * 65536], [None], 0, 1)
    with pytest.raises(ValueError, match="key of at most 65535 bytes"):
        _pump.encode(BINARY, 0, 0, [int(Op.MGET)], [(b"k", b"k" * 65536)], [None], 0, 1)
    for ttl, flags in [(-1, 0), (2**32, 0), (0, 2**32)]:  # the codec's struct ">II" refuses
        with pytest.raises(struct.error):
            CODECS["memcache-binary"].factory(CodecOptions(ttl_s=ttl, flags=flags))
        with pytest.raises(ValueError, match=r"0 to 4294967295|a ttl is 0 \(no expiry\)"):
            _pump.Stream(list, BINARY, ttl, flags)
    meta: Any = CODECS["memcache-meta"].factory(CodecOptions())
    with pytest.raises(ValueError, match="at least one key"):
        meta.encode_many([int(Op.MGET)], [()], [None], 0, 1, bytearray())
    with pytest.raises(ValueError, match="at least one key"):
        _pump.encode(META, 0, 0, [int(Op.MGET)], [()], [None], 0, 1)


# -- packed chunks (a replay's lane, from its spool) ---------------------------------------

# The ops a packed chunk may carry on each protocol: every one its pump encodes but a
# multi-get (whose keys only a list-form chunk holds).
SINGLE_KEY = {
    name: tuple(op for op in pump_oracle.ops_of(name) if op != Op.MGET) for name in PROTOCOLS
}
OFFSET_KINDS = pump_oracle.OFFSET_KINDS


@settings(max_examples=pump_oracle.examples(300), deadline=None)
@given(
    st.sampled_from(PROTOCOLS),
    st.lists(st.tuples(ALL_OPS, keys, data), min_size=1, max_size=20),
    st.integers(0, 10**6),
    st.integers(0, 2**32 - 1),
    st.sampled_from(OFFSET_KINDS),
    st.integers(0, 2**16),
    st.sampled_from([0, 2**32 - 2]),
)
def test_a_packed_chunk_is_the_bytes_of_its_list_form_and_the_codecs(
    name: str, requests: Any, ttl: int, flags: int, kind: str, layout: int, first: int
) -> None:
    """Every single-key op the pump sends on the protocol, any ttl and flags, any column
    type and value layout, opaques (binary, meta) from 0 or across their 32-bit wrap."""
    sent = SINGLE_KEY[name]
    ops = [int(sent[index % len(sent)]) for index, _, _ in requests]
    names = [
        pump_oracle.command_request(key, value, name) if op == Op.COMMAND else key
        for op, (_, key, value) in zip(ops, requests, strict=True)
    ]
    values = [
        value if op in pump_oracle.STORES else None
        for op, (_, _, value) in zip(ops, requests, strict=True)
    ]
    first = first if name in NEXT_OPAQUE else 0
    expected = codec_requests(name, CodecOptions(ttl_s=ttl, flags=flags), ops, names, values, first)
    number = fastpath.PROTOCOLS[name][0]
    columns = pump_oracle.pack(ops, names, values, 0, ttl, kind, layout)[:7]
    n = len(ops)
    frame = pump_oracle.frame_args(name)
    assert _pump.encode_packed(number, ttl, flags, *columns, 0, n, first, *frame) == expected
    assert _pump.encode(number, ttl, flags, ops, names, values, 0, n, first, *frame) == expected
    # a slice from request 1, its opaques following request 0's
    following = (first + 1) % 2**32 if name in NEXT_OPAQUE else 0
    tail = _pump.encode_packed(number, ttl, flags, *columns, 1, n, following, *frame)
    assert expected.endswith(tail)


class Chunks:
    """A refill handing out ``chunks`` (lists, or packed) in order, then None."""

    def __init__(self, chunks: list[tuple[Any, ...]]) -> None:
        self.chunks = list(chunks)

    def __call__(self) -> tuple[Any, ...] | None:
        return self.chunks.pop(0) if self.chunks else None


def stream_pump(name: str, chunks: list[tuple[Any, ...]]) -> tuple[Any, Any, Any, list[bytes]]:
    """A closed-loop pump of protocol ``name`` over a stream of its own fed ``chunks``."""
    number, families = fastpath.PROTOCOLS[name]
    tally = _pump.Tally()
    tally.issuing = True
    written: list[bytes] = []
    stream = _pump.Stream(Chunks(chunks), number, 5, **pump_oracle.stream_frame(name))
    return (
        tally,
        stream,
        _pump.Pump(tally, stream, written.append, number, families, 1 << 20),
        written,
    )


chunk_requests = st.lists(st.tuples(st.integers(0, 63), keys, data), min_size=1, max_size=8)
lane_chunks = st.lists(
    st.tuples(
        chunk_requests,
        st.integers(0, 7),  # start, within the chunk
        st.sampled_from([0, 60, 3600]),  # the chunk's stores' ttl
        st.sampled_from(OFFSET_KINDS),
        st.integers(0, 2**16),  # layout
        st.booleans(),  # the packed side takes this chunk packed (else as lists too)
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=pump_oracle.examples(200), deadline=None)
@given(
    st.sampled_from(PROTOCOLS),
    lane_chunks,
    st.lists(st.tuples(st.integers(1, 9), st.integers(0, 3)), min_size=1, max_size=8),
)
def test_a_stream_of_packed_chunks_sends_and_skips_what_its_list_chunks_do(
    name: str, drawn: Any, steps: list[tuple[int, int]]
) -> None:
    """Two pumps, one fed list-form chunks, the other the same chunks packed (or some of
    them as lists: the forms mix): the same writes, write by write, across chunk
    boundaries, each chunk's stores with its own ttl, opaques numbered on (binary, meta);
    ``skip`` takes the same ops off both."""
    sent = SINGLE_KEY[name]
    listed, packed = [], []
    for requests, start, ttl, kind, layout, as_packed in drawn:
        ops = [int(sent[index % len(sent)]) for index, _, _ in requests]
        names = [key for _, key, _ in requests]
        values = [
            value if op in pump_oracle.STORES else None
            for op, (_, _, value) in zip(ops, requests, strict=True)
        ]
        start %= len(ops)
        listed.append((ops, names, values, start, ttl))
        packed.append(
            pump_oracle.pack(ops, names, values, start, ttl, kind, layout)
            if as_packed
            else (ops, names, values, start, ttl)
        )
    tally_a, stream_a, pump_a, written_a = stream_pump(name, listed)
    tally_b, stream_b, pump_b, written_b = stream_pump(name, packed)
    for issue, skip in steps:
        assert pump_a.issue(issue) == pump_b.issue(issue)
        assert written_a == written_b
        assert (stream_a.pos, stream_a.size) == (stream_b.pos, stream_b.size)
        if skip:
            try:
                skipped = stream_a.skip(skip)
            except RuntimeError:  # the lane ran dry: both
                with pytest.raises(RuntimeError, match="not in its source"):
                    stream_b.skip(skip)
            else:
                assert stream_b.skip(skip) == skipped
    assert pump_a.inflight == pump_b.inflight and tally_a.bytes_out == tally_b.bytes_out


def test_a_packed_lane_writes_each_chunks_ttl_and_a_list_chunk_between_them() -> None:
    """What the property above holds, on bytes one can read: a chunk's stores carry its
    ttl, from its start, and a list-form chunk may come between two packed ones."""
    first = pump_oracle.pack(
        [int(Op.GET), int(Op.SET), int(Op.ADD)], [b"a", b"bb", b"c"], [None, b"xy", b"z"], 1, 60
    )
    second = ([int(Op.GETS)], [b"d"], [None], 0)
    third = pump_oracle.pack(
        [int(Op.CAS), int(Op.DELETE)], [b"e", b"f"], [b"vvv", None], 0, 0, "bytes"
    )
    _, stream, p, written = stream_pump("memcache-text", [first, second, third])
    assert p.issue(10) == 0
    assert written == [
        b"set bb 0 60 2\r\nxy\r\nadd c 0 60 1\r\nz\r\ngets d\r\ncas e 0 0 3 0\r\nvvv\r\ndelete f\r\n"
    ]
    assert (stream.pos, stream.size) == (2, 2) and p.issue(1) == 1  # the lane is dry


def test_a_packed_chunk_without_a_ttl_keeps_the_streams() -> None:
    """A plain run's source packs its chunks with ttl None: the stores carry the stream's
    ttl (the run's --ttl), as its list chunks without one do."""
    chunk = pump_oracle.pack([int(Op.SET), int(Op.SET)], [b"a", b"b"], [b"x", b"y"], 0, 0)
    no_ttl = (*chunk[:-1], None)
    _, _, p, written = stream_pump("memcache-text", [no_ttl])  # the stream's ttl: 5
    assert p.issue(2) == 0
    assert written == [b"set a 0 5 1\r\nx\r\nset b 0 5 1\r\ny\r\n"]


@pytest.mark.parametrize("name", PROTOCOLS)
def test_pumps_on_one_stream_send_each_its_own_ttl(name: str) -> None:
    """Under a --ttl range each connection's pump is given the ttl its connection drew,
    over the stream its shard's connections share: its stores carry that ttl, as its
    codec's would, and a pump given none carries the stream's (5)."""
    number, families = fastpath.PROTOCOLS[name]
    ops = [int(Op.SET), int(Op.GET), int(Op.SET)]
    names, values = [b"a", b"b", b"c"], [b"x", None, b"zz"]
    tally = _pump.Tally()
    tally.issuing = True
    stream = _pump.Stream(
        Chunks([(ops * 3, names * 3, values * 3, 0)]), number, 5, **pump_oracle.stream_frame(name)
    )
    for ttl in (90, None, 3600):
        written: list[bytes] = []
        own = {} if ttl is None else {"ttl": ttl}
        p = _pump.Pump(tally, stream, written.append, number, families, 1 << 20, **own)
        assert p.issue(3) == 0
        expected = codec_requests(
            name, CodecOptions(ttl_s=5 if ttl is None else ttl), ops, names, values, 0
        )
        assert written == [expected]


def test_a_pumps_own_ttl_is_one_its_protocol_carries() -> None:
    number, families = fastpath.PROTOCOLS["memcache-binary"]
    stream = _pump.Stream(list, number, 5)
    for ttl in (-2, 2**32):
        with pytest.raises(ValueError, match=r"0 to 4294967295|a ttl is 0 \(no expiry\)"):
            _pump.Pump(_pump.Tally(), stream, print, number, families, 1 << 20, ttl=ttl)


# -- a packed chunk is checked once, when it is loaded ------------------------------------


def u32(*numbers: int) -> Any:
    return np.array(numbers, dtype=np.uint32)


def with_column(index: int, column: Any) -> Any:
    """A good packed chunk (get aa, set bbb hello, delete c; ttl 5), one item replaced."""
    chunk: list[Any] = [
        bytes([int(Op.GET), int(Op.SET), int(Op.DELETE)]),
        b"aabbbc",
        u32(0, 2, 5),
        u32(2, 5, 6),
        b"hello",
        u32(0, 0, 0),
        u32(0, 5, 0),
        0,
        5,
    ]
    chunk[index] = column
    return tuple(chunk)


OPS_AT, KEYS_AT, KEY_STARTS_AT, KEY_ENDS_AT, VALUES_AT, STARTS_AT, ENDS_AT, START_AT, TTL_AT = (
    range(9)
)

BAD_CHUNKS = {  # what is wrong -> (the chunk, the error it gets)
    "op past MAX_OPS": (
        with_column(OPS_AT, bytes([0, 1, 64])),
        r"op 64 at 2 is not an op \(at most 63\)",
    ),
    "a multi-get": (with_column(OPS_AT, bytes([0, int(Op.MGET), 2])), "op 5 at 1 is a multi-get"),
    "an op the wire has no form for": (
        with_column(OPS_AT, bytes([0, int(Op.NOOP), 2])),
        "op 13 at 1 has no compiled encoding",
    ),
    "a key starting past its end": (
        with_column(KEY_ENDS_AT, u32(2, 1, 6)),
        r"key_starts\[1\] = 2 is past key_ends\[1\] = 1",
    ),
    "an empty first key": (with_column(KEY_ENDS_AT, u32(0, 5, 6)), r"key 0 is empty"),
    "an empty key": (with_column(KEY_STARTS_AT, u32(0, 5, 5)), r"key 1 is empty"),
    "a key starting past the keys": (
        with_column(KEY_STARTS_AT, u32(0, 2, 7)),
        r"key_starts\[2\] = 7 is past key_ends\[2\] = 6",
    ),
    "a key past the keys": (
        with_column(KEY_ENDS_AT, u32(2, 5, 7)),
        r"key_ends\[2\] = 7 is past the keys' 6 bytes",
    ),
    "a value starting past its end": (
        with_column(STARTS_AT, u32(0, 6, 0)),
        r"value_starts\[1\] = 6 is past value_ends\[1\] = 5",
    ),
    "a value past the values": (
        with_column(ENDS_AT, u32(0, 6, 0)),
        r"value_ends\[1\] = 6 is past the values' 5 bytes",
    ),
    "a non-store's range reversed": (
        with_column(STARTS_AT, u32(0, 0, 9)),
        r"value_starts\[2\] = 9 is past value_ends\[2\] = 0",
    ),
    "offsets not 4 bytes per op": (
        with_column(KEY_ENDS_AT, u32(2, 5)),
        r"key_ends holds 8 bytes, not 4 per op \(3 ops: 12 bytes\)",
    ),
    "offsets as bytes not 4 per op": (
        with_column(ENDS_AT, bytes(11)),
        r"value_ends holds 11 bytes, not 4 per op",
    ),
    "signed 64-bit offsets": (
        with_column(KEY_ENDS_AT, np.array([2, 5, 6], dtype=np.int64)),
        "key_ends must be native uint32 \\(format I\\), not format 'l' of 8-byte items",
    ),
    "big-endian offsets": (
        with_column(STARTS_AT, np.array([0, 0, 0], dtype=">u4")),
        "value_starts must be native uint32 \\(format I\\), not format '>I'",
    ),
    "ops of two bytes": (
        with_column(OPS_AT, np.array([0, 1, 2], dtype=np.uint16)),
        r"ops must hold bytes \(itemsize 1\), not items of 2 bytes",
    ),
    "start past the chunk": (with_column(START_AT, 3), "start 3 is not one of its 3 requests"),
    "a negative start": (with_column(START_AT, -1), "start -1 is not one of its 3 requests"),
}


@pytest.mark.parametrize("problem", BAD_CHUNKS)
def test_a_bad_packed_chunk_is_a_value_error_and_nothing_of_it_is_sent(problem: str) -> None:
    chunk, message = BAD_CHUNKS[problem]
    before = ([int(Op.GET)], [b"ok"], [None], 0)
    _, stream, p, written = stream_pump("memcache-text", [before, chunk])
    with pytest.raises(ValueError, match="packed chunk: " + message):
        p.issue(5)
    assert written == [b"get ok\r\n"] and p.inflight == 1  # the chunk before it went out
    assert (stream.pos, stream.size) == (0, 0)  # none of it is held
    assert p.issue(5) == 1 and len(written) == 1  # and the lane goes on (dry here)
    _, stream, _, _ = stream_pump("memcache-text", [chunk])
    with pytest.raises(ValueError, match="packed chunk: " + message):
        stream.skip(1)
    if problem.startswith("start") or problem.startswith("a negative start"):
        return  # encode_packed takes start and stop of its own
    text = fastpath.PROTOCOLS["memcache-text"][0]
    with pytest.raises(ValueError, match="packed chunk: " + message):
        _pump.encode_packed(text, 0, 0, *chunk[:7], 0, 3)


def test_what_is_not_a_packed_chunk_is_refused_with_what_one_is() -> None:
    _, _, p, _ = stream_pump("memcache-text", [with_column(KEYS_AT, "aabbbc")])
    with pytest.raises(
        TypeError, match="packed chunk: keys must be a C-contiguous buffer, not str"
    ):
        p.issue(1)
    _, _, p, _ = stream_pump("memcache-text", [with_column(OPS_AT, b"\0\1\2")[:8]])  # no ttl
    with pytest.raises(TypeError, match="lists or a packed chunk of 9 items"):
        p.issue(1)
    _, _, p, _ = stream_pump("memcache-text", [with_column(TTL_AT, "60")])
    with pytest.raises(TypeError, match=r"a packed chunk is \(ops, keys, key_starts, key_ends"):
        p.issue(1)
    strided = np.array([2, 0, 5, 0, 6, 0], dtype=np.uint32)[::2]
    _, _, p, _ = stream_pump("memcache-text", [with_column(KEY_ENDS_AT, strided)])
    with pytest.raises(TypeError, match="key_ends must be a C-contiguous buffer, not numpy"):
        p.issue(1)


def test_a_packed_chunks_ttl_is_checked_by_its_wire_once() -> None:
    _, _, p, written = stream_pump("memcache-binary", [with_column(TTL_AT, 2**32)])
    with pytest.raises(ValueError, match="ttl and flags from 0 to 4294967295"):
        p.issue(1)
    assert written == []
    resp = fastpath.PROTOCOLS["resp2"][0]
    gets = pump_oracle.pack([int(Op.GETS)], [b"k"], [None])
    with pytest.raises(ValueError, match="op 12 at 0 has no compiled encoding"):
        _pump.encode_packed(resp, 0, 0, *gets[:7], 0, 1)


def test_a_packed_chunks_buffers_are_held_until_the_next_chunk() -> None:
    """Its exporters cannot resize them while the pump may read them; the next chunk (or
    the stream's end) lets them go."""
    keys_blob = bytearray(b"aabbbc")
    chunk = with_column(KEYS_AT, keys_blob)
    _, stream, p, written = stream_pump(
        "memcache-text", [chunk, ([int(Op.GET)], [b"z"], [None], 0)]
    )
    p.issue(1)
    with pytest.raises(BufferError):
        keys_blob += b"more"
    p.issue(3)  # the rest, then the list chunk
    assert written == [b"get aa\r\n", b"set bbb 0 5 5\r\nhello\r\ndelete c\r\nget z\r\n"]
    keys_blob += b"more"  # let go
    assert stream.size == 1


class Blob(bytearray):
    """A column that can point back at its stream (so a cycle runs through the buffer)."""

    stream: Any


def test_a_cycle_through_a_held_column_is_collected() -> None:
    """The stream's GC traversal visits its columns' owners: a cycle through one is found."""
    blob = Blob(b"aabbbc")
    _, stream, p, _ = stream_pump("memcache-text", [with_column(KEYS_AT, blob)])
    p.issue(1)
    blob.stream = stream
    alive = weakref.ref(blob)
    del blob, stream, p
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize(
    ("index", "at", "value"),
    [
        (KEY_ENDS_AT, 1, 10**6),  # a key ending far past the keys
        (KEY_ENDS_AT, 1, 1),  # a key ending before it starts
        (KEY_STARTS_AT, 1, 5),  # an empty key
        (ENDS_AT, 1, 10**6),  # a store's value far past the values
        (STARTS_AT, 1, 9),  # ... starting past its end
        (OPS_AT, 1, 200),  # an op past MAX_OPS
        (OPS_AT, 1, int(Op.MGET)),  # a multi-get
    ],
)
def test_a_column_written_after_the_load_is_an_error_never_a_read_outside_it(
    index: int, at: int, value: int
) -> None:
    """A held buffer cannot be resized, but it can be written: the pump compares each
    request's op and offsets again as it resolves it."""
    column = with_column(TTL_AT, 5)[index]  # the good chunk's
    writable = bytearray(column) if index == OPS_AT else np.array(column, dtype=np.uint32)
    _, stream, p, written = stream_pump("memcache-text", [with_column(index, writable)])
    p.issue(1)  # loaded and checked: get aa
    writable[at] = value
    with pytest.raises(ValueError, match="request 1 changed after the chunk was loaded"):
        p.issue(2)
    assert written == [b"get aa\r\n"] and p.inflight == 1
    if index == OPS_AT and value >= 64:
        with pytest.raises(ValueError, match="request 1 changed"):
            stream.skip(1)


# -- --command's templates, rendered by the stream (RESP, memcached text) -----------------

word = st.binary(min_size=1, max_size=8)
text_word = st.binary(min_size=1, max_size=8).filter(lambda w: all(32 < b < 127 for b in w))
slot = st.tuples(st.binary(max_size=4), st.binary(max_size=4)).map(lambda p: KeySlot(*p))
text_slot = st.tuples(text_word | st.just(b""), text_word | st.just(b"")).map(lambda p: KeySlot(*p))


@st.composite
def templates(draw: Any, protocol: str) -> RequestTemplate:
    """A template of at most one key slot: RESP's, a name and literal words and values
    anywhere; memcached text's, a command line or a storage command (its value the data
    block, its size in the line)."""
    if protocol == "memcache-text":
        key: Any = draw(text_slot) if draw(st.booleans()) else draw(text_word)
        if draw(st.booleans()):
            verb = draw(st.sampled_from([b"set", b"add", b"append", b"cas"]))
            tail = [b"0", b"60", DATA, b"7"] if verb == b"cas" else [b"0", b"60", DATA]
            return text_template([verb, key, *tail])
        rest = draw(st.lists(text_word, max_size=3))
        return text_template([draw(st.sampled_from([b"touch", b"mg", b"version"])), key, *rest])
    # (a name the codec refuses, as 'hello' or 'client reply', is no request to render)
    words: list[Any] = [draw(word.filter(lambda w: w.lower() not in (*RESP_REFUSED, b"client")))]
    rest = draw(st.lists(st.one_of(word, st.just(DATA)), max_size=5))
    if draw(st.booleans()):
        rest.insert(draw(st.integers(0, len(rest))), draw(slot))
    return resp_template(words + rest)


@settings(max_examples=pump_oracle.examples(200), deadline=None)
@given(
    st.sampled_from(["resp2", "memcache-text"]).flatmap(
        lambda name: st.tuples(st.just(name), st.lists(templates(name), min_size=1, max_size=4))
    ),
    st.lists(st.tuples(st.integers(0, 99), keys, data), min_size=1, max_size=20),
    st.sampled_from(OFFSET_KINDS),
    st.integers(0, 2**16),
)
def test_a_stream_renders_a_packed_commands_requests_as_its_template_does(
    compiled: Any, requests: Any, kind: str, layout: int
) -> None:
    """Each command entry's code (COMMAND_BASE + i) in a packed chunk is rendered from its
    template with the request's key and value, as the template's render writes it; the
    fixed ops between them are encoded as ever."""
    name, chosen = compiled
    table = tuple((_pump.COMMAND_BASE, t.pieces()) for t in chosen)
    ops, names, values, expected = [], [], [], b""
    for choice, key, value in requests:
        if choice % 3 == 0:  # a fixed op now and then
            ops.append(int(Op.SET))
            expected += codec_requests(name, CodecOptions(), [int(Op.SET)], [key], [value], 0)
        else:
            entry = choice % len(chosen)
            ops.append(_pump.COMMAND_BASE + entry)
            template = chosen[entry]
            expected += template.render((key,) * template.keys, value)
        names.append(key)
        values.append(value)
    # (pack lays out the stores' values only: every request's here, as SETs', then the ops)
    columns = pump_oracle.pack([int(Op.SET)] * len(ops), names, values, 0, 0, kind, layout)[:7]
    columns = (bytes(ops), *columns[1:])
    number = fastpath.PROTOCOLS[name][0]
    got = _pump.encode_packed(number, 0, 0, *columns, 0, len(ops), 0, b"", b"", table)
    assert got == expected


def test_a_streams_templates_are_checked_when_it_is_made() -> None:
    """A bad ``commands`` is refused with what is wrong, before anything is sent; memcached
    binary and meta render none; a packed code past the templates is no op."""
    refill = lambda: None  # noqa: E731
    for bad, error in [
        ([(16, (b"x",))], "a tuple of at most 48"),
        (((15, (b"x",)),), "record a code from 16 to 63"),
        (((2**32 + 16, (b"x",)),), "record a code from 16 to 63"),  # (not cut to 16)
        (((16, [b"x"]),), "pieces a tuple"),
        (((16, (1,)),), "bytes or \\(kind, prefix, suffix\\), not int"),
        (((16, ((b"p", b"s"),)),), "bytes or \\(kind, prefix, suffix\\), not tuple"),
        (((16, ((0, b"", b""),)),), "piece 0: no kind 0"),
        (((16, ((6, b"", b""),)),), "piece 0: no kind 6"),
    ]:
        with pytest.raises((ValueError, TypeError), match=error):
            _pump.Stream(refill, RESP, commands=bad)
    for protocol in (BINARY, META):
        with pytest.raises(ValueError, match="renders no command templates"):
            _pump.Stream(refill, protocol, commands=((16, (b"x",)),))
    columns = pump_oracle.pack([int(Op.GET)], [b"k"], [None])[:7]
    table = ((16, (b"*1\r\n$4\r\nPING\r\n",)),)
    with pytest.raises(ValueError, match="op 17 at 0 has no compiled encoding"):
        _pump.encode_packed(RESP, 0, 0, bytes([17]), *columns[1:], 0, 1, 0, b"", b"", table)
    assert _pump.encode_packed(RESP, 0, 0, bytes([16]), *columns[1:], 0, 1, 0, b"", b"", table) == (
        b"*1\r\n$4\r\nPING\r\n"
    )
