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
