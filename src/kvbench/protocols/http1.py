"""HTTP/1.1 client codec for memc-style gateways: memcached behind nginx's memc module.

Sans-IO: no sockets, no asyncio, no clock. Every op is one keep-alive ``GET`` with the
memcached command in the query string, the way the memc README's third synopsis sets a
location up (``set $memc_cmd $arg_cmd; set $memc_key $arg_key; set $memc_value
$arg_val;``). Responses are framed per RFC 9112 (status line, header fields, then a
Content-Length, chunked or close-delimited body) by ``_http_response``; their status codes
become reply kinds as the memc README documents them per command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols._codec_base import REPLY_CACHE_LIMIT, CodecBase, op_table
from kvbench.protocols._http_response import (
    CHUNKED,
    MAX_HEAD_BYTES,
    Head,
    ResponseFramer,
    chunked_body,
    find_header,
)
from kvbench.protocols._http_url import (
    KEY_CHECK,
    KEY_SAFE,
    UNRESERVED,
    VALUE_TABLE,
    check_key,
    host_header,
    url_safe_value,
)
from kvbench.protocols._ops import OP_DECR, OP_DELETE, OP_GET, OP_INCR, OP_SET, OP_STATS
from kvbench.protocols.base import DEFAULT_OPTIONS, KEYS_SHIFT, NEED_DATA, Op, Reply, ReplyKind

if TYPE_CHECKING:  # names only annotations use
    from kvbench.protocols.base import CodecOptions, Keys, NeedData, Ops, Value, Values

# read_kinds compares the buffer in place with this many recent heads (a get's hit and miss,
# a store's answer, a delete's ...) before it parses.
_RECENT_HEADS = 6

__all__ = [
    "KEY_SAFE",
    "MAX_HEAD_BYTES",
    "UNRESERVED",
    "VALUE_TABLE",
    "HttpMemcCodec",
    "check_key",
    "host_header",
    "request_frame",
    "stats_text",
    "url_safe_value",
]

_K = ReplyKind
# The pending FIFO holds the Op value of each request, or _VERSION for ``encode_version``.
_VERSION = len(Op)
_STORES = {
    Op.SET: b"set",
    Op.ADD: b"add",
    Op.REPLACE: b"replace",
    Op.APPEND: b"append",
    Op.PREPEND: b"prepend",
}
_STORE_CODES = frozenset(int(op) for op in _STORES)
# status -> kind per request (memc README, per command). A store's 2xx is looked at again:
# memc answers ``200`` with the body ``NOT_STORED`` for a refused add/replace/append.
_GET_KINDS = {200: _K.HIT, 404: _K.MISS}
_STORE_KINDS = {201: _K.STORED, 200: _K.STORED, 404: _K.NOT_FOUND}
_DELETE_KINDS = {200: _K.DELETED, 404: _K.NOT_FOUND}
_COUNTER_KINDS = {200: _K.VALUE, 201: _K.VALUE, 404: _K.NOT_FOUND}  # memc answers incr 201
_VALUE_KINDS = {200: _K.VALUE}
_PAYLOAD_CODES = frozenset((OP_STATS, _VERSION))  # replies whose payload is always kept
# read_kinds values (``int(kind) | keys << KEYS_SHIFT``).
_ERROR_0 = int(_K.ERROR_REPLY)
_STORED_0 = int(_K.STORED)
_VALUE_0 = int(_K.VALUE)
_COMPACT_AT = CodecBase.COMPACT_AT

_Encoder = Callable[[Any, Any, bytearray, int], None]


def _kinds_for(code: int) -> dict[int, ReplyKind]:
    """The status -> kind table of the request announced as ``code``."""
    if code == OP_GET:
        return _GET_KINDS
    if code in _STORE_CODES:
        return _STORE_KINDS
    if code == OP_DELETE:
        return _DELETE_KINDS
    if code in (OP_INCR, OP_DECR):
        return _COUNTER_KINDS
    return _VALUE_KINDS  # stats, version


class HttpMemcCodec(CodecBase):
    """Client half of a memc-style HTTP gateway for one keep-alive connection.

    Requests: ``GET /PATH?cmd=get&key=K``, ``?cmd=set&key=K&val=V`` (also add, replace,
    append, prepend; ``&exptime=N`` with a ttl, ``&flags=N`` with flags), ``?cmd=delete&key=K``,
    ``?cmd=incr&key=K&val=N`` (decr), ``?cmd=stats``, ``?cmd=version``. Keys must be
    URL-safe (``check_key``); values are mapped to URL-safe bytes (``VALUE_TABLE``).

    Replies, by status: get 200 hit, 404 miss; store 201 (or another 200) stored, 200 with
    the body ``NOT_STORED`` not stored, 404 not found; delete 200 deleted, 404 not found;
    incr/decr 200/201 value, 404 not found. Every other status (5xx such as 502 and 504,
    other 4xx, 3xx) is an ``ERROR_REPLY`` whose payload is the status line.

    A response that asks to close the connection (``Connection: close``, HTTP/1.0 without
    keep-alive, a close-delimited body) is returned normally; ``closing`` is then True and
    any byte after it is a ProtocolError: the server closes, and the caller sees EOF.

    Args:
        options: keep_payload returns get bodies, incr numbers; ttl_s and flags add
            ``&exptime=`` and ``&flags=`` to stores (the location must map them to
            ``$memc_exptime``/``$memc_flags``); noreply has no HTTP form and is ignored.
        path: the gateway location, e.g. ``memc`` or ``/memc``.
        host: the ``Host`` field value (``host_header``).

    Attributes:
        server_software: the ``Server`` field of the last version response ("" before).
    """

    _pending: list[int]

    def __init__(
        self, options: CodecOptions = DEFAULT_OPTIONS, path: str = "memc", host: str = "localhost"
    ) -> None:
        super().__init__(options, [])
        self.server_software = ""
        self._framer = ResponseFramer(options.max_reply_bytes)
        self._receive = self._framer.feed
        # read_kinds' fast path: (head bytes up to the body, Head), most recent first.
        self._recent: list[tuple[bytes, Head]] = []
        self._build_templates(path, host, options)
        self._encoders = self._encoder_table()
        # status -> kind, and -> read_kinds value, per pending code.
        self._kinds = [_kinds_for(code) for code in range(_VERSION + 1)]
        self._codes = [
            {status: int(kind) | (kind is _K.HIT) << KEYS_SHIFT for status, kind in table.items()}
            for table in self._kinds
        ]
        self._replies: dict[tuple[int, int], Reply] = {}

    def _build_templates(self, path: str, host: str, options: CodecOptions) -> None:
        target, self._tail = request_frame(path, host)
        self._get_head = target + b"get&key="
        self._delete_head = target + b"delete&key="
        self._store_heads = {int(op): target + cmd + b"&key=" for op, cmd in _STORES.items()}
        self._set_head = self._store_heads[OP_SET]
        self._counter_heads = {OP_INCR: target + b"incr&key=", OP_DECR: target + b"decr&key="}
        self._stats_request = target + b"stats" + self._tail
        self._version_request = target + b"version" + self._tail
        self._flags = options.flags
        self.set_ttl(options.ttl_s)

    def set_ttl(self, ttl_s: int) -> None:
        """Send ``&exptime=ttl_s`` with the stores encoded from now on (0: none)."""
        extra = b""
        if ttl_s:
            extra += b"&exptime=%d" % ttl_s
        if self._flags:
            extra += b"&flags=%d" % self._flags
        self._store_tail = extra + self._tail

    def _encoder_table(self) -> list[_Encoder]:
        encoders: dict[Op, _Encoder] = {
            Op.GET: self._keyed_encoder(self._get_head),
            Op.DELETE: self._keyed_encoder(self._delete_head),
            Op.STATS: self._encode_stats,
        }
        for op in _STORES:
            encoders[op] = self._store_encoder(self._store_heads[op])
        for op in (Op.INCR, Op.DECR):
            encoders[op] = self._counter_encoder(self._counter_heads[op])
        return op_table(encoders, "a memc gateway has no {op} request this codec can send")

    @property
    def closing(self) -> bool:
        """True once a response said the server will close the connection after it."""
        return self._framer.closing

    # -- encoding ------------------------------------------------------------------------

    def encode(self, op: Op, key: Any, value: Value | None, out: bytearray, arg: int = 0) -> int:
        """Append one request to ``out``.

        Args:
            op: GET, SET, ADD, REPLACE, APPEND, PREPEND, DELETE, INCR, DECR or STATS.
            key: the key (URL-safe: ``check_key``); ignored by STATS.
            value: the value of a store (sent through ``VALUE_TABLE``), else None.
            out: the caller's write buffer.
            arg: the delta of incr/decr (>= 0).

        Returns:
            1. Send ``out``, then ``feed`` the server's bytes and pull ``next_reply``.

        Raises:
            ValueError: the op has no memc form (MGET, GETS, CAS, TOUCH, NOOP, COMMAND),
                the key is not URL-safe, a store has no value or a delta is negative.
                Nothing is appended then.
        """
        self._encoders[op](key, value, out, arg)
        self._pending.append(op)
        return 1

    @staticmethod
    def stored_value(value: Value) -> bytes:
        """The bytes the gateway stores for ``value`` (what a get of it returns)."""
        return url_safe_value(value)

    def encode_version(self, out: bytearray) -> int:
        """Append ``?cmd=version``; its reply is a VALUE whose payload is memcached's line.

        The response's ``Server`` field lands in ``server_software``. Returns 1.
        """
        out += self._version_request
        self._pending.append(_VERSION)
        return 1

    def encode_many(
        self, ops: Ops, keys: Keys, values: Values, start: int, stop: int, out: bytearray
    ) -> int:
        """See ``ClientCodec.encode_many``: GET, SET, DELETE and INCR (one step) are written
        inline, other ops through their encoder.

        Raises:
            ValueError: as ``encode``. A batch is all or nothing: on any exception ``out``
                and the pending FIFO are left as they were.
        """
        if start >= stop:
            return 0
        mark = len(out)
        tail, store_tail = self._tail, self._store_tail
        get_head, set_head, delete_head = self._get_head, self._set_head, self._delete_head
        incr_head = self._counter_heads[OP_INCR]
        encoders = self._encoders
        check, table = KEY_CHECK, VALUE_TABLE
        try:
            for i in range(start, stop):
                op = ops[i]
                key: Any = keys[i]
                if op > OP_INCR:  # the rarer ops check their own arguments
                    encoders[op](key, values[i], out, 1 if op == OP_DECR else 0)
                    continue
                if key.__class__ is not bytes or not key.translate(check).isalpha():
                    key = check_key(key)
                if op == OP_GET:
                    out += get_head
                    out += key
                    out += tail
                elif op == OP_SET:
                    value: Any = values[i]
                    out += set_head
                    out += key
                    out += b"&val="
                    if value.__class__ is memoryview:
                        out += value.tobytes().translate(table)
                    else:
                        out += url_safe_value(value)
                    out += store_tail
                elif op == OP_DELETE:
                    out += delete_head
                    out += key
                    out += tail
                else:
                    out += incr_head
                    out += key
                    out += b"&val=1"
                    out += tail
        except BaseException:
            del out[mark:]
            raise
        self._pending += ops[start:stop]
        return stop - start

    def _keyed_encoder(self, head: bytes) -> _Encoder:
        """GET and DELETE: the command's head, the key, the request's tail."""
        tail = self._tail

        def encode(key: Any, value: Any, out: bytearray, arg: int) -> None:
            key = check_key(key)
            out += head
            out += key
            out += tail

        return encode

    def _store_encoder(self, head: bytes) -> _Encoder:
        def encode(key: Any, value: Any, out: bytearray, arg: int) -> None:
            key = check_key(key)
            if value is None:
                raise ValueError("a store needs a value")
            out += head
            out += key
            out += b"&val="
            out += url_safe_value(value)
            out += self._store_tail

        return encode

    def _counter_encoder(self, head: bytes) -> _Encoder:
        def encode(key: Any, value: Any, out: bytearray, arg: int) -> None:
            key = check_key(key)
            if arg < 0:
                raise ValueError(f"memcached counters take deltas >= 0, not {arg}")
            out += head
            out += key
            out += b"&val=%d" % arg
            out += self._tail

        return encode

    def _encode_stats(self, key: Any, value: Any, out: bytearray, arg: int) -> None:
        out += self._stats_request

    # -- parsing -------------------------------------------------------------------------

    def feed_eof(self) -> None:
        super().feed_eof()
        self._framer.eof = True  # a close-delimited body ends here

    def next_reply(self) -> Reply | NeedData:
        """Return the next complete reply, or ``NEED_DATA``.

        Error statuses (5xx, 4xx other than a 404 the request expects, 3xx) are
        ``ERROR_REPLY`` values whose payload is the status line; they are not raised.

        Raises:
            ProtocolError: bytes that are no HTTP/1.x response, a response with no request
                pending, bytes after a response that closed the connection, or EOF before
                every announced reply. ``ReplyTooLarge`` (a subclass) when the head passes
                ``MAX_HEAD_BYTES`` or the body ``max_reply_bytes``. The codec is dead after.
        """
        if self._failure is not None:
            self._refuse()
        frame = self._next_frame()
        if frame is None:
            return NEED_DATA
        head, start, body_start, stop = frame
        index = self._head
        code = self._pending[index]
        self._head = index + 1
        if index >= _COMPACT_AT:
            self._advance(index + 1)
        return self._reply(code, head, start, body_start, stop)

    def read_kinds(self, kinds: list[int], sizes: list[int] | None = None) -> int:
        """See ``ClientCodec.read_kinds``: a response whose head is byte for byte one seen
        lately is framed in place, without parsing it again."""
        if self._failure is not None:
            self._refuse()
        append = kinds.append
        sized = (sizes if sizes is not None else []).append
        pending = self._pending
        codes = self._codes
        recent = self._recent
        framer = self._framer
        data = framer.data
        count = 0
        while True:
            # The common response inline: byte for byte a head seen (and checked) lately,
            # with Content-Length framing, keep-alive, and the body buffered. Compared in
            # place: no copy, no hash. Anything else takes _next_frame.
            pos, index = framer.pos, self._head
            for raw, head in recent:
                if data.startswith(raw, pos):
                    body_start = pos + len(raw)
                    stop = body_start + head.framing
                    break
            else:
                stop = -1
            if 0 <= stop <= len(data) and index < len(pending) and not framer.closing:
                start = pos
                framer.pos = stop
                framer.scan = 0
            else:
                frame = self._next_frame()
                if frame is None:
                    break
                head, start, body_start, stop = frame
                if head.framing >= 0 and not head.close:
                    recent.insert(0, (bytes(data[start:body_start]), head))
                    del recent[_RECENT_HEADS:]
            code = pending[index]
            self._head = index + 1
            sized(stop - start + framer.take_interim())  # (interim responses came for it)
            kind = codes[code].get(head.status, _ERROR_0)
            if kind == _STORED_0 and head.status == 200:
                kind = int(self._store_kind(body_start, stop, head))
            elif kind == _VALUE_0 and code in _PAYLOAD_CODES:
                self._reply(code, head, start, body_start, stop)  # server_software
            append(kind)
            count += 1
        if self._head >= _COMPACT_AT:
            self._advance(self._head)
        return count

    def _next_frame(self) -> tuple[Head, int, int, int] | None:
        """The next complete response, consumed: ``(head, start, body_start, stop)``."""
        framer = self._framer
        owed = len(self._pending) - self._head
        try:
            if framer.buffered():
                if framer.closing:
                    raise ProtocolError("bytes after a response that closed the connection")
                if not owed:
                    data = bytes(framer.data[framer.pos : framer.pos + 40])
                    raise ProtocolError(f"response bytes {data!r} with no request pending")
                frame = framer.frame()
                if frame is not None:
                    return frame
            if framer.eof and (framer.buffered() or owed):
                cut = " (one cut short)" if framer.buffered() else ""
                raise ProtocolError(f"EOF with {owed} replies pending{cut}")
        except ProtocolError as exc:
            self._fail(str(exc), isinstance(exc, ReplyTooLarge))
        return None

    def _store_kind(self, body_start: int, stop: int, head: Head) -> ReplyKind:
        """A store's 200: memc sends it with the body ``NOT_STORED``; other gateways' 200s
        with their own bodies count as stored."""
        if head.framing == CHUNKED:
            body = chunked_body(self._framer.data, body_start)
        else:
            body = bytes(self._framer.data[body_start : min(stop, body_start + 10)])
        return _K.NOT_STORED if body.startswith(b"NOT_STORED") else _K.STORED

    def _reply(self, code: int, head: Head, start: int, body_start: int, stop: int) -> Reply:
        status = head.status
        nbytes = stop - start + self._framer.take_interim()
        kind = self._kinds[code].get(status)
        if kind is None:
            return Reply(_K.ERROR_REPLY, nbytes, head.status_line)
        if code in _PAYLOAD_CODES:
            body = self._framer.body(head, body_start, stop)
            if code == _VERSION:
                raw = bytes(self._framer.data[start : body_start - 2])
                self.server_software = find_header(raw, b"server").decode("latin-1")
                return Reply(kind, nbytes, body)
            return Reply(kind, nbytes, stats_text(body))
        if kind is _K.STORED and status == 200:
            kind = self._store_kind(body_start, stop, head)
        keys = 1 if kind is _K.HIT else 0
        if self._keep and kind in (_K.HIT, _K.VALUE):
            body = self._framer.body(head, body_start, stop)
            return Reply(kind, nbytes, body if kind is _K.HIT else body.strip(), keys)
        reply = self._replies.get((kind, nbytes))
        if reply is None:
            reply = Reply(kind, nbytes, None, keys)
            if len(self._replies) < REPLY_CACHE_LIMIT:
                self._replies[kind, nbytes] = reply
        return reply


def request_frame(path: str, host: str) -> tuple[bytes, bytes]:
    """Every request's start, ``GET /<path>?cmd=``, and its end, `` HTTP/1.1``, the Host
    field and the empty line (the compiled pump writes its requests between the two too).

    Raises:
        ValueError: the path is not URL-safe.
    """
    location = path.lstrip("/").encode("utf-8")
    if location.translate(None, KEY_SAFE + b"%"):
        raise ValueError(f"path {path!r} is not URL-safe (percent-encode it)")
    host_bytes = host.encode("ascii") if host.isascii() else host.encode("idna")
    return b"GET /" + location + b"?cmd=", b" HTTP/1.1\r\nHost: " + host_bytes + b"\r\n\r\n"


def stats_text(body: bytes) -> bytes:
    """memcached's ``STAT name value`` lines (``END`` dropped) as ``name value`` lines."""
    return b"".join(line[5:] + b"\r\n" for line in body.split(b"\r\n") if line.startswith(b"STAT "))
