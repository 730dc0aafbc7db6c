"""memcached text protocol codec (memcached ``doc/protocol.txt``, "Commands").

Sans-IO: requests are appended to a caller-owned bytearray and replies are parsed from fed
bytes; no sockets, no clock, no event loop. Replies come back in request order, one per
announced request (a multi-get is one request and one reply). This module writes requests;
the replies are parsed by ``TextReplies`` (_memcache_text_replies.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from kvbench.protocols._memcache_lines import multiget_keys, value_length
from kvbench.protocols._memcache_text_replies import TextReplies
from kvbench.protocols._ops import OP_COMMAND, OP_DECR, OP_DELETE, OP_GET, OP_INCR, OP_MGET, OP_SET
from kvbench.protocols.base import DEFAULT_OPTIONS, Op
from kvbench.protocols.commands import Request, text_template

if TYPE_CHECKING:  # names only annotations use
    from kvbench.protocols.base import CodecOptions, Keys, Ops, Value, Values


_STORE_VERBS = {
    Op.SET: b"set",
    Op.ADD: b"add",
    Op.REPLACE: b"replace",
    Op.APPEND: b"append",
    Op.PREPEND: b"prepend",
}

# The ops encode_many sends with arg 1 (one step); every other op gets 0.
_STEPPED = frozenset({OP_INCR, OP_DECR})


# The byte size of a memoryview; AttributeError for anything else (the batch paths'
# per-op fallback then handles bytes, bytearray and None the way encode does).
_nbytes = attrgetter("nbytes")


def _formatted_sizes(sizes: list[int], cache: dict[int, bytes], size_format: bytes) -> list[bytes]:
    """``size_format % size`` for each of ``sizes``, through ``cache`` (a few sizes recur)."""
    try:
        return list(map(cache.__getitem__, sizes))
    except KeyError:
        if len(cache) > 1024:
            cache.clear()
        for size in sizes:
            if size not in cache:
                cache[size] = size_format % size
        return list(map(cache.__getitem__, sizes))


class MemcacheTextCodec(TextReplies):
    """Client side of memcached's text protocol, for one connection.

    Supports get, gets, multi-get, set, add, replace, append, prepend, cas, delete,
    incr, decr, touch, stats and arbitrary commands: ``COMMAND`` takes a ``Request``
    rendered by ``protocols.commands.text_template`` (or the words of one, as a sequence
    or a line, checked the same way), and its reply is framed by its first line (see
    ``TextReplies``). ``NOOP`` has no text form and raises ``ValueError`` at ``encode``.
    ``encode``'s ``arg`` is the cas unique (CAS), the delta (INCR/DECR) or the exptime
    (TOUCH).

    With ``options.noreply`` storage, delete, incr/decr and touch carry ``noreply`` and
    announce no reply. memcached still answers some failures of such commands (e.g.
    ``SERVER_ERROR out of memory storing object``); the text protocol gives no way to tell
    whose reply that is, so one arriving with nothing pending raises ``ProtocolError``,
    and one arriving while other replies are pending is taken as the head's reply.

    The pending FIFO holds each announced request's op and what its reply parser needs
    (the key of a get, the key tuple of a multi-get); ``encode_many`` extends it with two
    slices per batch.

    Args:
        options: per-connection settings (payload keeping, reply bound, ttl, flags, noreply).
    """

    def __init__(self, options: CodecOptions = DEFAULT_OPTIONS) -> None:
        super().__init__(options)
        # Request templates with options baked in: the hot path does one %-format.
        suffix = b" noreply" if options.noreply else b""
        self._flags_suffix = (options.flags, suffix)
        self.set_ttl(options.ttl_s)
        self._delete_format = b"delete %%s%s\r\n" % suffix
        self._arith_formats = {
            Op.INCR: b"incr %%s %%d%s\r\n" % suffix,
            Op.DECR: b"decr %%s %%d%s\r\n" % suffix,
        }
        self._incr_format = self._arith_formats[Op.INCR] % (b"%s", 1)  # one step
        self._touch_format = b"touch %%s %%d%s\r\n" % suffix
        self._get_formats = {Op.GET: b"get %s\r\n", Op.GETS: b"gets %s\r\n"}
        self._set_encoders(_STORE_VERBS, {Op.COMMAND: self._encode_command}, "text")

    def set_ttl(self, ttl_s: int) -> None:
        """Send ``ttl_s`` as the exptime of the stores encoded from now on."""
        flags, suffix = self._flags_suffix
        flags_ttl = b"%d %d" % (flags, ttl_s)
        self._store_formats = {
            op: b"%s %%s %s %%d%s\r\n" % (verb, flags_ttl, suffix)
            for op, verb in _STORE_VERBS.items()
        }
        # encode_many's set: b"set " key b" <flags> <ttl> <bytes>\r\n" value b"\r\n".
        self._set_tail_format = b" %s %%d\r\n" % flags_ttl
        self._set_tails: dict[int, bytes] = {}  # size -> self._set_tail_format % size
        self._cas_format = b"cas %%s %s %%d %%d%s\r\n" % (flags_ttl, suffix)

    def encode_many(
        self, ops: Ops, keys: Keys, values: Values, start: int, stop: int, out: bytearray
    ) -> int:
        """See ``ClientCodec.encode_many``: gets, sets of memoryviews, deletes, incrs and
        multi-gets of a key tuple inline, other ops through ``encode``; the FIFO is
        extended with slices.

        On an exception, what was written is announced and nothing else (a batch of only
        gets or only sets is written whole or not at all; otherwise the requests before the
        failing one are written).
        """
        if self._noreply:  # noreply requests announce nothing: the per-op path counts
            return super().encode_many(ops, keys, values, start, stop, out)
        batch = ops[start:stop]
        if batch.count(OP_GET) == stop - start:  # only gets: one join
            if start < stop:
                out += b"get %b\r\n" % b"\r\nget ".join(keys[start:stop])  # type: ignore[arg-type]
                self._pending.extend(batch)
                self._args += keys[start:stop]
            return stop - start
        if batch.count(OP_SET) == stop - start and self._sets(keys, values, start, stop, out):
            self._pending.extend(batch)
            self._args += keys[start:stop]
            return stop - start
        # Requests are collected as parts and joined once; runs of gets take one join.
        # ``run``: the first request not collected yet; ``segment``: not announced yet.
        parts: list[Any] = []
        add = parts.extend
        set_tail = b""
        tail_size = -1
        segment = run = start
        try:
            for i in range(start, stop):
                op = ops[i]
                if op == OP_GET:
                    continue
                if run < i:
                    add((b"get ", b"\r\nget ".join(keys[run:i]), b"\r\n"))  # type: ignore[arg-type]
                    run = i
                if op == OP_SET:
                    value = values[i]
                    if value.__class__ is memoryview:
                        if value.nbytes != tail_size:
                            tail_size = value.nbytes
                            set_tail = self._set_tail_format % tail_size
                        add((b"set ", keys[i], set_tail, value, b"\r\n"))
                        run = i + 1
                        continue
                elif op == OP_DELETE:
                    parts.append(self._delete_format % keys[i])
                    run = i + 1
                    continue
                elif op == OP_INCR:
                    parts.append(self._incr_format % keys[i])
                    run = i + 1
                    continue
                elif op == OP_MGET:
                    key = keys[i]
                    if key.__class__ is tuple and key:
                        add((b"get ", b" ".join(key), b"\r\n"))
                        run = i + 1
                        continue
                elif op == OP_COMMAND and keys[i].__class__ is Request:
                    parts.append(keys[i])
                    run = i + 1
                    continue
                # Rare ops and other value types: bytes and FIFO catch up, then encode().
                out += b"".join(parts)
                parts.clear()
                self._pending.extend(ops[segment:i])
                self._args += keys[segment:i]
                segment = i
                step = 1 if op in _STEPPED else 0
                self.encode(op, keys[i], values[i], out, step)  # type: ignore[arg-type]
                segment = run = i + 1
            if run < stop:
                add((b"get ", b"\r\nget ".join(keys[run:stop]), b"\r\n"))  # type: ignore[arg-type]
                run = stop
        finally:
            out += b"".join(parts)
            self._pending.extend(ops[segment:run])
            self._args += keys[segment:run]
        return stop - start

    def _sets(
        self,
        keys: Sequence[Any],
        values: Values,
        start: int,
        stop: int,
        out: bytearray,
    ) -> bool:
        """Write a batch of sets in one join; False (nothing written) unless every value is
        a memoryview."""
        chunk = values[start:stop]
        try:
            sizes = list(map(_nbytes, chunk))
        except AttributeError:
            return False
        parts: list[Any] = [b"\r\nset "] * (4 * len(chunk))
        parts[0] = b"set "
        parts[1::4] = keys[start:stop]
        parts[2::4] = _formatted_sizes(sizes, self._set_tails, self._set_tail_format)
        parts[3::4] = chunk
        out += b"".join(parts)
        out += b"\r\n"
        return True

    def _encode_get(self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int) -> int:
        out += self._get_formats[op] % key
        self._pending.append(op)  # as _push does, without the call: the per-op hot path
        self._args.append(key)
        return 1

    def _encode_mget(
        self, op: Op, key: Sequence[bytes], value: Value | None, out: bytearray, arg: int
    ) -> int:
        keys = multiget_keys(key)
        out += b"get %s\r\n" % b" ".join(keys)
        self._push(op, keys)
        return 1

    def _encode_store(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        out += self._store_formats[op] % (key, value_length(value))
        out += value  # type: ignore[arg-type]  # value_length() rejected None
        out += b"\r\n"
        return self._expect(op)

    def _encode_cas(self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int) -> int:
        out += self._cas_format % (key, value_length(value), arg)
        out += value  # type: ignore[arg-type]  # value_length() rejected None
        out += b"\r\n"
        return self._expect(op)

    def _encode_delete(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        out += self._delete_format % key
        return self._expect(op)

    def _encode_arith(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        if arg < 0:
            raise ValueError("incr/decr take a non-negative delta")
        out += self._arith_formats[op] % (key, arg)
        return self._expect(op)

    def _encode_touch(
        self, op: Op, key: bytes, value: Value | None, out: bytearray, arg: int
    ) -> int:
        out += self._touch_format % (key, arg)
        return self._expect(op)

    def _encode_stats(self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int) -> int:
        out += b"stats\r\n"
        self._push(op, None)
        return 1

    def _encode_command(
        self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int
    ) -> int:
        if key.__class__ is not Request:
            words = key.split() if isinstance(key, bytes | bytearray) else list(key)
            key = text_template([bytes(word) for word in words]).render((), value)
        out += key
        self._push(op, None)
        return 1
