"""The compiled pump's request encoders (engine/_pump*.c) against the Python codecs.

Requests must be the bytes the codec's ``encode_many`` writes, for every op, multi-get
width, ttl, flags and value type, opaques (binary) and tokens (meta) included, across
their 32-bit wrap; what a codec refuses to encode, the pump refuses too. Under
``CI=true`` a pump that is not built fails these tests instead of skipping them.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.engine import fastpath
from kvbench.protocols.base import CodecOptions, Op
from kvbench.protocols.registry import CODECS
from tests.support import pump_oracle, reply_grammar

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

TEXT, RESP, BINARY, META = (fastpath.PROTOCOLS[name][0] for name in pump_oracle.PROTOCOLS)
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


@settings(max_examples=300, deadline=None)
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
        tuple(key + b"%d" % i for i in range(width)) if op == Op.MGET else key
        for op, (_, key, _, width) in zip(ops, requests, strict=True)
    ]
    values = [
        kind(value) if op in pump_oracle.STORES else None
        for op, (_, _, value, _) in zip(ops, requests, strict=True)
    ]
    expected = codec_requests(name, CodecOptions(ttl_s=ttl, flags=flags), ops, names, values, 0)
    number = fastpath.PROTOCOLS[name][0]
    assert _pump.encode(number, ttl, flags, ops, names, values, 0, len(ops)) == expected
    # and a slice, as a stream takes it from a chunk, its opaques following the first's
    first = reply_grammar.opaques_taken(name, ops[0], names[0]) if name in NEXT_OPAQUE else 0
    middle = _pump.encode(number, ttl, flags, ops, names, values, 1, len(ops), first)
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
        with pytest.raises(ValueError, match="ttl and flags from 0 to 4294967295"):
            _pump.Stream(list, BINARY, ttl, flags)
    meta: Any = CODECS["memcache-meta"].factory(CodecOptions())
    with pytest.raises(ValueError, match="at least one key"):
        meta.encode_many([int(Op.MGET)], [()], [None], 0, 1, bytearray())
    with pytest.raises(ValueError, match="at least one key"):
        _pump.encode(META, 0, 0, [int(Op.MGET)], [()], [None], 0, 1)
