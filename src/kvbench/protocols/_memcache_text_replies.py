"""The reply half of the memcached text codec (``doc/protocol.txt``, "Commands").

``TextReplies`` parses replies one by one (``next_reply``; ``read_kinds`` is a loop over it);
``MemcacheTextCodec`` in memcache_text.py adds the request half. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols._memcache_lines import (
    COMPACT_AT,
    MAX_SIZE_DIGITS,
    MemcacheCore,
    error_reply,
    parse_stats_block,
)
from kvbench.protocols.base import (
    NEED_DATA,
    CodecOptions,
    NeedData,
    Op,
    Reply,
    ReplyKind,
)

# A parser for the reply at the head of the FIFO, called with what encode() stored for it.
_Parser = Callable[[Any], Reply | NeedData]

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
# The first words of the replies that are listings ending with an END line: ``stats``
# (and its subcommands) and ``stats cachedump`` (protocol.txt "Statistics").
_LISTING_LINES = (b"STAT ", b"ITEM ")
_STORE_OPS = (Op.SET, Op.ADD, Op.REPLACE, Op.APPEND, Op.PREPEND, Op.CAS)


def _value_size(fields: list[bytearray]) -> int:
    """Check the fields after ``VALUE `` (key, flags, bytes[, cas]) and return the byte count."""
    nfields = len(fields)
    if (
        (nfields != 3 and nfields != 4)
        or not fields[1].isdigit()
        or not fields[2].isdigit()
        or len(fields[2]) > MAX_SIZE_DIGITS
        or (nfields == 4 and not fields[3].isdigit())
    ):
        raise ProtocolError(f"bad VALUE header: {bytes(b' '.join(fields))[:64]!r}")
    return int(fields[2])


def _status_parser(
    usual: Reply, word: bytes, table: dict[bytes, Reply], what: str
) -> Callable[[TextReplies, None], Reply | NeedData]:
    """A parser of one status line: ``usual`` when the line is ``word``, else ``_status``."""
    line = word + b"\r\n"
    size = len(line)

    def parse(self: TextReplies, _: None) -> Reply | NeedData:
        rb = self._rb
        if rb.data.startswith(line, rb.pos):
            rb.pos += size
            return usual
        return self._status(table, what)

    return parse


class TextReplies(MemcacheCore):
    """Reply parsing for ``MemcacheTextCodec``, one reply at a time.

    Args:
        options: per-connection settings (payload keeping, reply bound, flags).
    """

    def __init__(self, options: CodecOptions) -> None:
        super().__init__(options)
        # A multi-get's values come in key order: the index of the next key that may answer.
        self._mget_index = 0
        parsers: dict[Op, _Parser] = {
            Op.GET: self._parse_get,
            Op.GETS: self._parse_get,
            Op.MGET: self._parse_mget,
            Op.DELETE: self._parse_delete,
            Op.INCR: self._parse_arith,
            Op.DECR: self._parse_arith,
            Op.TOUCH: self._parse_touch,
            Op.STATS: self._parse_stats,
            Op.COMMAND: self._parse_command,
        }
        parsers.update(dict.fromkeys(_STORE_OPS, self._parse_store))
        # Indexed by op; ops encode() refuses never reach the FIFO.
        self._parsers: list[_Parser] = [parsers.get(op, self._parse_store) for op in Op]

    def next_reply(self) -> Reply | NeedData:
        """See ``ClientCodec.next_reply``: the parser of the op at the FIFO's head reads it."""
        if self._failure is not None:
            self._refuse()
        head = self._head
        if head < len(self._pending):
            try:
                reply = self._parsers[self._pending[head]](self._args[head])
            except ProtocolError as exc:
                self._failure = str(exc)
                raise
            if reply is not NEED_DATA:
                if head < COMPACT_AT:
                    self._head = head + 1
                else:
                    self._advance(head + 1)
                return reply
        self._check_idle(head)
        return NEED_DATA

    def _check_idle(self, head: int) -> None:
        """Nothing more parses: fail on bytes nobody asked for, or on EOF mid-reply."""
        waiting = len(self._pending) - head
        if not waiting and len(self._rb):
            self._fail("a reply arrived with no request pending")
        if self._eof and (waiting or len(self._rb)):
            self._fail(f"connection closed with {waiting} replies pending")

    def _status(
        self, table: dict[bytes, Reply], what: str, numbers: bool = False
    ) -> Reply | NeedData:
        """Parse one status line: a word from ``table``, a number if ``numbers`` (the new
        value incr/decr answer), or an error line."""
        rb = self._rb
        pos = rb.pos
        eol = rb.find_line(pos, self._max)
        if eol < 0:
            return NEED_DATA
        line = bytes(rb.data[pos:eol])
        reply = table.get(line)
        if reply is None:
            if numbers and line.isdigit():
                reply = Reply(ReplyKind.VALUE, eol + 2 - pos, line if self._keep else None)
            else:
                reply = error_reply(line, eol + 2 - pos)
                if reply is None:
                    raise ProtocolError(f"unexpected reply to {what}: {line[:64]!r}")
            if reply.nbytes > self._max:
                raise ReplyTooLarge(f"{what} reply line longer than {self._max} bytes")
        rb.pos = eol + 2
        return reply

    # The status-line parsers compare their usual line in place first. Made by one function
    # as class attributes: as fast as methods written out (a closure made per codec, with
    # its free variables copied per call, measured 11-19% slower on next_reply of sets).
    _parse_store = _status_parser(_STORED, b"STORED", _STORE_REPLIES, "a storage command")
    _parse_delete = _status_parser(_DELETED, b"DELETED", _DELETE_REPLIES, "delete")
    _parse_touch = _status_parser(_TOUCHED, b"TOUCHED", _TOUCH_REPLIES, "touch")

    def _parse_arith(self, _: None) -> Reply | NeedData:
        return self._status(_ARITH_REPLIES, "incr/decr", numbers=True)

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
                eol = self._mget_line_end(pos)
                if eol < 0:
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
                if not self._mget_block(pos, start, end, 5, "get: "):  # 5: END CRLF
                    return NEED_DATA
                self._mget_index = index + 1
                continue
            if data.startswith(b"END\r\n", pos):
                rb.pos = pos + 5
                self._mget_index = 0
                return self._finish_mget(5, None)
            error = self._status(_NO_STATUS, "get")
            if error is NEED_DATA:
                return error
            # memcached can fail part way through a multi-get (out of memory, bad key).
            self._mget_index = 0
            return self._finish_mget(error.nbytes, error.payload)

    # -- arbitrary commands (Op.COMMAND): the reply's first line says its frame ------------

    def _parse_command(self, _: object) -> Reply | NeedData:
        """Any command's reply, framed by its first line (protocol.txt "Commands"):

        ``VALUE`` blocks then ``END`` (get, gets, gat, gats); ``VA <size> ...`` and one
        data block (meta get/arithmetic with ``v``); ``STAT``/``ITEM`` lines then ``END``
        (stats, stats cachedump); an error line; else one status line (STORED, TOUCHED,
        DELETED, HD, EN, a number, VERSION, OK, END ...). An error line is an
        ``ERROR_REPLY``, anything else ``OK``: commands are counted as ok or error.
        """
        rb = self._rb
        data = rb.data
        pos = rb.pos
        eol = rb.find_line(pos, self._max)
        if eol < 0:
            return NEED_DATA
        if data.startswith(b"VALUE ", pos):
            return self._command_lines(pos, blocks=True)
        if data.startswith(b"VA ", pos):
            return self._command_block(pos, eol)
        if data.startswith(_LISTING_LINES, pos):
            return self._command_lines(pos, blocks=False)
        line = bytes(data[pos:eol])
        nbytes = eol + 2 - pos
        if nbytes > self._max:
            raise ReplyTooLarge(f"reply line longer than {self._max} bytes")
        rb.pos = eol + 2
        return error_reply(line, nbytes) or Reply(
            ReplyKind.OK, nbytes, line if self._keep else None
        )

    def _command_lines(self, start: int, blocks: bool) -> Reply | NeedData:
        """``VALUE`` lines, each with its data block (``blocks``), or ``STAT``/``ITEM``
        lines; then ``END``, or an error line memcached sent part way (out of memory)."""
        rb = self._rb
        data = rb.data
        pos = start
        items = (b"VALUE ",) if blocks else _LISTING_LINES
        while True:
            eol = rb.find_line(pos, self._max - (pos - start))
            if eol < 0:
                return NEED_DATA
            if not data.startswith(items, pos):
                break
            end = eol + 2
            if blocks:
                end += _value_size(data[pos + 6 : eol].split(b" ")) + 2
            if end - start > self._max:
                raise ReplyTooLarge(f"reply larger than {self._max} bytes")
            if len(data) < end:
                return NEED_DATA
            if blocks and not data.startswith(b"\r\n", end - 2):
                raise ProtocolError("VALUE data block not followed by CRLF")
            pos = end
        line = bytes(data[pos:eol])
        rb.pos = eol + 2
        if line == b"END":
            payload = bytes(data[start:pos]) if self._keep else None
            return Reply(ReplyKind.OK, eol + 2 - start, payload)
        error = error_reply(line, eol + 2 - start)
        if error is None:
            raise ProtocolError(f"unexpected line in a command's reply: {line[:64]!r}")
        return error

    def _command_block(self, start: int, eol: int) -> Reply | NeedData:
        """``VA <size> <flags>*`` and a data block of ``size`` bytes (protocol.txt "Meta Get")."""
        rb = self._rb
        size = rb.data[start + 3 : eol].split(b" ", 1)[0]
        if not size.isdigit() or len(size) > MAX_SIZE_DIGITS:
            raise ProtocolError(f"bad VA line: {bytes(rb.data[start:eol])[:64]!r}")
        end = eol + 2 + int(size)
        if end + 2 - start > self._max:
            raise ReplyTooLarge(f"reply of {end + 2 - start} bytes, bound {self._max}")
        if len(rb.data) < end + 2:
            return NEED_DATA
        if not rb.data.startswith(b"\r\n", end):
            raise ProtocolError("VA data block not followed by CRLF")
        rb.pos = end + 2
        payload = bytes(rb.data[eol + 2 : end]) if self._keep else None
        return Reply(ReplyKind.OK, end + 2 - start, payload)
