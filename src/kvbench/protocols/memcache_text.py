"""memcached text protocol codec (memcached ``doc/protocol.txt``, "Commands").

Sans-IO: requests are appended to a caller-owned bytearray and replies are parsed from fed
bytes; no sockets, no clock, no event loop. Replies come back in request order, one per
announced request (a multi-get is one request and one reply).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols._buffer import ReceiveBuffer
from kvbench.protocols.base import (
    NEED_DATA,
    BatchDefaults,
    CodecOptions,
    NeedData,
    Op,
    Reply,
    ReplyKind,
)

Value = bytes | bytearray | memoryview
# A parser for the reply at the head of the FIFO, called with what encode() stored for it.
_Parser = Callable[[Any], Reply | NeedData]
_Encoder = Callable[[Op, Any, Value | None, bytearray, int], int]

_DEFAULT_OPTIONS = CodecOptions()

# protocol.txt "Error strings": ERROR, CLIENT_ERROR <error>, SERVER_ERROR <error>. They can
# answer any command (SERVER_ERROR out of memory ...), so every parser accepts them.
_ERROR_WORDS = frozenset({b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR"})
_ERROR_PREFIXES = (b"ERROR ", b"CLIENT_ERROR ", b"SERVER_ERROR ")

_STORED = Reply(ReplyKind.STORED, 8)
_DELETED = Reply(ReplyKind.DELETED, 9)
_TOUCHED = Reply(ReplyKind.TOUCHED, 9)
_MISS = Reply(ReplyKind.MISS, 5)
_NOT_FOUND = Reply(ReplyKind.NOT_FOUND, 11)

# Status line (without CRLF) -> reply, per command family (protocol.txt per command).
_STORE_REPLIES = {
    b"STORED": _STORED,
    b"NOT_STORED": Reply(ReplyKind.NOT_STORED, 12),
    b"EXISTS": Reply(ReplyKind.EXISTS, 8),
    b"NOT_FOUND": _NOT_FOUND,
}
_DELETE_REPLIES = {b"DELETED": _DELETED, b"NOT_FOUND": _NOT_FOUND}
_TOUCH_REPLIES = {b"TOUCHED": _TOUCHED, b"NOT_FOUND": _NOT_FOUND}
_ARITH_REPLIES = {b"NOT_FOUND": _NOT_FOUND}
_NO_STATUS: dict[bytes, Reply] = {}

_STORE_VERBS = {
    Op.SET: b"set",
    Op.ADD: b"add",
    Op.REPLACE: b"replace",
    Op.APPEND: b"append",
    Op.PREPEND: b"prepend",
}


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


def _value_size(fields: list[bytearray]) -> int:
    """Check the fields after ``VALUE `` (key, flags, bytes[, cas]) and return the byte count."""
    nfields = len(fields)
    if (
        (nfields != 3 and nfields != 4)
        or not fields[1].isdigit()
        or not fields[2].isdigit()
        or (nfields == 4 and not fields[3].isdigit())
    ):
        raise ProtocolError(f"bad VALUE header: {bytes(b' '.join(fields))[:64]!r}")
    return int(fields[2])


class MemcacheTextCodec(BatchDefaults):
    """Client side of memcached's text protocol, for one connection.

    Supports get, gets, multi-get, set, add, replace, append, prepend, cas, delete,
    incr, decr, touch and stats. ``NOOP`` and ``COMMAND`` have no text form and raise
    ``ValueError`` at ``encode``.

    With ``options.noreply`` storage, delete, incr/decr and touch carry ``noreply`` and
    announce no reply. memcached still answers some failures of such commands (e.g.
    ``SERVER_ERROR out of memory storing object``); the text protocol gives no way to tell
    whose reply that is, so one arriving with nothing pending raises ``ProtocolError``,
    and one arriving while other replies are pending is taken as the head's reply.

    Args:
        options: per-connection settings (payload keeping, reply bound, ttl, flags, noreply).
    """

    def __init__(self, options: CodecOptions = _DEFAULT_OPTIONS) -> None:
        self._keep = options.keep_payload
        self._max = options.max_reply_bytes
        self._noreply = options.noreply
        self._rb = ReceiveBuffer()
        self._pending: deque[tuple[_Parser, Any]] = deque()
        self._eof = False
        self._dead: str | None = None
        # Multi-get state kept across NEED_DATA: blocks already consumed.
        self._mget_index = 0
        self._mget_count = 0
        self._mget_nbytes = 0
        self._mget_values: list[bytes] = []
        # Request templates with options baked in: the hot path does one %-format.
        suffix = b" noreply" if options.noreply else b""
        flags_ttl = b"%d %d" % (options.flags, options.ttl_s)
        self._store_formats = {
            op: b"%s %%s %s %%d%s\r\n" % (verb, flags_ttl, suffix)
            for op, verb in _STORE_VERBS.items()
        }
        self._cas_format = b"cas %%s %s %%d %%d%s\r\n" % (flags_ttl, suffix)
        self._delete_format = b"delete %%s%s\r\n" % suffix
        self._arith_formats = {
            Op.INCR: b"incr %%s %%d%s\r\n" % suffix,
            Op.DECR: b"decr %%s %%d%s\r\n" % suffix,
        }
        self._touch_format = b"touch %%s %%d%s\r\n" % suffix
        self._get_formats = {Op.GET: b"get %s\r\n", Op.GETS: b"gets %s\r\n"}
        # Constant FIFO entries: no allocation per request for the status-only replies.
        self._store_entry: tuple[_Parser, Any] = (self._parse_store, None)
        self._delete_entry: tuple[_Parser, Any] = (self._parse_delete, None)
        self._arith_entry: tuple[_Parser, Any] = (self._parse_arith, None)
        self._touch_entry: tuple[_Parser, Any] = (self._parse_touch, None)
        self._stats_entry: tuple[_Parser, Any] = (self._parse_stats, None)
        self._parse_get_ = self._parse_get
        self._parse_mget_ = self._parse_mget
        encoders: dict[Op, _Encoder] = {
            Op.GET: self._encode_get,
            Op.GETS: self._encode_get,
            Op.MGET: self._encode_mget,
            Op.SET: self._encode_store,
            Op.ADD: self._encode_store,
            Op.REPLACE: self._encode_store,
            Op.APPEND: self._encode_store,
            Op.PREPEND: self._encode_store,
            Op.CAS: self._encode_cas,
            Op.DELETE: self._encode_delete,
            Op.INCR: self._encode_arith,
            Op.DECR: self._encode_arith,
            Op.TOUCH: self._encode_touch,
            Op.STATS: self._encode_stats,
        }
        self._encoders = [encoders.get(op, self._encode_unsupported) for op in Op]

    # -- requests ---------------------------------------------------------------------

    def encode(
        self,
        op: Op,
        key: bytes | Sequence[bytes],
        value: Value | None,
        out: bytearray,
        arg: int = 0,
    ) -> int:
        """Append one request to ``out`` and remember the reply shape it expects.

        Keys are written as given: the workload plan validates them once (no spaces or
        control characters, at most 250 bytes), not every request.

        Args:
            op: the request kind.
            key: the key; a sequence of keys for ``Op.MGET``.
            value: the value for set/add/replace/append/prepend/cas, else None.
            out: the caller's write buffer.
            arg: the cas unique (CAS), the delta (INCR/DECR), the exptime (TOUCH).

        Returns:
            How many replies the request produces: 1, or 0 for a ``noreply`` command.

        Raises:
            ValueError: ``NOOP``/``COMMAND`` (no text form), a storage op without a value,
                a negative delta, or an MGET without a key sequence.
        """
        return self._encoders[op](op, key, value, out, arg)

    def _encode_unsupported(
        self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int
    ) -> int:
        raise ValueError(f"the memcached text protocol has no {Op(op).name} command")

    def _encode_get(self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int) -> int:
        out += self._get_formats[op] % key
        self._pending.append((self._parse_get_, key))
        return 1

    def _encode_mget(
        self, op: Op, key: Sequence[bytes], value: Value | None, out: bytearray, arg: int
    ) -> int:
        keys = multiget_keys(key)
        out += b"get "
        out += b" ".join(keys)
        out += b"\r\n"
        self._pending.append((self._parse_mget_, keys))
        return 1

    def _encode_store(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        out += self._store_formats[op] % (key, value_length(value))
        out += value  # type: ignore[arg-type]  # value_length() rejected None
        out += b"\r\n"
        if self._noreply:
            return 0
        self._pending.append(self._store_entry)
        return 1

    def _encode_cas(self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int) -> int:
        out += self._cas_format % (key, value_length(value), arg)
        out += value  # type: ignore[arg-type]  # value_length() rejected None
        out += b"\r\n"
        if self._noreply:
            return 0
        self._pending.append(self._store_entry)
        return 1

    def _encode_delete(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        out += self._delete_format % key
        if self._noreply:
            return 0
        self._pending.append(self._delete_entry)
        return 1

    def _encode_arith(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        if arg < 0:
            raise ValueError("incr/decr take a non-negative delta")
        out += self._arith_formats[op] % (key, arg)
        if self._noreply:
            return 0
        self._pending.append(self._arith_entry)
        return 1

    def _encode_touch(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        out += self._touch_format % (key, arg)
        if self._noreply:
            return 0
        self._pending.append(self._touch_entry)
        return 1

    def _encode_stats(self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int) -> int:
        out += b"stats\r\n"
        self._pending.append(self._stats_entry)
        return 1

    # -- replies ----------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer bytes received from the server; call ``next_reply`` until ``NEED_DATA``.

        Raises:
            ProtocolError: the codec already failed, or EOF was already fed.
        """
        if self._dead is not None:
            raise ProtocolError(f"codec unusable after an earlier error: {self._dead}")
        if self._eof:
            raise self._kill("data fed after EOF")
        self._rb.feed(data)

    def feed_eof(self) -> None:
        """Mark the end of the stream; a reply cut short then fails at ``next_reply``."""
        self._eof = True

    def pending(self) -> int:
        """How many announced replies have not been returned yet."""
        return len(self._pending)

    def next_reply(self) -> Reply | NeedData:
        """Return the next complete reply, or ``NEED_DATA`` until more bytes are fed.

        Raises:
            ProtocolError: the bytes broke the grammar, a reply came with no request
                pending, or EOF cut a reply short. Every later call raises too; the
                caller closes the connection.
            ReplyTooLarge: a reply exceeded ``max_reply_bytes``.
        """
        if self._dead is not None:
            raise ProtocolError(f"codec unusable after an earlier error: {self._dead}")
        pending = self._pending
        if pending:
            parse, arg = pending[0]
            try:
                reply = parse(arg)
            except ProtocolError as exc:
                self._dead = str(exc)
                raise
            if reply is not NEED_DATA:
                pending.popleft()
                return reply
        elif len(self._rb):
            raise self._kill("a reply arrived with no request pending")
        if self._eof and (pending or len(self._rb)):
            raise self._kill(f"connection closed with {len(pending)} replies pending")
        return NEED_DATA

    def _kill(self, message: str) -> ProtocolError:
        self._dead = message
        return ProtocolError(message)

    def _need_line(self, pos: int) -> NeedData:
        """No CRLF yet after ``pos``: wait for more, unless the line is already too long."""
        if len(self._rb.data) - pos > self._max:
            raise ReplyTooLarge(f"reply line longer than {self._max} bytes")
        return NEED_DATA

    def _status(self, table: dict[bytes, Reply], what: str) -> Reply | NeedData:
        """Parse one status line: a word from ``table`` or an error line."""
        rb = self._rb
        pos = rb.pos
        eol = rb.find_line(pos, self._max)
        if eol < 0:
            return NEED_DATA
        line = bytes(rb.data[pos:eol])
        reply = table.get(line)
        if reply is None:
            reply = error_reply(line, eol + 2 - pos)
            if reply is None:
                raise ProtocolError(f"unexpected reply to {what}: {line[:64]!r}")
            if reply.nbytes > self._max:
                raise ReplyTooLarge(f"error line longer than {self._max} bytes")
        rb.pos = eol + 2
        return reply

    def _parse_store(self, _: None) -> Reply | NeedData:
        rb = self._rb
        if rb.data.startswith(b"STORED\r\n", rb.pos):
            rb.pos += 8
            return _STORED
        return self._status(_STORE_REPLIES, "a storage command")

    def _parse_delete(self, _: None) -> Reply | NeedData:
        rb = self._rb
        if rb.data.startswith(b"DELETED\r\n", rb.pos):
            rb.pos += 9
            return _DELETED
        return self._status(_DELETE_REPLIES, "delete")

    def _parse_touch(self, _: None) -> Reply | NeedData:
        rb = self._rb
        if rb.data.startswith(b"TOUCHED\r\n", rb.pos):
            rb.pos += 9
            return _TOUCHED
        return self._status(_TOUCH_REPLIES, "touch")

    def _parse_arith(self, _: None) -> Reply | NeedData:
        rb = self._rb
        pos = rb.pos
        eol = rb.find_line(pos, self._max)
        if eol < 0:
            return NEED_DATA
        line = bytes(rb.data[pos:eol])
        if line.isdigit():
            if eol + 2 - pos > self._max:
                raise ReplyTooLarge(f"incr/decr reply longer than {self._max} bytes")
            rb.pos = eol + 2
            return Reply(ReplyKind.VALUE, eol + 2 - pos, line if self._keep else None)
        return self._status(_ARITH_REPLIES, "incr/decr")

    def _parse_stats(self, _: None) -> Reply | NeedData:
        return parse_stats_block(self._rb, self._max)

    def _parse_get(self, key: bytes) -> Reply | NeedData:
        """``VALUE <key> <flags> <bytes> [<cas>]\\r\\n<data>\\r\\nEND\\r\\n``, or ``END\\r\\n``."""
        rb = self._rb
        data = rb.data
        pos = rb.pos
        if data.startswith(b"VALUE ", pos):
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                return self._need_line(pos)
            fields = data[pos + 6 : eol].split(b" ")
            size = _value_size(fields)
            if fields[0] != key:
                raise ProtocolError(f"VALUE for {bytes(fields[0])[:64]!r}, asked for {key[:64]!r}")
            start = eol + 2
            end = start + size
            nbytes = end + 7 - pos
            # Checked on the declared size, before the data block is buffered.
            if nbytes > self._max:
                raise ReplyTooLarge(f"get reply of {nbytes} bytes, bound {self._max}")
            if len(data) < end + 7:
                # Fail as soon as the bytes after the block cannot become CRLF END CRLF.
                if len(data) > end and not b"\r\nEND\r\n".startswith(data[end:]):
                    raise ProtocolError("get: data block not followed by CRLF END CRLF")
                return NEED_DATA
            if not data.startswith(b"\r\nEND\r\n", end):
                raise ProtocolError("get: data block not followed by CRLF END CRLF")
            rb.pos = end + 7
            return Reply(ReplyKind.HIT, nbytes, bytes(data[start:end]) if self._keep else None, 1)
        if data.startswith(b"END\r\n", pos):
            rb.pos = pos + 5
            return _MISS
        return self._status(_NO_STATUS, "get")

    def _parse_mget(self, keys: tuple[bytes, ...]) -> Reply | NeedData:
        """One multi-get reply: VALUE blocks for the hits, in key order, then ``END``.

        A loop over blocks (longer than most functions here on purpose): each complete
        block is consumed at once, so a reply arriving over many reads is parsed once.
        """
        rb = self._rb
        data = rb.data
        while True:
            pos = rb.pos
            if data.startswith(b"VALUE ", pos):
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    if self._mget_nbytes + len(data) - pos > self._max:
                        raise ReplyTooLarge(f"multi-get reply larger than {self._max} bytes")
                    return NEED_DATA
                fields = data[pos + 6 : eol].split(b" ")
                size = _value_size(fields)
                index = self._mget_index
                while index < len(keys) and keys[index] != fields[0]:
                    index += 1
                if index == len(keys):
                    raise ProtocolError(f"VALUE for unrequested key {bytes(fields[0])[:64]!r}")
                start = eol + 2
                end = start + size
                if self._mget_nbytes + end + 2 - pos + 5 > self._max:  # + END CRLF
                    raise ReplyTooLarge(f"multi-get reply larger than {self._max} bytes")
                if len(data) < end + 2:
                    return NEED_DATA
                if not data.startswith(b"\r\n", end):
                    raise ProtocolError("get: data block not followed by CRLF")
                if self._keep:
                    self._mget_values.append(bytes(data[start:end]))
                self._mget_index = index + 1
                self._mget_count += 1
                self._mget_nbytes += end + 2 - pos
                rb.pos = end + 2
                continue
            if data.startswith(b"END\r\n", pos):
                rb.pos = pos + 5
                return self._finish_mget(5, None)
            error = self._status(_NO_STATUS, "get")
            if isinstance(error, NeedData):
                return error
            # memcached can fail part way through a multi-get (out of memory, bad key).
            return self._finish_mget(error.nbytes, error.payload)

    def _finish_mget(self, tail_nbytes: int, error: bytes | None) -> Reply:
        values = self._mget_values
        count = self._mget_count
        nbytes = self._mget_nbytes + tail_nbytes
        if error is not None:
            reply = Reply(ReplyKind.ERROR_REPLY, nbytes, error, count)
        elif count:
            reply = Reply(ReplyKind.HIT, nbytes, b"".join(values) if self._keep else None, count)
        else:
            reply = Reply(ReplyKind.MISS, nbytes, None, 0)
        self._mget_index = 0
        self._mget_count = 0
        self._mget_nbytes = 0
        self._mget_values = []
        return reply
