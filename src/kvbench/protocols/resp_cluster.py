"""Redis Cluster on the wire: redirect replies, and the replies that describe the slot map.

Sans-IO: no sockets, no clock. ``parse_redirect`` reads a ``-MOVED``/``-ASK`` error reply;
``SlotsQuery`` is the discovery exchange (CLUSTER SHARDS and CLUSTER SLOTS asked at once,
after AUTH when there is a password) that the preflight probe and a worker's map refresh
both send, over a connection they own. Formats: the Redis Cluster specification
("Redirection and resharding"), and the CLUSTER SHARDS (Redis 7.0+) and CLUSTER SLOTS
command pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import hiredis

from kvbench.errors import ProtocolError
from kvbench.protocols.base import ReplyKind

# Hash slots in a cluster (the specification, "Key distribution model").
SLOTS = 16384
# Hosts that mean "the host you asked": an empty one (Redis 7 with an unknown endpoint
# sends ``MOVED 3999 :6380``, CLUSTER SLOTS a NULL) or ``?`` (cluster-preferred-endpoint-type
# unknown-endpoint).
_SAME_HOST = ("", "?")
_REDIRECTS = {b"MOVED": ReplyKind.MOVED, b"ASK": ReplyKind.ASK}
# A reply to the discovery exchange larger than this is not one (16384 one-slot ranges of
# CLUSTER SLOTS take about 2 MB).
MAX_SLOTS_REPLY_BYTES = 16 * 1024 * 1024


class Redirect(NamedTuple):
    """A ``-MOVED <slot> <host>:<port>`` or ``-ASK <slot> <host>:<port>`` reply.

    Attributes:
        kind: ``ReplyKind.MOVED`` (the slot now lives there: update the map) or
            ``ReplyKind.ASK`` (this one request goes there, preceded by ASKING).
        slot: the hash slot of the request's key.
        host: where to send the request; "" means the host of the node that answered.
        port: that node's port.
    """

    kind: ReplyKind
    slot: int
    host: str
    port: int


class Master(NamedTuple):
    """A master node and the slot ranges it serves (inclusive; none for an empty master)."""

    host: str
    port: int
    ranges: tuple[tuple[int, int], ...]


def parse_redirect(text: bytes) -> Redirect | None:
    """The redirect an error reply's text (without its ``-``) says, or None.

    None for any other error, and for a ``MOVED``/``ASK`` whose slot or address does not
    parse: that stays an error reply (a server's bytes are never trusted to steer).
    """
    word, _, rest = text.partition(b" ")
    kind = _REDIRECTS.get(word)
    if kind is None:
        return None
    slot_text, _, address = rest.strip().partition(b" ")
    host, _, port_text = address.rpartition(b":")  # an IPv6 address holds colons itself
    if (
        not (slot_text.isdigit() and port_text.isdigit())
        or max(map(len, (slot_text, port_text))) > 5
    ):
        return None
    slot, port = int(slot_text), int(port_text)
    if slot >= SLOTS or not 0 < port < 65536:
        return None
    return redirect_of(kind, slot, host, port)


def redirect_of(kind: int, slot: int, host: bytes, port: int) -> Redirect:
    """A redirect from its parts, the host as the reply spells it (a compiled cluster
    pump parses the reply as ``parse_redirect`` does, and hands these on)."""
    return Redirect(ReplyKind(kind), slot, _host(host.decode("ascii", "replace")), port)


def _host(host: str | None) -> str:
    """A node's host, with every spelling of "the host you asked" made ""."""
    host = (host or "").strip("[]")
    return "" if host in _SAME_HOST else host


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return "" if value is None else str(value)


def _port(value: Any) -> int:
    if value.__class__ is not int or not 0 < value < 65536:
        raise ProtocolError(f"not a port: {value!r:.40}")
    return int(value)


def _range(start: Any, end: Any) -> tuple[int, int]:
    if start.__class__ is not int or end.__class__ is not int or not 0 <= start <= end < SLOTS:
        raise ProtocolError(f"not a slot range: {start!r:.20} {end!r:.20}")
    return int(start), int(end)


def _pairs(value: Any, what: str) -> dict[str, Any]:
    """A RESP2 flat list of name, value, ... (a RESP3 map) as a dict."""
    if isinstance(value, dict):
        return {_text(k): v for k, v in value.items()}
    if not isinstance(value, list) or len(value) % 2:
        raise ProtocolError(f"{what} is not a map: {value!r:.60}")
    return {_text(k): v for k, v in zip(value[::2], value[1::2], strict=True)}


def parse_cluster_shards(value: Any, tls: bool = False) -> list[Master]:
    """The masters a CLUSTER SHARDS reply names (Redis 7.0+), with their slot ranges.

    Each shard is a map of ``slots`` (a flat list of range bounds) and ``nodes`` (maps of
    ``ip``, ``endpoint``, ``port`` and/or ``tls-port``, ``role`` ...); the one node whose
    role is ``master`` is the shard's master. Masters without slots are kept: a slot may
    be moved to them during a run.

    Args:
        value: the reply as hiredis parsed it.
        tls: the client connects with TLS, so the node's ``tls-port`` is the one to use.

    Raises:
        ProtocolError: the reply does not have that shape.
    """
    if not isinstance(value, list):
        raise ProtocolError(f"CLUSTER SHARDS reply is not an array: {value!r:.60}")
    masters = []
    for shard_value in value:
        shard = _pairs(shard_value, "a CLUSTER SHARDS shard")
        bounds = shard.get("slots")
        if not isinstance(bounds, list) or len(bounds) % 2:
            raise ProtocolError(f"CLUSTER SHARDS slots are not ranges: {bounds!r:.60}")
        ranges = tuple(_range(s, e) for s, e in zip(bounds[::2], bounds[1::2], strict=True))
        nodes = shard.get("nodes")
        if not isinstance(nodes, list):
            raise ProtocolError(f"CLUSTER SHARDS nodes are not an array: {nodes!r:.60}")
        for node_value in nodes:
            node = _pairs(node_value, "a CLUSTER SHARDS node")
            if _text(node.get("role")) != "master":
                continue
            port = node.get("tls-port") if tls and "tls-port" in node else node.get("port")
            host = _host(_text(node.get("endpoint"))) or _host(_text(node.get("ip")))
            masters.append(Master(host, _port(port), ranges))
    return masters


def parse_cluster_slots(value: Any) -> list[Master]:
    """The masters a CLUSTER SLOTS reply names, with their slot ranges.

    Each entry is ``[start, end, [host, port, id, ...], replicas ...]``: the first node is
    the master (the command's page). A master serving several ranges appears once per
    range; it is one ``Master`` here, in the order first seen.

    Raises:
        ProtocolError: the reply does not have that shape.
    """
    if not isinstance(value, list):
        raise ProtocolError(f"CLUSTER SLOTS reply is not an array: {value!r:.60}")
    ranges: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for entry in value:
        if not isinstance(entry, list) or len(entry) < 3 or not isinstance(entry[2], list):
            raise ProtocolError(f"CLUSTER SLOTS entry has no master: {entry!r:.60}")
        master = entry[2]
        if len(master) < 2:
            raise ProtocolError(f"CLUSTER SLOTS master has no address: {master!r:.60}")
        address = (_host(_text(master[0])), _port(master[1]))
        ranges.setdefault(address, []).append(_range(entry[0], entry[1]))
    return [Master(host, port, tuple(r)) for (host, port), r in ranges.items()]


class SlotsAnswer(NamedTuple):
    """What a node said to the discovery exchange: its masters, or the error it answered."""

    masters: list[Master] | None
    error: str | None


class SlotsQuery:
    """The discovery exchange: ``[AUTH ...] CLUSTER SHARDS; CLUSTER SLOTS``, pipelined.

    Both are asked at once so that one round trip serves every server version: SHARDS is
    used when the node knows it (7.0+), SLOTS when it answers SHARDS with an error. Send
    ``request``, then ``feed`` the node's bytes until it returns an answer.

    Args:
        password, username: AUTH first when a password is given.
        tls: the connection is TLS (CLUSTER SHARDS then names each node's ``tls-port``).
    """

    def __init__(
        self, password: str | None = None, username: str | None = None, tls: bool = False
    ) -> None:
        commands: list[tuple[str, ...]] = []
        if password is not None:
            commands.append(("AUTH", *((username,) if username else ()), password))
        self._auth = bool(commands)
        commands += [("CLUSTER", "SHARDS"), ("CLUSTER", "SLOTS")]
        # hiredis's stub types pack_command's argument as a 1-tuple; any length is taken.
        self.request = b"".join(hiredis.pack_command(c) for c in commands)  # type: ignore[arg-type]
        self._expected = len(commands)
        self._tls = tls
        self._reader = hiredis.Reader()
        self._replies: list[Any] = []
        self._fed = 0

    def feed(self, data: bytes) -> SlotsAnswer | None:
        """Take the node's bytes; the answer once every reply is in, else None.

        Raises:
            ProtocolError: the bytes are not RESP, grow past ``MAX_SLOTS_REPLY_BYTES``, or
                a reply does not have the shape its command gives.
        """
        self._fed += len(data)
        if self._fed > MAX_SLOTS_REPLY_BYTES:
            raise ProtocolError(f"cluster slots reply beyond {MAX_SLOTS_REPLY_BYTES} bytes")
        self._reader.feed(data)
        while len(self._replies) < self._expected:
            try:
                reply = self._reader.gets()
            except Exception as exc:  # hiredis's ProtocolError, TypeError on odd maps
                raise ProtocolError(f"RESP protocol error: {exc!r}") from None
            if reply is False:
                return None
            self._replies.append(reply)
        return self._answer(self._replies)

    def _answer(self, replies: Sequence[Any]) -> SlotsAnswer:
        if self._auth and isinstance(replies[0], hiredis.ReplyError):
            return SlotsAnswer(None, f"AUTH: {replies[0]}")
        shards, slots = replies[-2], replies[-1]
        if not isinstance(shards, hiredis.ReplyError):
            return SlotsAnswer(parse_cluster_shards(shards, self._tls), None)
        if not isinstance(slots, hiredis.ReplyError):
            return SlotsAnswer(parse_cluster_slots(slots), None)
        return SlotsAnswer(None, str(slots))
