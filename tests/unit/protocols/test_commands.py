"""Command templates (protocols/commands.py) and how the text and RESP codecs send and
frame commands: byte-exact requests, every reply frame whole / byte by byte / followed by
the next reply, refusals with their reason."""

from __future__ import annotations

import pytest

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols.base import CodecOptions, Op, Reply, ReplyKind
from kvbench.protocols.commands import (
    DATA,
    KeySlot,
    Request,
    Word,
    command_name,
    resp_template,
    text_template,
)
from kvbench.protocols.memcache_text import MemcacheTextCodec
from kvbench.protocols.registry import CODECS
from kvbench.protocols.resp import RespCodec, _array
from tests.support.codec_checks import drain, feed_whole, reads
from tests.support.memcached_script import TEXT

K = ReplyKind
KEY = KeySlot()
VALUE = memoryview(b"0123456789")[2:7]  # 23456, as the engine passes values


# -- templates ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "keys", "expected"),
    [
        ([b"HSET", KEY, b"field", DATA], [b"k1"], [b"HSET", b"k1", b"field", b"23456"]),
        ([b"LPUSH", KeySlot(b"q:", b":x"), DATA], [b"k"], [b"LPUSH", b"q:k:x", b"23456"]),
        ([b"MSET", KEY, b"a b", KEY, b""], [b"a", b"bb"], [b"MSET", b"a", b"a b", b"bb", b""]),
        ([b"PING"], [], [b"PING"]),
    ],
)
def test_resp_templates_render_what_the_codec_would_send(
    words: list[Word], keys: list[bytes], expected: list[bytes]
) -> None:
    template = resp_template(words)
    request = template.render(keys, VALUE)
    assert isinstance(request, Request)
    assert bytes(request) == _array(*expected)
    assert template.keys == len(keys)


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ([b"touch", KEY, b"60"], b"touch k1 60\r\n"),
        ([b"gat", b"0", KEY, KeySlot(b"x")], b"gat 0 k1 xk2\r\n"),
        ([b"set", KEY, b"5", b"-1", DATA], b"set k1 5 -1 5\r\n23456\r\n"),
        ([b"cas", KEY, b"0", b"0", DATA, b"77"], b"cas k1 0 0 5 77\r\n23456\r\n"),
        ([b"ms", KEY, DATA, b"T60", b"F3"], b"ms k1 5 T60 F3\r\n23456\r\n"),
        ([b"stats"], b"stats\r\n"),
        ([b"lru_crawler", b"crawl", b"all"], b"lru_crawler crawl all\r\n"),
    ],
)
def test_text_templates_render_lines_and_data_blocks(words: list[Word], expected: bytes) -> None:
    template = text_template(words)
    assert bytes(template.render([b"k1", b"k2"][: template.keys], VALUE)) == expected


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        ([b"SUBSCRIBE", b"c"], "pushes"),
        ([b"monitor"], "MONITOR"),
        ([b"quit"], "closes"),
        ([b"HELLO", b"3"], "?resp=3"),
        ([b"client", b"REPLY", b"OFF"], "without replies"),
        ([KEY, b"x"], "names the command"),
        ([], "empty"),
    ],
)
def test_resp_refuses_commands_whose_replies_do_not_answer_one_for_one(
    words: list[Word], reason: str
) -> None:
    with pytest.raises(ValueError, match=reason.replace("?", r"\?")):
        resp_template(words)


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        ([b"set", KEY, b"0", b"0", b"5"], "put __data__ where the byte count goes"),
        ([b"set", KEY, b"0", DATA, b"5"], "put __data__ where the byte count goes"),
        ([b"set", KEY, b"f", b"0", DATA], "flags must be a number"),
        ([b"set", KEY, b"0", b"soon", DATA], "exptime must be a number"),
        ([b"cas", KEY, b"0", b"0", DATA], "expected cas"),
        ([b"cas", KEY, b"0", b"0", DATA, b"-1"], "cas unique must not be negative"),
        ([b"set", KEY, b"0", b"0", DATA, b"noreply"], "noreply"),
        ([b"ms", KEY, b"5"], "put __data__"),
        ([b"touch", KEY, DATA], "stands only for a storage command"),
        ([b"mg", KEY, b"v", b"q"], "q flag"),
        ([b"get", b"a b"], "no spaces"),
        ([b"get", KeySlot(b"a\n")], "no spaces"),
        ([b"watch"], "streams"),
        ([b"lru_crawler", b"metadump", b"all"], "no frame"),
        ([b"stats", b"detail", b"dump"], "no frame"),
        ([b"quit"], "closes"),
    ],
)
def test_text_refuses_what_would_not_get_exactly_one_framed_reply(
    words: list[Word], reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        text_template(words)


def test_memcached_commands_are_case_sensitive_so_SET_has_no_data_block() -> None:
    # memcached answers "SET ..." with ERROR and would take a data block for a command.
    with pytest.raises(ValueError, match="stands only for a storage command"):
        text_template([b"SET", KEY, b"0", b"0", DATA])
    assert command_name([b"HSET", KEY]) == "hset"


def test_only_text_and_resp_compile_commands() -> None:
    compilers = {name: spec.command_template for name, spec in CODECS.items()}
    assert compilers == {
        "memcache-text": text_template,
        "memcache-binary": None,
        "memcache-meta": None,
        "resp2": resp_template,
        "resp3": resp_template,
        "http-memc": None,
    }


# -- the text codec's command replies -------------------------------------------------


def announce_command(codec: MemcacheTextCodec) -> int:
    return codec.encode(
        Op.COMMAND, text_template([b"gat", b"0", KEY]).render([b"k"], None), None, bytearray()
    )


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        (b"TOUCHED\r\n", Reply(K.OK, 9)),
        (b"END\r\n", Reply(K.OK, 5)),
        (b"HD t-1\r\n", Reply(K.OK, 8)),
        (b"12\r\n", Reply(K.OK, 4)),
        (b"VALUE k 0 2\r\nhi\r\nVALUE k2 3 1 99\r\nx\r\nEND\r\n", Reply(K.OK, 42)),
        (b"VA 2 f3\r\nhi\r\n", Reply(K.OK, 13)),
        (b"VA 0\r\n\r\n", Reply(K.OK, 8)),
        (b"STAT pid 7\r\nITEM k [1 b; 0 s]\r\nEND\r\n", Reply(K.OK, 36)),
        (b"STAT a b\r\nSERVER_ERROR busy\r\n", Reply(K.ERROR_REPLY, 29, b"SERVER_ERROR busy")),
        (b"ERROR\r\n", Reply(K.ERROR_REPLY, 7, b"ERROR")),
        (b"CLIENT_ERROR bad\r\n", Reply(K.ERROR_REPLY, 18, b"CLIENT_ERROR bad")),
        (
            b"VALUE k 0 1\r\nx\r\nSERVER_ERROR out of memory\r\n",
            Reply(K.ERROR_REPLY, 44, b"SERVER_ERROR out of memory"),
        ),
    ],
)
def test_a_command_reply_is_framed_by_its_first_line(wire: bytes, expected: Reply) -> None:
    TEXT.check_reply(Op.COMMAND, wire, expected, key=[b"gat", b"0", b"k"])


def test_command_payloads_are_kept_on_request() -> None:
    codec = MemcacheTextCodec(CodecOptions(keep_payload=True))
    for words in ([b"version"], [b"mg", b"k", b"v"], [b"gets", b"k"]):
        codec.encode(Op.COMMAND, words, None, bytearray())
    codec.feed(b"VERSION 1.6\r\nVA 2\r\nhi\r\nVALUE k 0 1 5\r\nx\r\nEND\r\n")
    assert [r.payload for r in drain(codec)] == [
        b"VERSION 1.6",
        b"hi",
        b"VALUE k 0 1 5\r\nx\r\n",
    ]


@pytest.mark.parametrize(
    "wire",
    [
        b"VALUE k 0 x\r\n",
        b"VALUE k 0 1\r\nxy\r\nEND\r\n",
        b"VALUE k 0 1\r\nx\r\nSTORED\r\n",
        b"VA x\r\n",
        b"VA 1\r\nxyz",
        b"STAT a b\r\nSTORED\r\n",
    ],
)
def test_broken_command_replies_are_protocol_errors(wire: bytes) -> None:
    codec = MemcacheTextCodec()
    announce_command(codec)
    with pytest.raises(ProtocolError):
        codec.feed(wire)
        drain(codec)


def test_a_command_reply_larger_than_the_bound_is_refused_from_its_header() -> None:
    codec = MemcacheTextCodec(CodecOptions(max_reply_bytes=64))
    announce_command(codec)
    with pytest.raises(ReplyTooLarge):
        codec.feed(b"VA 1000\r\n")
        drain(codec)


def test_text_batches_write_rendered_commands_between_other_ops() -> None:
    touch = text_template([b"touch", KEY, b"9"]).render([b"b"], None)
    ops = [int(Op.GET), int(Op.COMMAND), int(Op.SET), int(Op.COMMAND), int(Op.GET)]
    keys = [b"a", touch, b"c", Request(b"version\r\n"), b"d"]
    values = [None, None, memoryview(b"v"), None, None]
    one, many = MemcacheTextCodec(), MemcacheTextCodec()
    out_one, out_many = bytearray(), bytearray()
    for op, key, value in zip(ops, keys, values, strict=True):
        one.encode(Op(op), key, value, out_one)
    assert many.encode_many(ops, keys, values, 0, len(ops), out_many) == len(ops)
    assert (
        bytes(out_many)
        == bytes(out_one)
        == (b"get a\r\ntouch b 9\r\nset c 0 0 1\r\nv\r\nversion\r\nget d\r\n")
    )
    wire = b"END\r\nTOUCHED\r\nSTORED\r\nVERSION 1\r\nEND\r\n"
    expected = [int(K.MISS), int(K.OK), int(K.STORED), int(K.OK), int(K.MISS)]
    assert reads(many, wire, [7, 20]) == [r.kind for r in feed_whole(one, wire)] == expected


# -- RESP -------------------------------------------------------------------------------


def test_resp_writes_a_rendered_command_as_it_is_inline_in_batches() -> None:
    request = resp_template([b"HSET", KEY, b"f", DATA]).render([b"h"], VALUE)
    ops = [int(Op.GET), int(Op.COMMAND), int(Op.SET), int(Op.COMMAND)]
    keys = [b"a", request, b"c", request]
    values = [None, None, memoryview(b"v"), None]
    one, many = RespCodec(), RespCodec()
    out_one, out_many = bytearray(), bytearray()
    for op, key, value in zip(ops, keys, values, strict=True):
        one.encode(Op(op), key, value, out_one)
    many.encode_many(ops, keys, values, 0, len(ops), out_many)
    assert bytes(out_many) == bytes(out_one)
    assert bytes(out_one).count(bytes(request)) == 2
    many.feed(b"$-1\r\n:1\r\n+OK\r\n-WRONGTYPE no\r\n")
    kinds: list[int] = []
    assert many.read_kinds(kinds) == 4
    assert kinds == [int(K.MISS), int(K.OK), int(K.STORED), int(K.ERROR_REPLY)]
