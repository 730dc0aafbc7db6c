"""A blocking side connection to a target: reachability, version and server stats.

Used before a run (preflight: fail fast with one line, learn the server version) and to
sample the server's own counters before and after. Speaks through the same sans-IO codecs
as the load, over a plain socket; never on the load's connections.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from kvbench.config.model import TargetConfig
from kvbench.engine.setup import codec_factory_for, setup_for
from kvbench.engine.worker import connect_error_text
from kvbench.errors import ProtocolError, TargetUnreachable
from kvbench.protocols.base import NEED_DATA, CodecOptions, Op, Reply, ReplyKind, parse_stats_text


def _exchange(sock: socket.socket, codec: Any, out: bytearray, expected: int) -> list[Reply]:
    sock.sendall(out)
    replies: list[Reply] = []
    while len(replies) < expected:
        reply = codec.next_reply()
        if reply is NEED_DATA:
            data = sock.recv(65536)
            if not data:
                codec.feed_eof()
            else:
                codec.feed(data)
            continue
        replies.append(reply)
    return replies


def parse_redis_info(text: bytes) -> dict[str, str]:
    """``INFO`` output (``name:value`` lines, ``#`` section headers) as a dict."""
    stats: dict[str, str] = {}
    for line in text.decode("utf-8", "replace").splitlines():
        if line and not line.startswith("#") and ":" in line:
            name, _, value = line.partition(":")
            stats[name] = value
    return stats


def fetch_stats(target: TargetConfig, timeout_s: float = 3.0) -> dict[str, str]:
    """Connect, set up, ask for the server's stats (memcached ``stats``, Redis ``INFO``).

    Raises:
        TargetUnreachable: cannot connect, setup refused (e.g. bad password), or the
            server does not speak the protocol.
    """
    codec = codec_factory_for(target, CodecOptions(keep_payload=True))()
    try:
        with socket.create_connection((target.host, target.port), timeout=timeout_s) as sock:
            out = bytearray()
            setup = setup_for(target)
            count = setup(codec, out) if setup else 0
            if target.family == "redis":
                # Plain INFO leaves out commandstats, which reconciliation needs.
                count += codec.encode(Op.COMMAND, [b"INFO", b"all"], None, out)
            else:
                count += codec.encode(Op.STATS, b"", None, out)
            replies = _exchange(sock, codec, out, count)
    except (OSError, TimeoutError) as exc:
        raise TargetUnreachable(
            f"cannot connect to {target.url}: {connect_error_text(exc)}"
        ) from None
    except ProtocolError as exc:
        raise TargetUnreachable(
            f"{target.url} does not answer as {target.protocol} expects: {exc}"
        ) from None
    for reply in replies:
        if reply.kind == ReplyKind.ERROR_REPLY:
            text = (reply.payload or b"").decode("utf-8", "replace").strip()
            raise TargetUnreachable(f"{target.url} refused the request: {text}")
    payload = replies[-1].payload or b""
    if target.family == "redis":
        return parse_redis_info(payload)
    return parse_stats_text(payload)


def server_version(stats: dict[str, str]) -> str:
    """The version string out of a stats dict (memcached ``version``, Redis ``redis_version``)."""
    return stats.get("version") or stats.get("redis_version") or "unknown"


# The server figures kept for every interval (the full set is kept before and after).
INTERVAL_STATS = (
    # memcached "stats"
    "cmd_get", "cmd_set", "get_hits", "get_misses", "delete_hits", "delete_misses",
    "incr_hits", "incr_misses", "curr_connections", "curr_items", "evictions",
    "rusage_user", "rusage_system", "threads", "bytes",
    # Redis INFO
    "used_cpu_user", "used_cpu_sys", "connected_clients", "total_commands_processed",
    "keyspace_hits", "keyspace_misses", "evicted_keys", "instantaneous_ops_per_sec",
    "cmdstat_get", "cmdstat_set", "cmdstat_del", "cmdstat_incr", "cmdstat_incrby", "cmdstat_mget",
)  # fmt: skip


def sample(target: TargetConfig, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The server's stats and the monotonic time they were taken (for deltas and rates).

    Args:
        target: the server.
        keys: keep only these stats (None: all).

    Raises:
        TargetUnreachable: as ``fetch_stats``.
    """
    taken_ns = time.monotonic_ns()
    stats = fetch_stats(target)
    if keys is not None:
        stats = {k: v for k, v in stats.items() if k in keys}
    return {"taken_ns": taken_ns, "stats": stats}
