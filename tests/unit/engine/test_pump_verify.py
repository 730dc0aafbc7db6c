"""``--verify`` in the compiled pump (engine/_pump_verify.c), held to the Python driver's.

The pump keeps the key of every get in flight and checks each get hit's value as it reads
it; the tally counts the checks, the mismatches and their first keys. The same replies go
to the pump and to the Python driver's ``VerifyingCodec`` (engine/verify.py, the
reference), in every protocol the pump speaks, and the counts must agree. The SHAKE-128
the pump recomputes values with is held to hashlib's through workload/verify.py.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import numpy as np
import pytest

from kvbench.engine import fastpath
from kvbench.engine.verify import EXAMPLE_KEYS, Verifier, VerifyingCodec
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import OP_NAMES, CodecOptions, Op
from kvbench.protocols.http1 import url_safe_value
from kvbench.protocols.registry import CODECS
from kvbench.workload.verify import check_value, derive_value
from tests.support import pump_oracle
from tests.support.reply_grammar import packet

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

MAX = CodecOptions().max_reply_bytes
GET, SET = int(Op.GET), int(Op.SET)
NAMES = ["memcache-text", "memcache-binary", "memcache-meta", "resp2", "http-memc"]


def hit(name: str, opaque: int, key: bytes, value: bytes) -> bytes:
    """A get's hit carrying ``value``, as the server sends it (a gateway's every third
    in two chunks, which the pump joins before it checks the value)."""
    if name == "http-memc":
        if opaque % 3:
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(value), value)
        half = len(value) // 2
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (value[:half], value[half:]) if c)
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%s0\r\n\r\n" % chunks
    if name == "memcache-text":
        return b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (key, len(value), value)
    if name == "memcache-binary":
        return packet(0x00, opaque, extras=b"\0" * 4, value=value)
    if name == "memcache-meta":
        return b"VA %d O%d\r\n%s\r\n" % (len(value), opaque, value)
    return b"$%d\r\n%s\r\n" % (len(value), value)


def other(name: str, op: int, opaque: int) -> bytes:
    """A get's miss, or a set's success."""
    if name == "http-memc":
        status = b"404 Not Found" if op == GET else b"201 Created"
        return b"HTTP/1.1 %s\r\nContent-Length: 0\r\n\r\n" % status
    if name == "memcache-text":
        return b"END\r\n" if op == GET else b"STORED\r\n"
    if name == "memcache-binary":
        return packet(0x00, opaque, 1, value=b"Not found") if op == GET else packet(0x01, opaque)
    if name == "memcache-meta":
        return b"%s O%d\r\n" % (b"EN" if op == GET else b"HD", opaque)
    return b"$-1\r\n" if op == GET else b"+OK\r\n"


def verifying_pump(
    name: str,
    ops: list[int],
    keys: list[bytes],
    verify: int = 1,
    values: list[bytes] | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """A tally and a pump of protocol ``name`` that sends ``ops`` on ``keys`` (the sets
    ``values``) once, all of them at once, checking get hits as ``verify`` says."""
    number, families = fastpath.PROTOCOLS[name]
    chunks = iter([(ops, keys, values or [b"v"] * len(ops), 0)])
    tally = _pump.Tally()
    tally.issuing = True
    stream = _pump.Stream(lambda: next(chunks, None), number, **pump_oracle.stream_frame(name))
    pump = _pump.Pump(
        tally, stream, lambda data: None, number, families, MAX, verify=verify, **kwargs
    )
    assert pump.issue(len(ops)) == 0
    return tally, pump


def reference(
    name: str,
    ops: list[int],
    keys: list[bytes],
    replies: bytes,
    values: list[bytes] | None = None,
    exact: bool = False,
) -> Verifier:
    """The Python driver's verifier after reading ``replies`` to ``ops`` on ``keys``."""
    verifier = Verifier(Recorder(OP_NAMES))
    inner = CODECS[name].factory(CodecOptions(keep_payload=True))
    codec = VerifyingCodec(inner, verifier, exact)
    values = values or [b"v"] * len(ops)
    codec.encode_many(ops, keys, values, 0, len(ops), bytearray())  # type: ignore[arg-type]
    codec.feed(replies)
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == len(ops)
    return verifier


def exchange(name: str, seed: int) -> tuple[list[int], list[bytes], bytes, int]:
    """Requests and the server's replies to them: hits holding good values, values written
    for other keys, cut short or grown, garbage and empty ones; misses and sets between.
    Returns the ops, keys, replies and how many values are wrong."""
    rng = random.Random(seed)
    ops, keys, replies, wrong = [], [], [], 0
    for opaque in range(rng.randint(1, 60)):
        key = b"key:%d" % rng.randrange(40)
        op = GET if rng.random() < 0.8 else SET
        ops.append(op)
        keys.append(key)
        if op == SET or rng.random() < 0.15:
            replies.append(other(name, op, opaque))
            continue
        value = derive_value(key, rng.randrange(1 << 32), rng.choice([9, 12, 100, 168, 400]))
        damage = rng.randrange(6)
        if damage == 1:
            value = derive_value(key + b"x", 1, len(value))
        elif damage == 2:
            value = value[:-1]
        elif damage == 3:
            value += b"!"
        elif damage == 4:
            value = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 30)))
        wrong += damage != 0 and not check_value(key, value)
        replies.append(hit(name, opaque, key, value))
    return ops, keys, b"".join(replies), wrong


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", range(12))
def test_the_pump_checks_every_get_hit_as_the_python_driver_does(name: str, seed: int) -> None:
    ops, keys, replies, wrong = exchange(name, seed)
    tally, pump = verifying_pump(name, ops, keys)
    cut = random.Random(seed).sample(range(1, len(replies)), min(5, len(replies) - 1))
    for start, end in zip([0, *sorted(cut)], [*sorted(cut), len(replies)], strict=True):
        assert pump.received(replies[start:end]) in (0, 1)  # (1: nothing more to send)
    assert pump.inflight == 0
    checked, mismatches, named = tally.take_verified()
    verifier = reference(name, ops, keys, replies)
    assert checked == verifier.recorder.stats["verified"]
    assert mismatches == verifier.recorder.counts[GET][Outcome.MISMATCH] == wrong
    assert [key.decode() for key in named] == verifier.examples
    assert tally.take_verified() == (0, 0, [])  # taken


def pairs(name: str, seed: int) -> tuple[list[int], list[bytes], list[bytes], bytes]:
    """Set-then-get pairs (a get now and then without its set) and the server's replies:
    the value just set, an older version of it (stale: derived from the key, but not
    that set's), garbage, a miss. Returns the ops, keys, values and replies."""
    rng = random.Random(seed)
    ops, keys, values, replies = [], [], [], []
    opaque = 0
    for version in range(rng.randint(1, 30)):
        key = b"pair:%d" % rng.randrange(8)
        value = derive_value(key, version + 10, rng.choice([12, 100, 300]))
        if rng.random() < 0.8:
            ops.append(SET), keys.append(key), values.append(value)
            replies.append(other(name, SET, opaque))
            opaque += 1
        ops.append(GET), keys.append(key), values.append(b"")
        answer = rng.choice(
            [value, value, derive_value(key, version, len(value)), b"garbage!!!!!!", None]
        )
        if answer is not None and name == "http-memc":  # as the gateway stored it
            answer = url_safe_value(answer)
        reply = other(name, GET, opaque) if answer is None else hit(name, opaque, key, answer)
        replies.append(reply)
        opaque += 1
    return ops, keys, values, b"".join(replies)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", range(8))
def test_a_get_right_after_its_set_must_return_that_set_s_value(name: str, seed: int) -> None:
    """Exact mode (--ratio set-then-get): a stale version of the key is a mismatch too."""
    ops, keys, values, replies = pairs(name, seed)
    tally, pump = verifying_pump(name, ops, keys, values=values, exact=True)
    assert pump.received(replies) in (0, 1)
    verifier = reference(name, ops, keys, replies, values, exact=True)
    checked, mismatches, named = tally.take_verified()
    assert checked == verifier.recorder.stats["verified"]
    assert mismatches == verifier.recorder.counts[GET][Outcome.MISMATCH]
    assert [key.decode() for key in named] == verifier.examples


def test_exact_mode_tells_a_stale_version_from_the_value_just_set() -> None:
    key = b"k"
    fresh, stale = derive_value(key, 2, 40), derive_value(key, 1, 40)
    ops, keys, values = [SET, GET, SET, GET], [key] * 4, [fresh, b"", fresh, b""]
    replies = b"STORED\r\n" + hit("memcache-text", 0, key, fresh)
    replies += b"STORED\r\n" + hit("memcache-text", 0, key, stale)
    for exact, expected in [(True, (2, 1, [key])), (False, (2, 0, []))]:
        tally, pump = verifying_pump("memcache-text", ops, keys, values=values, exact=exact)
        pump.received(replies)
        assert tally.take_verified() == expected


@pytest.mark.parametrize("name", NAMES)
def test_a_read_that_breaks_the_protocol_counts_none_of_its_checks(name: str) -> None:
    tally, pump = verifying_pump(name, [GET, GET], [b"a", b"b"])
    good = hit(name, 0, b"a", derive_value(b"a", 1, 50))
    assert pump.received(good + b"\x80garbage\r\n" * 3) == 2
    assert tally.take_verified() == (0, 0, [])


def test_mismatched_keys_are_named_once_each_and_ten_at_most() -> None:
    keys = [b"bad%d" % (i % 15) for i in range(40)]
    tally, pump = verifying_pump("memcache-text", [GET] * 40, keys)
    replies = b"".join(hit("memcache-text", 0, key, b"garbage!") for key in keys)
    pump.received(replies)
    checked, mismatches, named = tally.take_verified()
    assert (checked, mismatches) == (40, 40)
    assert named == [b"bad%d" % i for i in range(EXAMPLE_KEYS)]


def stamp(ms: int) -> bytes:
    return struct.pack(">Q", ms)


def test_timestamps_are_checked_against_the_window_or_the_clock() -> None:
    values = [stamp(1000), stamp(999), stamp(2000), stamp(2001), b"\0" * 7, stamp(1500) + b"x"]
    keys = [b"t%d" % i for i in range(len(values))]
    replies = b"".join(hit("resp2", 0, k, v) for k, v in zip(keys, values, strict=True))
    tally, pump = verifying_pump("resp2", [GET] * 6, keys, verify=2, window_ms=(1000, 2000))
    pump.received(replies)
    assert tally.take_verified() == (6, 4, [b"t1", b"t3", b"t4", b"t5"])
    # No window: after the epoch and not in the future.
    values = [stamp(1), stamp(0), stamp(2**63)]
    replies = b"".join(hit("resp2", 0, b"k", v) for v in values)
    tally, pump = verifying_pump("resp2", [GET] * 3, [b"k"] * 3, verify=2)
    pump.received(replies)
    assert tally.take_verified()[:2] == (3, 2)


def test_settings_the_pump_cannot_use_are_refused() -> None:
    for settings in [
        {"verify": 3},
        {"verify": 1, "window_ms": (1, 2)},
        {"verify": 2, "window_ms": (2, 1)},
        {"verify": 0, "exact": True},
    ]:
        with pytest.raises(ValueError, match="verify is 0, 1 or 2"):
            verifying_pump("memcache-text", [GET], [b"k"], **settings)


def test_values_are_derived_and_checked_as_workload_verify_does() -> None:
    rng = random.Random(7)
    sizes = [9, 12, 100, 167, 168, 169, 175, 176, 177, 336, 337, 1000, 5000]
    for size in sizes:
        key = rng.randbytes(rng.randrange(0, 300))
        version = rng.randrange(1 << 40)  # (cut to 32 bits as derive_value cuts it)
        value = _pump.derive_value(key, version, size)
        assert value == derive_value(key, version, size)
        assert _pump.check_value(key, value)
        at = rng.randrange(size)
        damaged = value[:at] + bytes([value[at] ^ 1 << rng.randrange(8)]) + value[at + 1 :]
        assert not _pump.check_value(key, damaged) and not check_value(key, damaged)
        assert not _pump.check_value(key + b"x", value)
    assert not _pump.check_value(b"k", b"") and not _pump.check_value(b"k", b"\0" * 8)


@pytest.mark.parametrize("name", NAMES)
def test_a_stream_derives_each_set_s_value_as_the_python_source_does(name: str) -> None:
    """Packed sets under --verify carry sizes; the stream derives their values (the next
    version each) and writes the bytes a list chunk of Python-derived values writes."""
    rng = random.Random(3)
    ops = [rng.choice([SET, GET, SET]) for _ in range(40)]
    keys = [b"key:%d" % rng.randrange(10) for _ in ops]
    sizes = [rng.choice([12, 100, 169, 400]) for _ in ops]
    first = 5 << 24
    version, values = first, []
    for op, key, size in zip(ops, keys, sizes, strict=True):
        if op == SET:
            version += 1
            values.append(derive_value(key, version, size))
        else:
            values.append(b"")
    number, families = fastpath.PROTOCOLS[name]
    starts = np.cumsum([0, *map(len, keys)], dtype=np.uint32)
    value_starts = np.cumsum([0, *sizes], dtype=np.uint32)
    packed = (
        bytes(ops), b"".join(keys), starts[:-1], starts[1:],
        b"\0" * int(value_starts[-1]), value_starts[:-1], value_starts[1:], 0, None,
    )  # fmt: skip
    written = []
    for chunk, derive in [((ops, keys, values, 0), {}), (packed, {"derive_from": first})]:
        chunks = iter([chunk])
        frame = pump_oracle.stream_frame(name)
        stream = _pump.Stream(lambda: next(chunks, None), number, **derive, **frame)  # noqa: B023
        out: list[bytes] = []
        tally = _pump.Tally()
        tally.issuing = True
        _pump.Pump(tally, stream, out.append, number, families, MAX).issue(len(ops))
        written.append(b"".join(out))
    assert written[0] == written[1]


def test_a_derived_value_too_small_to_hold_its_header_is_refused() -> None:
    number, _ = fastpath.PROTOCOLS["memcache-text"]
    starts, ends = np.array([0], dtype=np.uint32), np.array([1], dtype=np.uint32)
    value_ends = np.array([8], dtype=np.uint32)
    chunk = (bytes([SET]), b"k", starts, ends, b"\0" * 8, starts, value_ends, 0, None)
    chunks = iter([chunk])
    stream = _pump.Stream(lambda: next(chunks, None), number, derive_from=0)
    tally = _pump.Tally()
    tally.issuing = True
    families = fastpath.PROTOCOLS["memcache-text"][1]
    pump = _pump.Pump(tally, stream, lambda data: None, number, families, MAX)
    with pytest.raises(ValueError, match="a derived value is 9 bytes to 4 GiB"):
        pump.issue(1)
    assert pump.inflight == 0
