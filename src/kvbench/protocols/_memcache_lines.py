"""What the memcached text and meta codecs share: line helpers and per-connection state.

memcached ``doc/protocol.txt``: error strings, the ``stats`` reply, storage values and
multi-get keys look the same in both protocols, and both codecs keep a receive buffer and
a FIFO of pending requests. Sans-IO, like the codecs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols._buffer import ReceiveBuffer
from kvbench.protocols._codec_base import CodecBase, op_table
from kvbench.protocols.base import (
    NEED_DATA,
    CodecOptions,
    Key,
    NeedData,
    Op,
    Reply,
    ReplyKind,
    Value,
)

# protocol.txt "Error strings": ERROR, CLIENT_ERROR <error>, SERVER_ERROR <error>. They can
# answer any command (SERVER_ERROR out of memory ...), so every parser accepts them.
_ERROR_WORDS = frozenset({b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR"})
_ERROR_PREFIXES = (b"ERROR ", b"CLIENT_ERROR ", b"SERVER_ERROR ")

# A declared data block size with more digits than this is refused as a bad header: no
# bound is that large (and int() refuses strings of more than 4300 digits).
MAX_SIZE_DIGITS = 18

# Pending-request FIFOs are read from a head index; the answered prefix is dropped once
# it is at least this long and at least half the FIFO (amortized O(1) per reply).
COMPACT_AT = 64


def error_reply(line: bytes, nbytes: int) -> Reply | None:
    """Recognize a memcached error line.

    Args:
        line: one reply line without its CRLF.
        nbytes: the line's size on the wire, CRLF included.

    Returns:
        An ``ERROR_REPLY`` whose payload is the line, or None if it is no error line.
    """
    if line.startswith(_ERROR_PREFIXES) or line in _ERROR_WORDS:
        return Reply(ReplyKind.ERROR_REPLY, nbytes, line)
    return None


def parse_stats_block(buf: ReceiveBuffer, limit: int) -> Reply | NeedData:
    """Parse a ``STAT <name> <value>`` ... ``END`` reply (protocol.txt "Statistics").

    Args:
        buf: the receive buffer, positioned at the reply's first byte.
        limit: the most bytes the whole reply may take.

    Returns:
        ``Reply(VALUE, nbytes, b"name value\\r\\n"...)``, an ``ERROR_REPLY`` when the server
        answered with an error line, or ``NEED_DATA`` (nothing consumed; call again later).

    Raises:
        ProtocolError: a line that is neither ``STAT`` nor ``END``.
        ReplyTooLarge: the reply grew past ``limit``.
    """
    data = buf.data
    start = pos = buf.pos
    lines: list[bytearray] = []
    while True:
        eol = buf.find_line(pos, limit - (pos - start))
        if eol < 0:
            return NEED_DATA
        if eol + 2 - start > limit:
            raise ReplyTooLarge(f"stats reply larger than {limit} bytes")
        if data.startswith(b"STAT ", pos):
            lines.append(data[pos + 5 : eol + 2])
        elif eol == pos + 3 and data.startswith(b"END", pos):
            buf.pos = eol + 2
            return Reply(ReplyKind.VALUE, eol + 2 - start, b"".join(lines))
        else:
            line = bytes(data[pos:eol])
            error = error_reply(line, eol + 2 - pos) if pos == start else None
            if error is None:
                raise ProtocolError(f"unexpected line in stats reply: {line[:64]!r}")
            buf.pos = eol + 2
            return error
        pos = eol + 2


def value_length(value: Value | None) -> int:
    """The byte length of a storage command's value (a memoryview counts its bytes).

    Raises:
        ValueError: no value was given.
    """
    if value is None:
        raise ValueError("storage commands need a value")
    if isinstance(value, memoryview):
        return value.nbytes
    return len(value)


def multiget_keys(key: bytes | Sequence[bytes]) -> tuple[bytes, ...]:
    """The keys of a multi-get as a tuple.

    Raises:
        ValueError: ``key`` is a single bytes-like key, or empty.
    """
    if isinstance(key, bytes | bytearray | memoryview):
        raise ValueError("MGET takes a sequence of keys, not one key")
    keys = tuple(key)
    if not keys:
        raise ValueError("MGET needs at least one key")
    return keys


# An encoder: ``encode``'s arguments, with the op; returns the replies it announced.
Encoder = Callable[[Op, Any, Value | None, bytearray, int], int]


# -- meta protocol lines ("Meta Commands") --------------------------------------------

# Opaque tokens are a counter mod 2**32 (protocol.txt: O(token), up to 32 bytes, echoed).
TOKEN_MASK = 0xFFFFFFFF

# Status replies differ only in length (the echoed token has 1-10 digits): built once.
_CACHED_LENGTHS = 32
_BY_LENGTH = {
    kind: tuple(Reply(kind, nbytes) for nbytes in range(_CACHED_LENGTHS))
    for kind in (
        ReplyKind.STORED,
        ReplyKind.NOT_STORED,
        ReplyKind.EXISTS,
        ReplyKind.NOT_FOUND,
        ReplyKind.DELETED,
        ReplyKind.TOUCHED,
        ReplyKind.MISS,
        ReplyKind.OK,
    )
}


def replies_by_length(kind: ReplyKind) -> tuple[Reply, ...]:
    """``Reply(kind, n)`` for n below 32, indexed by n (``kind`` is a status kind)."""
    return _BY_LENGTH[kind]


def fixed_reply(kind: ReplyKind, nbytes: int) -> Reply:
    """``Reply(kind, nbytes)``, shared when it is a status reply of a usual length."""
    cache = _BY_LENGTH.get(kind)
    if cache is not None and nbytes < _CACHED_LENGTHS:
        return cache[nbytes]
    return Reply(kind, nbytes)


def split_meta_status(line: bytes) -> tuple[bytes, bytes | None]:
    """Split ``XX [flag ...]`` into the return code and the opaque token, if any.

    Raises:
        ProtocolError: not a meta status line.
    """
    code = line[:2]
    if len(code) != 2 or not code.isalpha() or not code.isupper():
        raise ProtocolError(f"not a meta reply: {line[:64]!r}")
    token = None
    if len(line) > 2:
        if line[2] != 0x20:
            raise ProtocolError(f"not a meta reply: {line[:64]!r}")
        for flag in line[3:].split(b" "):
            if not flag or flag == b"O":
                raise ProtocolError(f"bad flags in meta reply: {line[:64]!r}")
            if flag[0] == 0x4F:  # O
                token = flag[1:]
    return code, token


def meta_token(token: bytes | bytearray) -> int:
    """The integer of an echoed opaque token, or -1 if it is not one of ours."""
    if 0 < len(token) <= 10 and token.isdigit():
        value = int(token)
        if value <= TOKEN_MASK:
            return value
    return -1


class MemcacheCore(CodecBase):
    """What both memcached codecs keep per connection, and the calls that only touch it.

    The pending FIFO is two aligned sequences read from ``_head``: ``_pending``, the op of each
    announced request (a bytearray, so ``count`` sees runs of one op without a loop), and
    ``_args``, what that request's reply parser needs. ``encode_many`` extends both with a
    slice or a range per batch. A multi-get's reply is assembled across ``NEED_DATA`` in
    ``_mget_count``/``_mget_nbytes``/``_mget_values`` by the codec's parser, then made a
    ``Reply`` by ``_finish_mget``.

    Args:
        options: per-connection settings.
    """

    COMPACT_AT = COMPACT_AT
    _pending: bytearray
    # The encoder per op (``_set_encoders``), called as encode is.
    _encoders: list[Encoder]
    # The encoders both codecs have, for the same ops (``_set_encoders``).
    _encode_get: Encoder
    _encode_mget: Encoder
    _encode_store: Encoder
    _encode_cas: Encoder
    _encode_delete: Encoder
    _encode_arith: Encoder
    _encode_touch: Encoder
    _encode_stats: Encoder

    def __init__(self, options: CodecOptions) -> None:
        super().__init__(options, bytearray())
        self._args: list[Any] = []
        self._noreply = options.noreply
        self._rb = ReceiveBuffer()
        self._receive = self._rb.feed
        self._mget_count = 0
        self._mget_nbytes = 0
        self._mget_values: list[bytes] = []

    def encode(self, op: Op, key: Key, value: Value | None, out: bytearray, arg: int = 0) -> int:
        """Append one request to ``out`` and remember the reply it expects.

        The codec's class docstring maps ops to commands. Keys are written as given: the
        workload plan validates them once (no spaces or control characters, at most 250
        bytes), not every request.

        Returns:
            How many replies the request produces: 1, or 0 for a noreply (quiet) request.

        Raises:
            ValueError: an op the protocol has no command for, a storage op without a
                value, a negative delta, or an MGET without a key sequence.
        """
        return self._encoders[op](op, key, value, out, arg)

    def _compact(self, head: int) -> None:
        del self._pending[:head], self._args[:head]

    def _set_encoders(self, store_ops: Iterable[Op], own: dict[Op, Encoder], name: str) -> None:
        """Build ``_encoders``: each op both protocols have a command for (``store_ops``:
        the storage ops, each written by ``_encode_store``), then the codec's ``own``; any
        other op is refused as one the memcached ``name`` protocol has no command for."""
        encoders: dict[Op, Encoder] = {
            Op.GET: self._encode_get,
            Op.GETS: self._encode_get,
            Op.MGET: self._encode_mget,
            Op.CAS: self._encode_cas,
            Op.DELETE: self._encode_delete,
            Op.INCR: self._encode_arith,
            Op.DECR: self._encode_arith,
            Op.TOUCH: self._encode_touch,
            Op.STATS: self._encode_stats,
        }
        encoders.update(dict.fromkeys(store_ops, self._encode_store))
        encoders.update(own)
        self._encoders = op_table(encoders, f"the memcached {name} protocol has no {{op}} command")

    def _push(self, op: Op, arg: Any) -> None:
        """Announce the reply of a request: its op, and what its parser needs."""
        self._pending.append(op)
        self._args.append(arg)

    def _expect(self, op: Op, arg: Any = None) -> int:
        """Announce the reply of a request that may be quiet (``noreply``); return the count."""
        if self._noreply:
            return 0
        self._pending.append(op)
        self._args.append(arg)
        return 1

    def _need_line(self, pos: int) -> NeedData:
        """No CRLF yet after ``pos``: wait for more, unless the line is already too long."""
        if len(self._rb.data) - pos > self._max:
            raise ReplyTooLarge(f"reply line longer than {self._max} bytes")
        return NEED_DATA

    def _mget_line_end(self, pos: int) -> int:
        """Where the CRLF of a multi-get's block header at ``pos`` is; -1 while it has not
        come (the reply so far kept within the bound)."""
        data = self._rb.data
        eol = data.find(b"\r\n", pos)
        if eol < 0 and self._mget_nbytes + len(data) - pos > self._max:
            raise ReplyTooLarge(f"multi-get reply larger than {self._max} bytes")
        return eol

    def _mget_block(self, pos: int, start: int, end: int, last_line: int, what: str) -> bool:
        """Take a multi-get's value (header at ``pos``, data ``start:end``, then CRLF) into
        the reply being assembled; False, nothing taken, while it is not all buffered.

        Args:
            last_line: the bytes of the line that ends the reply, counted in the bound.
            what: the error text's prefix.
        """
        data = self._rb.data
        if self._mget_nbytes + end + 2 - pos + last_line > self._max:
            raise ReplyTooLarge(f"multi-get reply larger than {self._max} bytes")
        if len(data) < end + 2:
            return False
        if not data.startswith(b"\r\n", end):
            raise ProtocolError(f"{what}data block not followed by CRLF")
        if self._keep:
            self._mget_values.append(bytes(data[start:end]))
        self._mget_count += 1
        self._mget_nbytes += end + 2 - pos
        self._rb.pos = end + 2
        return True

    def _finish_mget(self, end_nbytes: int, error: bytes | None) -> Reply:
        """The multi-get's reply, once its last line (``end_nbytes`` long) is consumed: an
        ``ERROR_REPLY`` carrying ``error`` if one came, else a hit counting the values, or
        a miss."""
        count = self._mget_count
        nbytes = self._mget_nbytes + end_nbytes
        if error is not None:
            reply = Reply(ReplyKind.ERROR_REPLY, nbytes, error, count)
        elif count:
            payload = b"".join(self._mget_values) if self._keep else None
            reply = Reply(ReplyKind.HIT, nbytes, payload, count)
        else:
            reply = Reply(ReplyKind.MISS, nbytes, None, 0)
        self._mget_count = 0
        self._mget_nbytes = 0
        self._mget_values = []
        return reply
