"""A blocking side connection to a queue server: its version and the queue's backlog.

memcacheq: ``stats queue`` (``STAT <queue> <enqueued>/<dequeued>``); Redis: ``LLEN``.
Never on the load's connections. A server that cannot say gives None, not an error: the
backlog seen by the server is a cross-check, the client's own counts are the figures.
"""

from __future__ import annotations

import socket
from typing import Any

from kvbench.config.queue import QueueConfig
from kvbench.engine.setup import setup_for
from kvbench.errors import ProtocolError
from kvbench.protocols.base import NEED_DATA, CodecOptions, Op, Reply, ReplyKind
from kvbench.protocols.memcacheq import (
    STATS_QUEUE_REQUEST,
    parse_stats_queue,
    stats_queue_complete,
)
from kvbench.protocols.resp import RespCodec

# A stats reply larger than this is not what we asked for.
MAX_STATS_BYTES = 1 << 20
# memcacheq's ``stats`` fields naming the server process: a restart changes them, and the
# ``stats queue`` counts start again (report/queue_report.py then stops comparing them).
PROCESS_STATS = (b"pid", b"uptime")


def server_backlog(config: QueueConfig, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The queue as the server sees it: ``{"backlog": n}`` plus, for memcacheq, the
    cumulative ``enqueued`` and ``dequeued`` counts; None when the server cannot tell."""
    try:
        with socket.create_connection(
            (config.target.host, config.target.port), timeout=timeout_s
        ) as sock:
            if config.backend == "memcacheq":
                return _stats_queue(sock, config.queue)
            return _llen(sock, config)
    except (OSError, ProtocolError):
        return None


def _stats_queue(sock: socket.socket, queue: str) -> dict[str, Any]:
    process = _process_stats(_ask(sock, b"stats\r\n"))
    enqueued, dequeued = parse_stats_queue(_ask(sock, STATS_QUEUE_REQUEST)).get(queue, (0, 0))
    return {"backlog": enqueued - dequeued, "enqueued": enqueued, "dequeued": dequeued, **process}


def _ask(sock: socket.socket, request: bytes) -> bytearray:
    """Send a stats request; its whole reply (up to END, or an error line)."""
    sock.sendall(request)
    data = bytearray()
    while not stats_queue_complete(data):
        chunk = sock.recv(65536)
        if not chunk or len(data) > MAX_STATS_BYTES:
            raise ProtocolError(f"{request.strip().decode()} reply cut short")
        data += chunk
    return data


def _process_stats(data: bytes | bytearray) -> dict[str, str]:
    """``pid`` and ``uptime`` out of a ``stats`` reply (none if it was refused)."""
    found: dict[str, str] = {}
    for line in bytes(data).split(b"\r\n"):
        fields = line.split(b" ")
        if len(fields) == 3 and fields[0] == b"STAT" and fields[1] in PROCESS_STATS:
            found[fields[1].decode()] = fields[2].decode("ascii", "replace")
    return found


def _llen(sock: socket.socket, config: QueueConfig) -> dict[str, Any] | None:
    codec = RespCodec(
        CodecOptions(keep_payload=True), 3 if config.target.protocol == "resp3" else 2
    )
    out = bytearray()
    setup = setup_for(config.target)
    expected = setup(codec, out) if setup else 0
    expected += codec.encode(Op.COMMAND, [b"LLEN", config.queue.encode()], None, out)
    sock.sendall(out)
    replies: list[Reply] = []
    while len(replies) < expected:
        reply = codec.next_reply()
        if reply is NEED_DATA:
            chunk = sock.recv(65536)
            if not chunk:
                codec.feed_eof()
            else:
                codec.feed(chunk)
            continue
        replies.append(reply)
    last = replies[-1]
    if last.kind == ReplyKind.ERROR_REPLY or last.payload is None:
        return None
    return {"backlog": int(last.payload)}
