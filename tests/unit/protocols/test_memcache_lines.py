"""What the memcached text and meta codecs share (_memcache_lines.py): one test, both grammars.

Encodings, every reply kind, error lines, garbage, EOF, reply bounds and the batch paths
are checked the same way in both codecs: each case here runs once per codec, with that
codec's wire bytes in its own table. What only one grammar has (opaques and quiet
failures, VALUE headers and the hit guess) stays in test_memcache_text.py and
test_memcache_meta.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols.base import NEED_DATA, CodecOptions, Op, Reply, ReplyKind, parse_stats_text
from tests.support.codec_checks import CodecUnderTest, announce, assert_refuses, drain
from tests.support.memcached_script import ERROR_LINES, META, TEXT

K = ReplyKind
SMALL = CodecOptions(max_reply_bytes=64)
HIT = K.HIT | 1 << 8
KEEP = CodecOptions(keep_payload=True)
NOREPLY = CodecOptions(noreply=True)


def cases(text: list[Any], meta: list[Any]) -> list[Any]:
    """Parameters: each text case with the text codec first, then each meta case."""
    return [pytest.param(TEXT, *case, id=f"text-{i}") for i, case in enumerate(text)] + [
        pytest.param(META, *case, id=f"meta-{i}") for i, case in enumerate(meta)
    ]


# -- EOF ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "partial"),
    cases(
        [(b"",), (b"VALUE k 0 5\r\nhi",), (b"VALUE k 0 2\r\nhi\r\nEN",), (b"VALU",), (b"END\r",)],
        [(b"",), (b"VA 5 O0\r\nhi",), (b"VA 2 O0\r\nhi\r",), (b"EN O",), (b"E",)],
    ),
)
def test_eof_mid_reply_or_with_replies_pending_raises(
    codec: CodecUnderTest, partial: bytes
) -> None:
    one = codec.factory(CodecOptions())
    announce(one, Op.GET)
    one.feed(partial)
    assert one.next_reply() is NEED_DATA
    one.feed_eof()
    with pytest.raises(ProtocolError):
        one.next_reply()
    with pytest.raises(ProtocolError):
        one.next_reply()


@pytest.mark.parametrize(
    ("codec", "values"), cases([(b"VALUE a 0 1\r\nx\r\n",)], [(b"VA 1 O0\r\nx\r\n",)])
)
def test_eof_mid_multiget_after_some_values_raises(codec: CodecUnderTest, values: bytes) -> None:
    one = codec.factory(CodecOptions())
    announce(one, Op.MGET, [b"a", b"b"])
    one.feed(values)
    assert one.next_reply() is NEED_DATA
    one.feed_eof()
    with pytest.raises(ProtocolError):
        one.next_reply()


@pytest.mark.parametrize(("codec", "stored"), cases([(b"STORED\r\n",)], [(b"HD O0\r\n",)]))
def test_eof_with_nothing_pending_is_a_clean_end(codec: CodecUnderTest, stored: bytes) -> None:
    one = codec.factory(CodecOptions())
    announce(one, Op.SET)
    one.feed(stored)
    one.feed_eof()
    assert one.next_reply() == Reply(K.STORED, len(stored))
    assert one.next_reply() is NEED_DATA
    assert one.next_reply() is NEED_DATA


@pytest.mark.parametrize(("codec", "wire"), cases([(b"STORED\r\n",)], [(b"MN\r\n",)]))
def test_data_after_eof_raises(codec: CodecUnderTest, wire: bytes) -> None:
    one = codec.factory(CodecOptions())
    one.feed_eof()
    with pytest.raises(ProtocolError):
        one.feed(wire)


# -- bounds ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "op", "header"),
    cases(
        [(Op.GET, b"VALUE k 0 1000000\r\n")],
        [(Op.GET, b"VA 1000000 O0\r\n"), (Op.INCR, b"VA 1000000 O0\r\n")],
    ),
)
def test_declared_value_size_over_the_bound_raises_before_the_data_arrives(
    codec: CodecUnderTest, op: Op, header: bytes
) -> None:
    one = codec.factory(SMALL)
    announce(one, op, arg=1)
    one.feed(header)
    with pytest.raises(ReplyTooLarge):
        one.next_reply()
    with pytest.raises(ProtocolError):
        one.next_reply()


@pytest.mark.parametrize(
    ("codec", "op"),
    cases(
        [(Op.SET,), (Op.GET,), (Op.INCR,), (Op.STATS,), (Op.DELETE,)],
        [(Op.SET,), (Op.GET,), (Op.NOOP,), (Op.STATS,), (Op.MGET,)],
    ),
)
def test_line_without_crlf_longer_than_the_bound_raises(codec: CodecUnderTest, op: Op) -> None:
    one = codec.factory(SMALL)
    announce(one, op, [b"a"] if op is Op.MGET else b"k", arg=1)
    one.feed(b"SERVER_ERROR " + b"x" * 40)
    assert one.next_reply() is NEED_DATA
    one.feed(b"x" * 40)
    with pytest.raises(ReplyTooLarge):
        one.next_reply()


@pytest.mark.parametrize(
    ("codec", "wire"),
    cases(
        [(b"VALUE a 0 20\r\n" + b"x" * 20 + b"\r\nVALUE b 0 20\r\n",)],
        [(b"VA 20 O0\r\n" + b"x" * 20 + b"\r\nVA 20 O1\r\n",)],
    ),
)
def test_multiget_bound_applies_to_the_whole_reply(codec: CodecUnderTest, wire: bytes) -> None:
    one = codec.factory(SMALL)
    announce(one, Op.MGET, [b"a", b"b", b"c"])
    one.feed(wire)
    with pytest.raises(ReplyTooLarge):
        one.next_reply()


@pytest.mark.parametrize(
    ("codec", "op", "wire"),
    cases(
        [
            (Op.GET, b"VALUE " + b"k" * 80),  # header line with no CRLF yet
            (Op.MGET, b"VALUE " + b"k" * 80),
            (Op.SET, b"SERVER_ERROR " + b"x" * 80 + b"\r\n"),  # complete, but too long
            (Op.INCR, b"1" * 80 + b"\r\n"),
        ],
        [
            (Op.GET, b"VA 1 " + b"c" * 80),  # header line with no CRLF yet
            (Op.MGET, b"VA 1 " + b"c" * 80),
            (Op.SET, b"SERVER_ERROR " + b"x" * 80 + b"\r\n"),  # complete, but too long
            (Op.SET, b"NS k" + b"x" * 80 + b" O0\r\n"),
        ],
    ),
)
def test_any_line_over_the_bound_raises_whole_or_partial(
    codec: CodecUnderTest, op: Op, wire: bytes
) -> None:
    one = codec.factory(SMALL)
    announce(one, op, [b"k"] if op is Op.MGET else b"k", arg=1)
    one.feed(wire)
    with pytest.raises(ReplyTooLarge):
        one.next_reply()


# -- batch paths: encode_many and read_kinds ------------------------------------------


@pytest.mark.parametrize(
    ("codec", "ops", "wire", "good"),
    cases(
        [
            ([Op.SET, Op.GET, Op.GET], b"STORED\r\nEND\r\nGARBAGE\r\n", 2),
            ([Op.GET, Op.GET], b"VALUE k 0 1\r\nx\r\nEND\r\nVALUE other 0 1\r\nx\r\nEND\r\n", 1),
            ([Op.GET, Op.GET], b"END\r\nVALUE k 0 1\r\nx\r\nEXD\r\n", 1),
            ([Op.DELETE, Op.SET], b"DELETED\r\nDELETED\r\n", 1),
            ([Op.SET], b"STORED\r\nSTORED\r\n", 1),  # a reply with nothing pending
            ([Op.GET], b"VALUE k 0 " + b"9" * 5000 + b"\r\n", 0),  # a size int() refuses
        ],
        [
            ([Op.SET, Op.GET, Op.GET], b"HD O0\r\nEN O1\r\nGARBAGE\r\n", 2),
            ([Op.GET, Op.GET], b"VA 1 O0\r\nx\r\nVA 1 O7\r\nx\r\n", 1),
            ([Op.GET, Op.GET], b"EN O0\r\nVA 1 O1\r\nxyz\r\n", 1),
            ([Op.DELETE, Op.SET], b"HD O0\r\nHD O0\r\n", 1),
            ([Op.SET], b"HD O0\r\nHD O1\r\n", 1),  # a reply with nothing pending
            ([Op.GET], b"VA " + b"9" * 5000 + b" O0\r\n", 0),  # a size int() refuses
        ],
    ),
)
def test_read_kinds_appends_good_replies_then_raises_and_stays_dead(
    codec: CodecUnderTest, ops: list[Op], wire: bytes, good: int
) -> None:
    one = codec.factory(CodecOptions())
    for op in ops:
        announce(one, op)
    one.feed(wire)
    kinds: list[int] = []
    with pytest.raises(ProtocolError):
        one.read_kinds(kinds)
    assert len(kinds) == good
    assert_refuses(one, match="unusable")


@pytest.mark.parametrize(
    ("codec", "wire"),
    cases([(b"STORED\r\nVALUE b 0 5\r\nab",)], [(b"HD O0\r\nVA 5 O1\r\nab",)]),
)
def test_read_kinds_fails_on_eof_mid_reply_after_the_complete_ones(
    codec: CodecUnderTest, wire: bytes
) -> None:
    one = codec.factory(CodecOptions())
    one.encode_many([1, 0], [b"a", b"b"], [memoryview(b"1"), None], 0, 2, bytearray())
    one.feed(wire)
    one.feed_eof()
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="closed with 1 replies pending"):
        one.read_kinds(kinds)
    assert kinds == [K.STORED]


@pytest.mark.parametrize(
    ("codec", "wire"),
    cases(
        [
            (b"VALUE k 0 1\r\nx\r\nEND\r\nVALUE k 0 %s\r\nx\r\nEND\r\n" % size,)
            for size in (b" 1", b"+1", b"-1", b"1_0", b"1 ", b"", b"\xd9\xa1")
        ],
        [(b"VA 1 O0\r\nx\r\nVA %s O1\r\nx\r\n" % size,) for size in (b" 1", b"+1", b"1_0", b"")],
    ),
)
def test_read_kinds_refuses_sizes_int_would_take(codec: CodecUnderTest, wire: bytes) -> None:
    one = codec.factory(CodecOptions())
    one.encode_many([0, 0], [b"k", b"k"], [None, None], 0, 2, bytearray())
    one.feed(wire)
    kinds: list[int] = []
    with pytest.raises(ProtocolError):
        one.read_kinds(kinds)
    assert kinds == [HIT]


@pytest.mark.parametrize(
    ("codec", "requests", "wire", "miss_nbytes"),
    cases(
        [
            (
                b"get a\r\nset b 0 0 1\r\n1\r\ndelete c\r\nget d\r\n",
                b"END\r\nSTORED\r\nDELETED\r\nVALUE d 0 1\r\nx\r\nEND\r\n",
                5,
            )
        ],
        [
            (
                b"mg a v O0\r\nms b 1 T0 F0 O1\r\n1\r\nmd c O2\r\nmg d v O3\r\n",
                b"EN O0\r\nHD O1\r\nHD O2\r\nVA 1 O3\r\nx\r\n",
                7,
            )
        ],
    ),
)
def test_read_kinds_interleaves_with_next_reply_in_order(
    codec: CodecUnderTest, requests: bytes, wire: bytes, miss_nbytes: int
) -> None:
    one = codec.factory(CodecOptions())
    out = bytearray()
    one.encode_many([0, 1], [b"a", b"b"], [None, memoryview(b"1")], 0, 2, out)
    one.encode(Op.DELETE, b"c", None, out)
    one.encode_many([0], [b"d"], [None], 0, 1, out)
    assert bytes(out) == requests
    one.feed(wire)
    assert one.next_reply() == Reply(K.MISS, miss_nbytes)
    kinds: list[int] = []
    assert one.read_kinds(kinds) == 3
    assert kinds == [K.STORED, K.DELETED, HIT]
    assert one.next_reply() is NEED_DATA


@pytest.mark.parametrize(
    ("codec", "requests"),
    cases([(b"incr a 1\r\ndecr b 1\r\n",)], [(b"ma a D1 v O0\r\nma b MD D1 v O1\r\n",)]),
)
def test_encode_many_sends_incr_and_decr_as_one_step(
    codec: CodecUnderTest, requests: bytes
) -> None:
    one = codec.factory(CodecOptions())
    out = bytearray()
    one.encode_many([int(Op.INCR), int(Op.DECR)], [b"a", b"b"], [None, None], 0, 2, out)
    assert bytes(out) == requests


# -- encodings ------------------------------------------------------------------------

TEXT_STORE_CASES = [
    (Op.SET, b"set k 0 0 2\r\nhi\r\n", b"set k 0 0 2 noreply\r\nhi\r\n"),
    (Op.ADD, b"add k 0 0 2\r\nhi\r\n", b"add k 0 0 2 noreply\r\nhi\r\n"),
    (Op.REPLACE, b"replace k 0 0 2\r\nhi\r\n", b"replace k 0 0 2 noreply\r\nhi\r\n"),
    (Op.APPEND, b"append k 0 0 2\r\nhi\r\n", b"append k 0 0 2 noreply\r\nhi\r\n"),
    (Op.PREPEND, b"prepend k 0 0 2\r\nhi\r\n", b"prepend k 0 0 2 noreply\r\nhi\r\n"),
]

META_STORE_CASES = [
    (Op.SET, b"ms k 2 T0 F0 O0\r\nhi\r\n", b"ms k 2 T0 F0 q O0\r\nhi\r\n"),
    (Op.ADD, b"ms k 2 T0 F0 ME O0\r\nhi\r\n", b"ms k 2 T0 F0 ME q O0\r\nhi\r\n"),
    (Op.REPLACE, b"ms k 2 T0 F0 MR O0\r\nhi\r\n", b"ms k 2 T0 F0 MR q O0\r\nhi\r\n"),
    (Op.APPEND, b"ms k 2 T0 F0 MA O0\r\nhi\r\n", b"ms k 2 T0 F0 MA q O0\r\nhi\r\n"),
    (Op.PREPEND, b"ms k 2 T0 F0 MP O0\r\nhi\r\n", b"ms k 2 T0 F0 MP q O0\r\nhi\r\n"),
]


@pytest.mark.parametrize(
    ("codec", "op", "plain", "quiet"), cases(TEXT_STORE_CASES, META_STORE_CASES)
)
def test_storage_encodings_are_byte_exact(
    codec: CodecUnderTest, op: Op, plain: bytes, quiet: bytes
) -> None:
    assert codec.encoded(op, b"k", b"hi") == (plain, 1)
    assert codec.encoded(op, b"k", b"hi", options=NOREPLY) == (quiet, 0)


@pytest.mark.parametrize(
    ("codec", "request_bytes"),
    cases([(b"set key 42 300 5\r\nvalue\r\n",)], [(b"ms key 5 T300 F42 O0\r\nvalue\r\n",)]),
)
def test_storage_encoding_carries_flags_and_ttl_from_options(
    codec: CodecUnderTest, request_bytes: bytes
) -> None:
    options = CodecOptions(flags=42, ttl_s=300)
    assert codec.encoded(Op.SET, b"key", b"value", options=options) == (request_bytes, 1)


@pytest.mark.parametrize(
    ("codec", "plain", "quiet"),
    cases(
        [(b"cas k 0 0 2 987654321\r\nhi\r\n", b"cas k 0 0 2 5 noreply\r\nhi\r\n")],
        [(b"ms k 2 T0 F0 C987654321 O0\r\nhi\r\n", b"ms k 2 T0 F0 C5 q O0\r\nhi\r\n")],
    ),
)
def test_cas_encoding_carries_the_unique(codec: CodecUnderTest, plain: bytes, quiet: bytes) -> None:
    assert codec.encoded(Op.CAS, b"k", b"hi", arg=987654321) == (plain, 1)
    assert codec.encoded(Op.CAS, b"k", b"hi", arg=5, options=NOREPLY) == (quiet, 0)


@pytest.mark.parametrize(
    ("codec", "op", "arg", "plain", "quiet"),
    cases(
        [
            (Op.DELETE, 0, b"delete k\r\n", b"delete k noreply\r\n"),
            (Op.INCR, 7, b"incr k 7\r\n", b"incr k 7 noreply\r\n"),
            (Op.DECR, 3, b"decr k 3\r\n", b"decr k 3 noreply\r\n"),
            (Op.TOUCH, 60, b"touch k 60\r\n", b"touch k 60 noreply\r\n"),
        ],
        [
            (Op.DELETE, 0, b"md k O0\r\n", b"md k q O0\r\n"),
            (Op.INCR, 7, b"ma k D7 v O0\r\n", b"ma k D7 q O0\r\n"),
            (Op.DECR, 3, b"ma k MD D3 v O0\r\n", b"ma k MD D3 q O0\r\n"),
        ],
    ),
)
def test_quietable_command_encodings_are_byte_exact(
    codec: CodecUnderTest, op: Op, arg: int, plain: bytes, quiet: bytes
) -> None:
    assert codec.encoded(op, b"k", arg=arg) == (plain, 1)
    assert codec.encoded(op, b"k", arg=arg, options=NOREPLY) == (quiet, 0)


@pytest.mark.parametrize(
    ("codec", "op", "key", "value", "arg"),
    cases(
        [
            (Op.NOOP, b"", None, 0),
            # A storage line whose data block the words do not give (no __data__).
            (Op.COMMAND, [b"set", b"k", b"0", b"0", b"5"], None, 0),
            (Op.SET, b"k", None, 0),
            (Op.CAS, b"k", None, 1),
            (Op.INCR, b"k", None, -1),
            (Op.MGET, b"single", None, 0),
            (Op.MGET, [], None, 0),
        ],
        [
            (Op.COMMAND, [b"PING"], None, 0),
            (Op.SET, b"k", None, 0),
            (Op.CAS, b"k", None, 1),
            (Op.DECR, b"k", None, -1),
            (Op.MGET, b"single", None, 0),
            (Op.MGET, [], None, 0),
        ],
    ),
)
def test_inexpressible_requests_raise_value_error(
    codec: CodecUnderTest, op: Op, key: bytes | list[bytes], value: bytes | None, arg: int
) -> None:
    one = codec.factory(CodecOptions())
    with pytest.raises(ValueError):
        one.encode(op, key, value, bytearray(), arg)
    assert one.pending() == 0


# -- replies --------------------------------------------------------------------------

TEXT_REPLY_CASES = [
    (Op.GET, b"END\r\n", K.MISS, None, 0),
    (Op.GET, b"VALUE k 0 2\r\nhi\r\nEND\r\n", K.HIT, b"hi", 1),
    (Op.GET, b"VALUE k 4294967295 0\r\n\r\nEND\r\n", K.HIT, b"", 1),
    (Op.GET, b"VALUE k 0 8\r\nx\r\nEND\r\n\r\nEND\r\n", K.HIT, b"x\r\nEND\r\n", 1),
    (Op.GETS, b"VALUE k 3 2 12345\r\nhi\r\nEND\r\n", K.HIT, b"hi", 1),
    (Op.GETS, b"END\r\n", K.MISS, None, 0),
    (Op.SET, b"STORED\r\n", K.STORED, None, 0),
    (Op.ADD, b"NOT_STORED\r\n", K.NOT_STORED, None, 0),
    (Op.REPLACE, b"NOT_STORED\r\n", K.NOT_STORED, None, 0),
    (Op.APPEND, b"STORED\r\n", K.STORED, None, 0),
    (Op.PREPEND, b"NOT_STORED\r\n", K.NOT_STORED, None, 0),
    (Op.CAS, b"EXISTS\r\n", K.EXISTS, None, 0),
    (Op.CAS, b"NOT_FOUND\r\n", K.NOT_FOUND, None, 0),
    (Op.CAS, b"STORED\r\n", K.STORED, None, 0),
    (Op.DELETE, b"DELETED\r\n", K.DELETED, None, 0),
    (Op.DELETE, b"NOT_FOUND\r\n", K.NOT_FOUND, None, 0),
    (Op.INCR, b"18446744073709551615\r\n", K.VALUE, b"18446744073709551615", 0),
    (Op.INCR, b"NOT_FOUND\r\n", K.NOT_FOUND, None, 0),
    (Op.DECR, b"0\r\n", K.VALUE, b"0", 0),
    (Op.TOUCH, b"TOUCHED\r\n", K.TOUCHED, None, 0),
    (Op.TOUCH, b"NOT_FOUND\r\n", K.NOT_FOUND, None, 0),
]

META_REPLY_CASES = [
    (Op.GET, b"EN O0\r\n", K.MISS, None, 0),
    (Op.GET, b"EN\r\n", K.MISS, None, 0),  # servers before 1.6.10 did not echo O on EN
    (Op.GET, b"VA 2 O0\r\nhi\r\n", K.HIT, b"hi", 1),
    (Op.GET, b"VA 0 O0\r\n\r\n", K.HIT, b"", 1),
    (Op.GET, b"VA 7 O0\r\nHD O0\r\n\r\n", K.HIT, b"HD O0\r\n", 1),
    (Op.GETS, b"VA 2 c12345 O0\r\nhi\r\n", K.HIT, b"hi", 1),
    (Op.GETS, b"EN O0\r\n", K.MISS, None, 0),
    (Op.TOUCH, b"HD O0\r\n", K.TOUCHED, None, 0),
    (Op.TOUCH, b"EN O0\r\n", K.NOT_FOUND, None, 0),
    (Op.SET, b"HD O0\r\n", K.STORED, None, 0),
    (Op.SET, b"NS O0\r\n", K.NOT_STORED, None, 0),
    (Op.ADD, b"NS O0\r\n", K.NOT_STORED, None, 0),
    (Op.REPLACE, b"NS O0\r\n", K.NOT_STORED, None, 0),
    (Op.APPEND, b"HD O0\r\n", K.STORED, None, 0),
    (Op.PREPEND, b"NS O0\r\n", K.NOT_STORED, None, 0),
    (Op.CAS, b"EX O0\r\n", K.EXISTS, None, 0),
    (Op.CAS, b"NF O0\r\n", K.NOT_FOUND, None, 0),
    (Op.CAS, b"HD O0\r\n", K.STORED, None, 0),
    (Op.DELETE, b"HD O0\r\n", K.DELETED, None, 0),
    (Op.DELETE, b"NF O0\r\n", K.NOT_FOUND, None, 0),
    (Op.INCR, b"VA 2 O0\r\n12\r\n", K.VALUE, b"12", 0),
    (Op.INCR, b"NF O0\r\n", K.NOT_FOUND, None, 0),
    (Op.DECR, b"VA 1 O0\r\n0\r\n", K.VALUE, b"0", 0),
    (Op.NOOP, b"MN\r\n", K.OK, None, 0),
]


@pytest.mark.parametrize(
    ("codec", "op", "wire", "kind", "payload", "keys"), cases(TEXT_REPLY_CASES, META_REPLY_CASES)
)
def test_every_reply_kind_parses_whole_bytewise_and_with_trailing_bytes(
    codec: CodecUnderTest, op: Op, wire: bytes, kind: ReplyKind, payload: bytes | None, keys: int
) -> None:
    codec.check_reply(op, wire, Reply(kind, len(wire), None, keys), arg=1)
    codec.check_reply(op, wire, Reply(kind, len(wire), payload, keys), arg=1, options=KEEP)


@pytest.mark.parametrize("codec", [TEXT, META])
def test_stats_reply_payload_is_name_value_lines_always(codec: CodecUnderTest) -> None:
    wire = b"STAT pid 4242\r\nSTAT version 1.6.18\r\nSTAT rusage_user 0.1 0.2\r\nEND\r\n"
    payload = b"pid 4242\r\nversion 1.6.18\r\nrusage_user 0.1 0.2\r\n"
    codec.check_reply(Op.STATS, wire, Reply(K.VALUE, len(wire), payload))
    assert parse_stats_text(payload) == {
        "pid": "4242",
        "version": "1.6.18",
        "rusage_user": "0.1 0.2",
    }


@pytest.mark.parametrize(
    ("codec", "op", "line"),
    cases(
        [
            (op, line)
            for op in [Op.GET, Op.GETS, Op.SET, Op.CAS, Op.DELETE, Op.INCR, Op.TOUCH, Op.STATS]
            for line in ERROR_LINES
        ],
        [
            (op, line)
            for op in [
                Op.GET,
                Op.GETS,
                Op.TOUCH,
                Op.SET,
                Op.CAS,
                Op.DELETE,
                Op.INCR,
                Op.NOOP,
                Op.STATS,
            ]
            for line in ERROR_LINES
        ],
    ),
)
def test_error_lines_are_reply_values_not_exceptions(
    codec: CodecUnderTest, op: Op, line: bytes
) -> None:
    wire = line + b"\r\n"
    codec.check_reply(op, wire, Reply(K.ERROR_REPLY, len(wire), line), arg=1)


@pytest.mark.parametrize(
    ("codec", "wire"),
    cases(
        [(b"VALUE a 0 1\r\nx\r\nVALUE c 7 3 99\r\nyyy\r\nEND\r\n",)],
        [(b"VA 1 O0\r\nx\r\nVA 3 O2\r\nyyy\r\nMN\r\n",)],
    ),
)
def test_multiget_with_some_misses_is_one_hit_reply_counting_values(
    codec: CodecUnderTest, wire: bytes
) -> None:
    keys = [b"a", b"b", b"c"]
    codec.check_reply(Op.MGET, wire, Reply(K.HIT, len(wire), None, 2), key=keys)
    codec.check_reply(Op.MGET, wire, Reply(K.HIT, len(wire), b"xyyy", 2), key=keys, options=KEEP)


@pytest.mark.parametrize(("codec", "wire"), cases([(b"END\r\n",)], [(b"MN\r\n",)]))
def test_multiget_with_only_misses_is_a_miss(codec: CodecUnderTest, wire: bytes) -> None:
    miss = Reply(K.MISS, len(wire), None, 0)
    codec.check_reply(Op.MGET, wire, miss, key=[b"a", b"b"], options=KEEP)


# -- protocol errors ------------------------------------------------------------------

TEXT_GARBAGE_CASES = [
    (Op.SET, b"HELLO\r\n"),
    (Op.SET, b"stored\r\n"),
    (Op.SET, b"STORED \r\n"),
    (Op.SET, b"VALUE k 0 1\r\nx\r\nEND\r\n"),
    (Op.GET, b"STORED\r\n"),
    (Op.GET, b"VALUE k x 1\r\nx\r\nEND\r\n"),
    (Op.GET, b"VALUE k 0\r\nx\r\nEND\r\n"),
    (Op.GET, b"VALUE k 0 -1\r\nx\r\nEND\r\n"),
    (Op.GET, b"VALUE k 0 1 2 3\r\nx\r\nEND\r\n"),
    (Op.GET, b"VALUE k 0 1 c\r\nx\r\nEND\r\n"),
    (Op.GET, b"VALUE k 0 1\r\nxyEND\r\n"),
    (Op.GET, b"VALUE other 0 1\r\nx\r\nEND\r\n"),
    (Op.GET, b"VALUE k 0 1\r\nx\r\nVALUE k 0 1\r\nx\r\nEND\r\n"),
    (Op.INCR, b"12a\r\n"),
    (Op.INCR, b"-1\r\n"),
    (Op.INCR, b"STORED\r\n"),
    (Op.DELETE, b"STORED\r\n"),
    (Op.TOUCH, b"DELETED\r\n"),
    (Op.STATS, b"STAT a b\r\nBOGUS\r\nEND\r\n"),
    (Op.STATS, b"STAT a b\r\nERROR\r\n"),
]

META_GARBAGE_CASES = [
    (Op.SET, b"hd O0\r\n"),
    (Op.SET, b"HDX O0\r\n"),
    (Op.SET, b"HD  O0\r\n"),
    (Op.SET, b"HD O\r\n"),
    (Op.SET, b"H\r\n"),
    (Op.SET, b"XX O0\r\n"),
    (Op.SET, b"EN O0\r\n"),
    (Op.SET, b"STORED\r\n"),
    (Op.GET, b"HD O0\r\n"),
    (Op.GET, b"MN\r\n"),
    (Op.GET, b"VA x O0\r\nx\r\n"),
    (Op.GET, b"VA -1 O0\r\nx\r\n"),
    (Op.GET, b"VA 1 O0\r\nxy\r\n"),
    (Op.GET, b"VALUE k 0 1\r\nx\r\nEND\r\n"),
    (Op.INCR, b"HD O0\r\n"),
    (Op.DELETE, b"NS O0\r\n"),
    (Op.NOOP, b"HD\r\n"),
    (Op.STATS, b"STAT a b\r\nMN\r\n"),
]


@pytest.mark.parametrize(
    ("codec", "op", "wire", "then"),
    cases(
        [(op, wire, Op.SET) for op, wire in TEXT_GARBAGE_CASES],
        [(op, wire, Op.NOOP) for op, wire in META_GARBAGE_CASES],
    ),
)
def test_garbage_raises_and_the_codec_stays_dead(
    codec: CodecUnderTest, op: Op, wire: bytes, then: Op
) -> None:
    one = codec.factory(CodecOptions())
    announce(one, op, arg=1)
    announce(one, then, b"")
    one.feed(wire)
    with pytest.raises(ProtocolError):
        drain(one)
    assert_refuses(one)


@pytest.mark.parametrize(
    ("codec", "template"),
    cases([(b"VALUE k 0 %d\r\n%s\r\nEND\r\n",)], [(b"VA %d O0\r\n%s\r\n",)]),
)
def test_reply_exactly_at_the_bound_is_accepted(codec: CodecUnderTest, template: bytes) -> None:
    value = b"x" * (64 - len(template % (10, b"")))  # a 2-digit size
    wire = template % (len(value), value)
    assert len(wire) == 64
    codec.check_reply(Op.GET, wire, Reply(K.HIT, 64, None, 1), options=SMALL)


@pytest.mark.parametrize(
    ("codec", "requests", "wire", "refused"),
    cases(
        [
            (
                b"set a 0 0 1\r\n1\r\nget a\r\nget a b\r\n",
                b"STORED\r\nEND\r\nVALUE a 0 1\r\n1\r\nVALUE b 0 1\r\n2\r\nEND\r\n",
                Op.NOOP,
            )
        ],
        [
            (
                b"ms a 1 T0 F0 O0\r\n1\r\nmg a v O1\r\nmg a v q O2\r\nmg b v q O3\r\nmn\r\n",
                b"HD O0\r\nEN O1\r\nVA 1 O2\r\n1\r\nVA 1 O3\r\n2\r\nMN\r\n",
                Op.COMMAND,
            )
        ],
    ),
)
def test_batch_paths_take_plain_int_ops_and_report_kinds_with_key_counts(
    codec: CodecUnderTest, requests: bytes, wire: bytes, refused: Op
) -> None:
    one = codec.factory(CodecOptions())
    out = bytearray()
    ops = [int(Op.SET), int(Op.GET), int(Op.MGET)]
    keys: list[bytes | list[bytes]] = [b"a", b"a", [b"a", b"b"]]
    assert one.encode_many(ops, keys, [b"1", None, None], 0, 3, out) == 3
    assert bytes(out) == requests
    one.feed(wire)
    kinds: list[int] = []
    assert one.read_kinds(kinds) == 3
    assert kinds == [K.STORED, K.MISS, K.HIT | 2 << 8]
    with pytest.raises(ValueError, match=refused.name):
        one.encode_many([int(refused)], [b""], [None], 0, 1, out)
