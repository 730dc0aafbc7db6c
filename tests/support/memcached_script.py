"""What memcached answers, whichever protocol (text or meta) asks: for the codecs' tests.

memcached gives the same outcome to the same command sent as a text line or as a meta
command, so the live tests of both codecs send these scripts and check the same replies;
each adds what only its protocol has (meta's ``mn``, its quiet failures). ``TEXT`` and
``META`` are the two codecs as the unit tests drive them.
"""

from __future__ import annotations

import uuid
from typing import Any

from kvbench.protocols.base import (
    KEYS_SHIFT,
    ClientCodec,
    CodecOptions,
    Op,
    Reply,
    ReplyKind,
    parse_stats_text,
)
from kvbench.protocols.memcache_meta import MemcacheMetaCodec
from kvbench.protocols.memcache_text import MemcacheTextCodec
from tests.support.codec_checks import CodecUnderTest, Request, run_pipeline
from tests.support.servers import Server

K = ReplyKind
KEEP = CodecOptions(keep_payload=True)


def text_next_hit(codec: ClientCodec) -> bytes:
    """Announce ``get next`` and return memcached's 3-byte hit for it, in text."""
    codec.encode(Op.GET, b"next", None, bytearray())
    return b"VALUE next 0 3\r\nabc\r\nEND\r\n"


def meta_next_hit(codec: ClientCodec) -> bytes:
    """Announce ``mg next v`` and return memcached's 3-byte hit for it, with its token."""
    request = bytearray()
    codec.encode(Op.GET, b"next", None, request)
    token = bytes(request).split(b" O")[1].rstrip(b"\r\n")
    return b"VA 3 O%s\r\nabc\r\n" % token


# protocol.txt "Error strings": they answer any command, in either protocol.
ERROR_LINES = [
    b"ERROR",
    b"CLIENT_ERROR bad command line format",
    b"CLIENT_ERROR bad data chunk",
    b"CLIENT_ERROR cannot increment or decrement non-numeric value",
    b"SERVER_ERROR out of memory storing object",
    b"SERVER_ERROR object too large for cache",
]

TEXT = CodecUnderTest(MemcacheTextCodec, text_next_hit)
META = CodecUnderTest(MemcacheMetaCodec, meta_next_hit)


def unique_prefix(protocol: str) -> bytes:
    """A key prefix no other test uses: the server is shared by the whole session."""
    return b"%s:%s:" % (protocol.encode(), uuid.uuid4().hex[:12].encode())


def every_op(prefix: bytes, noop: bool) -> tuple[list[Request], list[ReplyKind]]:
    """Every op in one pipeline (with NOOP if ``noop``) and the reply kinds memcached
    gives; STATS comes last. ``check_every_op`` then checks the payloads."""
    a, b, n, missing = prefix + b"a", prefix + b"b", prefix + b"n", prefix + b"missing"
    script: list[tuple[Request, ReplyKind]] = [
        ((Op.SET, a, b"hello", 0), K.STORED),
        ((Op.GET, a, None, 0), K.HIT),
        ((Op.GET, missing, None, 0), K.MISS),
        ((Op.ADD, a, b"again", 0), K.NOT_STORED),
        ((Op.ADD, b, b"bee", 0), K.STORED),
        ((Op.REPLACE, missing, b"x", 0), K.NOT_STORED),
        ((Op.APPEND, a, b"!", 0), K.STORED),
        ((Op.PREPEND, a, b">", 0), K.STORED),
        ((Op.GETS, a, None, 0), K.HIT),
        ((Op.CAS, a, b"lost", 2**63), K.EXISTS),
        ((Op.CAS, missing, b"x", 1), K.NOT_FOUND),
        ((Op.SET, n, b"10", 0), K.STORED),
        ((Op.INCR, n, None, 5), K.VALUE),
        ((Op.DECR, n, None, 20), K.VALUE),
        ((Op.INCR, missing, None, 1), K.NOT_FOUND),
        ((Op.INCR, a, None, 1), K.ERROR_REPLY),
        ((Op.TOUCH, a, None, 300), K.TOUCHED),
        ((Op.TOUCH, missing, None, 300), K.NOT_FOUND),
        ((Op.DELETE, b, None, 0), K.DELETED),
        ((Op.DELETE, b, None, 0), K.NOT_FOUND),
        ((Op.MGET, [a, missing, n, b], None, 0), K.HIT),
    ]
    if noop:
        script.append(((Op.NOOP, b"", None, 0), K.OK))
    script.append(((Op.STATS, b"", None, 0), K.VALUE))
    return [request for request, _ in script], [kind for _, kind in script]


def check_every_op(replies: list[Reply], server: Server) -> None:
    """The payloads of ``every_op``'s replies (read with ``keep_payload``)."""
    assert all(r.nbytes > 0 for r in replies)
    assert replies[1].payload == b"hello"
    assert replies[8].payload == b">hello!"
    assert (replies[12].payload, replies[13].payload) == (b"15", b"0")
    assert replies[15].payload is not None and replies[15].payload.startswith(b"CLIENT_ERROR")
    # protocol.txt: a decr that shortens the number "MAY be space-padded at the end".
    assert (replies[20].keys, replies[20].payload) == (2, b">hello!0 ")
    assert int(parse_stats_text(replies[-1].payload or b"")["pid"]) == server.proc.pid


def cas_round_trip(server: Server, codec: ClientCodec, key: bytes, unique: int) -> None:
    """CAS with ``key``'s current unique stores, the same unique again is EXISTS."""
    replies = run_pipeline(
        server,
        codec,
        [(Op.CAS, key, b"2", unique), (Op.CAS, key, b"3", unique), (Op.GET, key, None, 0)],
    )
    assert [r.kind for r in replies] == [K.STORED, K.EXISTS, K.HIT]
    assert replies[2].payload == b"2"


def large_value(server: Server, codec: ClientCodec, key: bytes) -> Reply:
    """A 512000-byte value set and read back (many recv() calls); returns the hit."""
    value = bytes(range(256)) * 2000
    replies = run_pipeline(server, codec, [(Op.SET, key, value, 0), (Op.GET, key, None, 0)])
    assert [r.kind for r in replies] == [K.STORED, K.HIT]
    assert replies[1].payload == value
    return replies[1]


def batch(prefix: bytes, noop: bool) -> tuple[list[Op], list[Any], list[Any], list[int]]:
    """Requests for the engine's batch path (ops, keys, values; NOOP last if ``noop``) and
    the ``read_kinds`` codes memcached's answers give."""
    a, n, missing = prefix + b"a", prefix + b"n", prefix + b"missing"
    big = memoryview(bytes(range(256)) * 400)  # 102400 bytes: hits arrive over many reads
    hit = K.HIT | 1 << KEYS_SHIFT
    script: list[tuple[Op, Any, Any, int]] = [
        (Op.SET, a, memoryview(b"hello"), K.STORED),
        (Op.GET, a, None, hit),
        (Op.GET, missing, None, K.MISS),
        (Op.SET, n, memoryview(b"10"), K.STORED),
        (Op.INCR, n, None, K.VALUE),  # incr by one step
        (Op.INCR, missing, None, K.NOT_FOUND),
        (Op.DECR, n, None, K.VALUE),
        (Op.MGET, (a, missing, n), None, K.HIT | 2 << KEYS_SHIFT),
        (Op.SET, a, big, K.STORED),
        (Op.GET, a, None, hit),
        (Op.GET, a, None, hit),
        (Op.DELETE, a, None, K.DELETED),
        (Op.DELETE, a, None, K.NOT_FOUND),
        (Op.GET, a, None, K.MISS),
        (Op.ADD, missing, b"bytes", K.STORED),
        (Op.TOUCH, missing, None, K.TOUCHED),
    ]
    if noop:
        script.append((Op.NOOP, b"", None, K.OK))
    ops, keys, values, kinds = (list(column) for column in zip(*script, strict=True))
    return ops, keys, values, kinds
