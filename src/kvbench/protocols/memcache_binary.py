"""memcached binary protocol codec: 24-byte headers, opaques, quiet ops, getkq + noop multi-get.

Sans-IO: no sockets, no asyncio, no clock. Requests are appended to the caller's bytearray;
responses are parsed from bytes given to ``feed``. Layout, opcodes and status codes follow
memcached's ``doc/protocol-binary.xml`` ("Memcache Binary Protocol", draft-stone-01).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from typing import Any, NoReturn

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols.base import NEED_DATA, CodecOptions, NeedData, Op, Reply, ReplyKind

# magic, opcode, key length, extras length, data type, vbucket/status, total body, opaque, cas
HEADER = struct.Struct(">BBHBBHIIQ")
HEADER_BYTES = 24
MAGIC_REQUEST = 0x80
MAGIC_RESPONSE = 0x81
_STORE_EXTRAS = struct.Struct(">II")  # flags, expiration (protocol-binary "Set, Add, Replace")
_COUNTER_EXTRAS = struct.Struct(">QQI")  # delta, initial, expiration ("Increment, Decrement")
_TOUCH_EXTRAS = struct.Struct(">I")  # expiration ("Touch")
_COUNTER = struct.Struct(">Q")
# An incr/decr expiration of all ones makes a missing counter fail with "not found" instead
# of being created with the initial value (protocol-binary "Increment, Decrement").
_COUNTER_NO_CREATE = 0xFFFFFFFF
_OPAQUE_MASK = 0xFFFFFFFF

OPCODE_GET = 0x00
OPCODE_SET = 0x01
OPCODE_ADD = 0x02
OPCODE_REPLACE = 0x03
OPCODE_DELETE = 0x04
OPCODE_INCR = 0x05
OPCODE_DECR = 0x06
OPCODE_NOOP = 0x0A
OPCODE_GETKQ = 0x0D
OPCODE_APPEND = 0x0E
OPCODE_PREPEND = 0x0F
OPCODE_STAT = 0x10
OPCODE_SETQ = 0x11
OPCODE_ADDQ = 0x12
OPCODE_REPLACEQ = 0x13
OPCODE_DELETEQ = 0x14
OPCODE_INCRQ = 0x15
OPCODE_DECRQ = 0x16
OPCODE_APPENDQ = 0x19
OPCODE_PREPENDQ = 0x1A
OPCODE_TOUCH = 0x1C

STATUS_OK = 0x0000
STATUS_KEY_NOT_FOUND = 0x0001
STATUS_KEY_EXISTS = 0x0002
STATUS_NOT_STORED = 0x0005

# The request opcode of each op, and its quiet twin used with ``CodecOptions.noreply``.
_OPCODES: dict[Op, int] = {
    Op.GET: OPCODE_GET,
    Op.GETS: OPCODE_GET,
    Op.SET: OPCODE_SET,
    Op.CAS: OPCODE_SET,
    Op.ADD: OPCODE_ADD,
    Op.REPLACE: OPCODE_REPLACE,
    Op.APPEND: OPCODE_APPEND,
    Op.PREPEND: OPCODE_PREPEND,
    Op.DELETE: OPCODE_DELETE,
    Op.INCR: OPCODE_INCR,
    Op.DECR: OPCODE_DECR,
    Op.TOUCH: OPCODE_TOUCH,
    Op.NOOP: OPCODE_NOOP,
    Op.STATS: OPCODE_STAT,
    Op.MGET: OPCODE_NOOP,  # a multi-get completes with the response to its trailing noop
}
_QUIET_OPCODES: dict[Op, int] = {
    Op.SET: OPCODE_SETQ,
    Op.ADD: OPCODE_ADDQ,
    Op.REPLACE: OPCODE_REPLACEQ,
    Op.DELETE: OPCODE_DELETEQ,
    Op.INCR: OPCODE_INCRQ,
    Op.DECR: OPCODE_DECRQ,
    Op.APPEND: OPCODE_APPENDQ,
    Op.PREPEND: OPCODE_PREPENDQ,
}
_QUIET_RESPONSE_OPCODES = frozenset(_QUIET_OPCODES.values())

_K = ReplyKind
_STORED = {STATUS_OK: _K.STORED, STATUS_NOT_STORED: _K.NOT_STORED}
# Response status -> outcome, per op (protocol-binary "Response Status"); any status not
# listed is an error reply carrying the server's message.
_STATUS_KINDS: dict[Op, dict[int, ReplyKind]] = {
    Op.GET: {STATUS_OK: _K.HIT, STATUS_KEY_NOT_FOUND: _K.MISS},
    Op.GETS: {STATUS_OK: _K.HIT, STATUS_KEY_NOT_FOUND: _K.MISS},
    Op.SET: {**_STORED, STATUS_KEY_EXISTS: _K.EXISTS},
    Op.ADD: {**_STORED, STATUS_KEY_EXISTS: _K.NOT_STORED},
    Op.REPLACE: {**_STORED, STATUS_KEY_NOT_FOUND: _K.NOT_STORED},
    Op.CAS: {**_STORED, STATUS_KEY_EXISTS: _K.EXISTS, STATUS_KEY_NOT_FOUND: _K.NOT_FOUND},
    Op.APPEND: dict(_STORED),
    Op.PREPEND: dict(_STORED),
    Op.DELETE: {STATUS_OK: _K.DELETED, STATUS_KEY_NOT_FOUND: _K.NOT_FOUND},
    Op.INCR: {STATUS_OK: _K.VALUE, STATUS_KEY_NOT_FOUND: _K.NOT_FOUND},
    Op.DECR: {STATUS_OK: _K.VALUE, STATUS_KEY_NOT_FOUND: _K.NOT_FOUND},
    Op.TOUCH: {STATUS_OK: _K.TOUCHED, STATUS_KEY_NOT_FOUND: _K.NOT_FOUND},
    Op.NOOP: {STATUS_OK: _K.OK},
    Op.STATS: {STATUS_OK: _K.VALUE},
    Op.MGET: {STATUS_OK: _K.OK},
}

# Replies without payload repeat (same kind, same size): keep at most this many per kind.
_REPLY_CACHE_LIMIT = 1024


_new_reply: Callable[[type[Reply], tuple[Any, ...]], Reply] = tuple.__new__
_unpack_header = HEADER.unpack_from
_pack_header = HEADER.pack
_HIT = ReplyKind.HIT
_VALUE = ReplyKind.VALUE
_MGET = Op.MGET
_STATS = Op.STATS

_DEFAULT_OPTIONS = CodecOptions()

# Every encoder takes (op, key, value, out, arg) and returns the number of replies announced.
_Encoder = Callable[[Op, Any, Any, bytearray, int], int]


class MemcacheBinaryCodec:
    """Client half of the memcached binary protocol for one connection.

    Every request carries a fresh 32-bit opaque. memcached answers in request order, so a
    response must carry the opaque of the oldest pending request, or belong to a request
    sent before it that answers only on failure (quiet ops, multi-get ``getkq`` hits).

    Quiet ops (``CodecOptions.noreply``: set/add/replace/delete/incr/decr/append/prepend)
    make ``encode`` return 0, since the server says nothing on success. A failed quiet
    request still gets an error response; the caller has no FIFO entry for it, so it is not
    returned as a ``Reply`` but counted in ``unsolicited_errors``.

    Attributes:
        unsolicited_errors: error responses to quiet requests, and multi-get ``getkq``
            lookups that failed with a status other than "key not found".
    """

    def __init__(self, options: CodecOptions = _DEFAULT_OPTIONS) -> None:
        self.unsolicited_errors = 0
        self._keep = options.keep_payload
        self._max = options.max_reply_bytes
        self._store_extras = _STORE_EXTRAS.pack(options.flags, options.ttl_s)
        self._buf = bytearray()
        self._pos = 0
        self._eof = False
        self._failure: str | None = None
        # (opaque, op, getkq count) per announced reply, oldest first.
        self._pending: deque[tuple[int, Op, int]] = deque()
        self._next_opaque = 0
        self._answered = _OPAQUE_MASK  # opaque of the last response consumed
        # Packets consumed so far for a multi-get or stats reply still being assembled.
        self._acc_nbytes = 0
        self._acc_keys = 0
        self._acc_lines: list[bytes] = []
        self._kinds: list[dict[int, ReplyKind]] = [_STATUS_KINDS.get(op, {}) for op in Op]
        self._expected_opcode: list[int] = [_OPCODES.get(op, -1) for op in Op]
        self._cache: dict[int, dict[int, Reply]] = {kind: {} for kind in ReplyKind}
        self._hit_cache = self._cache[_HIT]
        self._encoders: list[_Encoder] = self._encoder_table(options.noreply)

    def _encoder_table(self, noreply: bool) -> list[_Encoder]:
        replying: dict[Op, _Encoder] = {
            Op.GET: self._encode_get,
            Op.GETS: self._encode_get,
            Op.SET: self._encode_store,
            Op.ADD: self._encode_store,
            Op.REPLACE: self._encode_store,
            Op.CAS: self._encode_store,
            Op.APPEND: self._encode_concat,
            Op.PREPEND: self._encode_concat,
            Op.DELETE: self._encode_delete,
            Op.INCR: self._encode_counter,
            Op.DECR: self._encode_counter,
            Op.TOUCH: self._encode_touch,
            Op.NOOP: self._encode_noop,
            Op.STATS: self._encode_stats,
            Op.MGET: self._encode_mget,
        }
        table = []
        for op in Op:
            encoder = replying.get(op, self._encode_unsupported)
            if noreply and op in _QUIET_OPCODES:
                encoder = self._encode_quiet
            table.append(encoder)
        return table

    # -- encoding ------------------------------------------------------------------------

    def encode(
        self,
        op: Op,
        key: Any,
        value: bytes | bytearray | memoryview | None,
        out: bytearray,
        arg: int = 0,
    ) -> int:
        """Append one request to ``out`` (for ``Op.MGET``: a ``getkq`` per key, then a noop).

        Args:
            op: the request kind; ``Op.COMMAND`` has no binary form.
            key: the key; for ``Op.MGET`` a sequence of keys; for ``Op.STATS`` the stats
                group (``b""`` or None for the general stats).
            value: the value of set/add/replace/cas/append/prepend, else None.
            out: the caller's write buffer.
            arg: the delta of incr/decr, the expiry of touch, the cas unique of cas.

        Returns:
            1, or 0 for a quiet op (``noreply``). Send ``out``, then ``feed`` what the
            server answers and pull replies with ``next_reply``.

        Raises:
            ValueError: the op has no binary-protocol form (``Op.COMMAND``).
        """
        return self._encoders[op](op, key, value, out, arg)

    def _request(self, opcode: int, key: bytes, out: bytearray, extras: bytes = b"") -> int:
        """Append a request without a value; return its opaque."""
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        n = len(key)
        e = len(extras)
        out += _pack_header(MAGIC_REQUEST, opcode, n, e, 0, 0, e + n, opaque, 0)
        if e:
            out += extras
        out += key
        return opaque

    def _store(self, opcode: int, key: bytes, value: Any, out: bytearray, cas: int) -> int:
        """Append a set/add/replace (extras: flags, expiry); return its opaque."""
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        n = len(key)
        out += _pack_header(MAGIC_REQUEST, opcode, n, 8, 0, 0, 8 + n + len(value), opaque, cas)
        out += self._store_extras
        out += key
        out += value
        return opaque

    def _concat(self, opcode: int, key: bytes, value: Any, out: bytearray) -> int:
        """Append an append/prepend (no extras); return its opaque."""
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        n = len(key)
        out += _pack_header(MAGIC_REQUEST, opcode, n, 0, 0, 0, n + len(value), opaque, 0)
        out += key
        out += value
        return opaque

    def _encode_get(self, op: Op, key: bytes, value: object, out: bytearray, arg: int) -> int:
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        n = len(key)
        out += _pack_header(MAGIC_REQUEST, OPCODE_GET, n, 0, 0, 0, n, opaque, 0)
        out += key
        self._pending.append((opaque, op, 0))
        return 1

    def _encode_store(self, op: Op, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        # CAS is a set whose header carries the cas unique (protocol-binary "Set, Add, Replace").
        opaque = self._store(_OPCODES[op], key, value, out, arg if op == Op.CAS else 0)
        self._pending.append((opaque, op, 0))
        return 1

    def _encode_concat(self, op: Op, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        self._pending.append((self._concat(_OPCODES[op], key, value, out), op, 0))
        return 1

    def _encode_delete(self, op: Op, key: bytes, value: object, out: bytearray, arg: int) -> int:
        self._pending.append((self._request(OPCODE_DELETE, key, out), op, 0))
        return 1

    def _encode_counter(self, op: Op, key: bytes, value: object, out: bytearray, arg: int) -> int:
        extras = _COUNTER_EXTRAS.pack(arg, 0, _COUNTER_NO_CREATE)
        self._pending.append((self._request(_OPCODES[op], key, out, extras), op, 0))
        return 1

    def _encode_touch(self, op: Op, key: bytes, value: object, out: bytearray, arg: int) -> int:
        opaque = self._request(OPCODE_TOUCH, key, out, _TOUCH_EXTRAS.pack(arg))
        self._pending.append((opaque, op, 0))
        return 1

    def _encode_noop(self, op: Op, key: object, value: object, out: bytearray, arg: int) -> int:
        self._pending.append((self._request(OPCODE_NOOP, b"", out), op, 0))
        return 1

    def _encode_stats(
        self, op: Op, key: bytes | None, value: object, out: bytearray, arg: int
    ) -> int:
        self._pending.append((self._request(OPCODE_STAT, key or b"", out), _STATS, 0))
        return 1

    def _encode_mget(self, op: Op, keys: Any, value: object, out: bytearray, arg: int) -> int:
        # A getkq per key (only hits answer), then a noop whose response closes the batch
        # (protocol-binary "Get, Get Quietly, Get Key, Get Key Quietly" and "No-op").
        request = self._request
        for key in keys:
            request(OPCODE_GETKQ, key, out)
        self._pending.append((request(OPCODE_NOOP, b"", out), _MGET, len(keys)))
        return 1

    def _encode_quiet(self, op: Op, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        opcode = _QUIET_OPCODES[op]
        if op == Op.SET or op == Op.ADD or op == Op.REPLACE:
            self._store(opcode, key, value, out, 0)
        elif op == Op.APPEND or op == Op.PREPEND:
            self._concat(opcode, key, value, out)
        elif op == Op.INCR or op == Op.DECR:
            self._request(opcode, key, out, _COUNTER_EXTRAS.pack(arg, 0, _COUNTER_NO_CREATE))
        else:
            self._request(opcode, key, out)
        return 0

    def _encode_unsupported(
        self, op: Op, key: object, value: object, out: bytearray, arg: int
    ) -> int:
        raise ValueError(f"the memcached binary protocol has no {Op(op).name} request")

    # -- parsing -------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer bytes received from the server; then call ``next_reply`` until NEED_DATA.

        Raises:
            ProtocolError: the codec failed earlier, or ``feed_eof`` was called.
        """
        if self._failure is not None:
            raise ProtocolError(self._failure)
        if self._eof:
            raise ProtocolError("data fed after EOF")
        if self._pos:
            del self._buf[: self._pos]  # O(1) for a bytearray prefix
            self._pos = 0
        self._buf += data

    def feed_eof(self) -> None:
        """Mark the end of the stream: a response cut short or a reply still owed then raises."""
        self._eof = True

    def pending(self) -> int:
        """How many announced replies have not been returned yet."""
        return len(self._pending)

    def next_reply(self) -> Reply | NeedData:
        """Return the next complete reply, or ``NEED_DATA``.

        Raises:
            ProtocolError: bad magic, a malformed packet, an opaque or opcode that matches no
                pending request, or EOF before all announced replies arrived.
                ``ReplyTooLarge`` (a subclass) when a packet's body, or a multi-get or stats
                reply in total, exceeds ``max_reply_bytes``. The codec is dead afterwards.
        """
        # A table-driven loop over response packets, long on purpose: the common case (one
        # packet, one reply) stays inline; packets that complete no reply (getkq hits, stats
        # lines, quiet-op errors) are consumed and the loop goes on.
        if self._failure is not None:
            raise ProtocolError(self._failure)
        buf = self._buf
        pending = self._pending
        while True:
            pos = self._pos
            size = len(buf)
            if size - pos < HEADER_BYTES:
                return self._need_data()
            magic, opcode, keylen, extlen, _dtype, status, bodylen, opaque, _cas = _unpack_header(
                buf, pos
            )
            if magic != MAGIC_RESPONSE:
                self._fail(f"bad magic byte 0x{magic:02x} (expected 0x81)")
            if bodylen > self._max:
                self._fail(f"response body of {bodylen} bytes exceeds {self._max}", too_large=True)
            end = pos + HEADER_BYTES + bodylen
            if end > size:
                return self._need_data()
            if keylen + extlen > bodylen:
                self._fail(f"key ({keylen}) + extras ({extlen}) exceed the body ({bodylen})")
            if not pending or pending[0][0] != opaque:
                self._consume_unannounced(opcode, status, opaque, pos, end)
                continue
            op = pending[0][1]
            if opcode != self._expected_opcode[op]:
                self._fail(f"opcode 0x{opcode:02x} answers a {Op(op).name} request")
            self._pos = end
            self._answered = opaque
            nbytes = HEADER_BYTES + bodylen
            if op is _STATS and status == STATUS_OK and keylen:
                self._add_stat(pos, pos + HEADER_BYTES + extlen, keylen, end)
                continue
            pending.popleft()
            kind = self._kinds[op].get(status)
            if kind is _HIT:
                if self._keep:
                    payload = bytes(buf[pos + HEADER_BYTES + extlen + keylen : end])
                    return _new_reply(Reply, (_HIT, nbytes, payload, 1))
                reply = self._hit_cache.get(nbytes)
                return reply if reply is not None else self._cached(_HIT, nbytes, 1)
            if kind is None:
                return self._error_reply(status, nbytes, pos + HEADER_BYTES + extlen + keylen, end)
            if op is _MGET:
                return self._mget_reply(nbytes)
            if kind is _VALUE:
                if op is _STATS:
                    return self._stats_reply(nbytes)
                return self._counter_reply(nbytes, pos + HEADER_BYTES + extlen + keylen, end)
            reply = self._cache[kind].get(nbytes)
            return reply if reply is not None else self._cached(kind, nbytes, 0)

    def _need_data(self) -> NeedData:
        if self._eof:
            if self._pos < len(self._buf):
                self._fail("EOF in the middle of a response")
            if self._pending:
                self._fail(f"EOF with {len(self._pending)} replies pending")
        return NEED_DATA

    def _fail(self, message: str, too_large: bool = False) -> NoReturn:
        self._failure = message
        raise (ReplyTooLarge if too_large else ProtocolError)(message)

    def _cached(self, kind: ReplyKind, nbytes: int, keys: int) -> Reply:
        reply = Reply(kind, nbytes, None, keys)
        cache = self._cache[kind]
        if len(cache) < _REPLY_CACHE_LIMIT:
            cache[nbytes] = reply
        return reply

    def _consume_unannounced(
        self, opcode: int, status: int, opaque: int, pos: int, end: int
    ) -> None:
        """Consume a packet that completes no reply: a multi-get hit or a quiet-op error."""
        pending = self._pending
        bound = pending[0][0] if pending else self._next_opaque
        answered = self._answered
        # Answers come in request order: this packet must belong to a request sent after the
        # last one answered and before the oldest one still pending.
        if not 0 < (opaque - answered) & _OPAQUE_MASK < (bound - answered) & _OPAQUE_MASK:
            if not pending:
                self._fail(f"response (opaque {opaque}) with no request pending")
            self._fail(f"response opaque {opaque} out of order (oldest pending {bound})")
        if opcode == OPCODE_GETKQ and pending and pending[0][1] is _MGET:
            if (bound - opaque) & _OPAQUE_MASK > pending[0][2]:
                self._fail(f"getkq response (opaque {opaque}) to no multi-get key")
            if status == STATUS_OK:
                self._acc_keys += 1
            elif status != STATUS_KEY_NOT_FOUND:
                self.unsolicited_errors += 1
            self._accumulate(end - pos)
        elif opcode in _QUIET_RESPONSE_OPCODES:
            if status != STATUS_OK:
                self.unsolicited_errors += 1
        else:
            self._fail(f"unexpected opcode 0x{opcode:02x} (opaque {opaque}) answers no request")
        self._answered = opaque
        self._pos = end

    def _accumulate(self, nbytes: int) -> None:
        self._acc_nbytes += nbytes
        if self._acc_nbytes > self._max:
            self._fail(f"reply of more than {self._max} bytes", too_large=True)

    def _add_stat(self, pos: int, key_start: int, keylen: int, end: int) -> None:
        # One packet per statistic; the one with an empty key ends the reply (protocol-binary
        # "Stat").
        buf = self._buf
        value_start = key_start + keylen
        name = bytes(buf[key_start:value_start])
        self._acc_lines.append(name + b" " + buf[value_start:end] + b"\r\n")
        self._accumulate(end - pos)

    def _take_accumulated(self) -> tuple[int, int, list[bytes]]:
        acc = (self._acc_nbytes, self._acc_keys, self._acc_lines)
        self._acc_nbytes = 0
        self._acc_keys = 0
        self._acc_lines = []
        return acc

    def _mget_reply(self, nbytes: int) -> Reply:
        acc_nbytes, keys, _lines = self._take_accumulated()
        return Reply(ReplyKind.HIT if keys else ReplyKind.MISS, acc_nbytes + nbytes, None, keys)

    def _stats_reply(self, nbytes: int) -> Reply:
        acc_nbytes, _keys, lines = self._take_accumulated()
        return Reply(ReplyKind.VALUE, acc_nbytes + nbytes, b"".join(lines), 0)

    def _counter_reply(self, nbytes: int, value_start: int, end: int) -> Reply:
        if end - value_start != _COUNTER.size:
            self._fail(f"incr/decr response value of {end - value_start} bytes (expected 8)")
        payload = b"%d" % _COUNTER.unpack_from(self._buf, value_start)[0] if self._keep else None
        return Reply(ReplyKind.VALUE, nbytes, payload, 0)

    def _error_reply(self, status: int, nbytes: int, value_start: int, end: int) -> Reply:
        acc_nbytes, _keys, _lines = self._take_accumulated()
        text = bytes(self._buf[value_start:end]) or b"status 0x%04x" % status
        return Reply(ReplyKind.ERROR_REPLY, acc_nbytes + nbytes, text, 0)
