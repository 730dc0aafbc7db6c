"""The compiled pump (engine/_pump.c) against the Python codecs, which stay the reference.

The same replies, fed to the C scanner and to the codec's ``read_kinds``, must give the
same codes in the same order, however they are cut into reads; hostile replies (the
differential test, oracle in tests/support/pump_oracle.py) the same codes or a protocol
error on both; any bytes must give codes or an error, never a crash; requests must be
the bytes the codec's ``encode_many`` writes. Under ``CI=true`` a pump that is not built
fails these tests instead of skipping them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.engine import fastpath
from kvbench.errors import ProtocolError
from kvbench.protocols.base import KEYS_SHIFT, CodecOptions, Op, ReplyKind
from kvbench.protocols.memcache_text import MemcacheTextCodec
from kvbench.protocols.resp import RespCodec
from tests.support import pump_oracle

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

MAX = CodecOptions().max_reply_bytes
TEXT, TEXT_FAMILIES = fastpath.PROTOCOLS["memcache-text"]
RESP, RESP_FAMILIES = fastpath.PROTOCOLS["resp2"]


def test_reply_kinds_are_the_protocol_layer_values() -> None:
    for kind in ReplyKind:
        name = "K_" + kind.name
        if hasattr(_pump, name):
            assert getattr(_pump, name) == int(kind), name
    assert _pump.KEYS_SHIFT == KEYS_SHIFT
    assert len(Op) <= _pump.MAX_OPS


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
    if op == Op.SET:
        return int(op), draw(keys), draw(st.sampled_from([b"+OK\r\n", b"$2\r\nOK\r\n", b"$-1\r\n"]))
    if op == Op.MGET:
        names = tuple(draw(st.lists(keys, min_size=1, max_size=4)))
        values = [draw(st.one_of(st.none(), data)) for _ in names]
        return int(op), names, b"*%d\r\n" % len(names) + b"".join(bulk(v) for v in values)
    # INCR answers with any signed 64-bit value; DEL with a count
    number = draw(st.integers(-(2**63), 2**63 - 1)) if op == Op.INCR else draw(st.integers(0, 3))
    return int(op), draw(keys), b":%d\r\n" % number


CASES = {  # protocol name -> (a generator of well-formed replies, the C protocol, families)
    "memcache-text": (text_exchange(), TEXT, TEXT_FAMILIES),
    "resp2": (resp_exchange(), RESP, RESP_FAMILIES),
}


@pytest.mark.parametrize("name", CASES)
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_replies_classify_as_the_python_codec_does(name: str, data: Any) -> None:
    """Well-formed replies: the same requests and codes, no error, however they are cut."""
    exchange, protocol, families = CASES[name]
    exchanges = data.draw(st.lists(exchange, min_size=1, max_size=12))
    wire = b"".join(reply for _, _, reply in exchanges)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(wire) - 1)), max_size=4)))
    ops, names = [op for op, _, _ in exchanges], [key for _, key, _ in exchanges]
    ex = pump_oracle.Exchange(name, ops, names, wire, cuts, MAX)
    expected = pump_oracle.python_outcome(ex)
    assert expected.error is None and len(expected.codes) == len(ops)
    assert pump_oracle.pump_outcome(ex) == expected
    scanned = _pump.scan_replies(protocol, families, bytes(ops), wire, MAX)
    assert scanned == (expected.codes, len(wire), None)


@pytest.mark.parametrize("protocol", ["memcache-text", "resp2"])
@settings(max_examples=400, deadline=None)
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


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([TEXT, RESP]), st.binary(max_size=200), st.binary(min_size=1, max_size=8))
def test_any_bytes_give_codes_or_an_error_never_a_crash(
    protocol: int, wire: bytes, ops: bytes
) -> None:
    families = TEXT_FAMILIES if protocol == TEXT else RESP_FAMILIES
    ops = bytes(op % len(Op) for op in ops)
    codes, consumed, error = _pump.scan_replies(protocol, families, ops, wire, 64)
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
    ],
)
def test_replies_that_cannot_answer_the_request_are_grammar_errors(
    protocol: int, families: bytes, op: Op, wire: bytes, message: str
) -> None:
    codes, consumed, error = _pump.scan_replies(protocol, families, bytes([op]), wire, 64)
    assert codes == [] and consumed == 0
    assert error is not None and message in error


# -- requests ----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["memcache-text", "resp2"]),
    st.lists(
        st.tuples(
            st.sampled_from([Op.GET, Op.SET, Op.DELETE, Op.INCR, Op.DECR, Op.MGET]), keys, data
        ),
        min_size=1,
        max_size=20,
    ),
    st.integers(0, 10**6),
    st.integers(0, 2**32 - 1),
    st.sampled_from([bytes, memoryview, bytearray]),
)
def test_requests_are_the_bytes_the_codec_writes(
    protocol: str, requests: Any, ttl: int, flags: int, kind: Any
) -> None:
    options = CodecOptions(ttl_s=ttl, flags=flags)
    codec: Any = MemcacheTextCodec(options) if protocol == "memcache-text" else RespCodec(options)
    ops = [int(op) for op, _, _ in requests]
    names = [(key, key + b"2", key + b"3") if op == Op.MGET else key for op, key, _ in requests]
    values = [kind(value) if op == Op.SET else None for op, _, value in requests]
    expected = bytearray()
    codec.encode_many(ops, names, values, 0, len(ops), expected)
    number = fastpath.PROTOCOLS[protocol][0]
    assert _pump.encode(number, ttl, flags, ops, names, values, 0, len(ops)) == bytes(expected)
    # and a slice, as a stream takes it from a chunk
    middle = _pump.encode(number, ttl, flags, ops, names, values, 1, len(ops))
    assert bytes(expected).endswith(middle)


def test_ops_without_a_compiled_encoding_and_bad_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="op 13 has no compiled encoding"):
        _pump.encode(TEXT, 0, 0, [int(Op.NOOP)], [b"k"], [None], 0, 1)
    with pytest.raises(TypeError, match="bytes-like, not str"):
        _pump.encode(RESP, 0, 0, [int(Op.GET)], ["k"], [None], 0, 1)
    with pytest.raises(TypeError, match="tuple or list"):
        _pump.encode(RESP, 0, 0, [int(Op.MGET)], [b"k"], [None], 0, 1)


# -- the pump ----------------------------------------------------------------------------


class Pieces:
    """A stream refill serving chunks of gets (k0, k1, ...), and a write collector."""

    def __init__(self, per_piece: int) -> None:
        self.per_piece = per_piece
        self.served = 0
        self.writes: list[bytes] = []

    def refill(self) -> tuple[list[int], list[bytes], list[None], int]:
        names = [b"k%d" % (self.served + i) for i in range(self.per_piece)]
        self.served += self.per_piece
        return [int(Op.GET)] * len(names), names, [None] * len(names), 0


def pump(per_piece: int = 3, budget: int = -1) -> tuple[Any, Any, Pieces]:
    pieces = Pieces(per_piece)
    tally = _pump.Tally()
    tally.issuing, tally.budget = True, budget
    stream = _pump.Stream(pieces.refill, TEXT)
    return tally, _pump.Pump(tally, stream, pieces.writes.append, TEXT, TEXT_FAMILIES, MAX), pieces


def test_a_write_spanning_pieces_is_one_write_in_request_order() -> None:
    tally, p, pieces = pump(per_piece=3)
    assert p.issue(7) == 0
    assert pieces.writes == [b"".join(b"get k%d\r\n" % i for i in range(7))]
    assert p.inflight == 7 and tally.bytes_out == len(pieces.writes[0])


def test_replies_are_accounted_in_order_and_answered_with_as_many_requests() -> None:
    tally, p, pieces = pump()
    p.issue(2)
    hit = b"VALUE k0 0 1\r\nx\r\nEND\r\n"
    assert p.received(hit[:5]) == 0 and tally.pending == 0  # incomplete: kept
    assert p.received(hit[5:] + b"END\r\n") == 0
    ops, codes, latency = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert ops == [int(Op.GET)] * 2
    assert codes == [int(ReplyKind.HIT) | 1 << KEYS_SHIFT, int(ReplyKind.MISS)]
    assert all(ns >= 0 for ns in latency)
    assert pieces.writes[-1] == b"get k2\r\nget k3\r\n" and p.inflight == 2


def test_the_budget_is_never_exceeded_and_then_the_pump_reports_idle() -> None:
    tally, p, pieces = pump(budget=3)
    assert p.issue(2) == 0
    assert p.received(b"END\r\nEND\r\n") == 0  # only one more may go
    assert tally.budget == 0 and p.inflight == 1
    assert p.received(b"END\r\n") == 1
    assert sum(w.count(b"get ") for w in pieces.writes) == 3


def test_a_grammar_error_stops_the_pump_after_counting_what_came_before() -> None:
    tally, p, _ = pump()
    p.issue(3)
    assert p.received(b"END\r\nNONSENSE\r\nEND\r\n") == 2
    assert p.error == "unexpected reply to get: b'NONSENSE'"
    assert tally.pending == 1
    assert p.received(b"END\r\n") == 2  # unusable from now on
    assert p.drop() == bytes([int(Op.GET)] * 2)


def test_expired_requests_leave_the_fifo_oldest_first() -> None:
    _, p, _ = pump()
    p.issue(2)
    sent = p.oldest_sent_ns()
    assert p.expire(sent + 10, 11) == b""
    assert p.expire(sent + 11, 11) == bytes([int(Op.GET)] * 2)
    assert p.inflight == 0 and p.oldest_sent_ns() is None


def test_the_interval_cut_runs_before_the_read_is_accounted() -> None:
    seen: list[tuple[int, int]] = []
    pieces = Pieces(4)
    tally = _pump.Tally(lambda now: seen.append((now, tally.pending)))
    tally.issuing, tally.next_cut_ns = True, 0
    p = _pump.Pump(
        tally, _pump.Stream(pieces.refill, TEXT), pieces.writes.append, TEXT, TEXT_FAMILIES, MAX
    )
    p.issue(1)
    p.received(b"END\r\n")
    assert len(seen) == 1 and seen[0][1] == 0 and tally.pending == 1


# -- hostile bytes (issue "The answer is right", B) ----------------------------------------


def python_outcome(protocol: int, op: Op, wire: bytes) -> tuple[list[int], str | None]:
    """The Python codec's codes for ``wire`` answering one ``op``, and its error, if any."""
    codec: Any = (
        MemcacheTextCodec(CodecOptions()) if protocol == TEXT else RespCodec(CodecOptions())
    )
    key: Any = (b"a", b"b") if op == Op.MGET else b"k"
    codec.encode_many([int(op)], [key], [b"v"], 0, 1, bytearray())
    codes: list[int] = []
    try:
        codec.feed(wire)
        codec.read_kinds(codes)
    except ProtocolError as exc:
        return codes, str(exc)
    return codes, None


@pytest.mark.parametrize(
    "line",
    [
        b"\xff\xfe garbage",
        b"x" * 47 + "\u20ac".encode(),  # a 3-byte character cut at byte 48
        b"x" * 63 + b"\xc3\xa9" + b"tail",  # ... and at byte 64, where the codec cuts
        b"NUL\x00 and \x1b[31m escapes",
    ],
)
def test_error_text_quotes_reply_bytes_escaped_as_the_codec_does(line: bytes) -> None:
    wire = line + b"\r\n"
    _, expected = python_outcome(TEXT, Op.GET, wire)
    assert expected is not None
    codes, consumed, error = _pump.scan_replies(TEXT, TEXT_FAMILIES, bytes([Op.GET]), wire, MAX)
    assert (codes, consumed, error) == ([], 0, expected)
    assert error.isprintable()  # every byte that is not printable ASCII is escaped
    tally, p, _ = pump()
    p.issue(2)
    assert p.received(b"END\r\n" + wire) == 2  # a grammar error, not an exception
    assert p.error == expected and tally.pending == 1


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
    expected_codes, expected_error = python_outcome(RESP, op, reply)
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


UNINITIALIZED = """
from kvbench.engine import _pump
calls = {
    "Pump.issue": lambda: _pump.Pump.__new__(_pump.Pump).issue(1),
    "Pump.received": lambda: _pump.Pump.__new__(_pump.Pump).received(b"END\\r\\n"),
    "Pump.expire": lambda: _pump.Pump.__new__(_pump.Pump).expire(0, 0),
    "Pump.drop": lambda: _pump.Pump.__new__(_pump.Pump).drop(),
    "Pump.oldest_sent_ns": lambda: _pump.Pump.__new__(_pump.Pump).oldest_sent_ns(),
    "Tally.take": lambda: _pump.Tally.__new__(_pump.Tally).take(),
    "Stream.take_completed": lambda: _pump.Stream.__new__(_pump.Stream).take_completed(),
    "Pump(uninitialized Tally)": lambda: _pump.Pump(
        _pump.Tally.__new__(_pump.Tally), _pump.Stream(list, 1), print, 1, b"", 64
    ),
    "Pump(uninitialized Stream)": lambda: _pump.Pump(
        _pump.Tally(), _pump.Stream.__new__(_pump.Stream), print, 1, b"", 64
    ),
}
for name, call in calls.items():
    try:
        call()
    except RuntimeError as exc:
        print(name, "refused:", exc)
    else:
        print(name, "ran")
"""


def test_types_refuse_to_work_before_their_init_ran() -> None:
    """In a child process: before the fix, the first call was a segfault."""
    child = subprocess.run(
        [sys.executable, "-c", UNINITIALIZED], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert len(lines) == 9 and all("refused: " in line for line in lines), lines
    assert "Pump.issue refused: Pump.__init__ was not called" in lines


MEMBER_TYPES = {  # structmember type -> the C declaration it reads and writes
    "T_BOOL": "char",
    "T_INT": "int",
    "T_LONGLONG": "long long",
    "T_PYSSIZET": "Py_ssize_t",
    "T_OBJECT": "PyObject *",
}


def struct_fields(source: str, struct: str) -> dict[str, str]:
    """The fields of ``typedef struct {...} <struct>;`` in C source: name -> declared type."""
    body = re.search(r"typedef struct \{([^{}]*)\} " + struct + ";", source)
    assert body is not None, struct
    code = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S).replace("PyObject_HEAD", "")
    fields = {}
    declarator = r"\s*(\**)\s*(\w+)\s*(?:\[\w*\])?\s*"
    for statement in filter(str.strip, code.split(";")):
        # "long long a, b" / "PyObject *ops, *keys" / "unsigned char family[MAX_OPS]"
        first, *more = statement.split(",")
        head = re.fullmatch(r"\s*(.*?)" + declarator, first, re.S)
        assert head is not None, statement
        base, *named = head.groups()
        for stars, name in [named, *(re.findall(declarator, d)[0] for d in more)]:
            fields[name] = f"{base} {stars}" if stars else base
    return fields


def test_every_member_describes_the_c_type_of_its_field() -> None:
    """A T_BOOL over an int reads and writes one byte of it (the wrong one on big-endian)."""
    source = (Path(fastpath.__file__).parent / "_pump.c").read_text()
    members = re.findall(r"\{\"\w+\", (T_\w+), offsetof\((\w+), (\w+)\)", source)
    assert len(members) >= 8
    for member_type, struct, field in members:
        declared = struct_fields(source, struct)[field]
        assert declared == MEMBER_TYPES[member_type], (struct, field, declared)


def test_issuing_is_a_bool_that_round_trips() -> None:
    tally = _pump.Tally()
    assert tally.issuing is False
    tally.issuing = True
    assert tally.issuing is True
    with pytest.raises(TypeError):
        tally.issuing = 1


def test_requests_taken_before_a_failed_refill_are_sent_not_lost() -> None:
    """A refill that raises mid-batch: what was taken goes out, then the error is raised."""
    pieces = Pieces(3)
    served = 0

    def refill() -> tuple[list[int], list[bytes], list[None], int]:
        nonlocal served
        served += 1
        if served == 2:
            raise MemoryError("the workload could not draw its next chunk")
        return pieces.refill()

    tally = _pump.Tally()
    tally.issuing, tally.budget = True, 10
    stream = _pump.Stream(refill, TEXT)
    p = _pump.Pump(tally, stream, pieces.writes.append, TEXT, TEXT_FAMILIES, MAX)
    with pytest.raises(MemoryError, match="next chunk"):
        p.issue(5)
    assert pieces.writes == [b"get k0\r\nget k1\r\nget k2\r\n"]
    assert p.inflight == 3 and tally.budget == 7 and stream.pos == 3
    assert tally.bytes_out == len(pieces.writes[0])
    # the next issue goes on from the next chunk; the replies of all are accounted
    assert p.received(b"END\r\n" * 3) == 0
    assert pieces.writes[1] == b"get k3\r\nget k4\r\nget k5\r\n"
    assert tally.pending == 3 and p.inflight == 3


def test_an_encoding_failure_mid_batch_sends_what_was_encoded_first() -> None:
    ops, names = [int(Op.GET), int(Op.GET), int(Op.NOOP)], [b"a", b"b", b"c"]
    written: list[bytes] = []
    tally = _pump.Tally()
    tally.issuing = True
    stream = _pump.Stream(lambda: (ops, names, [None] * 3, 0), TEXT)
    p = _pump.Pump(tally, stream, written.append, TEXT, TEXT_FAMILIES, MAX)
    with pytest.raises(ValueError, match="no compiled encoding"):
        p.issue(3)
    assert written == [b"get a\r\nget b\r\n"] and p.inflight == 2 and stream.pos == 2
