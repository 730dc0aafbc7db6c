"""Drive a codec in tests as the engine does: feed bytes in pieces, pull what parses.

Shared by the codec tests (unit, property, integration) so each keeps only its grammar:
``drain``/``reads`` collect replies and read_kinds codes; ``check_reply`` holds one reply
to the same result whole, byte by byte, through read_kinds and with the next reply's
first bytes behind it (h11's ``tr`` helper); ``assert_refuses`` checks that a codec that
raised ProtocolError stays dead; ``run_pipeline``/``run_batches`` talk to a real server.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import strategies as st

from kvbench.errors import ProtocolError
from kvbench.protocols.base import (
    KEYS_SHIFT,
    NEED_DATA,
    ClientCodec,
    CodecOptions,
    Op,
    Reply,
    ReplyKind,
)
from tests.support.servers import Server

# The ops that take a value.
STORAGE = frozenset({Op.SET, Op.ADD, Op.REPLACE, Op.APPEND, Op.PREPEND, Op.CAS})
# The ops encode_many sends with arg 1 (one step); every other op gets 0.
STEPPED = (Op.INCR, Op.DECR)
DEFAULT_OPTIONS = CodecOptions()
# Hypothesis strategies for memcached keys, values and the text after an error word.
memcache_keys = st.text("abcxyz0123456789:_-", min_size=1, max_size=10).map(str.encode)
values = st.binary(max_size=40)
messages = st.text("abcdefghij ,.:0123456789", max_size=30).map(str.encode)
# A request as the integration tests write it: (op, key or keys, value, arg).
Request = tuple[Op, bytes | Sequence[bytes], bytes | None, int]


def step_of(op: int) -> int:
    """The arg ``encode_many`` gives ``op``: 1 for INCR/DECR, else 0."""
    return 1 if op in STEPPED else 0


def announce(codec: ClientCodec, op: Op, key: Any = b"k", arg: int = 0) -> int:
    """Encode ``op`` (a storage op with the value ``b"v"``), drop the bytes, return the
    replies announced."""
    return codec.encode(op, key, b"v" if op in STORAGE else None, bytearray(), arg)


def code_of(reply: Reply) -> int:
    """What ``read_kinds`` appends for ``reply``."""
    return reply.kind | reply.keys << KEYS_SHIFT


def drain(codec: ClientCodec) -> list[Reply]:
    """Every reply ``next_reply`` returns before ``NEED_DATA``."""
    replies = []
    while (reply := codec.next_reply()) is not NEED_DATA:
        assert isinstance(reply, Reply)
        replies.append(reply)
    return replies


def feed_whole(codec: ClientCodec, data: bytes) -> list[Reply]:
    codec.feed(data)
    return drain(codec)


def feed_bytewise(codec: ClientCodec, data: bytes) -> list[Reply]:
    replies = []
    for i in range(len(data)):
        codec.feed(data[i : i + 1])
        replies += drain(codec)
    return replies


def parse_all(codec: ClientCodec, wire: bytes, cuts: Sequence[int]) -> list[Reply]:
    """Feed ``wire`` cut at ``cuts`` (any order), draining after each piece."""
    replies: list[Reply] = []
    for start, end in itertools.pairwise([0, *sorted(cuts), len(wire)]):
        replies += feed_whole(codec, wire[start:end])
    return replies


def reads(codec: ClientCodec, wire: bytes, cuts: Sequence[int]) -> list[int]:
    """Feed ``wire`` cut at ``cuts`` (sorted), calling ``read_kinds`` after each piece."""
    kinds: list[int] = []
    for start, stop in itertools.pairwise([0, *cuts, len(wire)]):
        codec.feed(wire[start:stop])
        codec.read_kinds(kinds)
    return kinds


def encoded(
    codec: ClientCodec, op: Op, key: Any, value: bytes | None, arg: int
) -> tuple[bytes, int]:
    """What ``encode`` appends to a buffer that holds bytes already, and its reply count."""
    out = bytearray(b"previous;")
    count = codec.encode(op, key, value, out, arg)
    assert out.startswith(b"previous;"), "encode must append, not overwrite"
    return bytes(out[len(b"previous;") :]), count


def per_op(
    codec: ClientCodec, ops: Sequence[int], keys: Sequence[Any], values: Sequence[Any]
) -> tuple[bytes, int]:
    """What ``encode`` writes, one request at a time, for a batch, and the replies pending."""
    out = bytearray()
    for op, key, value in zip(ops, keys, values, strict=True):
        codec.encode(Op(op), key, value, out, step_of(op))
    return bytes(out), codec.pending()


def check_reply(
    make: Callable[[], ClientCodec],
    announce: Callable[[ClientCodec], int],
    wire: bytes,
    expected: Reply,
    next_hit: Callable[[ClientCodec], bytes],
) -> None:
    """``wire`` answers the request ``announce`` encodes with ``expected``: whole, byte by
    byte, through ``read_kinds`` (whole and byte by byte), and with the first bytes of the
    next reply behind it (``next_hit`` announces a get and returns its 3-byte hit)."""
    assert expected.nbytes == len(wire)

    whole = make()
    assert announce(whole) == 1
    assert feed_whole(whole, wire) == [expected]
    assert whole.pending() == 0

    bytewise = make()
    announce(bytewise)
    got = []
    for i in range(len(wire)):
        got += feed_whole(bytewise, wire[i : i + 1])
        if i < len(wire) - 1:
            assert got == [], f"reply returned after {i + 1} of {len(wire)} bytes"
    assert got == [expected]

    for chunks in ([wire], [wire[i : i + 1] for i in range(len(wire))]):
        batch = make()
        announce(batch)
        kinds: list[int] = []
        for count, chunk in enumerate(chunks, 1):
            batch.feed(chunk)
            assert batch.read_kinds(kinds) == (count == len(chunks))
        assert kinds == [code_of(expected)]
        assert batch.pending() == 0

    trailing = make()
    announce(trailing)
    hit = next_hit(trailing)
    assert feed_whole(trailing, wire + hit[:-5]) == [expected]
    assert trailing.pending() == 1
    assert [(r.kind, r.nbytes, r.keys) for r in feed_whole(trailing, hit[-5:])] == [
        (ReplyKind.HIT, len(hit), 1)
    ]


class CodecUnderTest:
    """One codec class as its unit tests drive it: announce a request, encode one, check
    one reply (``check_reply`` above) with that codec's options.

    Args:
        factory: the codec class (or any callable taking ``CodecOptions``).
        next_hit: announces ``GET next`` on a codec and returns its 3-byte hit's bytes.
    """

    def __init__(
        self,
        factory: Callable[[CodecOptions], ClientCodec],
        next_hit: Callable[[ClientCodec], bytes],
    ) -> None:
        self.factory = factory
        self.next_hit = next_hit

    def encoded(
        self,
        op: Op,
        key: Any = b"k",
        value: bytes | None = None,
        arg: int = 0,
        options: CodecOptions = DEFAULT_OPTIONS,
    ) -> tuple[bytes, int]:
        return encoded(self.factory(options), op, key, value, arg)

    def check_reply(
        self,
        op: Op,
        wire: bytes,
        expected: Reply,
        *,
        key: Any = b"k",
        arg: int = 0,
        options: CodecOptions = DEFAULT_OPTIONS,
    ) -> None:
        """The reply parses the same whole, byte by byte, and followed by the next reply."""
        check_reply(
            lambda: self.factory(options),
            lambda codec: announce(codec, op, key, arg),
            wire,
            expected,
            self.next_hit,
        )


def assert_refuses(codec: ClientCodec, match: str | None = None) -> None:
    """A codec that raised ProtocolError refuses every later call."""
    kinds: list[int] = []
    for call in (codec.next_reply, lambda: codec.read_kinds(kinds), lambda: codec.feed(b"x")):
        with pytest.raises(ProtocolError, match=match):
            call()
    assert kinds == []


def replies_or_protocol_error(
    codec: ClientCodec, wire: bytes, cuts: Sequence[int], eof: bool, exact_nbytes: bool = True
) -> tuple[list[Reply], ProtocolError | None]:
    """The fuzz oracle: ``wire`` (cut at ``cuts``; those past its end are ignored, then EOF
    if ``eof``) gives replies, or ProtocolError and a codec that refuses all after it.
    With ``exact_nbytes`` (every codec but RESP, whose sizes are recomputed estimates) the
    replies account for no more bytes than ``wire`` has.

    Returns:
        The replies parsed, and the error that stopped the codec (None: EOF found every
        announced reply answered, or no EOF came).
    """
    announced = codec.pending()
    replies: list[Reply] = []
    error = None
    try:
        replies += parse_all(codec, wire, [c for c in cuts if c <= len(wire)])
        if eof:
            codec.feed_eof()
            replies += drain(codec)  # EOF can end a reply (an HTTP body up to the close)
            assert codec.pending() == 0
    except ProtocolError as exc:
        assert_refuses(codec)
        error = exc
    assert len(replies) <= announced
    assert all(r.nbytes > 0 for r in replies)
    assert not exact_nbytes or sum(r.nbytes for r in replies) <= len(wire)
    return replies, error


def outcome(
    codec: ClientCodec, wire: bytes, cuts: Sequence[int], eof: bool, batch: Sequence[bool]
) -> tuple[list[int], str | None, int | None]:
    """The codes ``codec`` gives for ``wire`` cut at ``cuts`` (then EOF if ``eof``), each
    piece read by ``read_kinds`` where ``batch`` (cycled) says so, else by ``next_reply``;
    the error that stopped it, if any; how many replies it still awaits, if none."""
    codes: list[int] = []
    try:
        for index, (start, end) in enumerate(itertools.pairwise([0, *cuts, len(wire), -1])):
            if end < 0:
                if not eof:
                    break
                codec.feed_eof()
            else:
                codec.feed(wire[start:end])
            if batch[index % len(batch)]:
                codec.read_kinds(codes)
            else:  # each code is kept before the next reply may raise
                while (reply := codec.next_reply()) is not NEED_DATA:
                    codes.append(code_of(reply))
    except ProtocolError as exc:
        for call in (codec.next_reply, lambda: codec.read_kinds(codes)):
            with pytest.raises(ProtocolError):
                call()
        return codes, f"{type(exc).__name__}: {exc}", None
    return codes, None, codec.pending()


def batch_arguments(
    draw: st.DrawFn, requests: Sequence[tuple[Op, Any, bytes | None]]
) -> tuple[list[int], list[Any], list[Any]]:
    """The engine's view of ``(op, key, value)`` requests: int ops, keys (a multi-get's
    tuple, or any sequence) and values (a memoryview for every op, or bytes or None)."""
    ops = [int(op) for op, _, _ in requests]
    keys = [list(key) if op is Op.MGET and draw(st.booleans()) else key for op, key, _ in requests]
    values: list[Any] = [
        draw(st.sampled_from([memoryview(value), value]))
        if value is not None
        else draw(st.sampled_from([memoryview(b"ignored"), None]))
        for _, _, value in requests
    ]
    return ops, keys, values


def encode_in_windows(
    data: st.DataObject,
    codec: ClientCodec,
    ops: list[int],
    keys: list[Any],
    values: list[Any],
    out: bytearray,
) -> None:
    """``encode_many`` over random windows of a batch, some requests through ``encode``
    between them: the two must mix freely."""
    bounds = sorted(data.draw(st.lists(st.integers(0, len(ops)), max_size=4)))
    position = 0
    for bound in [*bounds, len(ops)]:
        stop = max(bound, position)
        assert codec.encode_many(ops, keys, values, position, stop, out) == stop - position
        position = stop
        if position < len(ops) and data.draw(st.booleans()):
            op = ops[position]
            codec.encode(Op(op), keys[position], values[position], out, step_of(op))
            position += 1


def read_in_pieces(data: st.DataObject, codec: ClientCodec, wire: bytes) -> list[int]:
    """Codes for ``wire`` fed in random pieces, each read by ``read_kinds``, some first
    by ``next_reply``."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    codes: list[int] = []
    for start, end in itertools.pairwise([0, *cuts, len(wire)]):
        codec.feed(wire[start:end])
        if data.draw(st.booleans()):
            codes += map(code_of, drain(codec))
        before = len(codes)
        assert codec.read_kinds(codes) == len(codes) - before
    return codes


def run_pipeline(server: Server, codec: ClientCodec, requests: Sequence[Request]) -> list[Reply]:
    """Send every request in one write on a fresh connection; read until every announced
    reply is parsed."""
    out = bytearray()
    announced = sum(codec.encode(op, key, value, out, arg) for op, key, value, arg in requests)
    return exchange(server, codec, out, announced)


def exchange(server: Server, codec: ClientCodec, out: bytearray, expected: int) -> list[Reply]:
    """Send ``out`` on a fresh connection; read until ``expected`` replies came back."""
    replies: list[Reply] = []
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(out)
        while len(replies) < expected:
            data = sock.recv(65536)
            if not data:
                codec.feed_eof()
            else:
                codec.feed(data)
            replies += drain(codec)
            assert data, "server closed the connection early"
    assert codec.pending() == 0
    return replies


def run_batches(
    server: Server, codec: ClientCodec, ops: list[Op], keys: list[Any], values: list[Any]
) -> list[int]:
    """The engine's path: encode_many per batch of 5, one write, read_kinds per recv()."""
    out = bytearray()
    for start in range(0, len(ops), 5):
        stop = min(start + 5, len(ops))
        codec.encode_many([int(op) for op in ops], keys, values, start, stop, out)
    kinds: list[int] = []
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(out)
        while len(kinds) < len(ops):
            data = sock.recv(4096)
            assert data, "server closed the connection early"
            codec.feed(data)
            codec.read_kinds(kinds)
    assert codec.pending() == 0
    return kinds
