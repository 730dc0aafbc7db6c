"""Properties of MemcacheTextCodec: reply writer round trips, chunking, random input."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.protocols.base import (
    DEFAULT_MAX_REPLY_BYTES,
    NEED_DATA,
    CodecOptions,
    Op,
    Reply,
    ReplyKind,
)
from kvbench.protocols.commands import DATA, KeySlot, text_template
from kvbench.protocols.memcache_text import MemcacheTextCodec
from tests.support.codec_checks import (
    batch_arguments,
    code_of,
    encode_in_windows,
    messages,
    outcome,
    parse_all,
    read_in_pieces,
    replies_or_protocol_error,
    step_of,
    values,
)
from tests.support.codec_checks import memcache_keys as keys

K = ReplyKind
STORE_VERBS = {
    Op.SET: b"set",
    Op.ADD: b"add",
    Op.REPLACE: b"replace",
    Op.APPEND: b"append",
    Op.PREPEND: b"prepend",
}
STORE_WORDS = {
    b"STORED": K.STORED,
    b"NOT_STORED": K.NOT_STORED,
    b"EXISTS": K.EXISTS,
    b"NOT_FOUND": K.NOT_FOUND,
}


@dataclass(frozen=True)
class Exchange:
    """One request and the reply the test-side writer rendered for it."""

    op: Op
    key: bytes | tuple[bytes, ...]
    value: bytes | None
    arg: int
    wire: bytes
    expected: Reply | None  # None: a noreply request, nothing on the wire


def _value_block(key: bytes, value: bytes, flags: int, cas: int | None) -> bytes:
    cas_field = b"" if cas is None else b" %d" % cas
    return b"VALUE %s %d %d%s\r\n%s\r\n" % (key, flags, len(value), cas_field, value)


@st.composite
def exchanges(draw: st.DrawFn, keep: bool, noreply: bool) -> Exchange:
    """A request and a reply for it, as memcached would write it (protocol.txt)."""
    kind = draw(
        st.sampled_from(
            [
                *("get", "gets", "mget", "store", "cas", "delete"),
                *("arith", "touch", "stats", "error", "command"),
            ]
        )
    )
    key = draw(keys)
    flags = draw(st.integers(0, 2**32 - 1))
    if kind == "command":
        return draw(commands(key, flags, keep))
    if kind in ("get", "gets"):
        value = draw(st.none() | values)
        op = Op.GET if kind == "get" else Op.GETS
        if value is None:
            return Exchange(op, key, None, 0, b"END\r\n", Reply(K.MISS, 5))
        cas = draw(st.integers(0, 2**64 - 1)) if op is Op.GETS else None
        wire = _value_block(key, value, flags, cas) + b"END\r\n"
        return Exchange(op, key, None, 0, wire, Reply(K.HIT, len(wire), value if keep else None, 1))
    if kind == "mget":
        many = tuple(draw(st.lists(keys, min_size=1, max_size=5)))
        hits = [(k, v) for k in many if (v := draw(st.none() | values)) is not None]
        wire = b"".join(_value_block(k, v, flags, None) for k, v in hits) + b"END\r\n"
        if not hits:
            return Exchange(Op.MGET, many, None, 0, wire, Reply(K.MISS, len(wire)))
        payload = b"".join(v for _, v in hits) if keep else None
        return Exchange(Op.MGET, many, None, 0, wire, Reply(K.HIT, len(wire), payload, len(hits)))
    if kind == "stats":
        pairs = draw(st.lists(st.tuples(keys, messages.filter(bool)), max_size=6))
        wire = b"".join(b"STAT %s %s\r\n" % pair for pair in pairs) + b"END\r\n"
        payload = b"".join(b"%s %s\r\n" % pair for pair in pairs)
        return Exchange(Op.STATS, b"", None, 0, wire, Reply(K.VALUE, len(wire), payload))
    if kind == "error":
        replying = [Op.GET, Op.GETS, Op.MGET, Op.STATS]
        quietable = [*STORE_VERBS, Op.CAS, Op.DELETE, Op.INCR, Op.DECR, Op.TOUCH]
        op = draw(st.sampled_from(replying if noreply else replying + quietable))
        line = draw(st.sampled_from([b"ERROR", b"CLIENT_ERROR ", b"SERVER_ERROR "]))
        if line != b"ERROR":
            line += draw(messages)
        arg = 1
        value = b"v" if op in STORE_VERBS or op is Op.CAS else None
        wire = line + b"\r\n"
        the_key: bytes | tuple[bytes, ...] = (key,) if op is Op.MGET else key
        return Exchange(op, the_key, value, arg, wire, Reply(K.ERROR_REPLY, len(wire), line))
    if kind in ("store", "cas"):
        op = Op.CAS if kind == "cas" else draw(st.sampled_from(list(STORE_VERBS)))
        word = draw(st.sampled_from(list(STORE_WORDS)))
        value = draw(values)
        arg = draw(st.integers(0, 2**64 - 1))
        return _maybe_quiet(
            Exchange(op, key, value, arg, word + b"\r\n", Reply(STORE_WORDS[word], len(word) + 2)),
            noreply,
        )
    if kind == "delete":
        word = draw(st.sampled_from([b"DELETED", b"NOT_FOUND"]))
        kind_ = K.DELETED if word == b"DELETED" else K.NOT_FOUND
        return _maybe_quiet(
            Exchange(Op.DELETE, key, None, 0, word + b"\r\n", Reply(kind_, len(word) + 2)), noreply
        )
    if kind == "touch":
        word = draw(st.sampled_from([b"TOUCHED", b"NOT_FOUND"]))
        kind_ = K.TOUCHED if word == b"TOUCHED" else K.NOT_FOUND
        arg = draw(st.integers(-1, 2**31))
        return _maybe_quiet(
            Exchange(Op.TOUCH, key, None, arg, word + b"\r\n", Reply(kind_, len(word) + 2)), noreply
        )
    op = draw(st.sampled_from([Op.INCR, Op.DECR]))
    arg = draw(st.integers(0, 2**64 - 1))
    number = draw(st.none() | st.integers(0, 2**64 - 1))
    if number is None:
        reply = Exchange(op, key, None, arg, b"NOT_FOUND\r\n", Reply(K.NOT_FOUND, 11))
    else:
        text = b"%d" % number
        reply = Exchange(
            op,
            key,
            None,
            arg,
            text + b"\r\n",
            Reply(K.VALUE, len(text) + 2, text if keep else None),
        )
    return _maybe_quiet(reply, noreply)


# Commands (``Op.COMMAND``) and a reply of each frame the codec knows for them.
COMMAND_WORDS = [
    [b"touch", KeySlot(), b"60"],
    [b"gat", b"0", KeySlot(), KeySlot(b"x:")],
    [b"mg", KeySlot(), b"v", b"t"],
    [b"set", KeySlot(), b"0", b"0", DATA],
    [b"ms", KeySlot(), DATA, b"T60"],
    [b"stats", b"slabs"],
    [b"version"],
]


@st.composite
def commands(draw: st.DrawFn, key: bytes, flags: int, keep: bool) -> Exchange:
    """A command and a reply of one of the frames (protocol.txt), answered ok or error."""
    words = draw(st.sampled_from(COMMAND_WORDS))
    template = text_template(words)
    value = draw(values)
    request = template.render([key] * template.keys, memoryview(value))
    frame = draw(st.sampled_from(["line", "values", "va", "listing", "error"]))
    if frame == "values":
        blocks = draw(st.lists(values, max_size=3))
        body = b"".join(_value_block(key, v, flags, None) for v in blocks)
        wire = body + b"END\r\n"
        payload = body or b"END"  # no values: the one line END, a miss
    elif frame == "va":
        body = draw(values)
        wire = b"VA %d t-1\r\n%s\r\n" % (len(body), body)
        payload = body
    elif frame == "listing":
        pairs = draw(st.lists(st.tuples(keys, messages.filter(bool)), max_size=4))
        body = b"".join(
            b"%s %s\r\n" % (draw(st.sampled_from([b"STAT", b"ITEM"])), b" ".join(p)) for p in pairs
        )
        wire = body + b"END\r\n"
        payload = body or b"END"
    elif frame == "error":
        line = draw(st.sampled_from([b"ERROR", b"CLIENT_ERROR x", b"SERVER_ERROR busy"]))
        wire = line + b"\r\n"
        return Exchange(Op.COMMAND, request, None, 0, wire, Reply(K.ERROR_REPLY, len(wire), line))
    else:
        payload = draw(
            st.sampled_from([b"STORED", b"TOUCHED", b"HD", b"EN", b"NF", b"12", b"VERSION 1.6"])
        )
        wire = payload + b"\r\n"
    return Exchange(
        Op.COMMAND, request, None, 0, wire, Reply(K.OK, len(wire), payload if keep else None)
    )


def _maybe_quiet(exchange: Exchange, noreply: bool) -> Exchange:
    if not noreply:
        return exchange
    return Exchange(exchange.op, exchange.key, exchange.value, exchange.arg, b"", None)


@settings(deadline=None)
@given(data=st.data(), keep=st.booleans(), noreply=st.booleans())
def test_written_replies_parse_back_in_any_chunking(
    data: st.DataObject, keep: bool, noreply: bool
) -> None:
    plan = data.draw(st.lists(exchanges(keep, noreply), min_size=1, max_size=10))
    codec = MemcacheTextCodec(CodecOptions(keep_payload=keep, noreply=noreply))
    announced = sum(codec.encode(e.op, e.key, e.value, bytearray(), e.arg) for e in plan)
    expected = [e.expected for e in plan if e.expected is not None]
    assert announced == len(expected) == codec.pending()
    wire = b"".join(e.wire for e in plan)
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=12))
    assert parse_all(codec, wire, cuts) == expected
    assert codec.pending() == 0
    codec.feed_eof()
    assert codec.next_reply() is NEED_DATA


def read_requests(stream: bytes) -> list[tuple[bytes, list[bytes], bytes | None]]:
    """Test-side request reader: (command, arguments, data block or None) per request."""
    requests = []
    pos = 0
    while pos < len(stream):
        eol = stream.index(b"\r\n", pos)
        command, *args = stream[pos:eol].split(b" ")
        pos = eol + 2
        block = None
        if command in (*STORE_VERBS.values(), b"cas"):
            size = int(args[3])
            block = stream[pos : pos + size]
            assert stream[pos + size : pos + size + 2] == b"\r\n"
            pos += size + 2
        if command == b"ms":
            size = int(args[1])
            block = stream[pos : pos + size]
            pos += size + 2
        requests.append((command, args, block))
    return requests


@settings(deadline=None)
@given(
    data=st.data(),
    noreply=st.booleans(),
    flags=st.integers(0, 2**32 - 1),
    ttl=st.integers(0, 2**31),
)
def test_requests_read_back_with_their_arguments(
    data: st.DataObject, noreply: bool, flags: int, ttl: int
) -> None:
    plan = data.draw(st.lists(exchanges(False, noreply), min_size=1, max_size=10))
    codec = MemcacheTextCodec(CodecOptions(noreply=noreply, flags=flags, ttl_s=ttl))
    out = bytearray()
    for e in plan:
        codec.encode(e.op, e.key, e.value, out, e.arg)
    requests = read_requests(bytes(out))
    assert len(requests) == len(plan)
    tail = [b"noreply"] if noreply else []
    for e, (command, args, block) in zip(plan, requests, strict=True):
        if e.op in STORE_VERBS:
            assert (command, args, block) == (
                STORE_VERBS[e.op],
                [e.key, b"%d" % flags, b"%d" % ttl, b"%d" % len(e.value or b""), *tail],
                e.value,
            )
        elif e.op is Op.CAS:
            assert (command, args, block) == (
                b"cas",
                [
                    e.key,
                    b"%d" % flags,
                    b"%d" % ttl,
                    b"%d" % len(e.value or b""),
                    b"%d" % e.arg,
                    *tail,
                ],
                e.value,
            )
        elif e.op in (Op.GET, Op.GETS):
            assert (command, args) == (e.op.name.lower().encode(), [e.key])
        elif e.op is Op.MGET:
            assert (command, args) == (b"get", list(e.key))
        elif e.op is Op.STATS:
            assert (command, args) == (b"stats", [])
        elif e.op is Op.DELETE:
            assert (command, args) == (b"delete", [e.key, *tail])
        elif e.op is Op.COMMAND:  # a rendered command is written as it is, noreply or not
            assert bytes(e.key).startswith(command + b" " if args else command + b"\r\n")
        else:
            assert (command, args) == (e.op.name.lower().encode(), [e.key, b"%d" % e.arg, *tail])


TOKENS = [
    b"VALUE ",
    b"VALUE k 0 1\r\n",
    b"VALUE a 0 1\r\n",
    b"VALUE k 0 1\r\nx\r\nEND\r\n",
    b"VALUE a 0 1\r\nx\r\nEND\r\n",
    b"VALUE k 0 1\r\nx\r\nEXD\r\n",
    b"VALUE k 0 ",
    b"\r\nEND\r\n",
    b"+",
    b"_",
    b"k",
    b"a",
    b" ",
    b"0",
    b"1",
    b"12",
    b"\r\n",
    b"\r",
    b"\n",
    b"END\r\n",
    b"STORED\r\n",
    b"NOT_STORED\r\n",
    b"EXISTS\r\n",
    b"NOT_FOUND\r\n",
    b"DELETED\r\n",
    b"TOUCHED\r\n",
    b"STAT ",
    b"ERROR",
    b"CLIENT_ERROR x",
    b"SERVER_ERROR ",
    b"-",
]
noise = st.lists(st.binary(max_size=12) | st.sampled_from(TOKENS), max_size=40).map(b"".join)
ops = st.sampled_from([op for op in Op if op is not Op.NOOP])  # COMMAND: the line "k"


@settings(deadline=None, max_examples=300)
@given(
    requests=st.lists(ops, max_size=6),
    wire=noise,
    cuts=st.lists(st.integers(0, 400), max_size=8),
    eof=st.booleans(),
    keep=st.booleans(),
    noreply=st.booleans(),
    bound=st.sampled_from([16, 64, DEFAULT_MAX_REPLY_BYTES]),
)
def test_random_bytes_give_replies_or_protocol_error_only(
    requests: list[Op],
    wire: bytes,
    cuts: list[int],
    eof: bool,
    keep: bool,
    noreply: bool,
    bound: int,
) -> None:
    codec = MemcacheTextCodec(
        CodecOptions(keep_payload=keep, noreply=noreply, max_reply_bytes=bound)
    )
    for op in requests:
        key: bytes | list[bytes] = [b"k", b"a"] if op is Op.MGET else b"k"
        codec.encode(op, key, b"v" if op in STORE_VERBS or op is Op.CAS else None, bytearray(), 1)
    replies, error = replies_or_protocol_error(codec, wire, cuts, eof)
    if eof and error is None:  # nothing is left unread: every byte was a reply's
        assert sum(r.nbytes for r in replies) == len(wire)


# -- batch paths: encode_many and read_kinds against encode and next_reply ---------------


@settings(deadline=None)
@given(data=st.data(), keep=st.booleans(), flags=st.sampled_from([0, 0, 5]))
def test_batch_paths_write_and_read_what_the_per_op_paths_do(
    data: st.DataObject, keep: bool, flags: int
) -> None:
    plan = data.draw(
        st.lists(exchanges(keep, False), min_size=1, max_size=12).filter(
            lambda p: all(e.op is not Op.CAS for e in p)  # cas needs its arg
        )
    )
    ops, keys, values = batch_arguments(data.draw, [(e.op, e.key, e.value) for e in plan])
    options = CodecOptions(keep_payload=keep, flags=flags, ttl_s=9)
    one, many = MemcacheTextCodec(options), MemcacheTextCodec(options)
    out_one, out_many = bytearray(), bytearray()
    for op, key, value in zip(ops, keys, values, strict=True):
        one.encode(Op(op), key, value, out_one, step_of(op))
    encode_in_windows(data, many, ops, keys, values, out_many)
    assert bytes(out_many) == bytes(out_one)
    assert many.pending() == one.pending() == len(plan)

    wire = b"".join(e.wire for e in plan)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    expected = [code_of(e.expected) for e in plan if e.expected is not None]
    assert [code_of(r) for r in parse_all(one, wire, cuts)] == expected
    assert read_in_pieces(data, many, wire) == expected
    assert many.pending() == 0


@settings(deadline=None, max_examples=400)
@given(
    requests=st.lists(
        st.tuples(st.sampled_from([Op.GET] * 8) | ops, st.sampled_from([b"k", b"a"])),
        max_size=8,
    ),
    wire=noise,
    cuts=st.lists(st.integers(0, 400), max_size=8),
    eof=st.booleans(),
    noreply=st.booleans(),
    bound=st.sampled_from([16, 40, 64, DEFAULT_MAX_REPLY_BYTES]),
    mixed=st.lists(st.booleans(), min_size=1, max_size=6),
    warm=st.booleans(),
)
def test_read_kinds_accepts_and_rejects_exactly_what_next_reply_does(
    requests: list[tuple[Op, bytes]],
    wire: bytes,
    cuts: list[int],
    eof: bool,
    noreply: bool,
    bound: int,
    mixed: list[bool],
    warm: bool,
) -> None:
    if warm:  # a first hit of 1 byte: read_kinds then guesses the next hits are 1 byte
        requests = [(Op.GET, b"k"), *requests]
        wire = b"VALUE k 0 1\r\nx\r\nEND\r\n" + wire
        cuts = [c + 20 for c in cuts]
    results = []
    for batch in ([False], [True], mixed):
        codec = MemcacheTextCodec(CodecOptions(noreply=noreply, max_reply_bytes=bound))
        for op, one_key in requests:
            key: bytes | list[bytes] = [b"k", b"a"] if op is Op.MGET else one_key
            value = b"v" if op in STORE_VERBS or op is Op.CAS else None
            codec.encode(op, key, value, bytearray(), 1)
        results.append(outcome(codec, wire, sorted(c for c in cuts if c <= len(wire)), eof, batch))
    assert results[1] == results[0]
    assert results[2] == results[0]
