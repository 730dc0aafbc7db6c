"""Redis RESP2/RESP3 codec: requests as arrays of bulk strings, replies parsed by hiredis.

Sans-IO: no sockets, no asyncio, no clock. ``hiredis.Reader`` (C) turns bytes into values;
this module matches each value to the request that announced it and makes it a ``Reply``.
Wire format: the Redis serialization protocol specification (RESP2 and RESP3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import hiredis

from kvbench.protocols._codec_base import REPLY_CACHE_LIMIT, CodecBase, new_reply, op_table
from kvbench.protocols._ops import OP_COMMAND, OP_DECR, OP_DELETE, OP_GET, OP_INCR, OP_SET
from kvbench.protocols.base import DEFAULT_OPTIONS, KEYS_SHIFT, NEED_DATA, Op, Reply, ReplyKind
from kvbench.protocols.commands import Request
from kvbench.protocols.resp_cluster import Redirect, parse_redirect

if TYPE_CHECKING:  # names only annotations use
    from kvbench.protocols.base import CodecOptions, Keys, NeedData, Ops, Value, Values

# hiredis returns this from gets() when no complete reply is buffered (RESP3 has a real
# boolean false, so the default False sentinel would be ambiguous).
_INCOMPLETE = object()

_ReplyError = hiredis.ReplyError
_PushNotification = hiredis.PushNotification
_HIT = ReplyKind.HIT
_MISS = ReplyKind.MISS
_VALUE = ReplyKind.VALUE

_Handler = Callable[[Any], Reply]
_Encoder = Callable[[Any, Any, bytearray, int], int]

# The pending FIFO holds one code per announced reply: the ``Op`` value of the request, or
# ``_SETUP`` for HELLO/AUTH/SELECT. ``_handlers[code]`` turns the reply into a ``Reply``.
# ``_ASKING``'s reply is checked and consumed here: it answers no request of the caller's.
_SETUP = len(Op)
_ASKING = _SETUP + 1
# SET NX / SET XX (add, replace): answered by a null when refused, which a plain SET is not.
_CONDITIONAL_SET = int(Op.ADD)
# read_kinds values (``int(kind) | keys << KEYS_SHIFT``) of the common replies.
_HIT_1 = int(_HIT) | 1 << KEYS_SHIFT
_MISS_0 = int(_MISS)
_STORED_0 = int(ReplyKind.STORED)
_DELETED_0 = int(ReplyKind.DELETED)
_NOT_FOUND_0 = int(ReplyKind.NOT_FOUND)
_VALUE_0 = int(_VALUE)
# encode_many's request heads (each begins with the CRLF that ends the request before),
# cached per key or value length: at most this many per table.
_GET_HEAD = b"\r\n*2\r\n$3\r\nGET\r\n$%d\r\n"
_DEL_HEAD = b"\r\n*2\r\n$3\r\nDEL\r\n$%d\r\n"
_INCR_HEAD = b"\r\n*2\r\n$4\r\nINCR\r\n$%d\r\n"
_HEAD_CACHE_LIMIT = 4096
_CRLF = b"\r\n"
_COMPACT_AT = CodecBase.COMPACT_AT


def _bulk(arg: bytes | bytearray | memoryview | str | int) -> bytes:
    """One bulk string of a request array (RESP "Bulk strings")."""
    if isinstance(arg, str):
        arg = arg.encode()
    elif isinstance(arg, int):
        arg = b"%d" % arg
    return b"$%d\r\n" % len(arg) + arg + b"\r\n"


def _array(*args: bytes | bytearray | memoryview | str | int) -> bytes:
    """A request: an array of bulk strings (RESP "Sending commands to a Redis server")."""
    return b"*%d\r\n" % len(args) + b"".join(_bulk(arg) for arg in args)


def wire_nbytes(value: Any, null_nbytes: int) -> int:
    """Estimate how many wire bytes a value parsed by hiredis took.

    hiredis does not report sizes, so they are recomputed from the value: exact for bulk
    strings, nulls, integers, errors and arrays or maps of them; a status reply counts
    as a bulk string (3 bytes more than ``+OK``); doubles, big numbers and verbatim
    strings are approximate. Aggregates are walked with a stack, not recursion: hiredis
    reads 1,024 of them nested, past Python's recursion limit.

    Args:
        value: what ``hiredis.Reader.gets`` returned.
        null_nbytes: 5 (``$-1\\r\\n``) for RESP2, 3 (``_\\r\\n``) for RESP3.
    """
    total = 0
    todo = [value]
    while todo:
        item = todo.pop()
        cls = item.__class__
        if cls is bytes:
            n = len(item)
            total += n + len(str(n)) + 5
        elif item is None:
            total += null_nbytes
        elif cls is int:
            total += len(str(item)) + 3
        elif cls is bool:
            total += 4
        elif cls is float:
            total += len(repr(item)) + 3
        elif cls is dict:
            total += len(str(len(item))) + 3
            for key, member in item.items():
                todo += (key, member)
        elif isinstance(item, list):
            total += len(str(len(item))) + 3
            todo += item
        elif isinstance(item, _ReplyError):
            total += len(str(item).encode()) + 3
    return total


def info_as_stats_text(info: bytes) -> bytes:
    """Rewrite ``INFO`` output (``name:value`` lines, ``# Section`` headers) as stats lines.

    The result is ``b"name value\\r\\n"`` lines, the STATS payload every codec returns, so
    ``parse_stats_text`` reads it.
    """
    lines = []
    for line in info.split(b"\r\n"):
        if line and not line.startswith(b"#"):
            name, _, value = line.partition(b":")
            lines.append(name + b" " + value + b"\r\n")
    return b"".join(lines)


class RespCodec(CodecBase):
    """Client half of RESP2 or RESP3 for one connection.

    Redis answers in request order; each ``encode`` pushes a code (the op) naming the
    handler that turns the matching reply into a ``Reply``. ``encode_many`` and
    ``read_kinds`` are the batch forms, with the common ops (GET, SET, DEL, INCR) inline;
    they share the FIFO with ``encode`` and ``next_reply``, so the styles mix freely. RESP3
    push messages (``>``), which the server may send at any time, are skipped and counted
    in ``push_messages``.

    ``Reply.nbytes`` is recomputed from the parsed value (see ``wire_nbytes``): exact for
    the replies of the fixed ops, approximate for status replies of arbitrary commands and
    for RESP3 doubles, big numbers and verbatim strings.

    ``CodecOptions.noreply`` and ``flags`` have no RESP form and are ignored; ``ttl_s``
    adds ``EX ttl`` to SET, ADD (``SET NX``) and REPLACE (``SET XX``).

    With ``cluster=True`` (a Redis Cluster node), a ``-MOVED`` or ``-ASK`` error reply is
    a ``MOVED`` or ``ASK`` reply instead of an ``ERROR_REPLY``, and its parsed ``Redirect``
    is appended to ``redirects``: the driver, which sends the request on, takes them from
    there in order. ``encode_asking`` writes the ASKING that must precede the request an
    ASK sends on.

    Attributes:
        protocol: 2 or 3. With 3, the caller first sends ``encode_hello``.
        push_messages: RESP3 push messages skipped.
        redirects: cluster mode: the redirects replied, oldest first, for the driver.
    """

    _pending: list[int]

    def __init__(
        self, options: CodecOptions = DEFAULT_OPTIONS, protocol: int = 2, cluster: bool = False
    ) -> None:
        if protocol not in (2, 3):
            raise ValueError(f"RESP protocol must be 2 or 3, not {protocol!r}")
        # The pending FIFO: codes from ``_head`` on are announced and not yet answered.
        super().__init__(options, [])
        self.protocol = protocol
        self.push_messages = 0
        self.redirects: list[Redirect] = []
        self._cluster = cluster
        self._reader = hiredis.Reader(notEnoughData=_INCOMPLETE)
        self._skip_pushes = protocol == 3
        self._null_nbytes = 3 if protocol == 3 else 5
        self._bulk_sizes: dict[int, int] = {}  # value length -> a bulk string's wire bytes
        self._unparsed = 0  # bytes fed since the last complete reply
        self._receive = self._feed_reader
        self._build_replies()
        self._encoders: list[_Encoder] = self._encoder_table()
        self._handlers: list[_Handler] = self._handler_table()
        self.set_ttl(options.ttl_s)

    def set_ttl(self, ttl_s: int) -> None:
        """Send ``EX ttl_s`` with the SETs encoded from now on (0: none)."""
        self._build_templates(ttl_s)
        # What encode_many reads, in one attribute.
        self._batch = (
            self._pending,
            self._encoders,
            self._get_heads,
            self._set_heads,
            self._value_lines,
            self._batch_set_tail,
        )

    def _build_templates(self, ttl_s: int) -> None:
        expiry = _bulk(b"EX") + _bulk(ttl_s) if ttl_s else b""
        extra = 2 if ttl_s else 0

        def store_head(argc: int) -> bytes:
            return b"*%d\r\n$3\r\nSET\r\n$%%d\r\n%%b\r\n$%%d\r\n" % (argc + extra)

        self._set_head = store_head(3)
        self._set_tail = b"\r\n" + expiry
        self._batch_set_tail = self._set_tail[:-2]  # encode_many's: the final CRLF comes later
        # encode_many's pieces: a head per key length (``*N ... $len\r\n``) and a value
        # length line (``\r\n$len\r\n``) per value length.
        self._set_head_template = b"\r\n*%d\r\n$3\r\nSET\r\n$%%d\r\n" % (3 + extra)
        self._get_heads: dict[int, bytes] = {}
        self._set_heads: dict[int, bytes] = {}
        self._del_heads: dict[int, bytes] = {}
        self._incr_heads: dict[int, bytes] = {}
        self._value_lines: dict[int, bytes] = {}
        self._add_head = store_head(4)
        self._add_tail = b"\r\n" + _bulk(b"NX") + expiry
        self._replace_tail = b"\r\n" + _bulk(b"XX") + expiry

    def _build_replies(self) -> None:
        null = self._null_nbytes
        self._stored = Reply(ReplyKind.STORED, 5)  # +OK\r\n
        self._not_stored = Reply(ReplyKind.NOT_STORED, null)  # SET NX/XX refused: null
        self._miss = Reply(_MISS, null)
        self._deleted = Reply(ReplyKind.DELETED, 4)  # :1\r\n
        self._not_found = Reply(ReplyKind.NOT_FOUND, 4)  # :0\r\n
        self._touched = Reply(ReplyKind.TOUCHED, 4)
        self._pong = Reply(ReplyKind.OK, 7)  # +PONG\r\n
        self._ok = Reply(ReplyKind.OK, 5)
        self._hit_cache: dict[int, Reply] = {}

    def _encoder_table(self) -> list[_Encoder]:
        encoders: dict[Op, _Encoder] = {
            Op.GET: self._encode_get,
            Op.SET: self._encode_set,
            Op.ADD: self._encode_add,
            Op.REPLACE: self._encode_replace,
            Op.DELETE: self._encode_delete,
            Op.INCR: self._counter_encoder(b"INCR"),
            Op.DECR: self._counter_encoder(b"DECR"),
            Op.MGET: self._encode_mget,
            Op.TOUCH: self._encode_touch,
            Op.APPEND: self._encode_append,
            Op.NOOP: self._encode_ping,
            Op.STATS: self._encode_info,
            Op.COMMAND: self._encode_command,
        }
        return op_table(encoders, "Redis has no {op} command this codec can send")

    def _handler_table(self) -> list[_Handler]:
        handlers: dict[Op, _Handler] = {
            Op.GET: self._on_get,
            Op.SET: self._on_set,
            Op.ADD: self._on_conditional_set,
            Op.REPLACE: self._on_conditional_set,
            Op.DELETE: self._on_delete,
            Op.INCR: self._on_counter,
            Op.DECR: self._on_counter,
            Op.MGET: self._on_mget,
            Op.TOUCH: self._on_touch,
            Op.APPEND: self._on_append,
            Op.NOOP: self._on_ping,
            Op.STATS: self._on_info,
            Op.COMMAND: self._on_command,
        }
        # Ops without an encoder are never pending; _SETUP and _ASKING come last (the
        # readers consume ASKING's reply before any handler would see it).
        return [handlers.get(op, self._on_setup) for op in Op] + [self._on_setup] * 2

    # -- encoding ------------------------------------------------------------------------

    def encode(self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int = 0) -> int:
        """Append one request to ``out``.

        GET, SET [EX], SET NX (ADD), SET XX (REPLACE), DEL, INCR/INCRBY, DECR/DECRBY,
        MGET, EXPIRE (TOUCH), APPEND, PING (NOOP), INFO (STATS), or the argv of COMMAND.

        Args:
            op: the request kind; GETS, CAS and PREPEND have no Redis form.
            key: the key; for ``Op.MGET`` a sequence of keys; for ``Op.COMMAND`` a
                ``Request`` rendered by ``protocols.commands.resp_template`` (written as it
                is), or the argv (a sequence of bytes or str, or one bytes string split on
                whitespace); for
                ``Op.STATS`` an optional INFO section.
            value: the value of SET/ADD/REPLACE/APPEND, else None.
            out: the caller's write buffer.
            arg: the delta of incr/decr (1 sends INCR/DECR, else INCRBY/DECRBY), the expiry
                in seconds of touch (must be > 0: ``EXPIRE key 0`` deletes the key).

        Returns:
            1. Send ``out``, then ``feed`` the server's bytes and pull ``next_reply``.

        Raises:
            ValueError: the op has no Redis form, or touch was given no positive expiry.
        """
        return self._encoders[op](key, value, out, arg)

    def encode_many(
        self, ops: Ops, keys: Keys, values: Values, start: int, stop: int, out: bytearray
    ) -> int:
        """See ``ClientCodec.encode_many``: GET, SET, DEL and INCR are written inline from
        heads cached per key length, other ops through their encoder; the ops are then
        added to the pending FIFO in one extend.

        Raises:
            ValueError: an op has no Redis form (or is TOUCH, which needs an expiry). A
                batch is all or nothing: on any exception ``out`` and the pending FIFO are
                left as they were.
        """
        if start >= stop:
            return 0
        pending, encoders, get_heads, set_heads, value_lines, set_tail = self._batch
        announced = len(pending)
        crlf = _CRLF
        # Each request is written without its final CRLF, which the next head begins with
        # (one append fewer per request); the CRLF owed before the first is removed at the
        # end. ops[flushed:i] are written but not yet pending.
        mark = len(out)
        flushed = start
        try:
            for i in range(start, stop):
                op = ops[i]
                if op == OP_GET:
                    key: Any = keys[i]
                    try:
                        out += get_heads[len(key)]
                    except KeyError:
                        out += self._head_for(get_heads, _GET_HEAD, len(key))
                    out += key
                elif op == OP_SET:
                    key = keys[i]
                    value: Any = values[i]
                    try:
                        out += set_heads[len(key)]
                    except KeyError:
                        out += self._head_for(set_heads, self._set_head_template, len(key))
                    out += key
                    try:
                        out += value_lines[len(value)]
                    except KeyError:
                        out += self._head_for(value_lines, b"\r\n$%d\r\n", len(value))
                    out += value
                    if set_tail:  # EX ttl
                        out += set_tail
                elif op == OP_DELETE:
                    key = keys[i]
                    try:
                        out += self._del_heads[len(key)]
                    except KeyError:
                        out += self._head_for(self._del_heads, _DEL_HEAD, len(key))
                    out += key
                elif op == OP_INCR:  # one step: INCR key
                    key = keys[i]
                    try:
                        out += self._incr_heads[len(key)]
                    except KeyError:
                        out += self._head_for(self._incr_heads, _INCR_HEAD, len(key))
                    out += key
                elif op == OP_COMMAND and keys[i].__class__ is Request:  # written whole
                    out += crlf
                    out += keys[i]  # type: ignore[arg-type]
                    del out[-2:]
                else:
                    # The encoder writes a whole request and pushes its own code: announce
                    # the requests before it first.
                    pending += ops[flushed:i]
                    flushed = i + 1
                    out += crlf
                    encoders[op](keys[i], values[i], out, 1 if op == OP_DECR else 0)
                    del out[-2:]
        except BaseException:
            del out[mark:]
            del pending[announced:]
            raise
        out += crlf
        del out[mark : mark + 2]
        pending += ops[flushed:stop]
        return stop - start

    def _head_for(self, table: dict[int, bytes], template: bytes, n: int) -> bytes:
        """``template % n``, cached in ``table`` while it holds fewer than the limit."""
        head = template % n
        if len(table) < _HEAD_CACHE_LIMIT:
            table[n] = head
        return head

    def encode_hello(
        self,
        out: bytearray,
        username: str | bytes | None = None,
        password: str | bytes | None = None,
    ) -> int:
        """Append ``HELLO 3 [AUTH username password]``; its map reply becomes ``OK``.

        Send it first on a RESP3 connection. Without a username, AUTH uses ``default``.

        Returns:
            1 (one reply: ``OK``, or ``ERROR_REPLY`` when refused).
        """
        if password is None:
            out += _array(b"HELLO", 3)
        else:
            out += _array(b"HELLO", 3, b"AUTH", username or b"default", password)
        self._pending.append(_SETUP)
        return 1

    def encode_auth(
        self, out: bytearray, password: str | bytes, username: str | bytes | None = None
    ) -> int:
        """Append ``AUTH [username] password``; returns 1 (``OK`` or ``ERROR_REPLY``)."""
        if username is None:
            out += _array(b"AUTH", password)
        else:
            out += _array(b"AUTH", username, password)
        self._pending.append(_SETUP)
        return 1

    def encode_asking(self, out: bytearray) -> int:
        """Append ``ASKING``: the request after it may use a slot this node is importing
        (the Redis Cluster specification, "ASK redirection").

        Its ``+OK`` is consumed by the codec, never returned: the caller sends ASKING right
        before the request an ASK redirect sends on, and its FIFO holds that request only.

        Returns:
            0 (no reply for the caller).

        Raises:
            ProtocolError: later, from the readers, when the node answers ASKING with
                anything but ``+OK`` (a node that is not in a cluster).
        """
        out += b"*1\r\n$6\r\nASKING\r\n"
        self._pending.append(_ASKING)
        return 0

    def encode_select(self, out: bytearray, db: int) -> int:
        """Append ``SELECT db``; returns 1 (``OK`` or ``ERROR_REPLY``)."""
        out += _array(b"SELECT", db)
        self._pending.append(_SETUP)
        return 1

    def _encode_get(self, key: bytes, value: object, out: bytearray, arg: int) -> int:
        out += b"*2\r\n$3\r\nGET\r\n$%d\r\n%b\r\n" % (len(key), key)
        self._pending.append(OP_GET)
        return 1

    def _encode_set(self, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        out += self._set_head % (len(key), key, len(value))
        out += value
        out += self._set_tail
        self._pending.append(OP_SET)
        return 1

    def _encode_add(self, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        return self._encode_conditional_set(key, value, out, self._add_tail)

    def _encode_replace(self, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        return self._encode_conditional_set(key, value, out, self._replace_tail)

    def _encode_conditional_set(self, key: bytes, value: Any, out: bytearray, tail: bytes) -> int:
        out += self._add_head % (len(key), key, len(value))
        out += value
        out += tail
        self._pending.append(_CONDITIONAL_SET)
        return 1

    def _encode_delete(self, key: bytes, value: object, out: bytearray, arg: int) -> int:
        out += b"*2\r\n$3\r\nDEL\r\n$%d\r\n%b\r\n" % (len(key), key)
        self._pending.append(OP_DELETE)
        return 1

    def _counter_encoder(self, command: bytes) -> _Encoder:
        """INCR or DECR: ``<command> key`` for one step, else ``<command>BY key delta``.
        Both answer an integer, handled as INCR's."""
        step = b"*2\r\n" + _bulk(command) + b"$%d\r\n%b\r\n"
        by = b"*3\r\n" + _bulk(command + b"BY") + b"$%d\r\n%b\r\n"

        def encode(key: bytes, value: object, out: bytearray, arg: int) -> int:
            if arg == 1:
                out += step % (len(key), key)
            else:
                out += by % (len(key), key) + _bulk(arg)
            self._pending.append(OP_INCR)
            return 1

        return encode

    def _encode_mget(self, keys: Any, value: object, out: bytearray, arg: int) -> int:
        out += b"*%d\r\n$4\r\nMGET\r\n" % (len(keys) + 1)
        for key in keys:
            out += b"$%d\r\n%b\r\n" % (len(key), key)
        self._pending.append(Op.MGET)
        return 1

    def _encode_touch(self, key: bytes, value: object, out: bytearray, arg: int) -> int:
        if arg <= 0:
            raise ValueError("touch needs an expiry > 0 for Redis (EXPIRE key 0 deletes the key)")
        out += _array(b"EXPIRE", key, arg)
        self._pending.append(Op.TOUCH)
        return 1

    def _encode_append(self, key: bytes, value: Any, out: bytearray, arg: int) -> int:
        out += b"*3\r\n$6\r\nAPPEND\r\n$%d\r\n%b\r\n$%d\r\n" % (len(key), key, len(value))
        out += value
        out += b"\r\n"
        self._pending.append(Op.APPEND)
        return 1

    def _encode_ping(self, key: object, value: object, out: bytearray, arg: int) -> int:
        out += b"*1\r\n$4\r\nPING\r\n"
        self._pending.append(Op.NOOP)
        return 1

    def _encode_info(self, key: bytes | None, value: object, out: bytearray, arg: int) -> int:
        out += _array(b"INFO", key) if key else b"*1\r\n$4\r\nINFO\r\n"
        self._pending.append(Op.STATS)
        return 1

    def _encode_command(self, argv: Any, value: object, out: bytearray, arg: int) -> int:
        if argv.__class__ is Request:  # rendered by protocols.commands.resp_template
            out += argv
            self._pending.append(OP_COMMAND)
            return 1
        if isinstance(argv, bytes | bytearray | memoryview):
            argv = bytes(argv).split()
        if not argv:
            raise ValueError("COMMAND needs a non-empty argv")
        out += _array(*argv)
        self._pending.append(Op.COMMAND)
        return 1

    # -- parsing -------------------------------------------------------------------------

    def _feed_reader(self, data: Value) -> None:
        # hiredis reads any buffer (its stub says str | bytes): no copy of a memoryview.
        self._reader.feed(data)  # type: ignore[arg-type]
        self._unparsed += len(data)

    def next_reply(self) -> Reply | NeedData:
        """Return the next complete reply, or ``NEED_DATA``.

        Error replies (``-ERR``, ``-WRONGTYPE`` ...) are ``ERROR_REPLY`` values, not raised.

        Raises:
            ProtocolError: hiredis rejected the stream, a reply came with no request
                pending or did not fit its request, or EOF came before all announced replies.
                ``ReplyTooLarge`` (a subclass) when more than ``max_reply_bytes`` were fed
                without completing a reply (counted per ``feed``, so the bound holds to
                within one chunk). The codec is dead afterwards.
        """
        if self._failure is not None:
            self._refuse()
        gets = self._reader.gets
        while True:
            try:
                value = gets()
            except Exception as exc:
                # hiredis raises its ProtocolError for most bad input, but TypeError for a
                # map whose key is an aggregate; any failure to parse the server's bytes
                # means the stream is broken.
                self._fail(f"RESP protocol error: {exc!r}")
            if value is _INCOMPLETE:
                return self._need_data()
            self._unparsed = 0
            if self._skip_pushes and value.__class__ is _PushNotification:
                self.push_messages += 1
                continue
            pending = self._pending
            head = self._head
            try:
                code = pending[head]
            except IndexError:
                self._fail("a reply arrived with no request pending")
            if head < _COMPACT_AT:
                self._head = head + 1
            else:
                self._advance(head + 1)
            if code == _ASKING:
                self._asked(value)
                continue
            return self._handlers[code](value)

    def read_kinds(self, kinds: list[int], sizes: list[int] | None = None) -> int:
        """See ``ClientCodec.read_kinds``: the common replies (GET hit or miss, SET ``+OK``,
        DEL and INCR integers) are classified inline, the others by ``next_reply``'s
        handlers. Their sizes are the wire bytes of what Redis sends for each (exact: a
        hit's bulk string, the null, ``+OK``, the integer); the others' ``Reply.nbytes``."""
        if self._failure is not None:
            self._refuse()
        gets = self._reader.gets
        pending = self._pending
        handlers = self._handlers
        append = kinds.append
        sized = (sizes if sizes is not None else []).append
        bulk_sizes = self._bulk_sizes
        null = self._null_nbytes
        incomplete = _INCOMPLETE
        before = len(kinds)
        head = self._head
        pushes = self.push_messages
        try:
            while True:
                try:
                    value = gets()
                except Exception as exc:
                    self._fail(f"RESP protocol error: {exc!r}")
                if value is incomplete:
                    break
                try:
                    code = pending[head]
                    head += 1
                except IndexError:
                    code = -1
                if code == OP_GET:
                    if value.__class__ is bytes:
                        append(_HIT_1)
                        n = len(value)
                        size = bulk_sizes.get(n)
                        if size is None:  # $<n>\r\n<value>\r\n
                            size = bulk_sizes[n] = n + len(str(n)) + 5
                        sized(size)
                        continue
                    if value is None:
                        append(_MISS_0)
                        sized(null)
                        continue
                elif code == OP_SET:
                    if value == b"OK":
                        append(_STORED_0)
                        sized(5)  # +OK\r\n
                        continue
                elif code == OP_DELETE:
                    if value.__class__ is int:
                        append(_DELETED_0 if value else _NOT_FOUND_0)
                        sized(len(str(value)) + 3)  # :<n>\r\n
                        continue
                elif code == OP_INCR and value.__class__ is int:
                    append(_VALUE_0)
                    sized(len(str(value)) + 3)
                    continue
                # Anything else: a push message, a reply to a rarer op, an error reply, or
                # a reply that cannot answer its request.
                if self._skip_pushes and value.__class__ is _PushNotification:
                    if code >= 0:
                        head -= 1  # a push answers no request
                    self.push_messages += 1
                    continue
                if code < 0:
                    self._fail("a reply arrived with no request pending")
                if code == _ASKING:
                    self._asked(value)
                    continue
                reply = handlers[code](value)
                append(reply.kind | reply.keys << KEYS_SHIFT)
                sized(reply.nbytes)
                if reply.kind is ReplyKind.ERROR_REPLY:
                    self.last_error = reply.payload
        finally:
            self._head = head
        if head >= _COMPACT_AT:
            self._advance(head)
        if len(kinds) != before or self.push_messages != pushes:
            self._unparsed = 0
        self._need_data()
        return len(kinds) - before

    def _need_data(self) -> NeedData:
        if self._unparsed > self._max:
            self._fail(f"reply of more than {self._max} bytes", too_large=True)
        pending = len(self._pending) - self._head
        if self._eof and (pending or self._unparsed or self._reader.has_data()):
            self._fail(f"EOF with {pending} replies pending")
        return NEED_DATA

    # -- reply handlers: one per request shape -------------------------------------------

    def _asked(self, value: Any) -> None:
        """ASKING's reply: ``+OK``, or the stream is not what a cluster node sends."""
        if value != b"OK":
            self._fail(f"ASKING answered {value!r:.60}: not a cluster node's reply")

    def _other(self, value: Any, request: str) -> Reply:
        """An error reply (in cluster mode a redirect is told apart), or a ProtocolError for
        a reply that cannot answer ``request``."""
        if value.__class__ is _ReplyError:
            text = str(value).encode()
            if self._cluster and (redirect := parse_redirect(text)) is not None:
                self.redirects.append(redirect)
                return Reply(redirect.kind, len(text) + 3, text)
            return Reply(ReplyKind.ERROR_REPLY, len(text) + 3, text)
        self._fail(f"reply {value!r:.60} cannot answer {request}")

    def _on_get(self, value: Any) -> Reply:
        if value.__class__ is bytes:
            n = len(value)
            if self._keep:
                return new_reply(Reply, (_HIT, n + len(str(n)) + 5, value, 1))
            reply = self._hit_cache.get(n)
            if reply is None:
                reply = Reply(_HIT, n + len(str(n)) + 5, None, 1)
                if len(self._hit_cache) < REPLY_CACHE_LIMIT:
                    self._hit_cache[n] = reply
            return reply
        if value is None:
            return self._miss
        return self._other(value, "GET")

    def _on_set(self, value: Any) -> Reply:
        if value == b"OK":
            return self._stored
        return self._other(value, "SET")  # a null too: only SET NX / XX may be refused

    def _on_conditional_set(self, value: Any) -> Reply:
        if value == b"OK":
            return self._stored
        if value is None:  # SET NX / SET XX whose condition failed
            return self._not_stored
        return self._other(value, "SET NX/XX")

    def _on_delete(self, value: Any) -> Reply:
        if value.__class__ is int:
            return self._deleted if value else self._not_found
        return self._other(value, "DEL")

    def _on_counter(self, value: Any) -> Reply:
        if value.__class__ is int:
            text = b"%d" % value
            return new_reply(Reply, (_VALUE, len(text) + 3, text if self._keep else None, 0))
        return self._other(value, "INCR/DECR")

    def _on_mget(self, value: Any) -> Reply:
        if value.__class__ is not list:
            return self._other(value, "MGET")
        null = self._null_nbytes
        nbytes = len(str(len(value))) + 3
        keys = 0
        for item in value:
            if item is None:
                nbytes += null
            elif item.__class__ is bytes:
                n = len(item)
                nbytes += n + len(str(n)) + 5
                keys += 1
            else:
                self._fail(f"element {item!r:.60} cannot answer MGET: not a bulk string or null")
        return new_reply(Reply, (_HIT if keys else _MISS, nbytes, None, keys))

    def _on_touch(self, value: Any) -> Reply:
        if value.__class__ is int:
            return self._touched if value else self._not_found
        return self._other(value, "EXPIRE")

    def _on_append(self, value: Any) -> Reply:
        if value.__class__ is int:  # the new length of the value
            return Reply(ReplyKind.STORED, len(str(value)) + 3)
        return self._other(value, "APPEND")

    def _on_ping(self, value: Any) -> Reply:
        if value == b"PONG":
            return self._pong
        return self._other(value, "PING")

    def _on_info(self, value: Any) -> Reply:
        if value.__class__ is bytes:
            nbytes = wire_nbytes(value, self._null_nbytes)
            return Reply(_VALUE, nbytes, info_as_stats_text(value))
        return self._other(value, "INFO")

    def _on_command(self, value: Any) -> Reply:
        """Any command's reply is ``OK`` or an error reply: commands are counted as ok or
        error (with ``keep_payload``, a bulk string or number comes back as the payload)."""
        if value == b"OK":
            return self._ok
        if value.__class__ is _ReplyError:
            return self._other(value, "a command")
        nbytes = wire_nbytes(value, self._null_nbytes)
        payload = None
        if self._keep and value is not None and not isinstance(value, list | dict):
            payload = value if value.__class__ is bytes else str(value).encode()
        return Reply(ReplyKind.OK, nbytes, payload)

    def _on_setup(self, value: Any) -> Reply:
        if value.__class__ is _ReplyError:
            return self._other(value, "connection setup")
        if value == b"OK":  # AUTH, SELECT
            return self._ok
        if isinstance(value, dict | list):  # HELLO: a map (an array under RESP2)
            return Reply(ReplyKind.OK, wire_nbytes(value, self._null_nbytes))
        return self._other(value, "connection setup")
