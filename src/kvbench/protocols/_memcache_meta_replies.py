"""The reply half of the memcached meta codec (``doc/protocol.txt``, "Meta Commands").

``MetaReplies`` parses replies one by one (``next_reply``; ``read_kinds`` loops over it),
matching each to its request by the opaque token it echoes; ``MemcacheMetaCodec`` in
memcache_meta.py adds the request half and hands out the tokens. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols._memcache_lines import (
    COMPACT_AT,
    MAX_SIZE_DIGITS,
    TOKEN_MASK,
    MemcacheCore,
    error_reply,
    fixed_reply,
    meta_token,
    parse_stats_block,
    replies_by_length,
    split_meta_status,
)
from kvbench.protocols.base import (
    NEED_DATA,
    CodecOptions,
    NeedData,
    Op,
    Reply,
    ReplyKind,
)

# A parser gets the request's first token. Tokens first..end-1 (mod 2**32) belong to the
# request: one for most, one per key for a multi-get, none (end == first) for mn and stats.
# It returns None when it consumed a quiet failure and must be called again.
_Parser = Callable[[int], Reply | NeedData | None]
# Return code -> outcome, per command (protocol.txt "Meta Get/Set/Delete/Arithmetic").
_GET_CODES = {b"EN": ReplyKind.MISS}
_TOUCH_CODES = {b"HD": ReplyKind.TOUCHED, b"EN": ReplyKind.NOT_FOUND}
_STORE_CODES = {
    b"HD": ReplyKind.STORED,
    b"NS": ReplyKind.NOT_STORED,
    b"EX": ReplyKind.EXISTS,
    b"NF": ReplyKind.NOT_FOUND,
}
_DELETE_CODES = {b"HD": ReplyKind.DELETED, b"NF": ReplyKind.NOT_FOUND, b"EX": ReplyKind.EXISTS}
_ARITH_CODES = {b"NF": ReplyKind.NOT_FOUND, b"NS": ReplyKind.NOT_STORED, b"EX": ReplyKind.EXISTS}
_NOOP_CODES = {b"MN": ReplyKind.OK}
_NO_CODES: dict[bytes, ReplyKind] = {}
_MISS_BY_LEN = replies_by_length(ReplyKind.MISS)
_MN = Reply(ReplyKind.OK, 4)
# What the q flag lets through for ms/md/ma (success HD is suppressed, failures are not).
_QUIET_FAILURE_CODES = frozenset({b"NS", b"EX", b"NF"})

# Ops whose requests carry a token range other than one token (see ``_end_of``).
_MGET, _UNTOKENED = int(Op.MGET), (int(Op.NOOP), int(Op.STATS))
_STORE_OPS = (Op.SET, Op.ADD, Op.REPLACE, Op.APPEND, Op.PREPEND, Op.CAS)


class MetaReplies(MemcacheCore):
    """Reply parsing for ``MemcacheMetaCodec``, one reply at a time.

    The FIFO's ``_args`` holds each pending request's first token; a multi-get's end token
    is in ``_mget_ends``.

    Args:
        options: per-connection settings (payload keeping, reply bound, noreply).
    """

    def __init__(self, options: CodecOptions) -> None:
        super().__init__(options)
        self._mget_ends: dict[int, int] = {}  # a pending multi-get's first -> end token
        self._token = 0  # the next opaque token to send
        self._done_below = 0  # every token before this one has been answered or is quiet
        self._quiet_failures = 0
        # A multi-get's values come in token order: the next token that may answer, and
        # the first error line that came (the reply is then an error; MN still follows).
        self._mget_next = -1
        self._mget_error: bytes | None = None
        hd_store = self._hd_parser(ReplyKind.STORED, _STORE_CODES)
        parsers: dict[Op, _Parser] = {
            Op.GET: self._parse_get,
            Op.GETS: self._parse_get,
            Op.MGET: self._parse_mget,
            Op.DELETE: self._hd_parser(ReplyKind.DELETED, _DELETE_CODES),
            Op.INCR: self._parse_arith,
            Op.DECR: self._parse_arith,
            Op.TOUCH: self._hd_parser(ReplyKind.TOUCHED, _TOUCH_CODES),
            Op.NOOP: self._parse_noop,
            Op.STATS: self._parse_stats,
        }
        parsers.update(dict.fromkeys(_STORE_OPS, hd_store))
        # Indexed by op; ops encode() refuses never reach the FIFO.
        self._parsers: list[_Parser] = [parsers.get(op, self._parse_noop) for op in Op]

    @property
    def quiet_failures(self) -> int:
        """Failures (NS/EX/NF or error lines) answered to ``noreply`` requests so far."""
        return self._quiet_failures

    def _end_of(self, op: int, first: int) -> int:
        """The token after the last of the pending request ``op`` sent with ``first``."""
        if op == _MGET:
            return self._mget_ends[first]
        return first if op in _UNTOKENED else (first + 1) & TOKEN_MASK

    def next_reply(self) -> Reply | NeedData:
        """See ``ClientCodec.next_reply``: a reply must echo its request's token; quiet
        failures (see the class docstring) are consumed on the way."""
        if self._failure is not None:
            self._refuse()
        head = self._head
        try:
            if head < len(self._pending):
                op = self._pending[head]
                parse = self._parsers[op]
                first = self._args[head]
                end = self._end_of(op, first)
                while (reply := parse(first)) is None:
                    pass
                if reply is not NEED_DATA:
                    self._done_below = end
                    if head < COMPACT_AT:
                        self._head = head + 1
                    else:
                        self._advance(head + 1)
                    return reply
            else:
                self._drain_unsolicited()
        except ProtocolError as exc:
            self._failure = str(exc)
            raise
        self._check_eof()
        return NEED_DATA

    def _check_eof(self) -> None:
        if self._eof and (len(self._pending) > self._head or len(self._rb)):
            self._fail(f"connection closed with {self.pending()} replies pending")

    def _is_quiet(self, token: int, before: int) -> bool:
        """Whether ``token`` was sent quietly after the last answer and before ``before``."""
        done = self._done_below
        return token >= 0 and (token - done) & TOKEN_MASK < (before - done) & TOKEN_MASK

    def _drain_unsolicited(self) -> None:
        """Bytes with nothing pending: only quiet requests' failures may be there."""
        rb = self._rb
        while rb.pos < len(rb.data) and self._unsolicited() is None:
            pass

    def _unsolicited(self) -> NeedData | None:
        """Parse one reply with nothing pending: it must be a quiet request's failure."""
        if not self._noreply:
            raise ProtocolError("a reply arrived with no request pending")
        reply = self._status(self._token, b"", _NO_CODES)
        if reply is None or reply is NEED_DATA:
            return reply
        # An error line carries no token: charge it to the oldest quiet request that may
        # still answer, so there are never more failures than quiet requests.
        if self._token == self._done_below:
            raise ProtocolError(f"a reply arrived with no request pending: {reply.payload!r}")
        self._done_below = (self._done_below + 1) & TOKEN_MASK
        self._quiet_failures += 1
        return None

    def _status(
        self, first: int, expected: bytes, codes: dict[bytes, ReplyKind]
    ) -> Reply | NeedData | None:
        """Parse one status line (no data block): a code from ``codes`` with the token
        ``expected`` (b"" when untokened), an error line, or a quiet request's failure
        (consumed, returns None)."""
        rb = self._rb
        pos = rb.pos
        eol = rb.find_line(pos, self._max)
        if eol < 0:
            return NEED_DATA
        nbytes = eol + 2 - pos
        if nbytes > self._max:
            raise ReplyTooLarge(f"reply line longer than {self._max} bytes")
        line = bytes(rb.data[pos:eol])
        reply = error_reply(line, nbytes)
        if reply is not None:
            rb.pos = eol + 2
            return reply
        code, token = split_meta_status(line)
        # A missing token is tolerated (older servers left it off EN); a wrong one is not.
        if token is None or token == expected:
            kind = codes.get(code)
            if kind is None:
                raise ProtocolError(f"unexpected meta reply {line[:64]!r}")
            rb.pos = eol + 2
            return fixed_reply(kind, nbytes)
        value = meta_token(token)
        if code in _QUIET_FAILURE_CODES and self._is_quiet(value, first):
            rb.pos = eol + 2
            self._quiet_failures += 1
            self._done_below = (value + 1) & TOKEN_MASK
            return None
        raise ProtocolError(f"opaque mismatch: expected O{expected.decode()}, got {line[:64]!r}")

    def _value(self, token: int, kind: ReplyKind, keys: int) -> Reply | NeedData:
        """``VA <size> [flags] O<t>\\r\\n<data>\\r\\n`` (the caller saw ``VA ``)."""
        rb = self._rb
        data = rb.data
        pos = rb.pos
        otok = b" O%d\r\n" % token
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return self._need_line(pos)
        token_at = eol + 2 - len(otok)
        if not data.startswith(otok, token_at):
            raise ProtocolError(f"VA without our opaque {otok[1:-2]!r}: {bytes(data[pos:eol])!r}")
        size = data[pos + 3 : token_at]
        space = size.find(b" ")
        if space >= 0:
            size = size[:space]
        if not size.isdigit() or len(size) > MAX_SIZE_DIGITS:
            raise ProtocolError(f"bad VA line: {bytes(data[pos:eol])[:64]!r}")
        start = eol + 2
        end = start + int(size)
        nbytes = end + 2 - pos
        # Checked on the declared size, before the data block is buffered.
        if nbytes > self._max:
            raise ReplyTooLarge(f"reply of {nbytes} bytes, bound {self._max}")
        if len(data) < end + 2:
            return NEED_DATA
        if not data.startswith(b"\r\n", end):
            raise ProtocolError("data block not followed by CRLF")
        rb.pos = end + 2
        return Reply(kind, nbytes, bytes(data[start:end]) if self._keep else None, keys)

    def _parse_get(self, first: int) -> Reply | NeedData | None:
        rb = self._rb
        data = rb.data
        pos = rb.pos
        if data.startswith(b"VA ", pos):
            return self._value(first, ReplyKind.HIT, 1)
        miss = b"EN O%d\r\n" % first
        if data.startswith(miss, pos):
            rb.pos = pos + len(miss)
            return _MISS_BY_LEN[len(miss)]
        return self._status(first, b"%d" % first, _GET_CODES)

    def _parse_arith(self, first: int) -> Reply | NeedData | None:
        if self._rb.data.startswith(b"VA ", self._rb.pos):
            return self._value(first, ReplyKind.VALUE, 0)
        return self._status(first, b"%d" % first, _ARITH_CODES)

    def _hd_parser(self, success: ReplyKind, codes: dict[bytes, ReplyKind]) -> _Parser:
        """A parser for commands that answer ``HD O<t>`` on success (ms, md, mg with T)."""
        rb = self._rb
        by_length = replies_by_length(success)
        status = self._status

        def parse(first: int) -> Reply | NeedData | None:
            pos = rb.pos
            hd = b"HD O%d\r\n" % first
            if rb.data.startswith(hd, pos):
                rb.pos = pos + len(hd)
                return by_length[len(hd)]
            return status(first, b"%d" % first, codes)

        return parse

    def _parse_noop(self, first: int) -> Reply | NeedData | None:
        rb = self._rb
        if rb.data.startswith(b"MN\r\n", rb.pos):
            rb.pos += 4
            return _MN
        return self._status(first, b"", _NOOP_CODES)

    def _parse_stats(self, first: int) -> Reply | NeedData | None:
        rb = self._rb
        if rb.data.startswith((b"STAT ", b"END\r\n"), rb.pos):
            return parse_stats_block(rb, self._max)
        return self._status(first, b"", _NO_CODES)

    def _parse_mget(self, first: int) -> Reply | NeedData | None:
        """One multi-get: ``VA`` blocks for the hits, error lines, then ``MN``.

        A loop over blocks (longer than most functions here on purpose): each complete
        block is consumed at once, so a reply arriving over many reads is parsed once.
        """
        rb = self._rb
        data = rb.data
        end_token = self._mget_ends[first]
        if self._mget_next < 0:
            self._mget_next = first
        while True:
            pos = rb.pos
            if data.startswith(b"VA ", pos):
                eol = self._mget_line_end(pos)
                if eol < 0:
                    return NEED_DATA
                fields = data[pos + 3 : eol].split(b" ")
                if (
                    len(fields) != 2
                    or not fields[0].isdigit()
                    or len(fields[0]) > MAX_SIZE_DIGITS
                    or not fields[1].startswith(b"O")
                ):
                    raise ProtocolError(f"bad VA line in multi-get: {bytes(data[pos:eol])[:64]!r}")
                token = meta_token(fields[1][1:])
                following = self._mget_next
                if (
                    token < 0
                    or (token - following) & TOKEN_MASK >= (end_token - following) & TOKEN_MASK
                ):
                    raise ProtocolError(f"VA with a token not in this multi-get: {fields[1]!r}")
                start = eol + 2
                end = start + int(fields[0])
                if not self._mget_block(pos, start, end, 4, ""):  # 4: MN CRLF
                    return NEED_DATA
                self._mget_next = (token + 1) & TOKEN_MASK
                continue
            if data.startswith(b"MN\r\n", pos):
                rb.pos = pos + 4
                del self._mget_ends[first]
                error = self._mget_error
                self._mget_next = -1
                self._mget_error = None
                return self._finish_mget(4, error)
            reply = self._status(first, b"", _NO_CODES)
            if reply is None:
                continue
            if reply is NEED_DATA:
                return reply
            # An error line answers one of the mg (e.g. a bad key); MN still follows.
            self._mget_nbytes += reply.nbytes
            if self._mget_error is None:
                self._mget_error = reply.payload
