"""The vocabulary every codec shares: ops, reply kinds, replies, the codec Protocol.

Sans-IO: nothing here (or in any codec) opens a socket, reads a clock, draws a random
number or schedules anything. A codec turns requests into bytes appended to a buffer the
caller owns, and bytes fed to it into ``Reply`` values, in order.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol

# A reply may not be bigger than this unless the caller says otherwise. memcached's own
# item size limit defaults to 1 MiB (-I); Redis's proto-max-bulk-len defaults to 512 MiB,
# which a benchmark never needs: 64 MiB bounds memory use per connection.
DEFAULT_MAX_REPLY_BYTES = 64 * 1024 * 1024


class Op(enum.IntEnum):
    """A request kind. Values are small consecutive ints so they index lists."""

    GET = 0
    SET = 1
    DELETE = 2
    INCR = 3
    DECR = 4
    MGET = 5  # multi-get: one op, several keys
    ADD = 6
    REPLACE = 7
    APPEND = 8
    PREPEND = 9
    CAS = 10
    TOUCH = 11
    GETS = 12
    NOOP = 13
    STATS = 14
    COMMAND = 15  # an arbitrary command (RESP): key is the argv


OP_NAMES: tuple[str, ...] = tuple(op.name.lower() for op in Op)


class ReplyKind(enum.IntEnum):
    """What a reply said. Numbering is shared with ``metrics.Outcome``."""

    HIT = 1
    MISS = 2
    STORED = 3
    NOT_STORED = 4
    EXISTS = 5
    NOT_FOUND = 6
    DELETED = 7
    TOUCHED = 8
    OK = 9
    VALUE = 10  # an integer, status or array reply (incr, RESP +OK-like values, stats)
    ERROR_REPLY = 20  # ERROR / CLIENT_ERROR / SERVER_ERROR / -ERR / HTTP 5xx
    # Redis Cluster redirects, from a codec asked to tell them (redis+cluster:// targets):
    # the request is to be sent on to another node, so neither ends it.
    MOVED = 26
    ASK = 27


class Reply(NamedTuple):
    """One reply, matched to one request that ``encode()`` announced.

    Attributes:
        kind: what the reply said.
        nbytes: wire bytes this reply took.
        payload: the value bytes when the codec keeps payloads, the number text of an
            incr/decr reply when it keeps payloads, the error text of an ERROR_REPLY
            (always), the stats text of a STATS reply (always), else None.
        keys: how many values the reply carried (1 for a get hit, k' <= k for a multi-get).
    """

    kind: ReplyKind
    nbytes: int
    payload: bytes | None = None
    keys: int = 0


class NeedData(enum.Enum):
    """Type of the ``NEED_DATA`` sentinel: no complete reply is buffered yet.

    An enum of one member, so that ``reply is not NEED_DATA`` narrows ``Reply | NeedData``
    to ``Reply`` for type checkers (PEP 484, "Support for singleton types in unions").
    """

    NEED_DATA = enum.auto()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA

# A request's value: bytes, or (on the engine's path) a memoryview slice of one blob.
Value = bytes | bytearray | memoryview
# ``encode``'s key: one key, or the keys of a multi-get (the argv of a RESP command).
Key = bytes | Sequence[bytes]
# ``encode_many``'s requests: ops as plain ints, keys and values, index-aligned.
Ops = Sequence[int]
Keys = Sequence[Key]
Values = Sequence[Value | None]


@dataclass(frozen=True, slots=True)
class CodecOptions:
    """Per-connection codec settings, fixed for the connection's life.

    Attributes:
        keep_payload: return value bytes in ``Reply.payload`` (verification, tests).
        max_reply_bytes: a reply larger than this raises ``ReplyTooLarge``.
        ttl_s: expiry sent with storage commands (0: never expires).
        noreply: ask the server not to answer storage/delete/incr commands where the
            protocol can (text ``noreply``, binary quiet ops, meta ``q``); ``encode``
            then returns 0 for them.
        flags: the client flags word stored with memcached items.
    """

    keep_payload: bool = False
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    ttl_s: int = 0
    noreply: bool = False
    flags: int = 0


# The settings of a codec built without any (frozen: one instance serves every codec).
DEFAULT_OPTIONS: Final = CodecOptions()


class ClientCodec(Protocol):
    """One per connection; holds both halves because the reply grammar depends on the request.

    No sockets, no clock, no event loop.

    Attributes:
        last_error: the text of the latest error reply ``read_kinds`` parsed where the
            codec keeps it (memcached text: ``SERVER_ERROR out of memory storing object``),
            else None: ``read_kinds`` gives only kinds, and a refusal is shown in the
            server's own words.
    """

    last_error: bytes | None

    def encode(self, op: Op, key: Key, value: Value | None, out: bytearray, arg: int = 0) -> int:
        """Append one request to ``out``.

        Args:
            op: the request kind.
            key: the key; for ``Op.MGET`` a sequence of keys; for ``Op.COMMAND`` the argv.
            value: the value for storage ops, else None.
            out: the caller's write buffer.
            arg: the delta of incr/decr, the expiry of touch, the cas unique of cas.

        Returns:
            How many ``Reply`` values this request will produce (0 with noreply/quiet ops).
            The caller keeps its own FIFO of that many entries, aligned with the replies.

        Raises:
            ValueError: the codec cannot express this op (caught at plan time, not per request).
        """
        ...

    def feed(self, data: Value) -> None:
        """Buffer bytes received from the server. Raises ProtocolError after EOF or an error."""
        ...

    def feed_eof(self) -> None:
        """Mark the end of the stream; a reply cut short then raises ProtocolError."""
        ...

    def next_reply(self) -> Reply | NeedData:
        """Return the next complete reply, or ``NEED_DATA``.

        Raises:
            ProtocolError: the bytes broke the grammar, a reply came with no request
                pending, or EOF cut a reply short. The codec refuses all input afterwards;
                the caller closes the connection.
        """
        ...

    def pending(self) -> int:
        """How many announced replies have not been returned yet."""
        ...

    @property
    def closing(self) -> bool:
        """The server announced it closes the connection after the replies returned so far
        (HTTP ``Connection: close``): send nothing more on it, reopen it."""
        ...

    def encode_many(
        self, ops: Ops, keys: Keys, values: Values, start: int, stop: int, out: bytearray
    ) -> int:
        """Append requests ``i in range(start, stop)`` (``ops[i]``, ``keys[i]``, ``values[i]``).

        The engine's batch path: the loop runs inside the codec. Every request must produce
        exactly one reply (no noreply or quiet ops). Requests are encoded as ``encode`` would
        with ``arg`` 1 for INCR/DECR (one step) and 0 for every other op. Returns
        ``stop - start``.
        """
        ...

    def set_ttl(self, ttl_s: int) -> None:
        """Send ``ttl_s`` as the expiry of the stores encoded from now on (a replay's
        chunk of requests carries its own TTL); requests already encoded keep theirs."""
        ...

    def read_kinds(self, kinds: list[int], sizes: list[int] | None = None) -> int:
        """Parse every complete buffered reply, appending ``int(kind) | keys << 8`` for each
        (and its wire bytes, ``Reply.nbytes``, to ``sizes`` when given).

        The engine's batch path for counting outcomes without a call per reply.

        Returns:
            How many replies were appended.

        Raises:
            ProtocolError: as ``next_reply``; replies parsed before the bad bytes are
                appended to ``kinds`` first.
        """
        ...


KIND_MASK = 0xFF
KEYS_SHIFT = 8


def parse_stats_text(payload: bytes) -> dict[str, str]:
    """Turn the payload of a STATS reply (``b"name value\\r\\n"`` lines) into a dict."""
    stats: dict[str, str] = {}
    for line in payload.split(b"\r\n"):
        name, _, value = line.partition(b" ")
        if name:
            stats[name.decode("ascii", "replace")] = value.decode("ascii", "replace")
    return stats
