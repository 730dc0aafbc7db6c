"""A queue's backlog as its server counts it, asked on a side connection.

memcacheq: ``stats queue`` (``STAT <queue> <enqueued>/<dequeued>``), with ``stats``'s pid
and uptime to tell a restart; Redis: ``LLEN`` (after the URL's AUTH/SELECT). Asked through
runner/probe.py's one connect-and-ask routine; never on the load's connections. A server
that cannot say gives None, not an error: the backlog seen by the server is a
cross-check, the client's own counts are the figures.
"""

from __future__ import annotations

import socket
from typing import Any

from kvbench.config.queue import QueueConfig
from kvbench.engine.setup import setup_for
from kvbench.errors import TargetUnreachable
from kvbench.protocols.base import CodecOptions, Op, ReplyKind
from kvbench.protocols.memcacheq import STATS_QUEUE_REQUEST, parse_stats_queue
from kvbench.protocols.resp import RespCodec
from kvbench.runner.probe import ask, exchange, text_exchange

# memcacheq's ``stats`` fields naming the server process: a restart changes them, and the
# ``stats queue`` counts start again (the report then stops comparing them).
PROCESS_STATS = (b"pid", b"uptime")


def server_backlog(config: QueueConfig, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The queue as the server sees it: ``{"backlog": n}`` plus, for memcacheq, the
    cumulative ``enqueued`` and ``dequeued`` counts; None when the server cannot tell."""
    try:
        if config.backend == "memcacheq":
            return ask(config.target, timeout_s, "stats queue", lambda s: _stats_queue(s, config))
        return ask(config.target, timeout_s, "LLEN", lambda sock: _llen(sock, config))
    except TargetUnreachable:  # the server could not say (it closed, refused, garbled)
        return None


def _stats_queue(sock: socket.socket, config: QueueConfig) -> dict[str, Any]:
    process = _process_stats(text_exchange(sock, b"stats\r\n"))
    queues = parse_stats_queue(text_exchange(sock, STATS_QUEUE_REQUEST))
    enqueued, dequeued = queues.get(config.queue, (0, 0))
    return {"backlog": enqueued - dequeued, "enqueued": enqueued, "dequeued": dequeued, **process}


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
    last = exchange(sock, codec, out, expected)[-1]
    if last.kind == ReplyKind.ERROR_REPLY or last.payload is None:
        return None
    return {"backlog": int(last.payload)}
