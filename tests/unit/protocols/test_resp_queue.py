"""RespQueueCodec: LPUSH / RPOP / BRPOP replies as queue outcomes, fed whole and byte by byte."""

from __future__ import annotations

import pytest

from kvbench.protocols.base import NEED_DATA, CodecOptions, Op, Reply, ReplyKind
from kvbench.protocols.resp_queue import RespQueueCodec

K = ReplyKind
KEEP = CodecOptions(keep_payload=True)


def replies_of(codec: RespQueueCodec, data: bytes, bytewise: bool) -> list[Reply]:
    chunks = [data[i : i + 1] for i in range(len(data))] if bytewise else [data]
    replies: list[Reply] = []
    for chunk in chunks:
        codec.feed(chunk)
        while (reply := codec.next_reply()) is not NEED_DATA:
            assert isinstance(reply, Reply)
            replies.append(reply)
    return replies


CASES = [
    # (argv, protocol, wire reply, expected kind, expected payload)
    ([b"LPUSH", b"l", b"m"], 2, b":12\r\n", K.STORED, None),
    ([b"RPOP", b"l"], 2, b"$3\r\nabc\r\n", K.HIT, b"abc"),
    ([b"RPOP", b"l"], 2, b"$-1\r\n", K.MISS, None),
    ([b"RPOP", b"l"], 3, b"_\r\n", K.MISS, None),
    ([b"BRPOP", b"l", b"0.100"], 2, b"*2\r\n$1\r\nl\r\n$3\r\nabc\r\n", K.HIT, b"abc"),
    ([b"BRPOP", b"l", b"0.100"], 2, b"*-1\r\n", K.MISS, None),
    ([b"BRPOP", b"l", b"0.100"], 3, b"_\r\n", K.MISS, None),
    ([b"RPOP", b"l"], 2, b"-WRONGTYPE Operation against a key\r\n", K.ERROR_REPLY, None),
]


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize(("argv", "protocol", "wire", "kind", "payload"), CASES)
def test_list_replies_are_queue_outcomes(
    argv: list[bytes],
    protocol: int,
    wire: bytes,
    kind: ReplyKind,
    payload: bytes | None,
    bytewise: bool,
) -> None:
    codec = RespQueueCodec(KEEP, protocol)
    out = bytearray()
    assert codec.encode(Op.COMMAND, argv, None, out) == 1
    (reply,) = replies_of(codec, wire, bytewise)
    assert reply.kind == kind
    if kind is not K.ERROR_REPLY:
        assert reply.payload == payload
        assert reply.nbytes == len(wire)


def test_a_message_carries_no_payload_unless_asked() -> None:
    codec = RespQueueCodec(CodecOptions(), 2)
    codec.encode(Op.COMMAND, [b"RPOP", b"l"], None, bytearray())
    (reply,) = replies_of(codec, b"$3\r\nabc\r\n", bytewise=False)
    assert (reply.kind, reply.payload, reply.keys) == (K.HIT, None, 1)


def test_binary_messages_with_crlf_inside_come_back_whole() -> None:
    message = b"\x00\r\n\xff" * 10
    codec = RespQueueCodec(KEEP, 2)
    codec.encode(Op.COMMAND, [b"RPOP", b"l"], None, bytearray())
    (reply,) = replies_of(codec, b"$%d\r\n%s\r\n" % (len(message), message), bytewise=True)
    assert reply.payload == message


def test_pipelined_queue_replies_come_back_in_order_with_trailing_bytes_kept() -> None:
    codec = RespQueueCodec(KEEP, 2)
    out = bytearray()
    for argv in ([b"LPUSH", b"l", b"x"], [b"RPOP", b"l"], [b"RPOP", b"l"]):
        codec.encode(Op.COMMAND, argv, None, out)
    assert out == (
        b"*3\r\n$5\r\nLPUSH\r\n$1\r\nl\r\n$1\r\nx\r\n"
        b"*2\r\n$4\r\nRPOP\r\n$1\r\nl\r\n*2\r\n$4\r\nRPOP\r\n$1\r\nl\r\n"
    )
    replies = replies_of(codec, b":1\r\n$1\r\nx\r\n$-1\r\n", bytewise=False)
    assert [r.kind for r in replies] == [K.STORED, K.HIT, K.MISS]


def test_read_kinds_sees_the_same_outcomes() -> None:
    codec = RespQueueCodec(KEEP, 2)
    for argv in ([b"LPUSH", b"l", b"x"], [b"RPOP", b"l"], [b"RPOP", b"l"]):
        codec.encode(Op.COMMAND, argv, None, bytearray())
    codec.feed(b":1\r\n$1\r\nx\r\n$-1\r\n")
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 3
    assert [k & 0xFF for k in kinds] == [K.STORED, K.HIT, K.MISS]


def test_other_ops_behave_as_in_the_plain_codec() -> None:
    codec = RespQueueCodec(KEEP, 2)
    codec.encode(Op.GET, b"k", None, bytearray())
    (reply,) = replies_of(codec, b"$-1\r\n", bytewise=False)
    assert reply.kind == K.MISS


def test_a_refused_lpush_keeps_the_servers_words_for_read_kinds() -> None:
    """Redis refuses an LPUSH over maxmemory with ``-OOM ...``; ``read_kinds`` gives only
    kinds, so the codec keeps the text (the queue producer shows it)."""
    codec = RespQueueCodec(KEEP, 2)
    out = bytearray()
    for _ in range(2):
        codec.encode(Op.COMMAND, [b"LPUSH", b"l", b"m"], None, out)
    codec.feed(b":1\r\n-OOM command not allowed when used memory > 'maxmemory'.\r\n")
    kinds: list[int] = []
    codec.read_kinds(kinds)
    assert [k & 0xFF for k in kinds] == [K.STORED, K.ERROR_REPLY]
    assert codec.last_error is not None
    assert bytes(codec.last_error).startswith(b"OOM command not allowed")
