"""``set_ttl``: a codec sends a new expiry with the stores it encodes after the call (a
replay's chunks carry their rows' TTLs), byte for byte as a codec built with that TTL."""

from __future__ import annotations

import pytest

from kvbench.protocols.base import CodecOptions, Op
from kvbench.protocols.registry import CODECS

STORES = [int(op) for op in (Op.SET, Op.ADD, Op.REPLACE, Op.APPEND, Op.PREPEND, Op.CAS)]


def _encoded(codec: object, ops: list[int]) -> bytes:
    out = bytearray()
    keys = [b"key:%d" % i for i in range(len(ops))]
    values = [memoryview(b"v" * (10 + i)) for i in range(len(ops))]
    codec.encode_many(ops, keys, values, 0, len(ops), out)  # type: ignore[attr-defined]
    return bytes(out)


@pytest.mark.parametrize("name", sorted(CODECS))
def test_a_new_ttl_encodes_as_a_codec_built_with_it(name: str) -> None:
    spec = CODECS[name]
    ops = [op for op in STORES if Op(op) in spec.ops] + [int(Op.GET), int(Op.SET)]
    changed = spec.factory(CodecOptions(ttl_s=0, flags=3))
    before = _encoded(changed, ops)
    changed.set_ttl(3600)
    after = _encoded(changed, ops)
    fresh = spec.factory(CodecOptions(ttl_s=3600, flags=3))
    assert after != before
    # Binary and meta number each request (opaque, token): compare codecs at the same count.
    _encoded(fresh, ops)
    assert after == _encoded(fresh, ops)
    changed.set_ttl(0)
    zero = spec.factory(CodecOptions(ttl_s=0, flags=3))
    _encoded(zero, ops)
    _encoded(zero, ops)
    assert _encoded(changed, ops) == _encoded(zero, ops)
