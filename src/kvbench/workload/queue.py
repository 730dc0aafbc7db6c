"""Queue messages: a binary header (run tag, producer, sequence number, send time) + padding.

Pure: no I/O, no clock (the caller passes the send time), no randomness (the caller passes
the run tag). Producers build messages with ``MessageFormat.build``; consumers read the
header back with ``read_header``, which returns None for bytes that are not a message of
this format (a leftover of another tool, or corruption), never raising.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

# Layout (little-endian, 28 bytes): magic "KVQ" + format version 1, run tag (u32),
# producer id (u32), sequence number (u64), send time (u64, ns on CLOCK_MONOTONIC).
MAGIC: Final = b"KVQ\x01"
HEADER: Final = struct.Struct("<4sIIQQ")
HEADER_BYTES: Final = HEADER.size
# The padding byte: printable, so a message read by hand (telnet, redis-cli) is legible.
PAD_BYTE: Final = b"."
MAX_PRODUCERS: Final = 2**32 - 1


class MessageHeader(NamedTuple):
    """What a consumer learns from a message."""

    run_tag: int
    producer: int
    seq: int
    sent_ns: int


class MessageFormat:
    """Builds one producer's messages, all ``size_bytes`` long.

    Args:
        run_tag: the run's tag: consumers count messages with another tag as foreign.
        producer: this producer's id (0-based).
        size_bytes: the whole message's length, header included.

    Raises:
        ValueError: ``size_bytes`` is smaller than the header.
    """

    __slots__ = ("_pack", "_padding", "_prefix", "size_bytes")

    def __init__(self, run_tag: int, producer: int, size_bytes: int) -> None:
        if size_bytes < HEADER_BYTES:
            raise ValueError(f"a message needs at least {HEADER_BYTES} bytes, got {size_bytes}")
        self.size_bytes = size_bytes
        self._padding = PAD_BYTE * (size_bytes - HEADER_BYTES)
        self._pack = HEADER.pack
        self._prefix = (MAGIC, run_tag, producer)

    def build(self, seq: int, sent_ns: int) -> bytes:
        """The message with sequence number ``seq`` sent at ``sent_ns``."""
        magic, tag, producer = self._prefix
        return self._pack(magic, tag, producer, seq, sent_ns) + self._padding


def read_header(payload: bytes | bytearray | memoryview | None) -> MessageHeader | None:
    """The header of a message, or None when ``payload`` is not one (wrong magic or too short)."""
    if payload is None or len(payload) < HEADER_BYTES:
        return None
    magic, tag, producer, seq, sent_ns = HEADER.unpack_from(payload)
    if magic != MAGIC:
        return None
    return MessageHeader(tag, producer, seq, sent_ns)
