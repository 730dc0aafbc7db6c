"""The compiled pump against the Python codecs on the same hostile replies (STYLE §6a).

The oracle of the differential test (tests/unit/engine/test_pump_differential.py) and of
the atheris harness (fuzz/fuzz_pump.py): one grammar of the replies each op family may
get (memcached text and RESP2, with the lengths and numbers a hostile server can write),
mutations of them (high bytes, split CRLFs, truncation, garbage), and a comparison of
what the compiled pump and the codec's ``read_kinds`` make of them, read in the same
random pieces. Both must account the same reply codes, and both must stop on a protocol
error or neither (the exceptions are listed in ``disagreement``, each with its reason).

Everything random comes through a ``Draw`` (an integer in a range), so a seeded
``random.Random``, hypothesis and atheris's data provider drive the same grammar.

``require_compiled`` is how a test of the compiled pump says it cannot run here.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pytest

from kvbench.engine import fastpath
from kvbench.errors import ProtocolError
from kvbench.protocols.base import CodecOptions, Op
from kvbench.protocols.memcache_text import MemcacheTextCodec
from kvbench.protocols.resp import RespCodec


def require_compiled(module: bool = False) -> None:
    """Skip, saying why, where the compiled pump is not built or switched off; under
    ``CI=true`` (.ci/run) fail instead: CI builds and tests it (STYLE 6a).

    Args:
        module: called at a test module's top level (skips or fails its collection).
    """
    if fastpath.compiled():
        return
    reason = (
        "the compiled pump (engine/_pump.c) is not built: install a C compiler and the "
        "Python headers (make deps), then reinstall"
        if not fastpath.built()
        else f"{fastpath.PURE_PYTHON_ENV} is set"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI builds and tests the compiled driver, but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=module)


# The ops a compiled run sends, by the families the C scanner checks (engine/fastpath.py).
OPS = (Op.GET, Op.SET, Op.DELETE, Op.INCR, Op.DECR, Op.MGET)
INT64 = 2**63
# Numbers at the edges a server or a fault can write: 18 to 20 digits, the signed and
# unsigned 64-bit limits and one past them, zeros, signs and leading zeros.
EDGE_NUMBERS = (
    b"0",
    b"1",
    b"42",
    b"-1",
    b"00",
    b"007",
    b"-0",
    b"+1",
    b"999999999999999999",  # 18 digits
    b"1000000000000000000",  # 19
    b"%d" % (INT64 - 1),
    b"%d" % INT64,
    b"-%d" % INT64,
    b"-%d" % (INT64 + 1),
    b"%d" % (2**64 - 1),  # memcached's incr limit, 20 digits
    b"%d" % 2**64,
    b"99999999999999999999",
    b"123456789012345678901234567890",
    b"",
    b"1 ",
    b" 1",
)
# Bulk string and array lengths: huge, negative and 19-20 digit ones besides real ones.
EDGE_LENGTHS = (
    b"-1",
    b"-2",
    b"-0",
    b"01",
    b"%d" % (INT64 - 1),
    b"%d" % (INT64 - 3),
    b"-%d" % INT64,
    b"1000000000000000000",
    b"99999999999999999999",
    b"4294967296",
    b"",
    b"x",
)
TEXT_WORDS = (
    b"STORED",
    b"NOT_STORED",
    b"EXISTS",
    b"NOT_FOUND",
    b"DELETED",
    b"TOUCHED",
    b"END",
    b"OK",
    b"VALUE",
)
ERROR_LINES = (b"ERROR", b"CLIENT_ERROR bad data chunk", b"SERVER_ERROR out of memory")


class Draw(Protocol):
    """A source of choices: an integer in ``[lo, hi]``."""

    def __call__(self, lo: int, hi: int) -> int: ...


def seeded(seed: int) -> Draw:
    """A ``Draw`` from a seeded ``random.Random``."""
    return random.Random(seed).randint


def pick(draw: Draw, items: Sequence[Any]) -> Any:
    return items[draw(0, len(items) - 1)]


def some_bytes(draw: Draw, most: int, high: bool = True) -> bytes:
    """Up to ``most`` bytes: printable, or any byte (NUL, CR, LF and high bytes too)."""
    top = 255 if high and draw(0, 1) else 126
    return bytes(draw(32 if top == 126 else 0, top) for _ in range(draw(0, most)))


def key_for(draw: Draw) -> bytes:
    return b"k%d" % draw(0, 99)


# -- the grammar: what each op may get back -------------------------------------------


def text_reply(draw: Draw, op: Op, key: Any) -> bytes:
    """One memcached text reply (protocol.txt) to ``op``, often well formed."""
    choice = draw(0, 19)
    if choice == 0:
        return pick(draw, ERROR_LINES) + some_bytes(draw, 8) * draw(0, 1) + b"\r\n"
    if choice == 1:
        return pick(draw, TEXT_WORDS) + b"\r\n"
    if choice == 2:
        return some_bytes(draw, 12) + b"\r\n"
    if op == Op.GET:
        return value_block(draw, key) + b"END\r\n" if draw(0, 1) else b"END\r\n"
    if op == Op.MGET:
        blocks = b"".join(value_block(draw, k) for k in key if draw(0, 1))
        tail = pick(draw, ERROR_LINES) + b"\r\n" if draw(0, 7) == 0 else b"END\r\n"
        return blocks + tail
    if op == Op.SET:
        return pick(draw, TEXT_WORDS[:4]) + b"\r\n"
    if op == Op.DELETE:
        return pick(draw, (b"DELETED", b"NOT_FOUND")) + b"\r\n"
    # incr/decr: the new value (an unsigned 64-bit number) or NOT_FOUND
    if draw(0, 3) == 0:
        return b"NOT_FOUND\r\n"
    number = pick(draw, EDGE_NUMBERS) if draw(0, 1) else b"%d" % draw(0, 2**64 - 1)
    return number + b"\r\n"


def value_block(draw: Draw, key: bytes) -> bytes:
    """``VALUE <key> <flags> <bytes> [<cas>]\\r\\n<data>\\r\\n``, sometimes lying."""
    data = some_bytes(draw, 24)
    size = b"%d" % len(data)
    if draw(0, 5) == 0:
        size = pick(draw, (*EDGE_LENGTHS, b"%d" % (len(data) + 1), b"%d" % max(0, len(data) - 1)))
    flags = b"%d" % draw(0, 2**32 - 1) if draw(0, 5) else pick(draw, EDGE_NUMBERS)
    cas = b" %d" % draw(0, 2**64 - 1) if draw(0, 2) == 0 else b""
    return b"VALUE %b %b %b%b\r\n%b\r\n" % (key, flags, size, cas, data)


def resp_reply(draw: Draw, op: Op, key: Any) -> bytes:
    """One RESP2 reply to ``op``, often well formed."""
    choice = draw(0, 19)
    if choice == 0:
        return b"-ERR " + some_bytes(draw, 12) + b"\r\n"
    if choice == 1:
        return resp_value(draw, depth=1)
    if choice == 2:
        return some_bytes(draw, 12) + b"\r\n"
    if op == Op.GET:
        return pick(draw, (bulk(draw), b"$-1\r\n", b"*-1\r\n", b"_\r\n", b"+x\r\n"))
    if op == Op.SET:  # OK as a status or a bulk string; a null (SET NX/XX); near misses
        return pick(
            draw,
            (b"+OK\r\n", b"$2\r\nOK\r\n", b"$-1\r\n", b"+OKAY\r\n", b"$3\r\nOK!\r\n", b"+ok\r\n"),
        )
    if op == Op.MGET:  # bulk strings, nulls (as $-1, *-1 or _), and elements no MGET has
        elements = (b"$-1\r\n", b"*-1\r\n", b"_\r\n", b"+v\r\n", b":1\r\n", b"*1\r\n+v\r\n")
        items = [
            bulk(draw) if draw(0, 1) else pick(draw, elements[: 4 + 2 * (draw(0, 7) == 0)])
            for _ in key
        ]
        count = b"%d" % len(items) if draw(0, 5) else pick(draw, EDGE_LENGTHS)
        return b"*%b\r\n" % count + b"".join(items)
    if op == Op.DELETE:
        return b":%d\r\n" % draw(0, 3)
    number = pick(draw, EDGE_NUMBERS) if draw(0, 1) else b"%d" % draw(-INT64, INT64 - 1)
    return b":" + number + b"\r\n"


def bulk(draw: Draw) -> bytes:
    """A bulk string, sometimes with a length that lies, is huge or is negative."""
    data = some_bytes(draw, 24)
    length = b"%d" % len(data)
    if draw(0, 5) == 0:
        length = pick(draw, (*EDGE_LENGTHS, b"%d" % (len(data) + 1), b"%d" % max(0, len(data) - 1)))
    return b"$%b\r\n%b\r\n" % (length, data)


def resp_value(draw: Draw, depth: int) -> bytes:
    """Any RESP2 value, arrays nested up to ``depth``."""
    kind = draw(0, 5 if depth else 4)
    if kind == 0:
        return b"+" + some_bytes(draw, 8, high=False).replace(b"\r", b"") + b"\r\n"
    if kind == 1:
        return b"-ERR\r\n"
    if kind == 2:
        return b":" + pick(draw, EDGE_NUMBERS) + b"\r\n"
    if kind == 3:
        return bulk(draw)
    if kind == 4:
        return b"$-1\r\n"
    items = [resp_value(draw, depth - 1) for _ in range(draw(0, 3))]
    return b"*%d\r\n" % len(items) + b"".join(items)


# -- mutations -------------------------------------------------------------------------


def mutate(draw: Draw, wire: bytes) -> bytes:
    """``wire`` with a few faults: high bytes, CRLFs split or broken, cuts, garbage."""
    for _ in range(draw(0, 3)):
        if not wire:
            return some_bytes(draw, 16)
        at = draw(0, len(wire) - 1)
        fault = draw(0, 7)
        if fault == 0:  # a high byte
            wire = wire[:at] + bytes([draw(128, 255)]) + wire[at + 1 :]
        elif fault == 1:  # garbage inserted
            wire = wire[:at] + some_bytes(draw, 6) + wire[at:]
        elif fault == 2:  # a range lost
            wire = wire[:at] + wire[at + draw(1, 8) :]
        elif fault == 3:  # the stream cut short
            wire = wire[:at]
        elif fault == 4:  # a CRLF split by a byte, or half of it lost
            crlf = wire.find(b"\r\n", at)
            if crlf >= 0:
                middle = pick(draw, (b"", b"\r", b"\n", b" ", bytes([draw(0, 255)])))
                wire = wire[: crlf + 1] + middle + wire[crlf + 1 + draw(0, 1) :]
        elif fault == 5:  # a digit more in a number
            wire = wire[:at] + bytes([draw(48, 57)]) + wire[at:]
        elif fault == 6:  # a reply repeated
            wire = wire[:at] + wire[at : at + draw(1, 40)] * 2 + wire[at + 40 :]
        else:  # a lone CR or LF
            wire = wire[:at] + pick(draw, (b"\r", b"\n")) + wire[at:]
    return wire


# -- one exchange ----------------------------------------------------------------------


@dataclass
class Exchange:
    """Requests, the server's reply bytes, where the reads end, and the reply bound."""

    protocol: str  # "memcache-text" or "resp2"
    ops: list[int]
    keys: list[Any]
    wire: bytes
    cuts: list[int]
    max_reply: int

    @property
    def values(self) -> list[Any]:
        return [b"vvv" if op == Op.SET else None for op in self.ops]


def exchange(draw: Draw, protocol: str | None = None) -> Exchange:
    """A random exchange: up to 8 requests, their replies (mutated, replaced by random
    bytes, or as the grammar wrote them), read in pieces."""
    if protocol is None:
        protocol = pick(draw, ("memcache-text", "resp2"))
    ops = [pick(draw, OPS) for _ in range(draw(1, 8))]
    keys = [
        tuple(key_for(draw) for _ in range(draw(1, 4))) if op == Op.MGET else key_for(draw)
        for op in ops
    ]
    reply = text_reply if protocol == "memcache-text" else resp_reply
    wire = b"".join(reply(draw, Op(op), key) for op, key in zip(ops, keys, strict=True))
    if draw(0, 19) == 0:  # no grammar at all
        wire = some_bytes(draw, 64)
    elif draw(0, 3):
        wire = mutate(draw, wire)
    cuts = sorted({draw(1, max(1, len(wire) - 1)) for _ in range(draw(0, 5))} - {len(wire)})
    max_reply = pick(draw, (CodecOptions().max_reply_bytes, 64, 200))
    return Exchange(protocol, [int(op) for op in ops], keys, wire, cuts, max_reply)


def pieces(ex: Exchange) -> list[bytes]:
    return [ex.wire[a:b] for a, b in zip([0, *ex.cuts], [*ex.cuts, len(ex.wire)], strict=True)]


@dataclass
class Outcome:
    """What a driver made of an exchange: the requests it wrote, the codes it accounted
    (``kind | keys << KEYS_SHIFT``, in reply order) and the protocol error, if any."""

    requests: bytes
    codes: list[int]
    error: str | None


def python_outcome(ex: Exchange) -> Outcome:
    """The codec's ``encode_many`` and ``read_kinds``, fed the pieces (the Python driver)."""
    options = CodecOptions(max_reply_bytes=ex.max_reply)
    codec: Any = (
        MemcacheTextCodec(options) if ex.protocol == "memcache-text" else RespCodec(options)
    )
    requests = bytearray()
    codec.encode_many(ex.ops, ex.keys, ex.values, 0, len(ex.ops), requests)
    codes: list[int] = []
    try:
        for piece in pieces(ex):
            codec.feed(piece)
            codec.read_kinds(codes)
    except ProtocolError as exc:
        return Outcome(bytes(requests), codes, str(exc))
    return Outcome(bytes(requests), codes, None)


def pump_outcome(ex: Exchange) -> Outcome:
    """A compiled pump's, sending the requests and then fed the pieces (the compiled driver).

    Also checks what holds for the pump alone: one write for the requests, the ops
    accounted are those sent, in order, and an error is a printable ``str``.
    """
    from kvbench.engine import _pump  # type: ignore[attr-defined]

    number, families = fastpath.PROTOCOLS[ex.protocol]
    tally = _pump.Tally()
    tally.issuing, tally.budget = True, len(ex.ops)  # exactly these requests, no more
    chunk = (ex.ops, ex.keys, ex.values, 0)
    written: list[bytes] = []
    pump = _pump.Pump(
        tally, _pump.Stream(lambda: chunk, number), written.append, number, families, ex.max_reply
    )
    pump.issue(len(ex.ops))
    assert len(written) == 1, written
    for piece in pieces(ex):
        status = pump.received(piece)
        assert status in (0, 1, 2), status
        if status == 2:  # the pump is done: the connection closes and reopens
            break
    ops, codes, _ = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert ops == ex.ops[: len(ops)], (ops, ex.ops)
    error = pump.error
    assert error is None or (isinstance(error, str) and error.isprintable()), repr(error)
    return Outcome(written[0], codes, error)


# Where the two drivers may part, each for a reason (the oracle's exceptions). The codes
# both accounted always agree; these are the ways one may stop while the other goes on.
#
# RESP2 (the codec's parser is hiredis):
# - the scanner refuses a reply at its head where the codec waits for the rest: an array
#   header answering a request no array answers, a non-bulk MGET element, bytes with no
#   request pending, a declared length past the reply bound. Equal codes, the codec
#   without an error yet (it refuses the same reply once it is complete or the bound is
#   crossed; or it stays incomplete and the request times out).
# - hiredis reads past what RESP2 allows, so the codec may count replies the scanner
#   refused: hiredis does not check the CRLF after a bulk string's data; it parses the
#   RESP3-only types ("(" "=" "~" "|" "#" "," "%" ">") on a RESP2 connection, some as
#   bulk strings or arrays; and its reply bound counts the bytes of one read without a
#   complete reply (resp.py), so a reply past the bound that arrives in one read passes.
#   The codec's codes then run on past the scanner's.
#
# memcached text: the scanner keeps no keys in flight, so it cannot tell a VALUE for a key
# that was not asked for; the codec refuses it, the scanner may count it and run on.
RESP_WAITS = (
    "cannot answer",
    "a reply arrived with no request pending",
    "an MGET element is not a bulk string or null",
)
RESP_RUNS_ON = (
    "bulk string not followed by CRLF",
    "unknown reply type",
    "larger than the reply bound",
)


def disagreement(ex: Exchange, py: Outcome, c: Outcome) -> str | None:
    """None when the two outcomes agree, else how they differ."""
    if py.requests != c.requests:
        return f"requests differ: python {py.requests!r}, compiled {c.requests!r}"
    if py.codes == c.codes and (py.error is None) == (c.error is None):
        return None
    if excused(ex.protocol, py, c):
        return None
    return f"python {py}, compiled {c}"


def excused(protocol: str, py: Outcome, c: Outcome) -> bool:
    """The outcomes part in one of the ways listed above."""
    shared = min(len(py.codes), len(c.codes))
    if py.codes[:shared] != c.codes[:shared]:
        return False
    if protocol == "memcache-text":
        keys = py.error is not None and py.error.startswith("VALUE for")
        return keys and len(c.codes) >= len(py.codes)
    if c.error is None:
        return False
    if any(reason in c.error for reason in RESP_RUNS_ON):
        return len(py.codes) >= len(c.codes)
    waits = any(reason in c.error for reason in RESP_WAITS)
    return waits and py.codes == c.codes and py.error is None


def check(ex: Exchange) -> None:
    """Assert that the pump and the codec agree on ``ex`` (the oracle)."""
    py, c = python_outcome(ex), pump_outcome(ex)
    problem = disagreement(ex, py, c)
    assert problem is None, f"{problem}\n{ex}"
