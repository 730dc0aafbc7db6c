"""memcached binary protocol codec: 24-byte headers, opaques, quiet ops, getkq + noop multi-get.

Sans-IO: no sockets, no asyncio, no clock. Requests are appended to the caller's bytearray;
responses are parsed from bytes given to ``feed``. Layout, opcodes and status codes follow
memcached's ``doc/protocol-binary.xml`` ("Memcache Binary Protocol", draft-stone-01).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvbench.protocols._buffer import ReceiveBuffer
from kvbench.protocols._codec_base import REPLY_CACHE_LIMIT, CodecBase, new_reply, op_table
from kvbench.protocols._ops import OP_DECR, OP_DELETE, OP_GET, OP_INCR, OP_SET
from kvbench.protocols.base import DEFAULT_OPTIONS, NEED_DATA, Op, Reply, ReplyKind

if TYPE_CHECKING:  # names only annotations use
    from kvbench.protocols.base import CodecOptions, Keys, NeedData, Ops, Value, Values

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

_COMPACT_AT = CodecBase.COMPACT_AT


_unpack_header = HEADER.unpack_from
_pack_header = HEADER.pack
_HIT = ReplyKind.HIT
_VALUE = ReplyKind.VALUE
_MGET = Op.MGET
_STATS = Op.STATS

# encode_many: one step (delta 1), as the workload's incr means.
_COUNTER_STEP_EXTRAS = _COUNTER_EXTRAS.pack(1, 0, _COUNTER_NO_CREATE)


# Request packers cached per key length: at most this many per op.
_PACKER_CACHE_LIMIT = 256
_Packer = tuple[Callable[..., bytes], bytes]


class _NearWrap(Exception):
    """encode_many's fast loop would pass the end of the opaque space."""


# Every encoder takes (op, key, value, out, arg) and returns the number of replies announced.
_Encoder = Callable[[Op, Any, Any, bytearray, int], int]


class MemcacheBinaryCodec(CodecBase):
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

    _pending: list[int]

    def __init__(self, options: CodecOptions = DEFAULT_OPTIONS) -> None:
        # The pending FIFO, two aligned lists read from ``_head``: the op (an ``Op`` value)
        # and the opaque that completes each announced reply, oldest first; and the getkq
        # count of each pending multi-get, by the opaque of its noop.
        super().__init__(options, [])
        self._pending_opaques: list[int] = []
        self.unsolicited_errors = 0
        self._flags = options.flags
        self._store_extras = _STORE_EXTRAS.pack(options.flags, options.ttl_s)
        self._rb = ReceiveBuffer()
        self._receive = self._rb.feed
        self._mget_keys: dict[int, int] = {}
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
        self._noreply = options.noreply
        # encode_many's packers, per key length: (struct pack, header start).
        self._get_packers: dict[int, _Packer] = {}
        self._set_packers: dict[int, _Packer] = {}
        self._delete_packers: dict[int, _Packer] = {}
        self._incr_packers: dict[int, _Packer] = {}

    def set_ttl(self, ttl_s: int) -> None:
        """Send ``ttl_s`` as the expiration of the stores encoded from now on."""
        self._store_extras = _STORE_EXTRAS.pack(self._flags, ttl_s)

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
        if noreply:
            replying.update(dict.fromkeys(_QUIET_OPCODES, self._encode_quiet))
        return op_table(replying, "the memcached binary protocol has no {op} request")

    # -- encoding ------------------------------------------------------------------------

    def encode(self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int = 0) -> int:
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

    def encode_many(
        self, ops: Ops, keys: Keys, values: Values, start: int, stop: int, out: bytearray
    ) -> int:
        """See ``ClientCodec.encode_many``: GET, SET, DELETE and INCR are packed inline (one
        struct call each, packers cached per key length), other ops through their encoder;
        the runs of requests between those are added to the pending FIFO in bulk, opaques
        as ranges.

        Raises:
            ValueError: an op has no binary form, or the codec was built with ``noreply``
                (whose quiet ops announce no reply). A batch is all or nothing: on any
                exception ``out`` and the pending FIFO are left as they were.
        """
        if start >= stop:
            return 0
        if self._noreply:
            raise ValueError("encode_many announces a reply per request: not with noreply")
        pending_ops = self._pending
        pending_opaques = self._pending_opaques
        encoders = self._encoders
        get_packers = self._get_packers
        set_packers = self._set_packers
        store_extras = self._store_extras
        mark = len(out)
        announced = len(pending_ops)
        first = o = seg = self._next_opaque  # seg: opaque of ops[flushed], not yet pending
        flushed = start
        try:
            if first + (stop - start) > _OPAQUE_MASK:
                raise _NearWrap
            for i in range(start, stop):
                op = ops[i]
                if op == OP_GET:
                    key: Any = keys[i]
                    try:
                        pack, head = get_packers[len(key)]
                    except KeyError:
                        pack, head = self._packer(get_packers, OPCODE_GET, b"", len(key))
                    out += pack(head, o, key)
                elif op == OP_SET:
                    key = keys[i]
                    value: Any = values[i]
                    n = len(key)
                    try:
                        pack, head = set_packers[n]
                    except KeyError:
                        pack, head = self._set_packer(n)
                    out += pack(head, 8 + n + len(value), o, store_extras, key)
                    out += value
                elif op == OP_DELETE:
                    key = keys[i]
                    try:
                        pack, head = self._delete_packers[len(key)]
                    except KeyError:
                        pack, head = self._packer(
                            self._delete_packers, OPCODE_DELETE, b"", len(key)
                        )
                    out += pack(head, o, key)
                elif op == OP_INCR:
                    key = keys[i]
                    try:
                        pack, head = self._incr_packers[len(key)]
                    except KeyError:
                        pack, head = self._packer(
                            self._incr_packers, OPCODE_INCR, _COUNTER_STEP_EXTRAS, len(key)
                        )
                    out += pack(head, o, _COUNTER_STEP_EXTRAS, key)
                else:
                    # The encoder takes its own opaques and announces its reply: announce
                    # the run before it first.
                    pending_ops += ops[flushed:i]
                    pending_opaques += range(seg, o)
                    flushed = i + 1
                    if op == _MGET and o + len(keys[i]) + (stop - i) > _OPAQUE_MASK:
                        raise _NearWrap
                    self._next_opaque = o
                    step = 1 if op == OP_DECR else 0
                    encoders[op](op, keys[i], values[i], out, step)  # type: ignore[arg-type]
                    o = seg = self._next_opaque
                    continue
                o += 1
        except _NearWrap:
            # Once per 2**32 packets: redo the batch one request at a time (they wrap).
            self._roll_back(out, mark, announced, first)
            try:
                for i in range(start, stop):
                    op = ops[i]
                    step = 1 if op in (OP_INCR, OP_DECR) else 0
                    encoders[op](op, keys[i], values[i], out, step)  # type: ignore[arg-type]
            except BaseException:
                self._roll_back(out, mark, announced, first)
                raise
            return stop - start
        except BaseException:
            self._roll_back(out, mark, announced, first)
            raise
        pending_ops += ops[flushed:stop]
        pending_opaques += range(seg, o)
        self._next_opaque = o
        return stop - start

    def _compact(self, head: int) -> None:
        del self._pending[:head], self._pending_opaques[:head]

    def _roll_back(self, out: bytearray, mark: int, announced: int, opaque: int) -> None:
        """Undo a failed ``encode_many``: bytes, pending entries and opaques."""
        del out[mark:]
        for op, noop in zip(
            self._pending[announced:], self._pending_opaques[announced:], strict=True
        ):
            if op == _MGET:
                del self._mget_keys[noop]
        del self._pending[announced:], self._pending_opaques[announced:]
        self._next_opaque = opaque

    def _packer(
        self, table: dict[int, _Packer], opcode: int, extras: bytes, keylen: int
    ) -> _Packer:
        """A request without value: pack(header start, opaque[, extras], key)."""
        e = len(extras)
        head = _pack_header(MAGIC_REQUEST, opcode, keylen, e, 0, 0, e + keylen, 0, 0)[:12]
        layout = f">12sI8x{e}s{keylen}s" if e else f">12sI8x{keylen}s"
        packer = (struct.Struct(layout).pack, head)
        if len(table) < _PACKER_CACHE_LIMIT:
            table[keylen] = packer
        return packer

    def _set_packer(self, keylen: int) -> _Packer:
        """A set without its value: pack(header start, total body, opaque, extras, key)."""
        head = _pack_header(MAGIC_REQUEST, OPCODE_SET, keylen, 8, 0, 0, 0, 0, 0)[:8]
        packer = (struct.Struct(f">8sII8x8s{keylen}s").pack, head)
        if len(self._set_packers) < _PACKER_CACHE_LIMIT:
            self._set_packers[keylen] = packer
        return packer

    def _request(
        self,
        opcode: int,
        key: bytes,
        out: bytearray,
        extras: bytes = b"",
        value: Any = b"",
        cas: int = 0,
    ) -> int:
        """Append a request (header, extras, key, value) with the next opaque; return it."""
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        n = len(key)
        e = len(extras)
        out += _pack_header(MAGIC_REQUEST, opcode, n, e, 0, 0, e + n + len(value), opaque, cas)
        out += extras
        out += key
        out += value
        return opaque

    def _expect(self, op: Op, opaque: int) -> int:
        """Announce the reply of the request sent with ``opaque``."""
        self._pending.append(op)
        self._pending_opaques.append(opaque)
        return 1

    def _encode_get(self, op: Op, key: bytes, value: object, out: bytearray, arg: int) -> int:
        # _request and _expect, inline: this is the per-op hot path (the calls cost a third).
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        n = len(key)
        out += _pack_header(MAGIC_REQUEST, OPCODE_GET, n, 0, 0, 0, n, opaque, 0)
        out += key
        self._pending.append(op)
        self._pending_opaques.append(opaque)
        return 1

    def _encode_store(self, op: Op, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        # CAS is a set whose header carries the cas unique (protocol-binary "Set, Add, Replace").
        cas = arg if op == Op.CAS else 0
        return self._expect(
            op, self._request(_OPCODES[op], key, out, self._store_extras, value, cas)
        )

    def _encode_concat(self, op: Op, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        return self._expect(op, self._request(_OPCODES[op], key, out, b"", value))

    def _encode_delete(self, op: Op, key: bytes, value: object, out: bytearray, arg: int) -> int:
        return self._expect(op, self._request(OPCODE_DELETE, key, out))

    def _encode_counter(self, op: Op, key: bytes, value: object, out: bytearray, arg: int) -> int:
        extras = _COUNTER_EXTRAS.pack(arg, 0, _COUNTER_NO_CREATE)
        return self._expect(op, self._request(_OPCODES[op], key, out, extras))

    def _encode_touch(self, op: Op, key: bytes, value: object, out: bytearray, arg: int) -> int:
        return self._expect(op, self._request(OPCODE_TOUCH, key, out, _TOUCH_EXTRAS.pack(arg)))

    def _encode_noop(self, op: Op, key: object, value: object, out: bytearray, arg: int) -> int:
        return self._expect(op, self._request(OPCODE_NOOP, b"", out))

    def _encode_stats(
        self, op: Op, key: bytes | None, value: object, out: bytearray, arg: int
    ) -> int:
        return self._expect(_STATS, self._request(OPCODE_STAT, key or b"", out))

    def _encode_mget(self, op: Op, keys: Any, value: object, out: bytearray, arg: int) -> int:
        # A getkq per key (only hits answer), then a noop whose response closes the batch
        # (protocol-binary "Get, Get Quietly, Get Key, Get Key Quietly" and "No-op").
        request = self._request
        for key in keys:
            request(OPCODE_GETKQ, key, out)
        opaque = request(OPCODE_NOOP, b"", out)
        self._mget_keys[opaque] = len(keys)
        return self._expect(_MGET, opaque)

    def _encode_quiet(self, op: Op, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        opcode = _QUIET_OPCODES[op]
        if op == Op.SET or op == Op.ADD or op == Op.REPLACE:
            self._request(opcode, key, out, self._store_extras, value)
        elif op == Op.APPEND or op == Op.PREPEND:
            self._request(opcode, key, out, b"", value)
        elif op == Op.INCR or op == Op.DECR:
            self._request(opcode, key, out, _COUNTER_EXTRAS.pack(arg, 0, _COUNTER_NO_CREATE))
        else:
            self._request(opcode, key, out)
        return 0

    # -- parsing -------------------------------------------------------------------------

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
            self._refuse()
        rb = self._rb
        buf = rb.data
        pending_ops = self._pending
        pending_opaques = self._pending_opaques
        while True:
            pos = rb.pos
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
            head = self._head
            if head == len(pending_ops) or pending_opaques[head] != opaque:
                self._consume_unannounced(opcode, status, opaque, pos, end)
                continue
            op = pending_ops[head]
            if opcode != self._expected_opcode[op]:
                self._fail(f"opcode 0x{opcode:02x} answers a {Op(op).name} request")
            rb.pos = end
            self._answered = opaque
            nbytes = HEADER_BYTES + bodylen
            if op == _STATS and status == STATUS_OK and keylen:
                self._add_stat(pos, pos + HEADER_BYTES + extlen, keylen, end)
                continue
            if head < _COMPACT_AT:
                self._head = head + 1
            else:
                self._advance(head + 1)
            kind = self._kinds[op].get(status)
            if kind is _HIT:
                if self._keep:
                    payload = bytes(buf[pos + HEADER_BYTES + extlen + keylen : end])
                    return new_reply(Reply, (_HIT, nbytes, payload, 1))
                reply = self._hit_cache.get(nbytes)
                return reply if reply is not None else self._cached(_HIT, nbytes, 1)
            if kind is None:
                if op == _MGET:
                    del self._mget_keys[opaque]
                return self._error_reply(status, nbytes, pos + HEADER_BYTES + extlen + keylen, end)
            if op == _MGET:
                return self._mget_reply(nbytes, opaque)
            if kind is _VALUE:
                if op == _STATS:
                    return self._stats_reply(nbytes)
                return self._counter_reply(nbytes, pos + HEADER_BYTES + extlen + keylen, end)
            reply = self._cache[kind].get(nbytes)
            return reply if reply is not None else self._cached(kind, nbytes, 0)

    def _need_data(self) -> NeedData:
        if self._eof:
            if len(self._rb):
                self._fail("EOF in the middle of a response")
            if self.pending():
                self._fail(f"EOF with {self.pending()} replies pending")
        return NEED_DATA

    def _cached(self, kind: ReplyKind, nbytes: int, keys: int) -> Reply:
        reply = Reply(kind, nbytes, None, keys)
        cache = self._cache[kind]
        if len(cache) < REPLY_CACHE_LIMIT:
            cache[nbytes] = reply
        return reply

    def _consume_unannounced(
        self, opcode: int, status: int, opaque: int, pos: int, end: int
    ) -> None:
        """Consume a packet that completes no reply: a multi-get hit or a quiet-op error."""
        head = self._head
        pending = head < len(self._pending)
        bound = self._pending_opaques[head] if pending else self._next_opaque
        answered = self._answered
        # Answers come in request order: this packet must belong to a request sent after the
        # last one answered and before the oldest one still pending.
        if not 0 < (opaque - answered) & _OPAQUE_MASK < (bound - answered) & _OPAQUE_MASK:
            if not pending:
                self._fail(f"response (opaque {opaque}) with no request pending")
            self._fail(f"response opaque {opaque} out of order (oldest pending {bound})")
        if opcode == OPCODE_GETKQ and pending and self._pending[head] == _MGET:
            if (bound - opaque) & _OPAQUE_MASK > self._mget_keys[bound]:
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
        self._rb.pos = end

    def _accumulate(self, nbytes: int) -> None:
        self._acc_nbytes += nbytes
        if self._acc_nbytes > self._max:
            self._fail(f"reply of more than {self._max} bytes", too_large=True)

    def _add_stat(self, pos: int, key_start: int, keylen: int, end: int) -> None:
        # One packet per statistic; the one with an empty key ends the reply (protocol-binary
        # "Stat").
        buf = self._rb.data
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

    def _mget_reply(self, nbytes: int, opaque: int) -> Reply:
        del self._mget_keys[opaque]
        acc_nbytes, keys, _lines = self._take_accumulated()
        return Reply(ReplyKind.HIT if keys else ReplyKind.MISS, acc_nbytes + nbytes, None, keys)

    def _stats_reply(self, nbytes: int) -> Reply:
        acc_nbytes, _keys, lines = self._take_accumulated()
        return Reply(ReplyKind.VALUE, acc_nbytes + nbytes, b"".join(lines), 0)

    def _counter_reply(self, nbytes: int, value_start: int, end: int) -> Reply:
        if end - value_start != _COUNTER.size:
            self._fail(f"incr/decr response value of {end - value_start} bytes (expected 8)")
        payload = (
            b"%d" % _COUNTER.unpack_from(self._rb.data, value_start)[0] if self._keep else None
        )
        return Reply(ReplyKind.VALUE, nbytes, payload, 0)

    def _error_reply(self, status: int, nbytes: int, value_start: int, end: int) -> Reply:
        acc_nbytes, _keys, _lines = self._take_accumulated()
        text = bytes(self._rb.data[value_start:end]) or b"status 0x%04x" % status
        return Reply(ReplyKind.ERROR_REPLY, acc_nbytes + nbytes, text, 0)
