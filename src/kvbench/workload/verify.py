"""Self-checking values for ``--verify``: derived from (key, version), so no client memory.

Timestamp values (``--value-kind timestamp``) are checked as times instead
(``timestamp_check``): 8 bytes, a time inside the window the set phase ran in.

A verified value is ``version (4 bytes) | length (4 bytes) | SHAKE-128(tag, key, header)``
cut to ``length - 8`` bytes, all big-endian. A reader recomputes the stream from the key
it asked for and the header it got back: any other bytes, a value written for another
key, or a truncated or extended value fails. A stale but once-valid value (an older
version of the same key) passes: that would need client memory of the latest version.
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Callable

from kvbench.config.model import WorkloadConfig

HEADER = struct.Struct(">II")
# Separates kvbench's stream from any other use of SHAKE-128 over the same bytes.
_TAG = b"kvbench-verify\x00"
_VERSION_MASK = 0xFFFFFFFF


def derive_value(key: bytes, version: int, size: int) -> bytes:
    """The value stored under ``key`` at ``version``; ``size`` >= 12 bytes (see config)."""
    head = HEADER.pack(version & _VERSION_MASK, size)
    return head + hashlib.shake_128(_TAG + key + head).digest(size - HEADER.size)


def first_version(worker_index: int) -> int:
    """The version a worker's sets count up from (each takes the next one): the worker's
    index in the top byte, so workers write versions of their own."""
    return worker_index << 24


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


Payload = bytes | bytearray | memoryview
TIMESTAMP = struct.Struct(">Q")  # workload/values.py's timestamp values: ms since the epoch


def timestamp_check(
    window_ms: tuple[int, int] | None, now_ms: Callable[[], int] = lambda: time.time_ns() // 10**6
) -> Callable[[bytes, Payload], bool]:
    """A check of timestamp values: 8 bytes that decode to a time inside ``window_ms`` (the
    set phase's), or without a window, a time not after the check (nothing stores a future
    time). The key plays no part: a timestamp says when, not what."""

    def check(key: bytes, payload: Payload) -> bool:
        if len(payload) != TIMESTAMP.size:
            return False
        stamp_ms = int(TIMESTAMP.unpack(bytes(payload))[0])
        if window_ms is None:
            return 0 < stamp_ms <= now_ms()
        return window_ms[0] <= stamp_ms <= window_ms[1]

    return check


def value_check(config: WorkloadConfig) -> Callable[[bytes, Payload], bool]:
    """How ``--verify`` checks a get hit's value under ``config``."""
    if config.value_kind == "timestamp":
        return timestamp_check(config.verify_window_ms)
    return check_value
