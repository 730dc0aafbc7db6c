"""The --verify codec wrapper and per-connection codec choice (ttl range, keep_payload)."""

from __future__ import annotations

from kvbench.config.model import WorkloadConfig
from kvbench.config.targets import parse_target
from kvbench.engine.codec_choice import connection_codec_factories, connection_ttls
from kvbench.engine.verify import EXAMPLE_KEYS, Verifier, VerifyingCodec
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import KIND_MASK, OP_NAMES, CodecOptions, Op, ReplyKind
from kvbench.protocols.memcache_text import MemcacheTextCodec
from kvbench.workload.verify import derive_value

GET, SET = int(Op.GET), int(Op.SET)


def hit(key: bytes, value: bytes) -> bytes:
    return b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (key, len(value), value)


def wrapped() -> tuple[VerifyingCodec, Recorder, Verifier]:
    recorder = Recorder(OP_NAMES)
    verifier = Verifier(recorder)
    return (
        VerifyingCodec(MemcacheTextCodec(CodecOptions(keep_payload=True)), verifier),
        recorder,
        verifier,
    )


def test_good_hits_are_checked_and_bad_ones_counted_with_their_keys() -> None:
    codec, recorder, verifier = wrapped()
    keys = [b"k1", b"k2", b"k3", b"k4"]
    ops = [GET, SET, GET, GET]
    values = [None, derive_value(b"k2", 1, 20), None, None]
    out = bytearray()
    assert codec.encode_many(ops, keys, values, 0, 4, out) == 4
    codec.feed(hit(b"k1", derive_value(b"k1", 5, 30)))
    codec.feed(b"STORED\r\n")
    codec.feed(hit(b"k3", b"garbage!"))
    codec.feed(b"END\r\n")  # k4: a miss is not checked
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 4
    assert [k & KIND_MASK for k in kinds] == [
        ReplyKind.HIT,
        ReplyKind.STORED,
        ReplyKind.HIT,
        ReplyKind.MISS,
    ]
    assert recorder.stats["verified"] == 2
    assert recorder.counts[GET][Outcome.MISMATCH] == 1
    assert verifier.examples == ["k3"]


def test_a_value_written_for_another_key_is_a_mismatch() -> None:
    codec, recorder, _ = wrapped()
    codec.encode(Op.GET, b"a", None, bytearray())
    codec.feed(hit(b"a", derive_value(b"b", 1, 40)))
    codec.read_kinds([])
    assert recorder.counts[GET][Outcome.MISMATCH] == 1


def test_replies_split_across_reads_stay_aligned_with_their_keys() -> None:
    codec, recorder, _ = wrapped()
    keys = [b"x%d" % i for i in range(5)]
    codec.encode_many([GET] * 5, keys, [None] * 5, 0, 5, bytearray())
    stream = b"".join(hit(k, derive_value(k, 1, 50)) for k in keys)
    kinds: list[int] = []
    for i in range(0, len(stream), 7):
        codec.feed(stream[i : i + 7])
        codec.read_kinds(kinds)
    assert len(kinds) == 5
    assert recorder.stats["verified"] == 5
    assert recorder.counts[GET][Outcome.MISMATCH] == 0


def test_example_keys_are_distinct_and_bounded() -> None:
    codec, _, verifier = wrapped()
    keys = [b"bad%d" % (i % 15) for i in range(40)]
    codec.encode_many([GET] * 40, keys, [None] * 40, 0, 40, bytearray())
    codec.feed(b"".join(hit(k, b"nope") for k in keys))
    codec.read_kinds([])
    assert len(verifier.examples) == EXAMPLE_KEYS
    assert len(set(verifier.examples)) == EXAMPLE_KEYS


def test_fixed_ttl_is_the_same_on_every_connection() -> None:
    assert connection_ttls(WorkloadConfig(ttl_s=30), 0, 4) == [30] * 4


def test_a_ttl_range_gives_each_connection_its_own_ttl_seeded() -> None:
    config = WorkloadConfig(ttl_s=60, ttl_max_s=120, seed=5)
    ttls = connection_ttls(config, 0, 200)
    assert min(ttls) >= 60 and max(ttls) <= 120
    assert len(set(ttls)) > 30
    assert ttls == connection_ttls(config, 0, 200)
    assert ttls != connection_ttls(config, 1, 200)


def test_codec_factories_carry_the_ttl_and_wrap_only_under_verify() -> None:
    target = parse_target("memcached://127.0.0.1:11211", "TARGET")
    config = WorkloadConfig(ttl_s=60, ttl_max_s=61, seed=1)
    ttls = connection_ttls(config, 0, 8)
    plain = [f() for f in connection_codec_factories(target, config, ttls, None)]
    assert all(isinstance(c, MemcacheTextCodec) for c in plain)
    out = bytearray()
    plain[0].encode(Op.SET, b"k", b"v", out)
    assert out.split(b"\r\n")[0] in (b"set k 0 60 1", b"set k 0 61 1")
    verifier = Verifier(Recorder(OP_NAMES))
    checked = [f() for f in connection_codec_factories(target, config, [60, 61], verifier)]
    assert all(isinstance(c, VerifyingCodec) for c in checked)


def test_exact_mode_wants_the_value_the_set_before_the_get_stored() -> None:
    """--ratio set-then-get: a stale version of the key (valid for its key) is a mismatch."""
    recorder = Recorder(OP_NAMES)
    verifier = Verifier(recorder)
    codec = VerifyingCodec(MemcacheTextCodec(CodecOptions(keep_payload=True)), verifier, exact=True)
    new, old = derive_value(b"k", 2, 30), derive_value(b"k", 1, 30)
    codec.encode_many(
        [SET, GET, SET, GET], [b"k", b"k", b"k", b"k"], [new, None, new, None], 0, 4, bytearray()
    )
    codec.feed(b"STORED\r\n" + hit(b"k", new) + b"STORED\r\n" + hit(b"k", old))
    codec.read_kinds([])
    assert recorder.stats["verified"] == 2
    assert recorder.counts[GET][Outcome.MISMATCH] == 1


def test_exact_mode_compares_a_gateways_url_safe_form() -> None:
    from kvbench.protocols._http_url import url_safe_value
    from kvbench.protocols.http1 import HttpMemcCodec

    recorder = Recorder(OP_NAMES)
    inner = HttpMemcCodec(CodecOptions(keep_payload=True))
    codec = VerifyingCodec(inner, Verifier(recorder), exact=True)
    value = derive_value(b"k", 1, 40)
    codec.encode_many([SET, GET], [b"k", b"k"], [value, None], 0, 2, bytearray())
    body = url_safe_value(value)
    codec.feed(b"HTTP/1.1 201 Created\r\nContent-Length: 8\r\n\r\nSTORED\r\n")
    codec.feed(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    codec.read_kinds([])
    assert recorder.stats["verified"] == 1
    assert recorder.counts[GET][Outcome.MISMATCH] == 0
