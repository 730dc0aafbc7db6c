"""memcacheq's ``stats queue`` reply: ``STAT <queue> <enqueued>/<dequeued>`` lines, END."""

from __future__ import annotations

import pytest

from kvbench.errors import ProtocolError
from kvbench.protocols.memcacheq import parse_stats_queue, stats_queue_complete


def test_stats_queue_lines_become_counts_per_queue() -> None:
    data = b"STAT q 10/4\r\nSTAT jobs.high 0/0\r\nEND\r\n"
    assert parse_stats_queue(data) == {"q": (10, 4), "jobs.high": (0, 0)}


def test_no_queues_is_an_empty_reply() -> None:
    assert stats_queue_complete(b"END\r\n")
    assert parse_stats_queue(b"END\r\n") == {}


@pytest.mark.parametrize(
    ("data", "complete"),
    [
        (b"", False),
        (b"STAT q 1/0\r\n", False),
        (b"STAT q 1/0\r\nEN", False),
        (b"STAT q 1/0\r\nEND\r\n", True),
        (b"ERROR\r\n", True),
        (b"ERR", False),
    ],
)
def test_completeness_is_known_before_parsing(data: bytes, complete: bool) -> None:
    assert stats_queue_complete(data) is complete


@pytest.mark.parametrize(
    "data", [b"ERROR\r\n", b"STAT q 10\r\nEND\r\n", b"STAT q a/b\r\nEND\r\n", b"VALUE q 0 1\r\n"]
)
def test_anything_else_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_stats_queue(data)


@pytest.mark.parametrize("cut", [None, 1])
def test_a_refused_set_keeps_the_servers_words_for_read_kinds(cut: int | None) -> None:
    """memcacheq 0.2.1 answers a message longer than its -B with ``SERVER_ERROR out of
    memory storing object``; ``read_kinds`` gives only kinds, so the codec keeps the text
    (the queue producer shows it). Inline path, and the parser's path for a split reply."""
    from kvbench.protocols.base import CodecOptions, Op, ReplyKind
    from kvbench.protocols.memcache_text import MemcacheTextCodec

    codec = MemcacheTextCodec(CodecOptions(keep_payload=True))
    out = bytearray()
    for _ in range(3):
        codec.encode(Op.SET, b"q", b"x" * 100, out)
    assert codec.last_error is None
    replies = b"STORED\r\nSERVER_ERROR out of memory storing object\r\nSTORED\r\n"
    kinds: list[int] = []
    parts = [replies] if cut is None else [replies[:20], replies[20:]]
    for part in parts:
        codec.feed(part)
        codec.read_kinds(kinds)
    assert [k & 0xFF for k in kinds] == [
        ReplyKind.STORED,
        ReplyKind.ERROR_REPLY,
        ReplyKind.STORED,
    ]
    assert codec.last_error == b"SERVER_ERROR out of memory storing object"
