"""The queue message format: a 28-byte header (run tag, producer, seq, send time) + padding."""

from __future__ import annotations

import pytest

from kvbench.config.queue import MIN_MESSAGE_BYTES
from kvbench.units import share_out as split
from kvbench.workload.queue import (
    HEADER_BYTES,
    MAGIC,
    MessageFormat,
    MessageHeader,
    read_header,
)


def test_config_takes_the_smallest_message_the_header_allows() -> None:
    # config/queue.py keeps its own copy of the header size: config may not import workload.
    assert MIN_MESSAGE_BYTES == HEADER_BYTES


def test_a_message_reads_back_as_its_header() -> None:
    message = MessageFormat(run_tag=0xDEADBEEF, producer=7, size_bytes=100).build(
        seq=123_456_789_012, sent_ns=987_654_321_000
    )
    assert read_header(message) == MessageHeader(0xDEADBEEF, 7, 123_456_789_012, 987_654_321_000)


@pytest.mark.parametrize("size", [HEADER_BYTES, HEADER_BYTES + 1, 100, 4096])
def test_every_message_has_exactly_the_requested_size(size: int) -> None:
    fmt = MessageFormat(1, 0, size)
    assert len(fmt.build(0, 0)) == size
    assert len(fmt.build(2**64 - 1, 2**64 - 1)) == size


def test_the_header_is_the_first_bytes_and_the_rest_is_printable_padding() -> None:
    message = MessageFormat(1, 2, 64).build(3, 4)
    assert message.startswith(MAGIC)
    assert message[HEADER_BYTES:] == b"." * (64 - HEADER_BYTES)


def test_a_message_smaller_than_its_header_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 28 bytes"):
        MessageFormat(1, 0, HEADER_BYTES - 1)


@pytest.mark.parametrize(
    "payload",
    [None, b"", b"hello", b"x" * 100, b"KVQ\x02" + b"\0" * 40, bytes(HEADER_BYTES - 1)],
    ids=["none", "empty", "short", "text", "other-version", "one-short"],
)
def test_bytes_that_are_no_message_read_as_none(payload: bytes | None) -> None:
    assert read_header(payload) is None


def test_a_header_reads_from_a_memoryview_too() -> None:
    message = MessageFormat(5, 6, 40).build(7, 8)
    assert read_header(memoryview(message)) == MessageHeader(5, 6, 7, 8)


def test_messages_of_one_producer_differ_only_in_seq_and_time() -> None:
    fmt = MessageFormat(9, 3, 50)
    a, b = fmt.build(1, 100), fmt.build(2, 100)
    assert a != b and a[:12] == b[:12] and a[20:] == b[20:]


@pytest.mark.parametrize(
    ("total", "parts", "expected"),
    [(10, 3, [4, 3, 3]), (2, 4, [1, 1, 0, 0]), (1_000_000, 2, [500_000, 500_000])],
)
def test_split_shares_out_evenly(total: int, parts: int, expected: list[int]) -> None:
    assert split(total, parts) == expected
    assert sum(split(total, parts)) == total
