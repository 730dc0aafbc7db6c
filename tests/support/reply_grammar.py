"""What a hostile server may answer each request with: a grammar per protocol.

The replies the differential test of the compiled pump (tests/support/pump_oracle.py,
tests/unit/engine/test_pump.py, fuzz/fuzz_pump.py) feeds to it and to the Python codecs:
for every op family, well-formed replies of every kind, near misses, and the lengths,
numbers and headers a hostile server can write (huge and negative lengths, 18-20 digit
numbers, wrong magic, opcodes and opaques, tokens with high bytes; HTTP status lines,
fields, Content-Length lists, chunk sizes and trailers, interim responses and announced
closes), then mutations of the byte stream (high bytes, split CRLFs, truncation, garbage).

Everything random comes through a ``Draw`` (an integer in a range), so a seeded
``random.Random``, hypothesis and atheris's data provider drive the same grammar.
Requests are numbered as the codecs number them (binary opaques and meta tokens from 0),
so a reply can carry the opaque its request was sent with, or another.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kvbench.protocols.base import Op
from kvbench.workload.mix import RMW_CODE

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
# The memcached text storage commands (a replay's besides set): answered as a set is.
TEXT_STORES = (Op.SET, Op.ADD, Op.REPLACE, Op.APPEND, Op.PREPEND, Op.CAS)


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
    if op == Op.COMMAND:  # any command's reply: its first line says its frame
        return text_command_reply(draw)
    if op in (Op.GET, Op.GETS):  # a gets hit's VALUE line has a cas field (value_block)
        return value_block(draw, key) + b"END\r\n" if draw(0, 1) else b"END\r\n"
    if op == Op.MGET:
        blocks = b"".join(value_block(draw, k) for k in key if draw(0, 1))
        tail = pick(draw, ERROR_LINES) + b"\r\n" if draw(0, 7) == 0 else b"END\r\n"
        return blocks + tail
    if op in TEXT_STORES:
        return pick(draw, TEXT_WORDS[:4]) + b"\r\n"
    if op == Op.DELETE:
        return pick(draw, (b"DELETED", b"NOT_FOUND")) + b"\r\n"
    # incr/decr: the new value (an unsigned 64-bit number) or NOT_FOUND
    if draw(0, 3) == 0:
        return b"NOT_FOUND\r\n"
    number = pick(draw, EDGE_NUMBERS) if draw(0, 1) else b"%d" % draw(0, 2**64 - 1)
    return number + b"\r\n"


# One-line replies to arbitrary commands: the classic and meta statuses, numbers, VERSION,
# a meta debug line, and lines no listing starts with.
COMMAND_LINES = (
    b"STORED", b"TOUCHED", b"DELETED", b"HD", b"EN", b"NF", b"NS", b"EX", b"MN", b"OK",
    b"END", b"42", b"VERSION 1.6.21", b"ME k exp=-1 la=3 cas=7 fetch=no cls=1 size=63",
    b"VA", b"VALUE", b"STAT", b"ITEMS", b"",
)  # fmt: skip


def text_command_reply(draw: Draw) -> bytes:
    """A reply to an arbitrary memcached text command (protocol.txt "Commands"): a line;
    VALUE blocks then END; a meta VA line and its block; STAT or ITEM lines then END;
    with the ends a server or a fault may write instead (an error line part way, a line
    no listing ends with, lying sizes)."""
    kind = draw(0, 4)
    if kind == 0:
        return pick(draw, COMMAND_LINES) + b"\r\n"
    end = pick(draw, (b"END", b"END", b"END", *ERROR_LINES, b"STORED", b"")) + b"\r\n"
    if kind == 1:
        return b"".join(value_block(draw, b"k%d" % i) for i in range(draw(1, 3))) + end
    if kind == 2:
        data = some_bytes(draw, 16)
        size = b"%d" % len(data)
        if draw(0, 5) == 0:
            size = pick(draw, (*EDGE_LENGTHS, b"%d" % (len(data) + 1), b"x", b"1" * 19))
        flags = pick(draw, (b"", b" f30 t-1", b" c7", b"  s3"))
        return b"VA %b%b\r\n%b\r\n" % (size, flags, data)
    if kind == 3:
        lines = [b"STAT %b %d\r\n" % (pick(draw, (b"pid", b"uptime")), draw(0, 99))]
        return b"".join(lines * draw(1, 3)) + end
    return b"ITEM k%d [%d b; 0 s]\r\n" % (draw(0, 9), draw(1, 99)) + end


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
    if op == Op.COMMAND:  # any value, RESP3's types too (hiredis reads them on either)
        return any_value(draw, depth=draw(0, 3))
    if op == Op.GET:
        return pick(draw, (bulk(draw), b"$-1\r\n", b"*-1\r\n", b"_\r\n", b"+x\r\n"))
    if op in (Op.SET, Op.ADD, Op.REPLACE):  # OK, status or bulk; a null (NX/XX); near misses
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
    # incr/decr: the new value; append: the value's new length
    number = pick(draw, EDGE_NUMBERS) if draw(0, 1) else b"%d" % draw(-INT64, INT64 - 1)
    return b":" + number + b"\r\n"


def resp3_reply(draw: Draw, op: Op, key: Any) -> bytes:
    """One RESP3 reply to ``op``, now and then after push messages (which answer no
    request); a null is RESP3's ``_`` more often than RESP2's forms."""
    pushes = b"".join(push_message(draw) for _ in range(draw(0, 2) if draw(0, 3) == 0 else 0))
    reply = resp_reply(draw, op, key)
    if draw(0, 1):
        reply = reply.replace(b"$-1\r\n", b"_\r\n").replace(b"*-1\r\n", b"_\r\n")
    return pushes + reply


def push_message(draw: Draw) -> bytes:
    """A push message, as Redis sends them (client tracking's invalidations, pub/sub
    messages) or holding any RESP2 value."""
    kind = draw(0, 3)
    if kind == 0:  # a key invalidated, or (a flush) all of them: a null
        keys = b"*1\r\n" + bulk(draw) if draw(0, 3) else b"_\r\n"
        return b">2\r\n$10\r\ninvalidate\r\n" + keys
    if kind == 1:
        return b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n" + bulk(draw)
    if kind == 2:
        return b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:%d\r\n" % draw(0, 9)
    items = [resp_value(draw, depth=1) for _ in range(draw(0, 3))]
    return b">%d\r\n" % len(items) + b"".join(items)


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


# A double's text (RESP3 ","): hiredis's words in any case, numbers of every form strtod
# reads and some it refuses, overflow, underflow, subnormals, and what no double is.
DOUBLE_TEXTS = (
    b"1.5", b"-0.25", b"0", b"-0", b"1e5", b"1E-3", b"1e+2", b".5", b"-.5", b"1.", b"00",
    b"inf", b"-inf", b"INF", b"-Inf", b"nan", b"-nan", b"NaN", b"+inf", b"infinity",
    b"1e308", b"1.7976931348623159e308", b"1e400", b"-1e400", b"1e-310", b"2.5e-324",
    b"1e-324", b"0e-400", b"0.000e999", b"1" * 400, b"+1", b"", b".", b"-", b"e5", b"1e",
    b"1.5.5", b"0x10", b"1_0", b" 1", b"1 ", b"abc",
)  # fmt: skip
DOUBLE_CHARS = b"0123456789.-+eEinfaN "


def any_value(draw: Draw, depth: int) -> bytes:
    """Any value hiredis reads (an arbitrary command's reply): RESP2's, RESP3's null,
    double, boolean, big number, verbatim string, map, set and push, aggregates nested up
    to ``depth``, with their near misses: now and then an attribute ("|": hiredis returns
    it as a reply of its own), a blob error ("!", which hiredis refuses), a map key that
    is an aggregate (which hiredis-py cannot hash), null aggregates."""
    kind = draw(0, 16 if depth else 11)
    if kind <= 4:
        return resp_value(draw, 0)
    if kind == 5:
        return b"_\r\n" if draw(0, 7) else b"_" + some_bytes(draw, 2) + b"\r\n"
    if kind == 6:
        text = pick(draw, DOUBLE_TEXTS)
        if draw(0, 2) == 0:
            text = bytes(pick(draw, DOUBLE_CHARS) for _ in range(draw(0, 6)))
        return b"," + text + b"\r\n"
    if kind == 7:
        return b"#" + pick(draw, (b"t", b"f", b"T", b"F", b"x", b"tt", b"")) + b"\r\n"
    if kind == 8:
        digits = pick(draw, (b"%d" % draw(-(10**30), 10**30), b"", b"-", b"--1", b"+1", b"1a"))
        return b"(" + digits + b"\r\n"
    if kind == 9:  # a verbatim string: "txt:" and the text, or a format cut or missing
        data = pick(draw, (b"txt:", b"mkd:", b"", b"tx:", b"txtx")) + some_bytes(draw, 12)
        length = b"%d" % len(data) if draw(0, 5) else pick(draw, EDGE_LENGTHS)
        return b"=%b\r\n%b\r\n" % (length, data)
    if kind == 10:  # null aggregates, and bad lengths
        return (
            pick(draw, (b"*", b"%", b"~", b">", b"=")) + pick(draw, (b"-1", b"-2", b"x")) + b"\r\n"
        )
    if kind == 11:
        return (
            pick(draw, (b"!5\r\nERR x\r\n", b"|1\r\n+a\r\n:1\r\n"))
            if draw(0, 3) == 0
            else bulk(draw)
        )
    items = [any_value(draw, depth - 1) for _ in range(draw(0, 3))]
    if kind == 12:  # a map: pairs, now and then an aggregate as a key
        if len(items) % 2:
            items.append(any_value(draw, 0))
        return b"%%%d\r\n" % (len(items) // 2) + b"".join(items)
    head = pick(draw, (b"*", b"~", b">", b"*"))
    if kind == 13 and draw(0, 3) == 0:  # an attribute before the value it describes
        return b"|1\r\n+key\r\n:1\r\n" + head + b"%d\r\n" % len(items) + b"".join(items)
    return head + b"%d\r\n" % len(items) + b"".join(items)


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


# -- memcached binary (protocol-binary.xml) ------------------------------------------------

# magic, opcode, key length, extras length, data type, status, total body, opaque, cas
HEADER = struct.Struct(">BBHBBHIIQ")
MASK = 0xFFFFFFFF
# The opcode answering each op (a multi-get's reply ends with its noop's response).
BINARY_OPCODES = {
    Op.GET: 0x00,
    Op.SET: 0x01,
    Op.DELETE: 0x04,
    Op.INCR: 0x05,
    Op.DECR: 0x06,
    Op.MGET: 0x0A,
    Op.GETS: 0x00,
    Op.ADD: 0x02,
    Op.REPLACE: 0x03,
    Op.APPEND: 0x0E,
    Op.PREPEND: 0x0F,
}
GETKQ, SETQ, NOOP = 0x0D, 0x11, 0x0A
# Statuses besides OK (0): not found, exists, not stored, non-numeric, unknown command,
# out of memory, and one no server sends.
BINARY_STATUSES = (0x0001, 0x0002, 0x0005, 0x0006, 0x0081, 0x0082, 0xBEEF)
# Body lengths a header may declare beyond its body: huge, past 2**31, past the bounds.
EDGE_BODIES = (MASK, 2**31, 2**31 - 1, 2**24, 65, 201, 4096, 0)


def packet(
    opcode: int,
    opaque: int,
    status: int = 0,
    key: bytes = b"",
    extras: bytes = b"",
    value: bytes = b"",
    magic: int = 0x81,
    body: int | None = None,
) -> bytes:
    """A response packet; ``body`` declares a total body length other than the real one."""
    size = len(key) + len(extras) + len(value) if body is None else body
    fields = (magic, opcode, len(key), len(extras), 0, status, size, opaque & MASK, 0)
    return HEADER.pack(*fields) + extras + key + value


def binary_reply(draw: Draw, op: Op, key: Any, opaque: int) -> bytes:
    """One binary reply to ``op`` sent with ``opaque`` (a multi-get: its getkq's from
    there, its noop's after them), often well formed."""
    tag = opaque + len(key) if op == Op.MGET else opaque
    opcode = BINARY_OPCODES[op]
    choice = draw(0, 19)
    if choice == 0:  # an error status with its text
        return packet(opcode, tag, pick(draw, BINARY_STATUSES), value=some_bytes(draw, 12))
    if choice == 1:
        return hostile_packet(draw, opcode, tag)
    if choice == 2:
        return some_bytes(draw, 40)
    if choice == 3:  # a quiet op's failure or a stray getkq first, in range or not
        stray = packet(pick(draw, (SETQ, GETKQ, 0x14, 0x1A, 0x00)), tag - draw(0, 2), 5)
        return stray + binary_reply(draw, op, key, opaque)
    if op in (Op.GET, Op.GETS):
        if draw(0, 1):
            extras = b"\0\0\0\7" if draw(0, 5) else pick(draw, (b"", b"12345678"))
            return packet(opcode, tag, 0, extras=extras, value=some_bytes(draw, 24))
        return packet(opcode, tag, 1, value=b"Not found")
    if op in TEXT_STORES:  # (add: exists, replace: not found are not stored)
        return packet(opcode, tag, pick(draw, (0, 0, 5, 2, 1)))
    if op == Op.DELETE:
        return packet(opcode, tag, pick(draw, (0, 1, 2)))
    if op in (Op.INCR, Op.DECR):
        if draw(0, 3) == 0:
            return packet(opcode, tag, 1, value=b"Not found")
        size = 8 if draw(0, 5) else pick(draw, (0, 4, 9))
        value = draw(0, 2**64 - 1).to_bytes(8, "big")[:size].rjust(size, b"\0")
        return packet(opcode, tag, 0, value=value)
    return binary_mget(draw, key, opaque)


def binary_mget(draw: Draw, keys: Sequence[bytes], opaque: int) -> bytes:
    """getkq responses for some keys (hits; now and then a miss, an error, or an opaque out
    of order), then the noop's response."""
    wire = b""
    for i, key in enumerate(keys):
        if draw(0, 1):
            continue
        o = opaque + i if draw(0, 9) else opaque + pick(draw, (-1, len(keys), len(keys) + 1, i))
        status = 0 if draw(0, 7) else pick(draw, (1, 0x82))
        wire += packet(GETKQ, o, status, key=key, extras=b"\0\0\0\0", value=some_bytes(draw, 16))
    status = 0 if draw(0, 7) else pick(draw, BINARY_STATUSES)
    return wire + packet(NOOP, opaque + len(keys), status)


def hostile_packet(draw: Draw, opcode: int, tag: int) -> bytes:
    """A packet that breaks the framing or the matching: magic, body length, key and
    extras lengths, opcode, opaque."""
    fault = draw(0, 5)
    if fault == 0:
        return packet(opcode, tag, magic=pick(draw, (0x80, 0x00, 0xFF, draw(0, 255))))
    if fault == 1:
        return packet(opcode, tag, value=some_bytes(draw, 8), body=pick(draw, EDGE_BODIES))
    if fault == 2:  # key and extras longer than the body
        header = HEADER.pack(0x81, opcode, draw(0, 65535), draw(0, 255), 0, 0, draw(0, 8), tag, 0)
        return header + b"\0" * 8
    if fault == 3:
        return packet(pick(draw, (draw(0, 255), GETKQ, NOOP, SETQ)), tag)
    if fault == 4:
        return packet(opcode, pick(draw, (tag + 1, tag - 1, MASK, draw(0, MASK))))
    return packet(opcode, tag)[: draw(1, 23)]  # a header cut short


# -- memcached meta ("Meta Commands") -------------------------------------------------------

# Value sizes: 18 to 20 digits (huge, and zero-padded small ones), signs, empty, not digits.
EDGE_SIZES = (
    b"999999999999999999",
    b"000000000000000003",  # 18 digits
    b"0000000000000000003",  # 19: the codec's parser refuses it (see pump_oracle)
    b"1000000000000000000",
    b"99999999999999999999",
    b"-1",
    b"+3",
    b"",
    b"x",
    b"03",
)
META_CODES = (b"HD", b"NS", b"EX", b"NF", b"EN", b"MN", b"VA", b"hd", b"H", b"XYZ")
META_ERRORS = (b"ERROR", b"CLIENT_ERROR bad command line format", b"SERVER_ERROR out of memory")


def meta_token(draw: Draw, token: int) -> bytes:
    """`` O<token>``, or now and then another, none, one with high bytes or leading zeros."""
    choice = draw(0, 23)
    if choice == 0:
        return b""
    if choice == 1:
        return b" O%d" % ((token + pick(draw, (1, -1, 2**32))) & MASK)
    if choice == 2:
        return b" O" + pick(draw, (b"%d\xff" % token, b"\x80%d" % token, b"0%d" % token, b""))
    return b" O%d" % (token & MASK)


def meta_status(draw: Draw, codes: Sequence[bytes], token: int) -> bytes:
    """A status line: a code (often one of ``codes``), its token, sometimes other flags."""
    code = pick(draw, codes) if draw(0, 5) else pick(draw, META_CODES)
    flags = b"" if draw(0, 7) else pick(draw, (b" k", b" b  ", b" f0", b" O", b" "))
    return code + meta_token(draw, token) + flags + b"\r\n"


def meta_value(draw: Draw, token: int, data: bytes | None = None) -> bytes:
    """``VA <size> [flags] O<t>\\r\\n<data>\\r\\n``, sometimes lying about its size."""
    data = some_bytes(draw, 24) if data is None else data
    size = b"%d" % len(data)
    if draw(0, 7) == 0:
        size = pick(draw, (*EDGE_SIZES, b"%d" % (len(data) + 1), b"%d" % max(0, len(data) - 1)))
    flags = b"" if draw(0, 7) else pick(draw, (b" f0", b" t-1 s3", b" "))
    return b"VA %b%b%b\r\n%b\r\n" % (size, flags, meta_token(draw, token), data)


def meta_reply(draw: Draw, op: Op, key: Any, token: int) -> bytes:
    """One meta reply to ``op`` sent with ``token`` (a multi-get: one token per key from
    there), often well formed."""
    choice = draw(0, 19)
    if choice == 0:
        return pick(draw, META_ERRORS) + b"\r\n"
    if choice == 1:
        return some_bytes(draw, 12) + b"\r\n"
    if op in (Op.GET, Op.GETS):  # (gets: the c flag's value among the VA line's flags)
        if draw(0, 1):
            return meta_value(draw, token)
        return meta_status(draw, (b"EN",), token)
    if op in TEXT_STORES:
        return meta_status(draw, (b"HD", b"NS", b"EX", b"NF"), token)
    if op == Op.DELETE:
        return meta_status(draw, (b"HD", b"NF", b"EX"), token)
    if op in (Op.INCR, Op.DECR):
        if draw(0, 2):
            return meta_value(draw, token, pick(draw, EDGE_NUMBERS))
        return meta_status(draw, (b"NF", b"NS", b"EX"), token)
    return meta_mget(draw, key, token)


def meta_mget(draw: Draw, keys: Sequence[bytes], token: int) -> bytes:
    """``VA`` blocks for some keys (now and then out of order, a stray status or an error
    line), then ``MN``."""
    wire = b""
    for i in range(len(keys)):
        if draw(0, 1):
            continue
        t = token + i if draw(0, 9) else token + pick(draw, (-1, len(keys), 0))
        data = some_bytes(draw, 16)
        fault = draw(0, 11)
        if fault == 0:
            wire += pick(draw, META_ERRORS) + b"\r\n"
        elif fault == 1:
            wire += meta_status(draw, (b"EN",), t)
        elif fault == 2:
            wire += meta_value(draw, t, data)  # flags, lies and tokens the grammar refuses
        else:
            wire += b"VA %d O%d\r\n%b\r\n" % (len(data), t & MASK, data)
    return wire + (b"MN\r\n" if draw(0, 9) else pick(draw, (b"MN O1\r\n", b"EN\r\n", b"")))


# -- HTTP to a memc gateway (RFC 9112; memc's README for what each command gets) --------

# What memc answers each op with (status, body), then statuses any request may get: a
# gateway's errors, ones no request expects, and ones that never carry a body.
HTTP_ANSWERS: dict[str, tuple[tuple[int, bytes], ...]] = {
    "get": ((200, b"vvv"), (200, b""), (404, b"<html>404 Not Found</html>")),
    "store": ((201, b"STORED\r\n"), (200, b"NOT_STORED\r\n"), (200, b"STORED"), (404, b"")),
    "delete": ((200, b"DELETED\r\n"), (404, b"NOT_FOUND\r\n")),
    "counter": ((200, b"43\r\n"), (201, b"1"), (404, b"")),
}
HTTP_ANY = (
    (502, b"Bad Gateway"),
    (504, b""),
    (500, b"x"),
    (414, b""),
    (204, b""),
    (304, b""),
    (301, b"moved"),
    (101, b""),
    (100, b""),
    (999, b""),
    (99, b""),
)
HTTP_OP_ANSWERS = {
    Op.GET: "get",
    Op.DELETE: "delete",
    Op.INCR: "counter",
    Op.DECR: "counter",
    **{op: "store" for op in TEXT_STORES},
}
HTTP_CONNECTION = (b"close", b"keep-alive", b"Keep-Alive, Upgrade", b" CLOSE ", b"x, close")
HTTP_LENGTHS = (b"-1", b"abc", b"", b"1000000000000000000", b"99999999999999999999", b"+3")


def http_name(draw: Draw, name: bytes) -> bytes:
    """A field name as a server may case it."""
    return pick(draw, (name, name.lower(), name.upper()))


def http_chunked(draw: Draw, body: bytes) -> bytes:
    """``body`` in chunks (hex sizes of any case and width, extensions, a trailer), or a
    near miss (a size that lies, a chunk without its CRLF, a bad size line)."""
    out = b""
    while body:
        size = draw(1, len(body))
        digits = pick(draw, (b"%x" % size, b"%X" % size, b"%04x" % size))
        ext = pick(draw, (b"", b"", b";a=1", b" ;x", b"\t"))
        out += digits + ext + b"\r\n" + body[:size] + b"\r\n"
        body = body[size:]
    out += pick(draw, (b"0\r\n", b"000;end\r\n"))
    out += pick(draw, (b"", b"", b"X-Trailer: 1\r\n", b"bad trailer\r\n"))
    out += b"\r\n"
    fault = draw(0, 11)
    if fault == 0:
        out = b"1" * draw(16, 18) + b"\r\n" + out  # more hex digits than 64 bits hold
    elif fault == 1:
        out = b"zz\r\n" + out
    elif fault == 2:
        out = out.replace(b"\r\n", b"\rX", 1)
    return out


def http_reply(draw: Draw, op: Op, key: Any, opaque: int) -> bytes:
    """A response to a memc request: memc's own answers, a gateway's errors, interim
    responses before, every framing (Content-Length, chunked, both, none: close-delimited),
    HTTP/1.0, Connection fields, and broken status lines, fields and lengths."""
    wire = b""
    if draw(0, 15) == 0:  # an interim response first
        wire += pick(
            draw, (b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Hints\r\nLink: x\r\n\r\n")
        )
    answers = HTTP_ANSWERS[HTTP_OP_ANSWERS[op]]
    status, body = pick(draw, answers) if draw(0, 7) else pick(draw, HTTP_ANY)
    version = b"1.0" if draw(0, 19) == 0 else b"1.1"  # (1.0 closes without keep-alive)
    reason = pick(draw, (b" OK", b" Created", b"", b" ", b" Not Found"))
    line = b"HTTP/%b %d%b\r\n" % (version, status, reason)
    if draw(0, 29) == 0:
        line = pick(
            draw,
            (
                b"HTTP/2 200\r\n",
                b"HTTP/1.1 20\r\n",
                b"HTTP/1.1 200OK\r\n",
                b"HTTPS/1.1 200\r\n",
                b"HTTP/1.1 2000\r\n",
            ),
        )
    fields = [b"Server: nginx/1.22.1", b"Date: Sat, 05 Dec 2026 04:00:00 GMT"]
    framing = draw(0, 29)
    if framing < 13:  # Content-Length, as nginx sends it
        fields.append(http_name(draw, b"Content-Length") + b": %d" % len(body))
    elif framing < 16:
        fields.append(http_name(draw, b"Transfer-Encoding") + b": chunked")
        body = http_chunked(draw, body)
    elif framing == 16:  # both: Transfer-Encoding wins
        fields += [b"Content-Length: 3", b"Transfer-Encoding: gzip, chunked"]
        body = http_chunked(draw, body)
    elif framing == 17:  # a list of lengths, equal or not, or a bad one
        fields.append(
            pick(
                draw,
                (
                    b"Content-Length: %d, %d" % (len(body), len(body)),
                    b"Content-Length: %d\r\nContent-Length: 1" % len(body),
                    b"Content-Length: " + pick(draw, HTTP_LENGTHS),
                ),
            )
        )
    elif framing == 18:  # a coding that is not chunked: close-delimited
        fields.append(b"Transfer-Encoding: gzip")
    elif framing > 18:  # Content-Length, as nginx sends it
        fields.append(b"Content-Length: %d" % len(body))
    if draw(0, 7) == 0:
        fields.append(http_name(draw, b"Connection") + b": " + pick(draw, HTTP_CONNECTION))
    if draw(0, 29) == 0:
        fields.append(pick(draw, (b" folded", b"Bad Name: x", b": empty", b"X-A:\x00\x7f")))
    return wire + line + b"".join(f + b"\r\n" for f in fields) + b"\r\n" + body


# -- a request's reply, by protocol ----------------------------------------------------------


def opaques_taken(protocol: str, op: int, key: Any) -> int:
    """How many opaques (binary) or tokens (meta) a request takes, as the codecs number them
    (an rmw: its get's and its set's)."""
    if op == RMW_CODE:
        return 2
    if op != Op.MGET:
        return 1
    return len(key) + (protocol == "memcache-binary")


Grammar = Callable[[Draw, Op, Any, int], bytes]
GRAMMARS: dict[str, Grammar] = {
    "memcache-text": lambda draw, op, key, opaque: text_reply(draw, op, key),
    "resp2": lambda draw, op, key, opaque: resp_reply(draw, op, key),
    "resp3": lambda draw, op, key, opaque: resp3_reply(draw, op, key),
    "memcache-binary": binary_reply,
    "memcache-meta": meta_reply,
    "http-memc": http_reply,
}


def replies(draw: Draw, protocol: str, ops: Sequence[int], keys: Sequence[Any]) -> bytes:
    """The replies to ``ops`` (sent in order on a fresh connection) as ``protocol``'s
    grammar writes them."""
    grammar = GRAMMARS[protocol]
    wire = b""
    opaque = 0
    for op, key in zip(ops, keys, strict=True):
        if op == RMW_CODE:  # a get's reply, then a set's (engine/rmw.py)
            wire += grammar(draw, Op.GET, key, opaque) + grammar(draw, Op.SET, key, opaque + 1)
        else:
            wire += grammar(draw, Op(op), key, opaque)
        opaque += opaques_taken(protocol, op, key)
    if protocol == "resp3" and draw(0, 7) == 0:  # a push after the last reply
        wire += push_message(draw)
    return wire
