"""memcached meta protocol codec (memcached ``doc/protocol.txt``, "Meta Commands").

Sans-IO: mg/ms/md/ma/mn requests are appended to a caller-owned bytearray and replies are
parsed from fed bytes; no sockets, no clock, no event loop. Every request carries an opaque
token (``O<n>``) that its reply must echo, so a misaligned stream is caught at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

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
from kvbench.protocols.memcache_text import (
    Value,
    error_reply,
    multiget_keys,
    parse_stats_block,
    value_length,
)

# A FIFO entry: (parser, b" O<t>\r\n" or b"", first token, end token). Tokens
# first..end-1 (mod 2**32) belong to the request; untokened requests have first == end.
# A parser returns None when it consumed a quiet failure and must be called again.
_Parser: TypeAlias = "Callable[[_Entry], Reply | NeedData | None]"
_Entry: TypeAlias = "tuple[_Parser, bytes, int, int]"
_Encoder = Callable[[Op, Any, Value | None, bytearray, int], int]

_DEFAULT_OPTIONS = CodecOptions()

# Opaque tokens are a counter mod 2**32 (protocol.txt: O(token), up to 32 bytes, echoed).
_TOKEN_MASK = 0xFFFFFFFF

# Fixed replies differ only in length (the echoed token has 1-10 digits): build them once.
_CACHED_LENGTHS = 32


def _by_length(kind: ReplyKind) -> tuple[Reply, ...]:
    return tuple(Reply(kind, nbytes) for nbytes in range(_CACHED_LENGTHS))


_BY_LENGTH = {
    kind: _by_length(kind)
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
_MISS_BY_LEN = _BY_LENGTH[ReplyKind.MISS]
_MN = Reply(ReplyKind.OK, 4)

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
# What the q flag lets through for ms/md/ma (success HD is suppressed, failures are not).
_QUIET_FAILURE_CODES = frozenset({b"NS", b"EX", b"NF"})

# ms mode flag (protocol.txt "Meta Set": M(token) E add, A append, P prepend, R replace).
_STORE_MODES = {
    Op.SET: b"",
    Op.ADD: b" ME",
    Op.REPLACE: b" MR",
    Op.APPEND: b" MA",
    Op.PREPEND: b" MP",
}


def _fixed(kind: ReplyKind, nbytes: int) -> Reply:
    cache = _BY_LENGTH.get(kind)
    if cache is not None and nbytes < _CACHED_LENGTHS:
        return cache[nbytes]
    return Reply(kind, nbytes)


def _split_status(line: bytes) -> tuple[bytes, bytes | None]:
    """Split ``XX [flag ...]`` into the return code and the opaque token, if any."""
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


def _token_value(token: bytes | bytearray) -> int:
    """The integer of an echoed opaque token, or -1 if it is not one of ours."""
    if 0 < len(token) <= 10 and token.isdigit():
        value = int(token)
        if value <= _TOKEN_MASK:
            return value
    return -1


class MemcacheMetaCodec(BatchDefaults):
    """Client side of memcached's meta protocol, for one connection.

    Mapping: GET ``mg <k> v``, GETS ``mg <k> v c``, TOUCH ``mg <k> T<arg>``, SET/ADD/
    REPLACE/APPEND/PREPEND ``ms <k> <n> T<ttl> F<flags> [M<mode>]``, CAS ``ms ... C<arg>``,
    DELETE ``md <k>``, INCR/DECR ``ma <k> [MD] D<arg> v``, NOOP ``mn``, STATS ``stats``,
    each with ``O<token>``. MGET is ``mg <k> v q O<t>`` per key then ``mn``, and yields one
    reply when ``MN`` arrives (misses are silent under ``q``).

    ``options.noreply`` adds ``q`` to ms/md/ma and ``encode`` returns 0: memcached then
    drops the success reply (``HD``) but still sends failures (``NS``/``EX``/``NF``). Those
    are matched by their token (it must belong to a quiet request sent before the pending
    head), consumed without a ``Reply`` and counted in ``quiet_failures``. An error line
    (no token) with nothing pending is counted the same way when quiet requests may be
    outstanding; with replies pending it is taken as the head's reply, as in the text
    protocol. TOUCH never gets ``q``: for mg it hides misses, not ``HD``.

    Args:
        options: per-connection settings (payload keeping, reply bound, ttl, flags, noreply).
    """

    def __init__(self, options: CodecOptions = _DEFAULT_OPTIONS) -> None:
        self._keep = options.keep_payload
        self._max = options.max_reply_bytes
        self._noreply = options.noreply
        self._rb = ReceiveBuffer()
        self._pending: deque[_Entry] = deque()
        self._eof = False
        self._dead: str | None = None
        self._token = 0  # the next opaque token to send
        self._done_below = 0  # every token before this one has been answered or is quiet
        self._quiet_failures = 0
        # Multi-get state kept across NEED_DATA: blocks already consumed.
        self._mget_next = -1
        self._mget_count = 0
        self._mget_nbytes = 0
        self._mget_values: list[bytes] = []
        self._mget_error: bytes | None = None
        # Request templates with options baked in; the last %s is b" O<t>\r\n".
        quiet = b" q" if options.noreply else b""
        ttl_flags = b"T%d F%d" % (options.ttl_s, options.flags)
        self._store_formats = {
            op: b"ms %%s %%d %s%s%s%%s" % (ttl_flags, mode, quiet)
            for op, mode in _STORE_MODES.items()
        }
        self._cas_format = b"ms %%s %%d %s C%%d%s%%s" % (ttl_flags, quiet)
        self._delete_format = b"md %%s%s%%s" % quiet
        value_flag = b" q" if options.noreply else b" v"
        self._arith_formats = {
            Op.INCR: b"ma %%s D%%d%s%%s" % value_flag,
            Op.DECR: b"ma %%s MD D%%d%s%%s" % value_flag,
        }
        self._get_formats = {Op.GET: b"mg %s v%s", Op.GETS: b"mg %s v c%s"}
        # Parsers bound once: FIFO entries then hold a reference, not a new bound method.
        self._parse_get_ = self._parse_get
        self._parse_arith_ = self._parse_arith
        self._parse_store_ = self._hd_parser(ReplyKind.STORED, _STORE_CODES)
        self._parse_delete_ = self._hd_parser(ReplyKind.DELETED, _DELETE_CODES)
        self._parse_touch_ = self._hd_parser(ReplyKind.TOUCHED, _TOUCH_CODES)
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
            Op.NOOP: self._encode_noop,
            Op.STATS: self._encode_stats,
        }
        self._encoders = [encoders.get(op, self._encode_unsupported) for op in Op]

    @property
    def quiet_failures(self) -> int:
        """Failures (NS/EX/NF or error lines) answered to ``noreply`` requests so far."""
        return self._quiet_failures

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
            key: the key; a sequence of keys for ``Op.MGET``; ignored by NOOP and STATS.
            value: the value for set/add/replace/append/prepend/cas, else None.
            out: the caller's write buffer.
            arg: the cas unique (CAS), the delta (INCR/DECR), the new TTL (TOUCH).

        Returns:
            How many replies the request produces: 1, or 0 for a quiet (noreply) request.

        Raises:
            ValueError: ``COMMAND``, a storage op without a value, a negative delta, or an
                MGET without a key sequence.
        """
        return self._encoders[op](op, key, value, out, arg)

    def _next_token(self) -> tuple[int, bytes]:
        token = self._token
        self._token = (token + 1) & _TOKEN_MASK
        return token, b" O%d\r\n" % token

    def _encode_unsupported(
        self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int
    ) -> int:
        raise ValueError(f"the memcached meta protocol has no {Op(op).name} command")

    def _encode_get(self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int) -> int:
        token, otok = self._next_token()
        out += self._get_formats[op] % (key, otok)
        self._pending.append((self._parse_get_, otok, token, self._token))
        return 1

    def _encode_touch(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        token, otok = self._next_token()
        out += b"mg %s T%d%s" % (key, arg, otok)
        self._pending.append((self._parse_touch_, otok, token, self._token))
        return 1

    def _encode_mget(
        self, op: Op, key: Sequence[bytes], value: Value | None, out: bytearray, arg: int
    ) -> int:
        first = self._token
        token = first
        for one_key in multiget_keys(key):
            out += b"mg %s v q O%d\r\n" % (one_key, token)
            token = (token + 1) & _TOKEN_MASK
        out += b"mn\r\n"
        self._token = token
        self._pending.append((self._parse_mget, b"", first, token))
        return 1

    def _encode_store(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        size = value_length(value)
        token, otok = self._next_token()
        out += self._store_formats[op] % (key, size, otok)
        out += value  # type: ignore[arg-type]  # value_length() rejected None
        out += b"\r\n"
        if self._noreply:
            return 0
        self._pending.append((self._parse_store_, otok, token, self._token))
        return 1

    def _encode_cas(self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int) -> int:
        size = value_length(value)
        token, otok = self._next_token()
        out += self._cas_format % (key, size, arg, otok)
        out += value  # type: ignore[arg-type]  # value_length() rejected None
        out += b"\r\n"
        if self._noreply:
            return 0
        self._pending.append((self._parse_store_, otok, token, self._token))
        return 1

    def _encode_delete(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        token, otok = self._next_token()
        out += self._delete_format % (key, otok)
        if self._noreply:
            return 0
        self._pending.append((self._parse_delete_, otok, token, self._token))
        return 1

    def _encode_arith(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        if arg < 0:
            raise ValueError("incr/decr take a non-negative delta")
        token, otok = self._next_token()
        out += self._arith_formats[op] % (key, arg, otok)
        if self._noreply:
            return 0
        self._pending.append((self._parse_arith_, otok, token, self._token))
        return 1

    def _encode_noop(self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int) -> int:
        out += b"mn\r\n"
        self._pending.append((self._parse_noop, b"", self._token, self._token))
        return 1

    def _encode_stats(self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int) -> int:
        out += b"stats\r\n"
        self._pending.append((self._parse_stats, b"", self._token, self._token))
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

        Quiet failures (see the class docstring) are consumed on the way.

        Raises:
            ProtocolError: the bytes broke the grammar, a token did not match, a reply came
                with no request pending, or EOF cut a reply short. Every later call raises
                too; the caller closes the connection.
            ReplyTooLarge: a reply exceeded ``max_reply_bytes``.
        """
        if self._dead is not None:
            raise ProtocolError(f"codec unusable after an earlier error: {self._dead}")
        pending = self._pending
        rb = self._rb
        try:
            while True:
                if pending:
                    entry = pending[0]
                    reply = entry[0](entry)
                    if reply is None:
                        continue
                    if reply is NEED_DATA:
                        break
                    pending.popleft()
                    self._done_below = entry[3]
                    return reply
                if rb.pos == len(rb.data) or self._unsolicited() is NEED_DATA:
                    break
        except ProtocolError as exc:
            self._dead = str(exc)
            raise
        if self._eof and (pending or len(rb)):
            raise self._kill(f"connection closed with {len(pending)} replies pending")
        return NEED_DATA

    def _kill(self, message: str) -> ProtocolError:
        self._dead = message
        return ProtocolError(message)

    def _is_quiet(self, token: int, before: int) -> bool:
        """Whether ``token`` was sent quietly after the last answer and before ``before``."""
        done = self._done_below
        return token >= 0 and (token - done) & _TOKEN_MASK < (before - done) & _TOKEN_MASK

    def _unsolicited(self) -> NeedData | None:
        """Bytes with nothing pending: only a quiet request's failure may be there."""
        if not self._noreply:
            raise ProtocolError("a reply arrived with no request pending")
        idle: _Entry = (self._parse_noop, b"", self._token, self._token)
        reply = self._status(idle, _NO_CODES)
        if reply is None or isinstance(reply, NeedData):
            return reply
        # An error line carries no token: charge it to the oldest quiet request that may
        # still answer, so there are never more failures than quiet requests.
        if self._token == self._done_below:
            raise ProtocolError(f"a reply arrived with no request pending: {reply.payload!r}")
        self._done_below = (self._done_below + 1) & _TOKEN_MASK
        self._quiet_failures += 1
        return None

    def _status(self, entry: _Entry, codes: dict[bytes, ReplyKind]) -> Reply | NeedData | None:
        """Parse one status line (no data block): a code from ``codes``, an error line,
        or a quiet request's failure (consumed, returns None)."""
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
        code, token = _split_status(line)
        expected = entry[1][2:-2]
        # A missing token is tolerated (older servers left it off EN); a wrong one is not.
        if token is None or token == expected:
            kind = codes.get(code)
            if kind is None:
                raise ProtocolError(f"unexpected meta reply {line[:64]!r}")
            rb.pos = eol + 2
            return _fixed(kind, nbytes)
        value = _token_value(token)
        if code in _QUIET_FAILURE_CODES and self._is_quiet(value, entry[2]):
            rb.pos = eol + 2
            self._quiet_failures += 1
            self._done_below = (value + 1) & _TOKEN_MASK
            return None
        raise ProtocolError(f"opaque mismatch: expected O{expected.decode()}, got {line[:64]!r}")

    def _value(self, entry: _Entry, kind: ReplyKind, keys: int) -> Reply | NeedData:
        """``VA <size> [flags] O<t>\\r\\n<data>\\r\\n`` (the caller saw ``VA ``)."""
        rb = self._rb
        data = rb.data
        pos = rb.pos
        otok = entry[1]
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            if len(data) - pos > self._max:
                raise ReplyTooLarge(f"reply line longer than {self._max} bytes")
            return NEED_DATA
        token_at = eol + 2 - len(otok)
        if not data.startswith(otok, token_at):
            raise ProtocolError(f"VA without our opaque {otok[1:-2]!r}: {bytes(data[pos:eol])!r}")
        size = data[pos + 3 : token_at]
        space = size.find(b" ")
        if space >= 0:
            size = size[:space]
        if not size.isdigit():
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

    def _parse_get(self, entry: _Entry) -> Reply | NeedData | None:
        rb = self._rb
        data = rb.data
        pos = rb.pos
        if data.startswith(b"VA ", pos):
            return self._value(entry, ReplyKind.HIT, 1)
        otok = entry[1]
        if data.startswith(b"EN", pos) and data.startswith(otok, pos + 2):
            nbytes = len(otok) + 2
            rb.pos = pos + nbytes
            return _MISS_BY_LEN[nbytes]
        return self._status(entry, _GET_CODES)

    def _parse_arith(self, entry: _Entry) -> Reply | NeedData | None:
        if self._rb.data.startswith(b"VA ", self._rb.pos):
            return self._value(entry, ReplyKind.VALUE, 0)
        return self._status(entry, _ARITH_CODES)

    def _hd_parser(self, success: ReplyKind, codes: dict[bytes, ReplyKind]) -> _Parser:
        """A parser for commands that answer ``HD O<t>`` on success (ms, md, mg with T)."""
        rb = self._rb
        by_length = _BY_LENGTH[success]
        status = self._status

        def parse(entry: _Entry) -> Reply | NeedData | None:
            pos = rb.pos
            otok = entry[1]
            if rb.data.startswith(b"HD", pos) and rb.data.startswith(otok, pos + 2):
                nbytes = len(otok) + 2
                rb.pos = pos + nbytes
                return by_length[nbytes]
            return status(entry, codes)

        return parse

    def _parse_noop(self, entry: _Entry) -> Reply | NeedData | None:
        rb = self._rb
        if rb.data.startswith(b"MN\r\n", rb.pos):
            rb.pos += 4
            return _MN
        return self._status(entry, _NOOP_CODES)

    def _parse_stats(self, entry: _Entry) -> Reply | NeedData | None:
        rb = self._rb
        if rb.data.startswith((b"STAT ", b"END\r\n"), rb.pos):
            return parse_stats_block(rb, self._max)
        return self._status(entry, _NO_CODES)

    def _parse_mget(self, entry: _Entry) -> Reply | NeedData | None:
        """One multi-get: ``VA`` blocks for the hits, error lines, then ``MN``.

        A loop over blocks (longer than most functions here on purpose): each complete
        block is consumed at once, so a reply arriving over many reads is parsed once.
        """
        rb = self._rb
        data = rb.data
        end_token = entry[3]
        if self._mget_next < 0:
            self._mget_next = entry[2]
        while True:
            pos = rb.pos
            if data.startswith(b"VA ", pos):
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    if self._mget_nbytes + len(data) - pos > self._max:
                        raise ReplyTooLarge(f"multi-get reply larger than {self._max} bytes")
                    return NEED_DATA
                fields = data[pos + 3 : eol].split(b" ")
                if len(fields) != 2 or not fields[0].isdigit() or not fields[1].startswith(b"O"):
                    raise ProtocolError(f"bad VA line in multi-get: {bytes(data[pos:eol])[:64]!r}")
                token = _token_value(fields[1][1:])
                following = self._mget_next
                if (
                    token < 0
                    or (token - following) & _TOKEN_MASK >= (end_token - following) & _TOKEN_MASK
                ):
                    raise ProtocolError(f"VA with a token not in this multi-get: {fields[1]!r}")
                start = eol + 2
                end = start + int(fields[0])
                if self._mget_nbytes + end + 2 - pos + 4 > self._max:  # + MN CRLF
                    raise ReplyTooLarge(f"multi-get reply larger than {self._max} bytes")
                if len(data) < end + 2:
                    return NEED_DATA
                if not data.startswith(b"\r\n", end):
                    raise ProtocolError("data block not followed by CRLF")
                if self._keep:
                    self._mget_values.append(bytes(data[start:end]))
                self._mget_next = (token + 1) & _TOKEN_MASK
                self._mget_count += 1
                self._mget_nbytes += end + 2 - pos
                rb.pos = end + 2
                continue
            if data.startswith(b"MN\r\n", pos):
                rb.pos = pos + 4
                return self._finish_mget()
            reply = self._status(entry, _NO_CODES)
            if reply is None:
                continue
            if isinstance(reply, NeedData):
                return reply
            # An error line answers one of the mg (e.g. a bad key); MN still follows.
            self._mget_nbytes += reply.nbytes
            if self._mget_error is None:
                self._mget_error = reply.payload

    def _finish_mget(self) -> Reply:
        count = self._mget_count
        nbytes = self._mget_nbytes + 4
        if self._mget_error is not None:
            reply = Reply(ReplyKind.ERROR_REPLY, nbytes, self._mget_error, count)
        elif count:
            payload = b"".join(self._mget_values) if self._keep else None
            reply = Reply(ReplyKind.HIT, nbytes, payload, count)
        else:
            reply = Reply(ReplyKind.MISS, nbytes, None, 0)
        self._mget_next = -1
        self._mget_count = 0
        self._mget_nbytes = 0
        self._mget_values = []
        self._mget_error = None
        return reply
