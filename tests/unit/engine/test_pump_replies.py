"""The compiled pump's reply scanners (engine/_pump*.c) against the Python codecs.

For memcached text, binary and meta and for RESP2: the same replies, fed to the C scanner
and to the codec's ``read_kinds``, must give the same codes in the same order, however
they are cut into reads; hostile replies (the differential test, oracle in
tests/support/pump_oracle.py, grammar in tests/support/reply_grammar.py) the same codes or
a protocol error on both; any bytes must give codes or an error, never a crash. Under
``CI=true`` a pump that is not built fails these tests instead of skipping them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.engine import fastpath
from kvbench.errors import ProtocolError
from kvbench.protocols.base import KEYS_SHIFT, CodecOptions, Op, ReplyKind
from kvbench.protocols.registry import CODECS
from tests.support import pump_oracle, reply_grammar
from tests.support.reply_grammar import packet

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

MAX = CodecOptions().max_reply_bytes
TEXT, TEXT_FAMILIES = fastpath.PROTOCOLS["memcache-text"]
RESP, RESP_FAMILIES = fastpath.PROTOCOLS["resp2"]
RESP3, RESP3_FAMILIES = fastpath.PROTOCOLS["resp3"]
BINARY, BINARY_FAMILIES = fastpath.PROTOCOLS["memcache-binary"]
META, META_FAMILIES = fastpath.PROTOCOLS["memcache-meta"]
PROTOCOLS = pump_oracle.PROTOCOLS


def test_reply_kinds_are_the_protocol_layer_values() -> None:
    for kind in ReplyKind:
        name = "K_" + kind.name
        if hasattr(_pump, name):
            assert getattr(_pump, name) == int(kind), name
    assert _pump.KEYS_SHIFT == KEYS_SHIFT
    assert len(Op) <= _pump.MAX_OPS
    assert _pump.OP_RMW == pump_oracle.RMW < _pump.MAX_OPS  # workload.mix.RMW_CODE


# -- replies, built with what each op may get back -------------------------------------

keys = st.binary(min_size=1, max_size=12).map(lambda b: b"k" + b.hex().encode())
data = st.binary(max_size=40)
error_lines = st.sampled_from(
    [b"ERROR\r\n", b"CLIENT_ERROR bad data chunk\r\n", b"SERVER_ERROR out of memory\r\n"]
)


@st.composite
def text_exchange(draw: Any) -> tuple[int, Any, bytes]:
    """(op, key or keys, the reply bytes) for one memcached text request."""
    op = draw(st.sampled_from([Op.GET, Op.SET, Op.DELETE, Op.INCR, Op.MGET]))
    if draw(st.integers(0, 9)) == 0:
        return int(op), draw(keys) if op != Op.MGET else (b"a", b"b"), draw(error_lines)
    if op == Op.GET:
        key = draw(keys)
        if draw(st.booleans()):
            value = draw(data)
            cas = b" %d" % draw(st.integers(0, 99)) if draw(st.booleans()) else b""
            reply = b"VALUE %b %d %d%b\r\n%b\r\nEND\r\n" % (
                key,
                draw(st.integers(0, 9)),
                len(value),
                cas,
                value,
            )
            return int(op), key, reply
        return int(op), key, b"END\r\n"
    if op == Op.MGET:
        names = tuple(draw(st.lists(keys, min_size=1, max_size=4, unique=True)))
        hits = [k for k in names if draw(st.booleans())]
        blocks = b"".join(
            b"VALUE %b 0 %d\r\n%b\r\n" % (k, len(v), v) for k in hits for v in [draw(data)]
        )
        tail = draw(error_lines) if draw(st.integers(0, 5)) == 0 else b"END\r\n"
        return int(op), names, blocks + tail
    words = {
        Op.SET: [b"STORED", b"NOT_STORED", b"EXISTS", b"NOT_FOUND"],
        Op.DELETE: [b"DELETED", b"NOT_FOUND"],
        Op.INCR: [
            b"NOT_FOUND",
            b"0",
            b"42",
            b"999999999999999999",
            b"1000000000000000000",
            b"18446744073709551615",
        ],
    }[op]
    return int(op), draw(keys), draw(st.sampled_from(words)) + b"\r\n"


@st.composite
def resp_exchange(draw: Any) -> tuple[int, Any, bytes]:
    """(op, key or keys, the reply bytes) for one RESP2 request (no touch: encode_many has
    no expiry to give EXPIRE)."""
    op = draw(st.sampled_from([Op.GET, Op.SET, Op.DELETE, Op.INCR, Op.MGET]))

    def bulk(value: bytes | None) -> bytes:
        return b"$-1\r\n" if value is None else b"$%d\r\n%b\r\n" % (len(value), value)

    if draw(st.integers(0, 9)) == 0:
        key: Any = (b"a", b"b") if op == Op.MGET else draw(keys)
        return (
            int(op),
            key,
            b"-ERR " + draw(st.sampled_from([b"wrong type", b"oom", b""])) + b"\r\n",
        )
    if op == Op.GET:
        value = draw(st.one_of(st.none(), data))
        reply = draw(st.sampled_from([bulk(value), b"*-1\r\n"])) if value is None else bulk(value)
        return int(op), draw(keys), reply
    if op == Op.SET:  # (a null refuses a SET NX / XX only: a plain SET cannot get one)
        return int(op), draw(keys), draw(st.sampled_from([b"+OK\r\n", b"$2\r\nOK\r\n"]))
    if op == Op.MGET:
        names = tuple(draw(st.lists(keys, min_size=1, max_size=4)))
        values = [draw(st.one_of(st.none(), data)) for _ in names]
        return int(op), names, b"*%d\r\n" % len(names) + b"".join(bulk(v) for v in values)
    # INCR answers with any signed 64-bit value; DEL with a count
    number = draw(st.integers(-(2**63), 2**63 - 1)) if op == Op.INCR else draw(st.integers(0, 3))
    return int(op), draw(keys), b":%d\r\n" % number


@st.composite
def resp3_exchange(draw: Any) -> tuple[int, Any, bytes]:
    """One RESP3 request's reply: RESP2's, its nulls as ``_``, now and then after a push
    message (a tracking invalidation, a pub/sub message), which answers no request."""
    op, key, reply = draw(resp_exchange())
    reply = reply.replace(b"$-1\r\n", b"_\r\n").replace(b"*-1\r\n", b"_\r\n")
    push = draw(st.sampled_from(RESP3_PUSHES + (b"",) * len(RESP3_PUSHES)))
    return op, key, push + reply


RESP3_PUSHES = (
    b">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nk1\r\n",
    b">2\r\n$10\r\ninvalidate\r\n_\r\n",
    b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n",
    b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    b">1\r\n*2\r\n*1\r\n:1\r\n*-1\r\n",
    b">0\r\n",
)


# Replies that carry their request's opaque are built once it is known: (op, key or keys,
# the reply given the request's first opaque).
Render = Callable[[int], bytes]
binary_errors = st.sampled_from([0x0082, 0x0081, 0x0004, 0x0086])  # oom, unknown, invalid


@st.composite
def binary_exchange(draw: Any) -> tuple[int, Any, Render]:
    """One memcached binary request and a well-formed response of each kind to it."""
    op = draw(st.sampled_from([Op.GET, Op.SET, Op.DELETE, Op.INCR, Op.DECR, Op.MGET]))
    opcode = reply_grammar.BINARY_OPCODES[op]
    if op == Op.MGET:
        names = tuple(draw(st.lists(keys, min_size=1, max_size=4, unique=True)))
        hits = [(i, draw(data)) for i in range(len(names)) if draw(st.booleans())]
        status = draw(binary_errors) if draw(st.integers(0, 5)) == 0 else 0

        def mget(o: int) -> bytes:
            found = b"".join(
                packet(0x0D, o + i, key=names[i], extras=b"\0\0\0\1", value=v) for i, v in hits
            )
            return found + packet(0x0A, o + len(names), status)

        return int(op), names, mget
    status = draw(
        st.sampled_from(
            {
                Op.GET: [0, 1],
                Op.SET: [0, 5, 2],
                Op.DELETE: [0, 1],
                Op.INCR: [0, 1],
                Op.DECR: [0, 1],
            }[op]
        )
    )
    if draw(st.integers(0, 9)) == 0:
        status = draw(binary_errors)
    extras, value = b"", b"Not found" if status == 1 else b""
    if status == 0 and op == Op.GET:
        extras, value = b"\0\0\0\7", draw(data)
    elif status == 0 and op in (Op.INCR, Op.DECR):
        value = draw(st.integers(0, 2**64 - 1)).to_bytes(8, "big")
    elif status not in (0, 1, 2, 5):
        value = b"error text"
    return int(op), draw(keys), lambda o: packet(opcode, o, status, extras=extras, value=value)


meta_errors = st.sampled_from([b"SERVER_ERROR out of memory\r\n", b"CLIENT_ERROR bad key\r\n"])


@st.composite
def meta_exchange(draw: Any) -> tuple[int, Any, Render]:
    """One memcached meta request and a well-formed reply of each kind to it."""
    op = draw(st.sampled_from([Op.GET, Op.SET, Op.DELETE, Op.INCR, Op.DECR, Op.MGET]))
    if op == Op.MGET:
        names = tuple(draw(st.lists(keys, min_size=1, max_size=4)))
        hits = [(i, draw(data)) for i in range(len(names)) if draw(st.booleans())]
        error = draw(meta_errors) if draw(st.integers(0, 7)) == 0 else b""

        def mget(t: int) -> bytes:
            found = b"".join(b"VA %d O%d\r\n%b\r\n" % (len(v), t + i, v) for i, v in hits)
            return found + error + b"MN\r\n"

        return int(op), names, mget
    if draw(st.integers(0, 9)) == 0:
        line = draw(meta_errors)
        return int(op), draw(keys), lambda t: line
    flags = draw(st.sampled_from([b"", b" k", b" f0 s3"]))
    if op in (Op.GET, Op.INCR, Op.DECR) and draw(st.booleans()):
        value = draw(data) if op == Op.GET else b"%d" % draw(st.integers(0, 2**64 - 1))
        return (
            int(op),
            draw(keys),
            lambda t: b"VA %d%b O%d\r\n%b\r\n" % (len(value), flags, t, value),
        )
    code = draw(
        st.sampled_from(
            {
                Op.GET: [b"EN"],
                Op.SET: [b"HD", b"NS", b"EX", b"NF"],
                Op.DELETE: [b"HD", b"NF", b"EX"],
                Op.INCR: [b"NF", b"NS", b"EX"],
                Op.DECR: [b"NF", b"NS", b"EX"],
            }[op]
        )
    )
    untokened = op == Op.GET and draw(st.integers(0, 5)) == 0  # old servers: a bare EN
    return int(op), draw(keys), lambda t: code + (b"" if untokened else b" O%d" % t) + b"\r\n"


def fixed(exchange: Any) -> Any:
    """A text or RESP2 generator as one whose replies carry no opaque."""
    return exchange.map(lambda e: (e[0], e[1], lambda o, reply=e[2]: reply))


CASES = {  # protocol name -> a generator of well-formed replies
    "memcache-text": fixed(text_exchange()),
    "resp2": fixed(resp_exchange()),
    "memcache-binary": binary_exchange(),
    "memcache-meta": meta_exchange(),
    "resp3": fixed(resp3_exchange()),
}


@pytest.mark.parametrize("name", CASES)
# (200 each: the hostile test below, its fixed sweep and fuzz/fuzz_pump.py draw many more)
@settings(max_examples=pump_oracle.examples(200), deadline=None)
@given(st.data())
def test_replies_classify_as_the_python_codec_does(name: str, data: Any) -> None:
    """Well-formed replies: the same requests and codes, no error, however they are cut."""
    exchanges = data.draw(st.lists(CASES[name], min_size=1, max_size=12))
    wire, opaque = b"", 0
    for op, key, render in exchanges:
        wire += render(opaque)
        opaque += reply_grammar.opaques_taken(name, op, key)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(wire) - 1)), max_size=4)))
    ops, names = [op for op, _, _ in exchanges], [key for _, key, _ in exchanges]
    ex = pump_oracle.Exchange(name, ops, names, wire, cuts, MAX)
    expected = pump_oracle.python_outcome(ex)
    assert expected.error is None and len(expected.codes) == len(ops)
    py, c = pump_oracle.py_pump_outcome(ex), pump_oracle.pump_outcome(ex)
    assert py == c and pump_oracle.disagreement(ex, py, c) is None  # (and the bytes by op)
    assert c.codes == expected.codes
    protocol, families = fastpath.PROTOCOLS[name]
    widths = bytes(len(key) if op == Op.MGET else 0 for op, key in zip(ops, names, strict=True))
    scanned = _pump.scan_replies(protocol, families, bytes(ops), wire, MAX, widths)
    assert scanned == (expected.codes, len(wire), None)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@settings(max_examples=pump_oracle.examples(400), deadline=None)
@given(st.randoms(use_true_random=False))
def test_hostile_replies_give_the_same_codes_or_a_protocol_error_on_both(
    protocol: str, rng: Any
) -> None:
    """The differential test (STYLE 6a): replies from the grammar of each op family, with
    huge, negative and 18-20 digit lengths and numbers, mutated (high bytes, split CRLFs,
    truncation, garbage) and read in random pieces; the oracle is tests/support/pump_oracle.py,
    which fuzz/fuzz_pump.py runs too."""
    pump_oracle.check(pump_oracle.exchange(rng.randint, protocol))


def test_hostile_replies_from_a_fixed_sweep_agree() -> None:
    """The same oracle over a few thousand seeded exchanges, the same in every run."""
    for seed in range(3000):
        pump_oracle.check(pump_oracle.exchange(pump_oracle.seeded(seed)))


@settings(max_examples=pump_oracle.examples(300), deadline=None)
@given(st.sampled_from(PROTOCOLS), st.binary(max_size=200), st.binary(min_size=1, max_size=8))
def test_any_bytes_give_codes_or_an_error_never_a_crash(name: str, wire: bytes, ops: bytes) -> None:
    protocol, families = fastpath.PROTOCOLS[name]
    ops = bytes(op % len(Op) for op in ops)
    widths = bytes(op % 5 for op in ops)
    codes, consumed, error = _pump.scan_replies(protocol, families, ops, wire, 64, widths)
    assert 0 <= consumed <= len(wire)
    assert len(codes) <= len(ops)
    assert all(code & 0xFF in {int(k) for k in ReplyKind} for code in codes)
    assert error is None or isinstance(error, str)


@pytest.mark.parametrize(
    ("protocol", "families", "op", "wire", "message"),
    [
        (TEXT, TEXT_FAMILIES, Op.GET, b"WHAT\r\n", "unexpected reply to get: b'WHAT'"),
        (TEXT, TEXT_FAMILIES, Op.GET, b"VALUE k 0 x\r\n", "bad VALUE header"),
        (TEXT, TEXT_FAMILIES, Op.GET, b"VALUE k 0 1\r\nab", "not followed by CRLF END CRLF"),
        (TEXT, TEXT_FAMILIES, Op.SET, b"DELETED\r\n", "unexpected reply to a storage command"),
        (TEXT, TEXT_FAMILIES, Op.GET, b"x" * 100, "longer than the reply bound"),
        (TEXT, TEXT_FAMILIES, Op.GET, b"VALUE k 0 999\r\n", "larger than the reply bound"),
        (RESP, RESP_FAMILIES, Op.GET, b":1\r\n", "cannot answer GET"),
        (RESP, RESP_FAMILIES, Op.SET, b"+QUEUED\r\n", "cannot answer SET"),
        (RESP, RESP_FAMILIES, Op.MGET, b"*1\r\n:1\r\n", "MGET element"),
        (RESP, RESP_FAMILIES, Op.GET, b"?\r\n", "unknown reply type"),
        (RESP, RESP_FAMILIES, Op.GET, b"?", "unknown reply type"),  # no need to wait for CRLF
        (RESP, RESP_FAMILIES, Op.SET, b"+O\rK\r\n", "CR or LF in a simple string"),
        (RESP, RESP_FAMILIES, Op.GET, b"-ERR a\nb\r\n", "CR or LF in a simple string"),
        (RESP, RESP_FAMILIES, Op.MGET, b"*99\r\n" + b"$-1\r\n" * 20, "reply bound"),
        (RESP, RESP_FAMILIES, Op.GET, b"$abc\r\n", "bad bulk string length"),
        (RESP, RESP_FAMILIES, Op.GET, b"$1\r\nab\r\n", "not followed by CRLF"),
        (RESP, RESP_FAMILIES, Op.NOOP, b"+PONG\r\n", "no compiled scanner"),
        (RESP, RESP_FAMILIES, Op.GET, b">1\r\n+x\r\n$1\r\nv\r\n", "unknown reply type"),
        (RESP3, RESP3_FAMILIES, Op.GET, b",1.5\r\n", "unknown reply type"),
        (RESP3, RESP3_FAMILIES, Op.GET, b"!3\r\nERR\r\n", "unknown reply type"),
        (RESP3, RESP3_FAMILIES, Op.GET, b">1\r\n#t\r\n$1\r\nv\r\n", "unknown reply type"),
        (RESP3, RESP3_FAMILIES, Op.GET, b">x\r\n", "bad push message length"),
        (RESP3, RESP3_FAMILIES, Op.GET, b">99\r\n" + b":1\r\n" * 20, "reply bound"),
    ],
)
def test_replies_that_cannot_answer_the_request_are_grammar_errors(
    protocol: int, families: bytes, op: Op, wire: bytes, message: str
) -> None:
    codes, consumed, error = _pump.scan_replies(protocol, families, bytes([op]), wire, 64)
    assert codes == [] and consumed == 0
    assert error is not None and message in error


def test_a_resp3_push_message_answers_no_request() -> None:
    """Between replies, before the first, after the last with none pending, or alone: a
    push is consumed whole and accounted to no request; cut short, it waits for the rest."""
    push = RESP3_PUSHES[0]
    ops = bytes([Op.GET, Op.SET])
    for wire in (
        push + b"$1\r\nv\r\n" + push + b"+OK\r\n" + push,
        b"_\r\n" + push + push + b"+OK\r\n",
    ):
        codes, consumed, error = _pump.scan_replies(RESP3, RESP3_FAMILIES, ops, wire, MAX)
        assert (len(codes), consumed, error) == (2, len(wire), None)
        assert [c & 0xFF for c in codes][1] == ReplyKind.STORED
    assert _pump.scan_replies(RESP3, RESP3_FAMILIES, b"", push, MAX) == ([], len(push), None)
    cut = push + b"$1\r\nv\r\n"
    for end in range(1, len(push)):  # (the push is not consumed until it is whole)
        assert _pump.scan_replies(RESP3, RESP3_FAMILIES, ops, cut[:end], MAX) == ([], 0, None)


HEADER = reply_grammar.HEADER


@pytest.mark.parametrize(
    ("protocol", "op", "wire", "message"),
    [
        (BINARY, Op.GET, packet(0x00, 0, magic=0x80), "bad magic byte 0x80 (expected 0x81)"),
        (BINARY, Op.GET, packet(0x00, 0, body=2**32 - 1)[:24], "body of 4294967295 bytes"),
        (BINARY, Op.SET, packet(0x01, 0, body=65)[:24], "exceeds 64"),  # before the body
        (BINARY, Op.GET, HEADER.pack(0x81, 0, 9, 4, 0, 0, 8, 0, 0) + b"x" * 8, "exceed the body"),
        (BINARY, Op.GET, packet(0x01, 0), "opcode 0x01 answers a GET request"),
        (BINARY, Op.DECR, packet(0x05, 0, value=b"\0" * 8), "answers a DECR request"),
        (BINARY, Op.MGET, packet(0x00, 2), "opcode 0x00 answers a MGET request"),
        (BINARY, Op.GET, packet(0x00, 7), "opaque 7 out of order (oldest pending 0)"),
        (BINARY, Op.GET, packet(0x00, 2**32 - 1), "out of order"),  # the one before
        (BINARY, Op.MGET, packet(0x0D, 3) + packet(0x0A, 2), "opaque 3 out of order"),
        (BINARY, Op.MGET, packet(0x01, 0) + packet(0x0A, 2), "unexpected opcode 0x01"),
        (BINARY, Op.INCR, packet(0x05, 0, value=b"\0" * 4), "value of 4 bytes (expected 8)"),
        (BINARY, Op.INCR, packet(0x05, 0, value=b"\0" * 9), "value of 9 bytes (expected 8)"),
        (META, Op.GET, b"VA 3 O9\r\nabc\r\n", "VA without our opaque b'O0'"),
        (META, Op.GET, b"VA 3 O0 k\r\nabc\r\n", "VA without our opaque"),
        (META, Op.GET, b"VA 3 O0\r\nabcd\r\n", "data block not followed by CRLF"),
        (META, Op.GET, b"VA x3 O0\r\nabc\r\n", "bad VA line"),
        (META, Op.GET, b"VA 99999999999999999999 O0\r\n", "bad VA line"),  # 20 digits
        (META, Op.GET, b"VA 999999999999999999 O0\r\n", "bound 64"),  # 18: the bound says
        (META, Op.GET, b"VA 000000000000000070 O0\r\n", "bound 64"),
        (META, Op.SET, b"HD O1\r\n", "opaque mismatch: expected O0, got b'HD O1'"),
        (META, Op.SET, b"HD O00\r\n", "opaque mismatch"),  # tokens compare as written
        (META, Op.SET, b"NS O\xff0\r\n", "opaque mismatch"),
        (META, Op.GET, b"HD O0\r\n", "unexpected meta reply b'HD O0'"),
        (META, Op.DELETE, b"hd O0\r\n", "not a meta reply"),
        (META, Op.DELETE, b"HDX O0\r\n", "not a meta reply"),
        (META, Op.DELETE, b"HD  O0\r\n", "bad flags in meta reply"),
        (META, Op.DELETE, b"HD O\r\n", "bad flags in meta reply"),
        (META, Op.DELETE, b"HD O0 \r\n", "bad flags in meta reply"),
        (META, Op.INCR, b"EN O0\r\n", "unexpected meta reply"),
        (META, Op.MGET, b"VA 1 O5\r\nx\r\nMN\r\n", "VA with a token not in this multi-get"),
        (META, Op.MGET, b"VA 1 O1\r\nx\r\nVA 1 O0\r\nx\r\nMN\r\n", "not in this multi-get"),
        (META, Op.MGET, b"VA 1 f0 O0\r\nx\r\nMN\r\n", "bad VA line in multi-get"),
        (META, Op.MGET, b"EN O0\r\nMN\r\n", "opaque mismatch: expected O, got b'EN O0'"),
        (META, Op.MGET, b"MN O2\r\n", "opaque mismatch"),
        (META, Op.MGET, b"HD\r\n", "unexpected meta reply"),
        (META, Op.GET, b"x" * 65, "no line end within"),
    ],
)
def test_binary_and_meta_grammar_errors_are_errors_of_the_codec_too(
    protocol: int, op: Op, wire: bytes, message: str
) -> None:
    """Each fault stops the scanner at the reply's head, and the codec refuses it too."""
    families = BINARY_FAMILIES if protocol == BINARY else META_FAMILIES
    ops, widths = bytes([op]), bytes([2 if op == Op.MGET else 0])
    codes, consumed, error = _pump.scan_replies(protocol, families, ops, wire, 64, widths)
    assert (codes, consumed) == ([], 0) and error is not None and message in error, error
    assert pump_oracle.codec_outcome(protocol, op, wire, 64)[1] is not None


@pytest.mark.parametrize(
    ("protocol", "op", "wire", "code"),
    [
        (BINARY, Op.GET, packet(0x00, 0, 0x82, value=b"out of memory"), ReplyKind.ERROR_REPLY),
        (BINARY, Op.GET, packet(0x00, 0, extras=b"12345678", value=b"v"), ReplyKind.HIT | 256),
        (BINARY, Op.SET, packet(0x01, 0, 1), ReplyKind.ERROR_REPLY),  # no "not found" for set
        # getkq hits counted, and a getkq error counted aside; an error noop drops the hits
        (BINARY, Op.MGET, packet(0x0D, 0) + packet(0x0D, 1, 0x82) + packet(0x0A, 2), 1 | 256),
        (BINARY, Op.MGET, packet(0x0D, 1) + packet(0x0A, 2, 0x82), ReplyKind.ERROR_REPLY),
        (BINARY, Op.MGET, packet(0x11, 1, 5) + packet(0x0A, 2), ReplyKind.MISS),  # quiet op
        (META, Op.GET, b"EN\r\n", ReplyKind.MISS),  # no token: older servers
        (META, Op.GET, b"VA 1 f0 t-1 O0\r\nx\r\n", ReplyKind.HIT | 256),
        (META, Op.GET, b"VA 000000000000000001 O0\r\nx\r\n", ReplyKind.HIT | 256),
        (META, Op.SET, b"NS O0 k b\r\n", ReplyKind.NOT_STORED),
        (META, Op.SET, b"EX O7 O0\r\n", ReplyKind.EXISTS),  # the last O flag is the token
        (META, Op.DELETE, b"SERVER_ERROR out of memory\r\n", ReplyKind.ERROR_REPLY),
        (META, Op.INCR, b"VA 2 O0\r\nxy\r\n", ReplyKind.VALUE),  # not checked: a value
        (META, Op.MGET, b"VA 1 O1\r\nx\r\nCLIENT_ERROR bad\r\nMN\r\n", 20 | 256),
        (META, Op.MGET, b"VA 1 O00\r\nx\r\nMN\r\n", ReplyKind.HIT | 256),  # meta_token
    ],
)
def test_binary_and_meta_edge_replies_classify_as_the_codec_does(
    protocol: int, op: Op, wire: bytes, code: int
) -> None:
    families = BINARY_FAMILIES if protocol == BINARY else META_FAMILIES
    ops, widths = bytes([op]), bytes([2 if op == Op.MGET else 0])
    scanned = _pump.scan_replies(protocol, families, ops, wire, MAX, widths)
    assert scanned == ([int(code)], len(wire), None)
    assert pump_oracle.codec_outcome(protocol, op, wire) == ([int(code)], None)


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        (packet(0x00, 0, 1) + packet(0x00, 1, 1)[:23], None),  # the codec waits for 24 bytes
        (packet(0x00, 0, 1) + packet(0x00, 1, 1, body=9), None),  # ... and for the body
        (packet(0x00, 0, 1) + packet(0x00, 1, 1), "(opaque 1) with no request pending"),
        (packet(0x00, 0, 1) + packet(0x00, 1, magic=0), "bad magic"),
    ],
)
def test_a_binary_response_with_nothing_pending_is_refused_when_the_codec_refuses_it(
    wire: bytes, error: str | None
) -> None:
    codes, consumed, scanned = _pump.scan_replies(BINARY, BINARY_FAMILIES, bytes([0]), wire, MAX)
    assert codes == [int(ReplyKind.MISS)] and consumed == 24
    assert scanned is None if error is None else error in scanned
    assert (pump_oracle.codec_outcome(BINARY, Op.GET, wire)[1] is None) == (error is None)


def test_a_meta_19_digit_size_is_refused_by_the_scanner_and_both_codec_paths() -> None:
    """A zero-padded 19-digit size is beyond MAX_SIZE_DIGITS: the scanner, the codec's
    parser (next_reply) and its inline path (read_kinds, which once took it) all refuse it."""
    wire = b"VA 0000000000000000003 O0\r\nabc\r\n"
    _, _, error = _pump.scan_replies(META, META_FAMILIES, bytes([Op.GET]), wire, MAX)
    assert error is not None and "bad VA line" in error
    for read in ("next_reply", "read_kinds"):
        codec: Any = CODECS["memcache-meta"].factory(CodecOptions())
        codec.encode(Op.GET, b"k", None, bytearray())
        codec.feed(wire)
        with pytest.raises(ProtocolError, match="bad VA line"):
            codec.next_reply() if read == "next_reply" else codec.read_kinds([])


INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("op", "reply"),
    [
        (Op.INCR, b":1000000000000000000\r\n"),  # 19 digits
        (Op.INCR, b":%d\r\n" % INT64_MAX),
        (Op.INCR, b":%d\r\n" % -(2**63)),
        (Op.INCR, b":-1000000000000000000\r\n"),
        (Op.INCR, b":0\r\n"),
        (Op.DELETE, b":%d\r\n" % INT64_MAX),
        (Op.INCR, b":%d\r\n" % (INT64_MAX + 1)),  # beyond: a protocol error on both
        (Op.INCR, b":%d\r\n" % (-(2**63) - 1)),
        (Op.INCR, b":18446744073709551615\r\n"),
        (Op.INCR, b":100000000000000000000\r\n"),
        (Op.INCR, b":007\r\n"),  # hiredis refuses what Redis never writes
        (Op.INCR, b":-0\r\n"),
        (Op.INCR, b":+1\r\n"),
        (Op.INCR, b":-\r\n"),
        (Op.INCR, b":\r\n"),
        (Op.INCR, b": 1\r\n"),
        (Op.GET, b"$-2\r\n"),
        (Op.GET, b"$01\r\nx\r\n"),
        (Op.GET, b"$-0\r\n"),
        (Op.MGET, b"*-2\r\n"),
        (Op.MGET, b"*%d\r\n" % 2**32),
        (Op.MGET, b"*99999999999999999999\r\n"),
        (Op.GET, b"$99999999999999999999\r\n"),
    ],
)
def test_resp_numbers_take_the_signed_64_bit_range_as_the_codec_does(op: Op, reply: bytes) -> None:
    expected_codes, expected_error = pump_oracle.codec_outcome(RESP, op, reply)
    codes, consumed, error = _pump.scan_replies(RESP, RESP_FAMILIES, bytes([op]), reply, MAX)
    assert codes == expected_codes
    assert (error is None) == (expected_error is None), (error, expected_error)
    assert consumed == (len(reply) if error is None else 0)


@pytest.mark.parametrize(
    "header", [b"$%d\r\n" % INT64_MAX, b"$%d\r\n" % (INT64_MAX - 3), b"$1000000000000000000\r\n"]
)
def test_huge_bulk_lengths_are_refused_by_the_bound_not_overflowed(header: bytes) -> None:
    codes, consumed, error = _pump.scan_replies(
        RESP, RESP_FAMILIES, bytes([Op.GET]), header + b"abc\r\n", 64
    )
    assert (codes, consumed) == ([], 0)
    assert error is not None and "larger than the reply bound" in error


# -- an arbitrary command's reply (--command): any value hiredis reads --------------------

OK, ERROR_REPLY = int(ReplyKind.OK), int(ReplyKind.ERROR_REPLY)


def command_reply(protocol: int, families: bytes, wire: bytes) -> tuple[list[int], int, Any]:
    return _pump.scan_replies(protocol, families, bytes([Op.COMMAND]), wire, MAX)


@pytest.mark.parametrize(
    "reply",
    [
        # RESP2's types, nested, and errors inside a value (the value is still ok)
        b"+PONG\r\n", b"-WRONGTYPE Operation\r\n", b":-7\r\n", b"$3\r\nabc\r\n", b"$-1\r\n",
        b"*-1\r\n", b"*0\r\n", b"*2\r\n$1\r\na\r\n*1\r\n-ERR x\r\n",
        # RESP3's, on either protocol: hiredis reads them on both
        b"_\r\n", b"#t\r\n", b"#F\r\n", b"(-123\r\n", b"(\r\n", b"(-\r\n", b"=8\r\ntxt:abcd\r\n",
        b"=-1\r\n", b"%1\r\n+k\r\n:1\r\n", b"%1\r\n*-1\r\n:1\r\n", b"%1\r\n-ERR\r\n,1.5\r\n",
        b"~2\r\n:1\r\n:1\r\n", b"%-1\r\n", b"*1\r\n>1\r\n+a\r\n", b"%0\r\n",
        *(b",%b\r\n" % text for text in reply_grammar.DOUBLE_TEXTS),
        # what hiredis refuses
        b"#x\r\n", b"#tt\r\n", b"(+1\r\n", b"(1a\r\n", b"=3\r\nabc\r\n", b"=5\r\nab:cd\r\n",
        b"_x\r\n", b"!5\r\nERR x\r\n", b"%-2\r\n", b":\r\n",
        # a map key that is an aggregate, refused as soon as its header is read
        b"%1\r\n*0\r\n:1\r\n", b"%1\r\n~1\r\n", b"*1\r\n%1\r\n>0\r\n",
    ],
)  # fmt: skip
@pytest.mark.parametrize("name", ["resp2", "resp3"])
def test_a_command_reply_is_any_value_hiredis_reads(name: str, reply: bytes) -> None:
    """The scanner reads an arbitrary command's reply as hiredis does: ok for any value
    (an error inside an aggregate too), error_reply for an error; refused where hiredis
    refuses, whole or cut anywhere."""
    protocol, families = fastpath.PROTOCOLS[name]
    expected_codes, expected_error = pump_oracle.codec_outcome(name, Op.COMMAND, reply)
    codes, consumed, error = command_reply(protocol, families, reply)
    assert codes == expected_codes and set(codes) <= {OK, ERROR_REPLY}
    assert (error is None) == (expected_error is None), (error, expected_error)
    assert consumed == (len(reply) if error is None else 0)
    if error is None:  # cut anywhere: incomplete, nothing consumed
        for end in range(len(reply)):
            assert command_reply(protocol, families, reply[:end]) == ([], 0, None)
        assert codes == [ERROR_REPLY if reply.startswith(b"-") else OK]


def test_a_command_reply_nests_as_deep_as_hiredis_reads_and_no_deeper() -> None:
    """hiredis reads 1,024 aggregates nested, and refuses the 1,025th's header."""
    for depth, refused in ((1024, False), (1025, True)):
        for inner in (b":1\r\n", b""):  # (the deepest one's item, or an empty one)
            wire = b"*1\r\n" * (depth - 1) + (b"*1\r\n" + inner if inner else b"*0\r\n")
            expected_codes, expected_error = pump_oracle.codec_outcome("resp2", Op.COMMAND, wire)
            codes, consumed, error = command_reply(RESP, RESP_FAMILIES, wire)
            assert (error is not None) == (expected_error is not None) == refused, (depth, error)
            assert consumed == (0 if refused else len(wire))
            assert codes == expected_codes == ([] if refused else [OK])


def test_a_resp3_attribute_is_refused_where_hiredis_takes_it_for_a_reply() -> None:
    """The oracle's one exception for commands (pump_oracle.RESP_RUNS_ON): hiredis returns
    an attribute ("|") as a reply of its own, so the codec gives it to the command and the
    value it describes to the next request; the scanner refuses it instead."""
    wire = b"|1\r\n+key\r\n:1\r\n+OK\r\n"
    codes, consumed, error = command_reply(RESP3, RESP3_FAMILIES, wire)
    assert (codes, consumed) == ([], 0) and error is not None and "RESP3 attribute" in error
    # the codec: the attribute answers the command, the value it describes nothing
    codes, error = pump_oracle.codec_outcome("resp3", Op.COMMAND, wire)
    assert codes == [OK] and error is not None and "with no request pending" in error


def test_a_command_may_take_the_rmw_code_when_the_run_has_no_rmw() -> None:
    """``COMMAND_BASE`` is both the first command name's code and an rmw's (config never
    sends both): a pump whose families give it F_COMMAND sends it as a command, whole,
    and records it under that code; one without sends it as an rmw."""
    sent: list[bytes] = []
    request = pump_oracle.command_request(b"k1", b"vv")
    chunk = ([_pump.OP_RMW, int(Op.GET)], [request, b"k2"], [None, None], 0)
    families = RESP_FAMILIES.ljust(_pump.OP_RMW, b"\0") + bytes([_pump.F_COMMAND])
    tally = _pump.Tally()
    tally.issuing, tally.budget = True, 2
    pump = _pump.Pump(tally, _pump.Stream(lambda: chunk, RESP), sent.append, RESP, families, MAX)
    assert pump.issue(2) == 0
    assert sent == [bytes(request) + b"*2\r\n$3\r\nGET\r\n$2\r\nk2\r\n"]
    assert pump.received(b"%1\r\n+f\r\n:1\r\n$-1\r\n") == 1  # (idle: the budget is spent)
    ops, codes, _ = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert ops == [_pump.OP_RMW, int(Op.GET)] and codes == [OK, int(ReplyKind.MISS)]
    # memcached binary and meta send none (config allows commands on text and RESP)
    with pytest.raises(ValueError, match="sends no arbitrary commands"):
        _pump.Pump(
            tally, _pump.Stream(lambda: chunk, BINARY), sent.append, BINARY,
            BINARY_FAMILIES.ljust(_pump.OP_RMW, b"\0") + bytes([_pump.F_COMMAND]), MAX,
        )  # fmt: skip


@pytest.mark.parametrize(
    "reply",
    [
        b"STORED\r\n", b"TOUCHED\r\n", b"HD\r\n", b"EN\r\n", b"VERSION 1.6.21\r\n", b"42\r\n",
        b"END\r\n", b"\r\n", b"ERROR\r\n", b"CLIENT_ERROR bad command line format\r\n",
        b"SERVER_ERROR out of memory\r\n", b"ERRORS\r\n",
        b"VALUE k 0 3\r\nabc\r\nVALUE j 5 1 9\r\nx\r\nEND\r\n", b"VALUE k 0 3\r\nabc\r\nERROR\r\n",
        b"VALUE k 0 3\r\nabc\r\nSTORED\r\n", b"VALUE k 0 3\r\nabcd\r\nEND\r\n",
        b"VALUE k x 3\r\nabc\r\nEND\r\n", b"VALUE k 0 %b\r\n" % (b"1" * 19),
        b"VA 3 f30\r\nabc\r\n", b"VA 3\r\nabc\r\n", b"VA 0\r\n\r\n", b"VA x\r\nabc\r\n",
        b"VA \r\n", b"VA 3\r\nabcd\r\n", b"VA\r\n",
        b"STAT pid 1\r\nSTAT uptime 2\r\nEND\r\n", b"STAT pid 1\r\nSERVER_ERROR oom\r\n",
        b"ITEM k [3 b; 0 s]\r\nEND\r\n", b"STAT pid 1\r\nVALUE k 0 1\r\nx\r\nEND\r\n",
    ],
)  # fmt: skip
def test_a_memcached_command_reply_is_framed_by_its_first_line_as_the_codec_frames_it(
    reply: bytes,
) -> None:
    """memcached text's --command replies (_pump_text.c's text_command against the
    codec's _parse_command): ok or error_reply, or refused, alike; whole or cut anywhere."""
    expected_codes, expected_error = pump_oracle.codec_outcome(TEXT, Op.COMMAND, reply)
    codes, consumed, error = command_reply(TEXT, TEXT_FAMILIES, reply)
    assert codes == expected_codes and set(codes) <= {OK, ERROR_REPLY}
    assert (error is None) == (expected_error is None), (error, expected_error)
    assert consumed == (len(reply) if error is None else 0)
    if error is None:
        for end in range(len(reply)):
            assert command_reply(TEXT, TEXT_FAMILIES, reply[:end]) == ([], 0, None)


def test_a_memcached_command_reply_past_the_bound_is_refused_by_both() -> None:
    line = b"VERSION " + b"1" * 100 + b"\r\n"
    for wire in (line, line[:-2], b"STAT x " + b"1" * 100 + b"\r\nEND\r\n"):
        codes, _, error = _pump.scan_replies(TEXT, TEXT_FAMILIES, bytes([Op.COMMAND]), wire, 64)
        expected_codes, expected_error = pump_oracle.codec_outcome(TEXT, Op.COMMAND, wire, 64)
        assert codes == expected_codes == [] and error is not None and expected_error is not None


@pytest.mark.parametrize(
    ("protocol", "families", "replies", "words"),
    [
        (RESP, RESP_FAMILIES, b"-OOM command not allowed\r\n-ERR later\r\n", b"OOM command not allowed"),
        (TEXT, TEXT_FAMILIES, b"SERVER_ERROR out of memory\r\nSTORED\r\n", b"SERVER_ERROR out of memory"),
        (BINARY, BINARY_FAMILIES, None, b"Too large."),
    ],
    ids=["resp", "text", "binary"],
)  # fmt: skip
def test_the_first_error_reply_is_kept_in_the_servers_words(
    protocol: int, families: bytes, replies: bytes | None, words: bytes
) -> None:
    """A run that fails on error replies says what the server said (an OOM, a value too
    large, a gateway's 502): the tally keeps the first one's op and words, until taken."""
    sent: list[bytes] = []
    chunk = ([int(Op.SET), int(Op.SET)], [b"k1", b"k2"], [b"v", b"w"], 0)
    tally = _pump.Tally()
    tally.issuing, tally.budget = True, 2
    stream = _pump.Stream(lambda: chunk, protocol)
    pump = _pump.Pump(tally, stream, sent.append, protocol, families, MAX)
    pump.issue(2)
    if replies is None:  # binary: each set's response names its request's opaque
        wire = b"".join(sent)
        first, size = int.from_bytes(wire[12:16], "big"), int.from_bytes(wire[8:12], "big")
        second = int.from_bytes(wire[24 + size + 12 : 24 + size + 16], "big")
        replies = packet(0x01, first, 0x03, value=b"Too large.") + packet(0x01, second)
    pump.received(replies)
    assert tally.take_said() == (int(Op.SET), words)
    assert tally.take_said() is None  # emptied; the second error was not kept
