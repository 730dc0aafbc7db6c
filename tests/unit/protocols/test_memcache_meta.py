"""MemcacheMetaCodec: byte-exact requests, every reply kind, opaques, quiet mode, failures."""

from __future__ import annotations

import pytest

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols.base import (
    NEED_DATA,
    CodecOptions,
    Op,
    Reply,
    ReplyKind,
)
from kvbench.protocols.memcache_meta import MemcacheMetaCodec
from tests.support import codec_checks
from tests.support.codec_checks import announce, code_of, drain, reads
from tests.support.memcached_script import META

K = ReplyKind
DEFAULT = CodecOptions()
KEEP = CodecOptions(keep_payload=True)
NOREPLY = CodecOptions(noreply=True)


CODEC = META
encoded, check_reply = CODEC.encoded, CODEC.check_reply


# -- encodings ------------------------------------------------------------------------


@pytest.mark.parametrize("options", [CodecOptions(), NOREPLY])
def test_gets_touch_noop_stats_and_multiget_ignore_noreply(options: CodecOptions) -> None:
    assert encoded(Op.GET, b"k", options=options) == (b"mg k v O0\r\n", 1)
    assert encoded(Op.GETS, b"k", options=options) == (b"mg k v c O0\r\n", 1)
    # mg's q hides misses, not HD, so a quiet touch could not be matched: never quiet.
    assert encoded(Op.TOUCH, b"k", arg=60, options=options) == (b"mg k T60 O0\r\n", 1)
    assert encoded(Op.NOOP, b"", options=options) == (b"mn\r\n", 1)
    assert encoded(Op.STATS, b"", options=options) == (b"stats\r\n", 1)
    assert encoded(Op.MGET, [b"a", b"bb", b"c"], options=options) == (
        b"mg a v q O0\r\nmg bb v q O1\r\nmg c v q O2\r\nmn\r\n",
        1,
    )


def test_every_tokened_request_takes_the_next_opaque() -> None:
    codec = MemcacheMetaCodec()
    out = bytearray()
    codec.encode(Op.GET, b"a", None, out)
    codec.encode(Op.NOOP, b"", None, out)
    codec.encode(Op.MGET, [b"b", b"c"], None, out)
    codec.encode(Op.SET, b"d", b"1", out)
    codec.encode(Op.STATS, b"", None, out)
    codec.encode(Op.DELETE, b"e", None, out)
    assert bytes(out) == (
        b"mg a v O0\r\nmn\r\nmg b v q O1\r\nmg c v q O2\r\nmn\r\n"
        b"ms d 1 T0 F0 O3\r\n1\r\nstats\r\nmd e O4\r\n"
    )
    assert codec.pending() == 6


def test_opaque_wraps_at_two_to_the_32() -> None:
    codec = MemcacheMetaCodec()
    codec._token = 2**32 - 1  # white-box: 4 billion requests are too many for a unit test
    out = bytearray()
    codec.encode(Op.GET, b"a", None, out)
    codec.encode(Op.GET, b"b", None, out)
    assert bytes(out) == b"mg a v O4294967295\r\nmg b v O0\r\n"
    codec.feed(b"EN O4294967295\r\nEN O0\r\n")
    assert [r.kind for r in drain(codec)] == [K.MISS, K.MISS]


# -- replies --------------------------------------------------------------------------

# -- opaque matching ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "wire"),
    [
        (Op.GET, b"EN O1\r\n"),
        (Op.GET, b"VA 1 O7\r\nx\r\n"),
        (Op.GET, b"VA 1\r\nx\r\n"),
        (Op.GET, b"VA 1 O00\r\nx\r\n"),
        (Op.SET, b"HD O9\r\n"),
        (Op.DELETE, b"NF O12\r\n"),
        (Op.INCR, b"VA 1 O3\r\n5\r\n"),
        (Op.TOUCH, b"HD O1\r\n"),
    ],
)
def test_opaque_mismatch_raises(op: Op, wire: bytes) -> None:
    codec = MemcacheMetaCodec()
    announce(codec, op, arg=1)
    codec.feed(wire)
    with pytest.raises(ProtocolError):
        drain(codec)
    with pytest.raises(ProtocolError):
        codec.next_reply()


def test_replies_out_of_request_order_raise() -> None:
    codec = MemcacheMetaCodec()
    announce(codec, Op.GET, b"a")
    announce(codec, Op.GET, b"b")
    codec.feed(b"EN O1\r\nEN O0\r\n")
    with pytest.raises(ProtocolError, match="opaque"):
        codec.next_reply()


# -- multi-get ------------------------------------------------------------------------


def test_error_line_inside_a_multiget_makes_it_an_error_reply() -> None:
    wire = b"CLIENT_ERROR bad command line format\r\nVA 1 O1\r\nz\r\nMN\r\n"
    expected = Reply(K.ERROR_REPLY, len(wire), b"CLIENT_ERROR bad command line format", 1)
    check_reply(Op.MGET, wire, expected, key=[b"a", b"b"])


@pytest.mark.parametrize(
    "wire",
    [
        b"VA 1 O5\r\nx\r\nMN\r\n",  # token of no key in this multi-get
        b"VA 1 O2\r\nx\r\nVA 1 O0\r\nx\r\nMN\r\n",  # out of order
        b"VA 1 O1\r\nx\r\nVA 1 O1\r\nx\r\nMN\r\n",  # the same key twice
        b"VA 1\r\nx\r\nMN\r\n",  # no token
        b"VA 1 O0\r\nxMN\r\n",  # block not followed by CRLF
        b"EN O1\r\nMN\r\n",  # misses are quiet
        b"HD\r\nMN\r\n",
    ],
)
def test_multiget_grammar_violations_raise(wire: bytes) -> None:
    codec = MemcacheMetaCodec()
    announce(codec, Op.MGET, [b"a", b"b", b"c"])
    codec.feed(wire)
    with pytest.raises(ProtocolError):
        drain(codec)


# -- noreply (quiet mode) -------------------------------------------------------------


def test_quiet_failures_are_matched_by_token_and_counted_not_returned() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    out = bytearray()
    announced = [
        codec.encode(Op.ADD, b"a", b"1", out),  # O0, fails: NS O0
        codec.encode(Op.GET, b"a", None, out),  # O1
        codec.encode(Op.DELETE, b"b", None, out),  # O2, fails: NF O2
        codec.encode(Op.INCR, b"c", None, out, 1),  # O3, succeeds silently
        codec.encode(Op.GET, b"c", None, out),  # O4
    ]
    assert announced == [0, 1, 0, 0, 1]
    codec.feed(b"NS O0\r\nEN O1\r\nNF O2\r\nVA 1 O4\r\n2\r\n")
    assert [(r.kind, r.nbytes) for r in drain(codec)] == [(K.MISS, 7), (K.HIT, 12)]
    assert codec.quiet_failures == 2
    assert codec.pending() == 0


def test_quiet_failure_with_nothing_pending_is_consumed() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    announce(codec, Op.SET, b"a")
    announce(codec, Op.SET, b"b")
    codec.feed(b"NS O1")
    assert codec.next_reply() is NEED_DATA
    codec.feed(b"\r\n")
    assert codec.next_reply() is NEED_DATA
    assert codec.quiet_failures == 1
    codec.feed_eof()
    assert codec.next_reply() is NEED_DATA


def test_quiet_failure_before_an_untokened_request_is_consumed() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    announce(codec, Op.SET, b"a")
    announce(codec, Op.NOOP, b"")
    codec.feed(b"NS O0\r\nMN\r\n")
    assert drain(codec) == [Reply(K.OK, 4)]
    assert codec.quiet_failures == 1


def test_error_line_with_nothing_pending_counts_as_a_quiet_failure() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    announce(codec, Op.SET, b"a")
    codec.feed(b"SERVER_ERROR out of memory storing object\r\n")
    assert codec.next_reply() is NEED_DATA
    assert codec.quiet_failures == 1


@pytest.mark.parametrize(
    "wire",
    [
        b"NS O1\r\n",  # token not sent yet
        b"NS O0\r\nNS O0\r\n",  # the same failure twice
        b"HD O0\r\n",  # success is suppressed by q: an HD is not ours
        b"NS\r\n",  # no token: cannot be matched
    ],
)
def test_unmatchable_quiet_replies_raise(wire: bytes) -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    announce(codec, Op.SET, b"a")
    codec.feed(wire)
    with pytest.raises(ProtocolError):
        drain(codec)


def test_quiet_failure_token_of_a_pending_request_raises() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    announce(codec, Op.GET, b"a")  # O0
    announce(codec, Op.SET, b"b")  # O1, quiet
    codec.feed(b"NS O1\r\n")  # arrives before the get's reply: out of order
    with pytest.raises(ProtocolError):
        drain(codec)


def test_without_noreply_any_reply_with_nothing_pending_raises() -> None:
    codec = MemcacheMetaCodec()
    codec.feed(b"NS O0\r\n")
    with pytest.raises(ProtocolError, match="no request pending"):
        codec.next_reply()


def test_error_line_with_nothing_pending_and_no_quiet_request_raises() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    codec.feed(b"SERVER_ERROR out of memory\r\n")
    with pytest.raises(ProtocolError):
        codec.next_reply()


# -- protocol errors ------------------------------------------------------------------

# -- bounds ---------------------------------------------------------------------------

SMALL = CodecOptions(max_reply_bytes=64)


# -- pipelines ------------------------------------------------------------------------


def test_pipeline_of_mixed_replies_in_odd_chunks() -> None:
    codec = MemcacheMetaCodec(KEEP)
    out = bytearray()
    codec.encode(Op.SET, b"a", b"1", out)  # O0
    codec.encode(Op.GET, b"a", None, out)  # O1
    codec.encode(Op.MGET, [b"a", b"b"], None, out)  # O2 O3
    codec.encode(Op.INCR, b"a", None, out, 2)  # O4
    codec.encode(Op.STATS, b"", None, out)
    codec.encode(Op.NOOP, b"", None, out)
    codec.encode(Op.DELETE, b"a", None, out)  # O5
    pieces = [
        b"HD O0\r\n",
        b"VA 1 O1\r\n1\r\n",
        b"VA 2 O3\r\nbb\r\nMN\r\n",
        b"VA 1 O4\r\n3\r\n",
        b"STAT pid 1\r\nEND\r\n",
        b"MN\r\n",
        b"HD O5\r\n",
    ]
    wire = b"".join(pieces)
    got: list[Reply] = []
    for start in range(0, len(wire), 5):
        codec.feed(wire[start : start + 5])
        got += drain(codec)
    assert got == [
        Reply(K.STORED, len(pieces[0])),
        Reply(K.HIT, len(pieces[1]), b"1", 1),
        Reply(K.HIT, len(pieces[2]), b"bb", 1),
        Reply(K.VALUE, len(pieces[3]), b"3"),
        Reply(K.VALUE, len(pieces[4]), b"pid 1\r\n"),
        Reply(K.OK, 4),
        Reply(K.DELETED, len(pieces[6])),
    ]
    assert codec.pending() == 0


def test_no_more_quiet_error_lines_than_quiet_requests() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    announce(codec, Op.SET, b"a")
    announce(codec, Op.SET, b"b")
    codec.feed(b"SERVER_ERROR out of memory\r\nSERVER_ERROR out of memory\r\n")
    assert codec.next_reply() is NEED_DATA
    assert codec.quiet_failures == 2
    codec.feed(b"SERVER_ERROR out of memory\r\n")
    with pytest.raises(ProtocolError):
        codec.next_reply()


def test_status_line_with_extra_flags_is_measured_exactly() -> None:
    wire = b"HD k" + b"x" * 40 + b" O0\r\n"  # the k flag echoes the key
    check_reply(Op.SET, wire, Reply(K.STORED, len(wire)))


@pytest.mark.parametrize("wire", [b"NS Oabc\r\n", b"NS O99999999999\r\n", b"NS O-1\r\n"])
def test_tokens_we_never_send_are_not_quiet_failures(wire: bytes) -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    announce(codec, Op.SET, b"a")
    codec.feed(wire)
    with pytest.raises(ProtocolError):
        codec.next_reply()


def test_multiget_token_we_never_send_raises() -> None:
    codec = MemcacheMetaCodec()
    announce(codec, Op.MGET, [b"a"])
    codec.feed(b"VA 1 Oabc\r\nx\r\nMN\r\n")
    with pytest.raises(ProtocolError):
        codec.next_reply()


def test_quiet_failure_before_a_multiget_is_consumed() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    announce(codec, Op.ADD, b"a")  # O0, quiet
    announce(codec, Op.MGET, [b"a", b"b"])  # O1 O2
    codec.feed(b"NS O0\r\nVA 1 O1\r\nx\r\nMN\r\n")
    assert drain(codec) == [Reply(K.HIT, len(b"VA 1 O1\r\nx\r\nMN\r\n"), None, 1)]
    assert codec.quiet_failures == 1


# -- batch paths: encode_many and read_kinds ------------------------------------------

Key = bytes | tuple[bytes, ...] | list[bytes]
Value = bytes | memoryview | None


def per_op(ops: list[int], keys: list[Key], values: list[Value]) -> tuple[bytes, int, int]:
    """What encode() writes for the requests, how many it announces, the next token."""
    codec = MemcacheMetaCodec()
    return (*codec_checks.per_op(codec, ops, keys, values), codec._token)


def test_encode_many_matches_encode_for_every_op_and_value_type() -> None:
    ops = [int(op) for op in (Op.GET, Op.GET, Op.SET, Op.GET, Op.DELETE, Op.INCR, Op.MGET)]
    ops += [int(op) for op in (Op.SET, Op.ADD, Op.GETS, Op.DECR, Op.TOUCH, Op.NOOP, Op.STATS)]
    ops += [int(Op.GET), int(Op.CAS), int(Op.MGET), int(Op.GET)]
    keys: list[Key] = [b"k%d" % i for i in range(len(ops))]
    keys[6] = (b"a", b"b", b"c")
    keys[16] = [b"d"]
    values: list[Value] = [VALUE_100 if op in (1, 6, 10) else None for op in ops]
    values[7] = b"bytes value"  # not a memoryview: the per-op path
    codec = MemcacheMetaCodec()
    out = bytearray(b"previous;")
    assert codec.encode_many(ops, keys, values, 0, len(ops), out) == len(ops)
    assert (bytes(out[9:]), codec.pending(), codec._token) == per_op(ops, keys, values)


VALUE_100 = memoryview(b"v" * 100)


def test_encode_many_of_gets_only_and_a_window() -> None:
    codec = MemcacheMetaCodec()
    out = bytearray()
    keys: list[Key] = [b"a", b"b", b"c", b"d"]
    assert codec.encode_many([0] * 4, keys, [None] * 4, 1, 3, out) == 2
    assert bytes(out) == b"mg b v O0\r\nmg c v O1\r\n"
    assert codec.encode_many([1, 2], keys, [memoryview(b"xy"), None], 0, 2, out) == 2
    assert bytes(out[22:]) == b"ms a 2 T0 F0 O2\r\nxy\r\nmd b O3\r\n"
    assert codec.pending() == 4


def test_encode_many_hands_the_tokens_near_the_wrap_to_encode() -> None:
    codec = MemcacheMetaCodec()
    codec._token = 2**32 - 2  # white-box, as in test_opaque_wraps_at_two_to_the_32
    out = bytearray()
    keys: list[Key] = [b"a", (b"b", b"c"), b"d", b"e"]
    codec.encode_many([0, int(Op.MGET), 0, 1], keys, [None, None, None, VALUE_100], 0, 4, out)
    assert bytes(out) == (
        b"mg a v O4294967294\r\nmg b v q O4294967295\r\nmg c v q O0\r\nmn\r\nmg d v O1\r\n"
        b"ms e 100 T0 F0 O2\r\n" + b"v" * 100 + b"\r\n"
    )
    codec.feed(b"EN O4294967294\r\nVA 1 O0\r\nx\r\nMN\r\nEN O1\r\nHD O2\r\n")
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 4
    assert kinds == [K.MISS, K.HIT | 1 << 8, K.MISS, K.STORED]
    # A multi-get that brings the wrap near hands the rest of the batch to encode().
    codec = MemcacheMetaCodec()
    codec._token = 2**32 - 6
    out.clear()
    keys = [b"a", (b"b", b"c", b"d"), b"e", b"f"]
    codec.encode_many([0, int(Op.MGET), 0, 0], keys, [None] * 4, 0, 4, out)
    codec.encode(Op.GET, b"g", None, out)
    assert bytes(out).endswith(b"mn\r\nmg e v O4294967294\r\nmg f v O4294967295\r\nmg g v O0\r\n")
    assert (codec._token, codec.pending()) == (1, 5)


@pytest.mark.parametrize(
    ("bad", "error", "written"),
    [
        ((int(Op.COMMAND), b"k", None), ValueError, 2),
        ((int(Op.SET), b"k", None), ValueError, 2),
        ((int(Op.MGET), b"k", None), ValueError, 2),
        # Requests are joined once: a bad key fails what was collected with it.
        ((int(Op.GET), None, None), TypeError, 0),
    ],
)
def test_encode_many_failing_midway_announces_exactly_what_it_wrote(
    bad: tuple[int, Key | None, Value], error: type[Exception], written: int
) -> None:
    ops = [int(Op.SET), int(Op.GET), bad[0], int(Op.GET)]
    keys = [b"a", b"b", bad[1], b"d"]
    values: list[Value] = [memoryview(b"1"), None, bad[2], None]
    codec = MemcacheMetaCodec()
    out = bytearray()
    with pytest.raises(error):
        codec.encode_many(ops, keys, values, 0, 4, out)  # type: ignore[arg-type]
    assert (
        (bytes(out), codec.pending(), codec._token)
        == per_op(
            ops[:written],
            keys[:written],  # type: ignore[arg-type]
            values[:written],
        )
    )
    codec.feed(b"HD O0\r\nEN O1\r\n"[: 7 * written])
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == written
    assert kinds == [K.STORED, K.MISS][:written]


def test_encode_many_with_noreply_writes_what_encode_writes() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    out = bytearray()
    assert codec.encode_many([1, 0], [b"a", b"b"], [memoryview(b"1"), None], 0, 2, out) == 2
    assert bytes(out) == b"ms a 1 T0 F0 q O0\r\n1\r\nmg b v O1\r\n"
    assert codec.pending() == 1


def test_read_kinds_counts_hits_misses_and_statuses_inline_and_not() -> None:
    codec = MemcacheMetaCodec()
    ops = [Op.GET, Op.GET, Op.GET, Op.GET, Op.SET, Op.DELETE, Op.DELETE, Op.INCR, Op.SET]
    ops += [Op.GETS, Op.MGET, Op.GET, Op.INCR, Op.TOUCH, Op.NOOP]
    for op in ops:
        announce(codec, op, [b"k", b"j"] if op is Op.MGET else b"k")
    wire = (
        b"VA 3 O0\r\nabc\r\n"
        b"VA 3 O1\r\nxyz\r\n"  # the guessed size
        b"VA 2 f5 O2\r\nab\r\n"  # flags: the parser
        b"EN O3\r\nHD O4\r\nHD O5\r\nNF O6\r\nVA 2 O7\r\n42\r\nNS O8\r\n"
        b"VA 1 c9 O9\r\nz\r\n"
        b"VA 1 O11\r\nz\r\nMN\r\n"
        b"SERVER_ERROR out of memory\r\n"
        b"NF O13\r\nHD O14\r\nMN\r\n"
    )
    expected = [K.HIT | 1 << 8, K.HIT | 1 << 8, K.HIT | 1 << 8, K.MISS, K.STORED, K.DELETED]
    expected += [K.NOT_FOUND, K.VALUE, K.NOT_STORED, K.HIT | 1 << 8, K.HIT | 1 << 8]
    expected += [K.ERROR_REPLY, K.NOT_FOUND, K.TOUCHED, K.OK]
    assert reads(codec, wire, []) == expected
    assert codec.pending() == 0


def test_read_kinds_waits_for_a_split_reply() -> None:
    wire = b"VA 3 O0\r\nabc\r\nVA 3 O1\r\nabc\r\nHD O2\r\n"
    for cut in range(len(wire) + 1):
        codec = MemcacheMetaCodec()
        codec.encode_many([0, 0, 1], [b"a", b"b", b"c"], [None, None, VALUE_100], 0, 3, bytearray())
        assert reads(codec, wire, [cut]) == [K.HIT | 1 << 8] * 2 + [K.STORED]


def test_read_kinds_consumes_quiet_failures_like_next_reply() -> None:
    codec = MemcacheMetaCodec(NOREPLY)
    announce(codec, Op.SET, b"a")  # O0, quiet
    announce(codec, Op.GET, b"b")  # O1
    announce(codec, Op.ADD, b"c")  # O2, quiet
    codec.feed(b"NS O0\r\nEN O1\r\nNS O2\r\nSERVER_ERROR x\r\n")
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="no request pending"):
        codec.read_kinds(kinds)  # two quiet requests, three failures
    assert kinds == [K.MISS]
    assert codec.quiet_failures == 2


def test_read_kinds_keeps_the_reply_bound() -> None:
    hit = b"VA 10 O0\r\n0123456789\r\n"
    codec = MemcacheMetaCodec(CodecOptions(max_reply_bytes=len(hit) + 1))
    codec.encode_many([0, 0], [b"a", b"b"], [None, None], 0, 2, bytearray())
    codec.feed(hit + b"VA 30 O1\r\n" + b"x" * 30 + b"\r\n")
    kinds: list[int] = []
    with pytest.raises(ReplyTooLarge):
        codec.read_kinds(kinds)
    assert kinds == [K.HIT | 1 << 8]


def test_fifo_is_compacted_and_multiget_ends_are_dropped() -> None:
    codec = MemcacheMetaCodec()
    out = bytearray()
    kinds: list[int] = []
    for _ in range(40):
        first = codec._token
        codec.encode_many([0] * 30, [b"k"] * 30, [None] * 30, 0, 30, out)
        codec.encode(Op.MGET, [b"a"], None, out)
        codec.feed(b"".join(b"EN O%d\r\n" % (first + i) for i in range(30)) + b"MN\r\n")
        assert codec.read_kinds(kinds) == 31
    assert codec.pending() == 0
    assert len(codec._pending) <= 62 and not codec._mget_ends  # white-box: nothing kept


def test_read_kinds_does_not_take_an_answered_token_for_a_quiet_failure() -> None:
    for wire in (b"EN O0\r\nNS O0\r\n", b"VA 1 c5 O0\r\nx\r\nNS O0\r\n"):
        results = []
        for batch in (False, True):
            codec = MemcacheMetaCodec(NOREPLY)
            announce(codec, Op.GETS if b"c5" in wire else Op.GET, b"a")  # O0
            announce(codec, Op.SET, b"b")  # O1, quiet
            announce(codec, Op.GET, b"c")  # O2
            codec.feed(wire)
            kinds: list[int] = []
            with pytest.raises(ProtocolError, match="opaque mismatch"):
                if batch:
                    codec.read_kinds(kinds)
                while not batch and (reply := codec.next_reply()) is not NEED_DATA:
                    kinds.append(code_of(reply))
            results.append(kinds)
        assert results[0] == results[1] == [K.MISS if b"EN" in wire else K.HIT | 1 << 8]


@pytest.mark.parametrize(
    ("op", "line"), [(Op.SET, b"HD O%d\r\n"), (Op.DELETE, b"HD O%d\r\n"), (Op.GET, b"EN O%d\r\n")]
)
def test_runs_of_one_status_whose_tokens_grow_a_digit(op: Op, line: bytes) -> None:
    codec = MemcacheMetaCodec()
    codec._token = 95  # white-box: the run's tokens go from 2 to 3 digits
    codec.encode_many([int(op)] * 8, [b"k"] * 8, [VALUE_100] * 8, 0, 8, bytearray())
    kinds: list[int] = []
    codec.feed(b"".join(line % t for t in range(95, 100)))
    assert codec.read_kinds(kinds) == 5
    codec.feed(b"".join(line % t for t in range(100, 103)))
    assert codec.read_kinds(kinds) == 3
    code = {Op.SET: K.STORED, Op.DELETE: K.DELETED, Op.GET: K.MISS}[op]
    assert kinds == [code] * 8


def test_a_run_of_one_status_with_a_wrong_token_fails_where_it_is_wrong() -> None:
    codec = MemcacheMetaCodec()
    codec.encode_many([1] * 6, [b"k"] * 6, [VALUE_100] * 6, 0, 6, bytearray())
    codec.feed(b"HD O0\r\nHD O1\r\nHD O2\r\nHD O9\r\nHD O4\r\nHD O5\r\n")
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="opaque mismatch"):
        codec.read_kinds(kinds)
    assert kinds == [K.STORED] * 3


def test_quiet_failure_after_a_noop_answer_is_counted_by_both_paths() -> None:
    for batch in (False, True):
        codec = MemcacheMetaCodec(NOREPLY)
        announce(codec, Op.NOOP)  # untokened: answered with MN
        announce(codec, Op.SET, b"a")  # O0, quiet
        codec.feed(b"MN\r\nNS O0\r\n")
        if batch:
            assert codec.read_kinds([]) == 1
        else:
            assert drain(codec) == [Reply(K.OK, 4)]
        assert codec.quiet_failures == 1


def test_a_run_of_hd_answers_keeps_each_ops_outcome() -> None:
    codec = MemcacheMetaCodec()
    codec.encode_many([1, 1, 2, 1], [b"k"] * 4, [VALUE_100] * 4, 0, 4, bytearray())
    codec.feed(b"HD O0\r\nHD O1\r\nHD O2\r\nHD O3\r\n")
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 4
    assert kinds == [K.STORED, K.STORED, K.DELETED, K.STORED]
