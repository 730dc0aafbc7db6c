"""memcached meta protocol codec (memcached ``doc/protocol.txt``, "Meta Commands").

Sans-IO: mg/ms/md/ma/mn requests are appended to a caller-owned bytearray and replies are
parsed from fed bytes; no sockets, no clock, no event loop. Every request carries an opaque
token (``O<n>``) that its reply must echo, so a misaligned stream is caught at once. This
module writes requests; the replies are parsed by ``MetaReplies`` (_memcache_meta_replies.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvbench.protocols._memcache_lines import TOKEN_MASK, multiget_keys, value_length
from kvbench.protocols._memcache_meta_replies import MetaReplies
from kvbench.protocols._ops import OP_DECR, OP_DELETE, OP_GET, OP_INCR, OP_SET
from kvbench.protocols.base import DEFAULT_OPTIONS, Op

if TYPE_CHECKING:  # names only annotations use
    from kvbench.protocols.base import CodecOptions, Keys, Ops, Value, Values


# ms mode flag (protocol.txt "Meta Set": M(token) E add, A append, P prepend, R replace).
_STORE_MODES = {
    Op.SET: b"",
    Op.ADD: b" ME",
    Op.REPLACE: b" MR",
    Op.APPEND: b" MA",
    Op.PREPEND: b" MP",
}

# The ops encode_many sends with arg 1 (one step); every other op gets 0.
_STEPPED = frozenset({OP_INCR, OP_DECR})


class MemcacheMetaCodec(MetaReplies):
    """Client side of memcached's meta protocol, for one connection.

    Mapping: GET ``mg <k> v``, GETS ``mg <k> v c``, TOUCH ``mg <k> T<arg>``, SET/ADD/
    REPLACE/APPEND/PREPEND ``ms <k> <n> T<ttl> F<flags> [M<mode>]``, CAS ``ms ... C<arg>``,
    DELETE ``md <k>``, INCR/DECR ``ma <k> [MD] D<arg> v``, NOOP ``mn``, STATS ``stats``,
    each with ``O<token>``. MGET is ``mg <k> v q O<t>`` per key then ``mn``, and yields one
    reply when ``MN`` arrives (misses are silent under ``q``). ``encode``'s ``arg`` is the
    cas unique (CAS), the delta (INCR/DECR) or the new TTL (TOUCH); NOOP and STATS ignore
    the key.

    ``options.noreply`` adds ``q`` to ms/md/ma and ``encode`` returns 0: memcached then
    drops the success reply (``HD``) but still sends failures (``NS``/``EX``/``NF``). Those
    are matched by their token (it must belong to a quiet request sent before the pending
    head), consumed without a ``Reply`` and counted in ``quiet_failures``. An error line
    (no token) with nothing pending is counted the same way when quiet requests may be
    outstanding; with replies pending it is taken as the head's reply, as in the text
    protocol. TOUCH never gets ``q``: for mg it hides misses, not ``HD``.

    The pending FIFO holds each announced request's op and first token; ``encode_many``
    extends it with a slice and a range per batch.

    Args:
        options: per-connection settings (payload keeping, reply bound, ttl, flags, noreply).
    """

    def __init__(self, options: CodecOptions = DEFAULT_OPTIONS) -> None:
        super().__init__(options)
        # Request templates with options baked in; the last %s is b" O<t>\r\n".
        quiet = b" q" if options.noreply else b""
        self._flags_quiet = (options.flags, quiet)
        self.set_ttl(options.ttl_s)
        self._delete_format = b"md %%s%s%%s" % quiet
        value_flag = b" q" if options.noreply else b" v"
        self._arith_formats = {
            Op.INCR: b"ma %%s D%%d%s%%s" % value_flag,
            Op.DECR: b"ma %%s MD D%%d%s%%s" % value_flag,
        }
        self._get_formats = {Op.GET: b"mg %s v%s", Op.GETS: b"mg %s v c%s"}
        self._set_encoders(_STORE_MODES, {Op.NOOP: self._encode_noop}, "meta")

    def set_ttl(self, ttl_s: int) -> None:
        """Send ``ttl_s`` (``T``) with the stores encoded from now on."""
        flags, quiet = self._flags_quiet
        ttl_flags = b"T%d F%d" % (ttl_s, flags)
        self._store_formats = {
            op: b"ms %%s %%d %s%s%s%%s" % (ttl_flags, mode, quiet)
            for op, mode in _STORE_MODES.items()
        }
        self._cas_format = b"ms %%s %%d %s C%%d%s%%s" % (ttl_flags, quiet)
        # encode_many's set: b"ms " key b" <bytes> T<ttl> F<flags> O" token CRLF value CRLF.
        self._set_tail = b" %%d %s O" % ttl_flags

    def encode_many(
        self, ops: Ops, keys: Keys, values: Values, start: int, stop: int, out: bytearray
    ) -> int:
        """See ``ClientCodec.encode_many``: tokens as ``encode`` hands them out; gets, sets
        of memoryviews, deletes and incrs inline, other ops through ``encode``; the FIFO is
        extended with a slice and a range.

        On an exception, what was written is announced and nothing else (requests are
        joined once, so a bad key fails the requests collected with it; a failing
        ``encode`` leaves the requests before it written).
        """
        token = self._token
        if self._noreply or token + (stop - start) > TOKEN_MASK:
            # Quiet requests announce nothing; near the wrap, tokens go one by one.
            return super().encode_many(ops, keys, values, start, stop, out)
        batch = ops[start:stop]
        if batch.count(OP_GET) == stop - start:  # only gets: one format
            args: list[Any] = [None] * (2 * (stop - start))
            args[::2] = keys[start:stop]
            args[1::2] = range(token, token + stop - start)
            out += b"mg %s v O%d\r\n" * (stop - start) % tuple(args)
            self._announce(batch, 0, stop - start, token)
            return stop - start
        # Requests are collected as parts and joined once. ``run``: the first request not
        # collected yet; ``segment``: not announced yet, its first token ``segment_token``.
        parts: list[Any] = []
        add = parts.extend
        set_tail = b""
        tail_size = -1
        segment = run = start
        segment_token = token
        try:
            for i in range(start, stop):
                op = ops[i]
                if op == OP_GET:
                    add((b"mg ", keys[i], b" v O%d\r\n" % token))
                elif op == OP_SET and values[i].__class__ is memoryview:
                    value = values[i]
                    if value.nbytes != tail_size:  # type: ignore[union-attr]
                        tail_size = value.nbytes  # type: ignore[union-attr]
                        set_tail = self._set_tail % tail_size
                    add((b"ms ", keys[i], set_tail, b"%d\r\n" % token, value, b"\r\n"))
                elif op == OP_DELETE:
                    add((b"md ", keys[i], b" O%d\r\n" % token))
                elif op == OP_INCR:
                    add((b"ma ", keys[i], b" D1 v O%d\r\n" % token))  # one step
                else:
                    # Rare ops and other value types: bytes and FIFO catch up, then encode().
                    out += b"".join(parts)
                    parts.clear()
                    self._announce(ops, segment, i, segment_token)
                    segment = run = i
                    self._token = token
                    step = 1 if op in _STEPPED else 0
                    self.encode(op, keys[i], values[i], out, step)  # type: ignore[arg-type]
                    segment = run = i + 1
                    segment_token = token = self._token
                    if token + (stop - segment) > TOKEN_MASK:
                        super().encode_many(ops, keys, values, segment, stop, out)
                        return stop - start
                    continue
                token += 1
                run = i + 1
        finally:
            out += b"".join(parts)
            self._announce(ops, segment, run, segment_token)
        return stop - start

    def _announce(self, ops: Sequence[int], start: int, stop: int, token: int) -> None:
        """Announce batch requests ``start`` to ``stop``, one token each from ``token``."""
        if start < stop:
            self._pending.extend(ops[start:stop])
            end = token + stop - start
            self._args += range(token, end)
            self._token = end

    def _next_token(self) -> tuple[int, bytes]:
        token = self._token
        self._token = (token + 1) & TOKEN_MASK
        return token, b" O%d\r\n" % token

    def _encode_get(self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int) -> int:
        token, otok = self._next_token()
        out += self._get_formats[op] % (key, otok)
        self._push(op, token)
        return 1

    def _encode_touch(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        token, otok = self._next_token()
        out += b"mg %s T%d%s" % (key, arg, otok)
        self._push(op, token)
        return 1

    def _encode_mget(
        self, op: Op, key: Sequence[bytes], value: Value | None, out: bytearray, arg: int
    ) -> int:
        first = self._token
        token = first
        for one_key in multiget_keys(key):
            out += b"mg %s v q O%d\r\n" % (one_key, token)
            token = (token + 1) & TOKEN_MASK
        out += b"mn\r\n"
        self._token = token
        self._mget_ends[first] = token
        self._push(op, first)
        return 1

    def _encode_store(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        size = value_length(value)
        token, otok = self._next_token()
        out += self._store_formats[op] % (key, size, otok)
        out += value  # type: ignore[arg-type]  # value_length() rejected None
        out += b"\r\n"
        return self._expect(op, token)

    def _encode_cas(self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int) -> int:
        size = value_length(value)
        token, otok = self._next_token()
        out += self._cas_format % (key, size, arg, otok)
        out += value  # type: ignore[arg-type]  # value_length() rejected None
        out += b"\r\n"
        return self._expect(op, token)

    def _encode_delete(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        token, otok = self._next_token()
        out += self._delete_format % (key, otok)
        return self._expect(op, token)

    def _encode_arith(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        if arg < 0:
            raise ValueError("incr/decr take a non-negative delta")
        token, otok = self._next_token()
        out += self._arith_formats[op] % (key, arg, otok)
        return self._expect(op, token)

    def _encode_noop(self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int) -> int:
        out += b"mn\r\n"
        self._push(op, self._token)
        return 1

    def _encode_stats(self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int) -> int:
        out += b"stats\r\n"
        self._push(op, self._token)
        return 1
