"""memcacheq's one command beyond the memcached text protocol: ``stats queue``.

memcacheq (a BerkeleyDB-backed queue speaking memcached's text protocol) enqueues with
``set <queue> <flags> 0 <bytes>`` and dequeues with ``get <queue>``: the text codec does
both, and an empty queue's bare ``END`` is a MISS. ``stats queue`` answers one line per
queue, ``STAT <queue> <enqueued>/<dequeued>`` (cumulative counts), then ``END``. Sans-IO.
"""

from __future__ import annotations

from typing import Final

from kvbench.errors import ProtocolError

STATS_QUEUE_REQUEST: Final = b"stats queue\r\n"
_END: Final = b"END\r\n"
_ERRORS: Final = (b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR")


def stats_queue_complete(data: bytes | bytearray) -> bool:
    """Whether ``data`` holds a whole ``stats queue`` reply (up to END, or an error line)."""
    if data.endswith(b"\r\n" + _END) or data == _END:
        return True
    return data.endswith(b"\r\n") and data.startswith(_ERRORS)


def parse_stats_queue(data: bytes | bytearray) -> dict[str, tuple[int, int]]:
    """``STAT <queue> <enqueued>/<dequeued>`` lines as ``{queue: (enqueued, dequeued)}``.

    Raises:
        ProtocolError: an error reply (the server is no memcacheq) or a malformed line.
    """
    queues: dict[str, tuple[int, int]] = {}
    for line in bytes(data).split(b"\r\n"):
        if not line or line == b"END":
            continue
        if line.startswith(_ERRORS):
            raise ProtocolError(f"stats queue refused: {line[:80]!r}")
        fields = line.split(b" ")
        counts = fields[2].split(b"/") if len(fields) == 3 and fields[0] == b"STAT" else []
        if len(counts) != 2 or not all(c.isdigit() for c in counts):
            raise ProtocolError(f"bad stats queue line: {line[:80]!r}")
        queues[fields[1].decode("utf-8", "replace")] = (int(counts[0]), int(counts[1]))
    return queues
