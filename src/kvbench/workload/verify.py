"""Self-checking values for ``--verify``: derived from (key, version), so no client memory.

A verified value is ``version (4 bytes) | length (4 bytes) | SHAKE-128(tag, key, header)``
cut to ``length - 8`` bytes, all big-endian. A reader recomputes the stream from the key
it asked for and the header it got back: any other bytes, a value written for another
key, or a truncated or extended value fails. A stale but once-valid value (an older
version of the same key) passes: that would need client memory of the latest version.
"""

from __future__ import annotations

import hashlib
import struct

HEADER = struct.Struct(">II")
# Separates kvbench's stream from any other use of SHAKE-128 over the same bytes.
_TAG = b"kvbench-verify\x00"
_VERSION_MASK = 0xFFFFFFFF


def derive_value(key: bytes, version: int, size: int) -> bytes:
    """The value stored under ``key`` at ``version``; ``size`` >= 12 bytes (see config)."""
    head = HEADER.pack(version & _VERSION_MASK, size)
    return head + hashlib.shake_128(_TAG + key + head).digest(size - HEADER.size)


def check_value(key: bytes, payload: bytes | bytearray | memoryview) -> bool:
    """True when ``payload`` is a value ``derive_value`` gives for ``key`` (any version)."""
    if len(payload) <= HEADER.size:
        return False
    head = bytes(payload[: HEADER.size])
    _version, length = HEADER.unpack(head)
    if length != len(payload):
        return False
    return payload[HEADER.size :] == hashlib.shake_128(_TAG + key + head).digest(
        length - HEADER.size
    )
