"""MemcacheTextCodec: byte-exact requests, every reply kind, incrementality, failures."""

from __future__ import annotations

from array import array

import pytest

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols._buffer import ReceiveBuffer
from kvbench.protocols.base import (
    CodecOptions,
    Op,
    Reply,
    ReplyKind,
)
from kvbench.protocols.memcache_text import MemcacheTextCodec
from tests.support import codec_checks
from tests.support.codec_checks import drain, reads
from tests.support.memcached_script import ERROR_LINES, TEXT

K = ReplyKind
DEFAULT = CodecOptions()
KEEP = CodecOptions(keep_payload=True)
NOREPLY = CodecOptions(noreply=True)


CODEC = TEXT
encoded, check_reply = CODEC.encoded, CODEC.check_reply


# -- encodings ------------------------------------------------------------------------


@pytest.mark.parametrize("options", [CodecOptions(), NOREPLY])
def test_retrieval_and_stats_ignore_noreply(options: CodecOptions) -> None:
    assert encoded(Op.GET, b"k", options=options) == (b"get k\r\n", 1)
    assert encoded(Op.GETS, b"k", options=options) == (b"gets k\r\n", 1)
    assert encoded(Op.MGET, [b"a", b"bb", b"c"], options=options) == (b"get a bb c\r\n", 1)
    assert encoded(Op.STATS, b"", options=options) == (b"stats\r\n", 1)


def test_memoryview_values_are_written_by_byte_length() -> None:
    blob = memoryview(b"0123456789")
    out = bytearray()
    MemcacheTextCodec().encode(Op.SET, b"k", blob[2:5], out)
    assert bytes(out) == b"set k 0 0 3\r\n234\r\n"


def test_encode_appends_a_pipeline_to_one_buffer() -> None:
    codec = MemcacheTextCodec()
    out = bytearray()
    counts = [
        codec.encode(Op.SET, b"a", b"1", out),
        codec.encode(Op.GET, b"a", None, out),
        codec.encode(Op.DELETE, b"a", None, out),
    ]
    assert counts == [1, 1, 1]
    assert bytes(out) == b"set a 0 0 1\r\n1\r\nget a\r\ndelete a\r\n"
    assert codec.pending() == 3


# -- replies --------------------------------------------------------------------------


def test_empty_stats_reply_is_an_empty_value() -> None:
    check_reply(Op.STATS, b"END\r\n", Reply(K.VALUE, 5, b""))


@pytest.mark.parametrize("line", ERROR_LINES)
def test_error_line_answers_a_multiget(line: bytes) -> None:
    wire = line + b"\r\n"
    check_reply(Op.MGET, wire, Reply(K.ERROR_REPLY, len(wire), line), key=[b"a", b"b"])


def test_connection_stays_usable_after_an_error_reply() -> None:
    codec = MemcacheTextCodec()
    codec.encode(Op.SET, b"k", b"v", bytearray())
    codec.encode(Op.SET, b"k", b"v", bytearray())
    codec.feed(b"SERVER_ERROR out of memory storing object\r\nSTORED\r\n")
    assert [r.kind for r in drain(codec)] == [K.ERROR_REPLY, K.STORED]


# -- multi-get ------------------------------------------------------------------------


def test_multiget_answers_a_repeated_key_twice() -> None:
    wire = b"VALUE a 0 1\r\nx\r\nVALUE a 0 1\r\nx\r\nEND\r\n"
    check_reply(Op.MGET, wire, Reply(K.HIT, len(wire), None, 2), key=[b"a", b"a"])


def test_error_part_way_through_a_multiget_ends_that_reply() -> None:
    wire = b"VALUE a 0 1\r\nx\r\nSERVER_ERROR out of memory writing get response\r\n"
    expected = Reply(
        K.ERROR_REPLY, len(wire), b"SERVER_ERROR out of memory writing get response", 1
    )
    check_reply(Op.MGET, wire, expected, key=[b"a", b"b"])


@pytest.mark.parametrize(
    "wire",
    [
        b"VALUE z 0 1\r\nx\r\nEND\r\n",  # not requested
        b"VALUE c 0 1\r\nx\r\nVALUE a 0 1\r\nx\r\nEND\r\n",  # out of order
        b"VALUE a 0 1\r\nxEND\r\n",  # block not followed by CRLF
        b"VALUE a 0 1\r\nx\r\nSTORED\r\n",  # not a get reply line
    ],
)
def test_multiget_grammar_violations_raise(wire: bytes) -> None:
    codec = MemcacheTextCodec()
    codec.encode(Op.MGET, [b"a", b"b", b"c"], None, bytearray())
    codec.feed(wire)
    with pytest.raises(ProtocolError):
        drain(codec)


# -- noreply --------------------------------------------------------------------------


def test_noreply_requests_announce_nothing_and_keep_the_fifo_aligned() -> None:
    codec = MemcacheTextCodec(NOREPLY)
    out = bytearray()
    announced = [
        codec.encode(Op.SET, b"a", b"1", out),
        codec.encode(Op.INCR, b"a", None, out, 1),
        codec.encode(Op.GET, b"a", None, out),
        codec.encode(Op.DELETE, b"a", None, out),
        codec.encode(Op.TOUCH, b"a", None, out, 5),
        codec.encode(Op.MGET, [b"a", b"b"], None, out),
    ]
    assert announced == [0, 0, 1, 0, 0, 1]
    assert codec.pending() == 2
    codec.feed(b"VALUE a 0 1\r\n2\r\nEND\r\nEND\r\n")
    assert [(r.kind, r.keys) for r in drain(codec)] == [(K.HIT, 1), (K.MISS, 0)]
    assert codec.pending() == 0


# -- protocol errors ------------------------------------------------------------------


def test_reply_with_nothing_pending_raises() -> None:
    codec = MemcacheTextCodec()
    codec.feed(b"STORED\r\n")
    with pytest.raises(ProtocolError, match="no request pending"):
        codec.next_reply()
    with pytest.raises(ProtocolError):
        codec.next_reply()


def test_extra_reply_after_the_announced_ones_raises() -> None:
    codec = MemcacheTextCodec()
    codec.encode(Op.SET, b"k", b"v", bytearray())
    codec.feed(b"STORED\r\nSTORED\r\n")
    assert codec.next_reply() == Reply(K.STORED, 8)
    with pytest.raises(ProtocolError):
        codec.next_reply()


# -- bounds ---------------------------------------------------------------------------

SMALL = CodecOptions(max_reply_bytes=64)


def test_stats_bound_applies_to_the_whole_reply() -> None:
    codec = MemcacheTextCodec(SMALL)
    codec.encode(Op.STATS, b"", None, bytearray())
    codec.feed(b"STAT a 1\r\n" * 10)
    with pytest.raises(ReplyTooLarge):
        codec.next_reply()


# -- pipelines ------------------------------------------------------------------------


def test_pipeline_of_mixed_replies_in_odd_chunks() -> None:
    codec = MemcacheTextCodec(KEEP)
    out = bytearray()
    codec.encode(Op.SET, b"a", b"1", out)
    codec.encode(Op.GET, b"a", None, out)
    codec.encode(Op.MGET, [b"a", b"b"], None, out)
    codec.encode(Op.INCR, b"a", None, out, 2)
    codec.encode(Op.STATS, b"", None, out)
    codec.encode(Op.DELETE, b"a", None, out)
    wire = (
        b"STORED\r\nVALUE a 0 1\r\n1\r\nEND\r\nVALUE b 0 2\r\nbb\r\nEND\r\n3\r\n"
        b"STAT pid 1\r\nEND\r\nDELETED\r\n"
    )
    got: list[Reply] = []
    for start in range(0, len(wire), 7):
        codec.feed(wire[start : start + 7])
        got += drain(codec)
    assert got == [
        Reply(K.STORED, 8),
        Reply(K.HIT, len(b"VALUE a 0 1\r\n1\r\nEND\r\n"), b"1", 1),
        Reply(K.HIT, len(b"VALUE b 0 2\r\nbb\r\nEND\r\n"), b"bb", 1),
        Reply(K.VALUE, 3, b"3"),
        Reply(K.VALUE, len(b"STAT pid 1\r\nEND\r\n"), b"pid 1\r\n"),
        Reply(K.DELETED, 9),
    ]
    assert codec.pending() == 0


def test_multiget_exactly_at_the_bound_counts_the_end_line() -> None:
    wire = b"VALUE a 0 16\r\n" + b"x" * 16 + b"\r\nVALUE b 0 16\r\n" + b"y" * 16 + b"\r\nEND\r\n"
    assert len(wire) == 69
    at_bound = CodecOptions(max_reply_bytes=69)
    check_reply(Op.MGET, wire, Reply(K.HIT, 69, None, 2), key=[b"a", b"b"], options=at_bound)
    codec = MemcacheTextCodec(CodecOptions(max_reply_bytes=68))
    codec.encode(Op.MGET, [b"a", b"b"], None, bytearray())
    codec.feed(wire[:48])  # through the second VALUE header: its size is now declared
    with pytest.raises(ReplyTooLarge):
        codec.next_reply()


def test_receive_buffer_finds_lines_takes_bytes_and_compacts_on_feed() -> None:
    buf = ReceiveBuffer()
    buf.feed(b"abc\r\ndef")
    assert (buf.find_line(0, 100), len(buf)) == (3, 8)
    assert buf.take(5) == b"abc\r\n"
    assert (buf.pos, len(buf), buf.find_line(buf.pos, 100)) == (5, 3, -1)
    buf.feed(memoryview(b"\r\n"))
    assert (bytes(buf.data), buf.pos, buf.find_line(0, 100)) == (b"def\r\n", 0, 3)
    assert buf.take(5) == b"def\r\n"
    buf.feed(b"xxxx")
    assert (bytes(buf.data), buf.find_line(0, 4)) == (b"xxxx", -1)
    with pytest.raises(ReplyTooLarge):
        buf.find_line(0, 3)


# -- batch paths: encode_many and read_kinds ------------------------------------------

VALUE_100 = memoryview(b"v" * 100)


def per_op_bytes(ops: list[int], keys: list[Key], values: list[Value]) -> tuple[bytes, int]:
    return codec_checks.per_op(MemcacheTextCodec(), ops, keys, values)


Key = bytes | tuple[bytes, ...] | list[bytes]
Value = bytes | memoryview | None


def test_encode_many_matches_encode_for_every_op_and_value_type() -> None:
    ops = [int(op) for op in (Op.GET, Op.GET, Op.SET, Op.GET, Op.DELETE, Op.INCR, Op.MGET)]
    ops += [int(op) for op in (Op.SET, Op.ADD, Op.GETS, Op.DECR, Op.TOUCH, Op.MGET, Op.STATS)]
    ops += [int(Op.GET), int(Op.CAS), int(Op.GET), int(Op.GET)]
    keys: list[Key] = [b"k%d" % i for i in range(len(ops))]
    keys[6] = (b"a", b"b")
    keys[12] = [b"c"]  # a list, not a tuple: the per-op path
    values: list[Value] = [VALUE_100 if op in (1, 6, 10) else None for op in ops]
    values[7] = b"bytes value"  # not a memoryview: the per-op path
    codec = MemcacheTextCodec()
    out = bytearray(b"previous;")
    assert codec.encode_many(ops, keys, values, 0, len(ops), out) == len(ops)
    assert (bytes(out[9:]), codec.pending()) == per_op_bytes(ops, keys, values)


def test_encode_many_takes_a_window_and_flags_and_ttl_from_options() -> None:
    ops = [int(Op.SET), int(Op.GET), int(Op.SET), int(Op.GET), int(Op.DELETE)]
    keys: list[Key] = [b"a", b"b", b"c", b"d", b"e"]
    values: list[Value] = [memoryview(b"1"), None, memoryview(b"22"), None, None]
    codec = MemcacheTextCodec(CodecOptions(flags=7, ttl_s=60))
    out = bytearray()
    assert codec.encode_many(ops, keys, values, 1, 4, out) == 3
    assert bytes(out) == b"get b\r\nset c 7 60 2\r\n22\r\nget d\r\n"
    assert codec.pending() == 3
    assert codec.encode_many(ops, keys, values, 2, 2, out) == 0
    assert codec.pending() == 3


@pytest.mark.parametrize(
    ("bad", "error", "written"),
    [
        ((int(Op.NOOP), b"k", None), ValueError, 2),
        ((int(Op.SET), b"k", None), ValueError, 2),
        ((int(Op.MGET), b"k", None), ValueError, 2),
        # A run of gets is written with one join: a bad key fails the whole run.
        ((int(Op.GET), None, None), TypeError, 1),
    ],
)
def test_encode_many_failing_midway_announces_exactly_what_it_wrote(
    bad: tuple[int, Key | None, Value], error: type[Exception], written: int
) -> None:
    ops = [int(Op.SET), int(Op.GET), bad[0], int(Op.GET)]
    keys = [b"a", b"b", bad[1], b"d"]
    values: list[Value] = [memoryview(b"1"), None, bad[2], None]
    codec = MemcacheTextCodec()
    out = bytearray()
    with pytest.raises(error):
        codec.encode_many(ops, keys, values, 0, 4, out)  # type: ignore[arg-type]
    assert (
        (bytes(out), codec.pending())
        == per_op_bytes(
            ops[:written],
            keys[:written],  # type: ignore[arg-type]
            values[:written],
        )
    )
    codec.feed(b"STORED\r\nEND\r\n"[: 8 + 5 * (written - 1)])
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == written
    assert kinds == [K.STORED, K.MISS][:written]


def test_encode_many_with_noreply_writes_what_encode_writes() -> None:
    ops = [int(Op.SET), int(Op.GET), int(Op.DELETE)]
    codec = MemcacheTextCodec(NOREPLY)
    out = bytearray()
    assert codec.encode_many(ops, [b"a", b"b", b"c"], [memoryview(b"1"), None, None], 0, 3, out)
    assert bytes(out) == b"set a 0 0 1 noreply\r\n1\r\nget b\r\ndelete c noreply\r\n"
    assert codec.pending() == 1


def test_read_kinds_counts_hits_misses_and_statuses_inline_and_not() -> None:
    codec = MemcacheTextCodec()
    ops = [Op.GET, Op.GET, Op.GET, Op.GET, Op.SET, Op.DELETE, Op.DELETE, Op.INCR, Op.SET]
    ops += [Op.GETS, Op.MGET, Op.GET, Op.INCR, Op.TOUCH]
    for op in ops:
        codec.encode(op, [b"k", b"j"] if op is Op.MGET else b"k", b"v", bytearray())
    wire = (
        b"VALUE k 0 3\r\nabc\r\nEND\r\n"
        b"VALUE k 0 3\r\nxyz\r\nEND\r\n"  # the guessed size
        b"VALUE k 9 7\r\n\r\nEND\r\n\r\nEND\r\n"  # other flags; CRLF END CRLF as data
        b"END\r\n"
        b"STORED\r\nDELETED\r\nNOT_FOUND\r\n42\r\nNOT_STORED\r\n"
        b"VALUE k 0 1 77\r\nz\r\nEND\r\n"
        b"VALUE k 0 1\r\nz\r\nVALUE j 0 2\r\nzz\r\nEND\r\n"
        b"SERVER_ERROR out of memory\r\n"
        b"NOT_FOUND\r\nTOUCHED\r\n"
    )
    expected = [K.HIT | 1 << 8, K.HIT | 1 << 8, K.HIT | 1 << 8, K.MISS, K.STORED, K.DELETED]
    expected += [K.NOT_FOUND, K.VALUE, K.NOT_STORED, K.HIT | 1 << 8, K.HIT | 2 << 8]
    expected += [K.ERROR_REPLY, K.NOT_FOUND, K.TOUCHED]
    assert reads(codec, wire, []) == expected
    assert codec.pending() == 0


def test_read_kinds_waits_for_a_split_reply_and_returns_zero() -> None:
    wire = b"VALUE a 0 3\r\nabc\r\nEND\r\nVALUE b 0 3\r\nabc\r\nEND\r\n"
    for cut in range(len(wire) + 1):
        codec = MemcacheTextCodec()
        codec.encode_many([0, 0], [b"a", b"b"], [None, None], 0, 2, bytearray())
        assert reads(codec, wire, [cut]) == [K.HIT | 1 << 8] * 2
    codec = MemcacheTextCodec()
    codec.encode_many([0], [b"a"], [None], 0, 1, bytearray())
    codec.feed(wire[:10])
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 0
    assert (kinds, codec.pending()) == ([], 1)


def test_fifo_is_compacted_and_survives_long_runs() -> None:
    codec = MemcacheTextCodec()
    out = bytearray()
    kinds: list[int] = []
    for round_ in range(50):
        codec.encode_many([1] * 40, [b"k"] * 40, [memoryview(b"v")] * 40, 0, 40, out)
        codec.feed(b"STORED\r\n" * 30)
        assert codec.read_kinds(kinds) == 30
        if round_ % 2:
            codec.feed(b"STORED\r\n" * 5)
            assert drain(codec) == [Reply(K.STORED, 8)] * 5
    assert codec.pending() == 50 * 40 - len(kinds) - 25 * 5
    assert len(codec._pending) <= 2 * (codec.pending() + 40)  # white-box: answered ones dropped


def test_read_kinds_keeps_the_reply_bound() -> None:
    small = CodecOptions(max_reply_bytes=40)
    codec = MemcacheTextCodec(small)
    codec.encode_many([0, 0], [b"a", b"b"], [None, None], 0, 2, bytearray())
    hit = b"VALUE a 0 10\r\n0123456789\r\nEND\r\n"
    codec.feed(hit + b"VALUE b 0 30\r\n" + b"x" * 30 + b"\r\nEND\r\n")
    kinds: list[int] = []
    with pytest.raises(ReplyTooLarge):
        codec.read_kinds(kinds)
    assert kinds == [K.HIT | 1 << 8]
    # A reply just under the bound passes, whatever else is buffered behind it.
    codec = MemcacheTextCodec(CodecOptions(max_reply_bytes=len(hit)))
    codec.encode_many([0, 0], [b"a", b"a"], [None, None], 0, 2, bytearray())
    codec.feed(hit + hit)
    assert codec.read_kinds(kinds) == 2


def test_read_kinds_checks_the_key_of_a_hit_of_the_guessed_size() -> None:
    codec = MemcacheTextCodec()
    codec.encode_many([0, 0], [b"k", b"a"], [None, None], 0, 2, bytearray())
    codec.feed(b"VALUE k 0 1\r\nx\r\nEND\r\nVALUE k 0 1\r\nx\r\nEND\r\n")
    kinds: list[int] = []
    with pytest.raises(ProtocolError, match="asked for b'a'"):
        codec.read_kinds(kinds)
    assert kinds == [K.HIT | 1 << 8]


def guessing_codec() -> MemcacheTextCodec:
    """A codec that has read one hit of 1 byte (the size the next hits declare, or not)."""
    codec = MemcacheTextCodec()
    codec.encode_many([0], [b"k"], [None], 0, 1, bytearray())
    codec.feed(b"VALUE k 0 1\r\nx\r\nEND\r\n")
    assert codec.read_kinds([]) == 1
    return codec


HIT_K = b"VALUE k 0 1\r\nx\r\nEND\r\n"


@pytest.mark.parametrize(
    ("ops", "keys", "wire", "good"),
    [
        ([Op.GET, Op.GET, Op.GET], [b"k", b"k", b"k"], HIT_K * 3, 3),
        ([Op.GET, Op.GET], [b"k", b"a"], HIT_K * 2, 1),  # the second is not for "a"
        ([Op.GET, Op.SET], [b"k", b"k"], HIT_K * 2, 1),  # a set is not answered by VALUE
        ([Op.GET, Op.GET], [b"k", b"k"], HIT_K.replace(b"END", b"EXD") + HIT_K, 0),
        ([Op.GET, Op.GET, Op.GET], [b"k"] * 3, HIT_K * 2 + b"VALUE k 0 2\r\nxy\r\nEND\r\n", 3),
    ],
)
def test_read_kinds_runs_of_hits_check_every_trailer_and_key(
    ops: list[Op], keys: list[bytes], wire: bytes, good: int
) -> None:
    codec = guessing_codec()
    for op, key in zip(ops, keys, strict=True):
        codec.encode(op, key, b"v", bytearray())
    codec.feed(wire)
    kinds: list[int] = []
    if good == len(ops):
        assert codec.read_kinds(kinds) == good
    else:
        with pytest.raises(ProtocolError):
            codec.read_kinds(kinds)
    assert kinds == [K.HIT | 1 << 8] * good


@pytest.mark.parametrize("cut", range(len(HIT_K) * 2, len(HIT_K) * 3))
def test_read_kinds_run_of_hits_cut_in_the_last_one(cut: int) -> None:
    codec = guessing_codec()
    codec.encode_many([0, 0, 0], [b"k"] * 3, [None] * 3, 0, 3, bytearray())
    wire = HIT_K * 3
    assert reads(codec, wire, [cut]) == [K.HIT | 1 << 8] * 3


def test_encode_many_counts_the_bytes_of_a_wide_memoryview() -> None:
    wide = memoryview(array("H", [1, 2, 3]))  # 3 items, 6 bytes
    for ops in ([int(Op.SET)], [int(Op.SET), int(Op.GET)]):
        codec = MemcacheTextCodec()
        out = bytearray()
        codec.encode_many(ops, [b"k", b"k"], [wide, None], 0, len(ops), out)
        assert bytes(out).startswith(b"set k 0 0 6\r\n" + wide.tobytes() + b"\r\n")
