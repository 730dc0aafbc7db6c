"""HTTP/1.1 response framing (RFC 9112): the status line and header fields, chunked bodies.

Sans-IO: ``ResponseFramer`` buffers one connection's bytes and says where each response
ends, with pure functions of bytes for heads and chunks; what a status means is the
business of ``http1.HttpMemcCodec``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from kvbench.errors import ProtocolError, ReplyTooLarge

# A status line plus header fields above this is no gateway response: h11's
# DEFAULT_MAX_INCOMPLETE_EVENT_SIZE (16 KiB). nginx's own responses take ~160 bytes.
MAX_HEAD_BYTES = 16 * 1024
# Heads repeat (same status, length and Date within a second): their parse is cached, this
# many at most before the cache starts over.
_HEAD_CACHE_LIMIT = 256
_HEAD_END = b"\r\n\r\n"
_PREFIX = b"HTTP/1."
# Body framing of a response (``Head.framing``); a value >= 0 is the Content-Length.
CHUNKED = -1
UNTIL_EOF = -2  # close-delimited (RFC 9112 section 6.3, rule 8)

# RFC 9112 section 4: HTTP-version SP status-code SP [reason-phrase] CRLF. A missing SP
# before an empty reason is tolerated, as most clients do.
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [^\r\n]*)?\r\n")
# RFC 9110 section 5.1 (field-name is a token) and 5.5 (no CR or LF in a value); obs-fold
# (a line starting with whitespace) is rejected, as RFC 9112 section 5.2 allows.
_FIELD_LINES = re.compile(rb"(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\r\n]*\r\n)*")
# The fields that decide framing and keep-alive, found in the lower-cased head.
_FRAMING_FIELDS = re.compile(
    rb"\r\n(content-length|transfer-encoding|connection):[ \t]*([^\r\n]*?)[ \t]*(?=\r\n)"
)
# RFC 9112 section 7.1: chunk-size [chunk-ext] CRLF; 16 hex digits hold any 64-bit size.
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?")
# A chunk-size line or trailer field longer than this is no answer from a gateway.
MAX_CHUNK_LINE_BYTES = 4096
# Content-Length digits beyond this cannot be a size anyone buffers (and int() of thousands
# of digits is slow).
_MAX_LENGTH_DIGITS = 18


class Head(NamedTuple):
    """What a response's status line and header fields say.

    Attributes:
        status: the status code.
        framing: the Content-Length (>= 0), ``CHUNKED`` or ``UNTIL_EOF``.
        close: the server closes the connection after this response.
        status_line: the status line without its CRLF (an error reply's text).
    """

    status: int
    framing: int
    close: bool
    status_line: bytes


def parse_head(head: bytes, max_body_bytes: int) -> Head:
    """Parse a status line and header fields (``head`` ends with the last field's CRLF).

    Raises:
        ProtocolError: not a status line, a malformed field, a bad or conflicting
            Content-Length, or a 101 (this client never asks to switch protocols).
        ReplyTooLarge: the Content-Length is above ``max_body_bytes``.
    """
    match = _STATUS_LINE.match(head)
    if match is None:
        raise ProtocolError(f"not an HTTP/1.x status line: {head[:60]!r}")
    if _FIELD_LINES.fullmatch(head, match.end()) is None:
        raise ProtocolError(f"malformed header field in {head[match.end() :][:80]!r}")
    status = int(match[2])
    if status == 101:
        raise ProtocolError("101 Switching Protocols: no upgrade was asked for")
    length: int | None = None
    codings: bytes | None = None
    tokens: set[bytes] = set()
    for name, value in _FRAMING_FIELDS.findall(head.lower()):
        if name == b"connection":
            tokens.update(token.strip() for token in value.split(b","))
        elif name == b"transfer-encoding":
            codings = value if codings is None else codings + b"," + value
        else:
            length = _content_length(value, length)
    close = b"close" in tokens or (match[1] == b"0" and b"keep-alive" not in tokens)
    if status < 200 or status in (204, 304):
        framing = 0  # RFC 9112 section 6.3, rule 1: never a body
    elif codings is not None:
        # Rule 4: Transfer-Encoding wins over Content-Length; only a final "chunked" frames.
        framing = CHUNKED if codings.rsplit(b",", 1)[-1].strip() == b"chunked" else UNTIL_EOF
    elif length is not None:
        framing = length
        if length > max_body_bytes:
            raise ReplyTooLarge(f"Content-Length {length} is above {max_body_bytes} bytes")
    else:
        framing = UNTIL_EOF
    if framing == UNTIL_EOF:
        close = True
    return Head(status, framing, close, head[: match.end() - 2])


def _content_length(value: bytes, seen: int | None) -> int:
    """One Content-Length field value (a list of equal numbers is allowed: RFC 9110 8.6)."""
    for part in value.split(b","):
        part = part.strip()
        if not part.isdigit() or len(part) > _MAX_LENGTH_DIGITS:
            raise ProtocolError(f"bad Content-Length {value[:40]!r}")
        number = int(part)
        if seen is not None and number != seen:
            raise ProtocolError(f"conflicting Content-Length values {seen} and {number}")
        seen = number
    assert seen is not None  # split() gives at least one part, checked above
    return seen


def find_header(head: bytes, name: bytes) -> bytes:
    """The value of the first field called ``name`` (lower case) in ``head``, or b""."""
    at = head.lower().find(b"\r\n" + name + b":")
    if at < 0:
        return b""
    start = at + len(name) + 3
    return head[start : head.find(b"\r\n", start)].strip()


def _line_end(data: bytearray, start: int) -> int:
    """The CRLF ending the line at ``start``, -1 if not here yet; bounded."""
    eol = data.find(b"\r\n", start)
    if eol < 0 and len(data) - start > MAX_CHUNK_LINE_BYTES:
        raise ProtocolError(f"chunk line longer than {MAX_CHUNK_LINE_BYTES} bytes")
    if eol - start > MAX_CHUNK_LINE_BYTES:
        raise ProtocolError(f"chunk line longer than {MAX_CHUNK_LINE_BYTES} bytes")
    return eol


# Where scan_chunks stands in a chunked body.
IN_CHUNKS = 0
IN_TRAILER = 1  # the zero-size chunk was read
DONE = 2


def scan_chunks(
    data: bytearray, start: int, size: int, state: int, max_body_bytes: int
) -> tuple[int, int, int]:
    """Walk a chunked body from ``start`` as far as ``data`` goes.

    Args:
        data: the receive buffer.
        start: where a chunk-size line (IN_CHUNKS) or a trailer line (IN_TRAILER) begins.
        size: body bytes in the chunks before ``start``.
        state: IN_CHUNKS or IN_TRAILER.
        max_body_bytes: the bound on the body.

    Returns:
        ``(position, size, state)``: with DONE, ``position`` is just past the body (trailer
        included); else it is where to resume, with the size and state, once more bytes
        have come.

    Raises:
        ProtocolError: a bad chunk-size line, a chunk not followed by CRLF, a bad trailer
            field. ReplyTooLarge: the body grew past ``max_body_bytes``.
    """
    while state == IN_CHUNKS:
        eol = _line_end(data, start)
        if eol < 0:
            return start, size, state
        match = _CHUNK_SIZE.fullmatch(data, start, eol)
        if match is None:
            raise ProtocolError(f"bad chunk-size line {bytes(data[start:eol])[:40]!r}")
        chunk = int(match[1], 16)
        if chunk == 0:
            start, state = eol + 2, IN_TRAILER
            break
        if size + chunk > max_body_bytes:
            raise ReplyTooLarge(f"chunked body above {max_body_bytes} bytes")
        end = eol + 2 + chunk
        if len(data) < end + 2:
            return start, size, state
        if data[end : end + 2] != b"\r\n":
            raise ProtocolError("chunk data not followed by CRLF")
        start, size = end + 2, size + chunk
    while True:  # trailer fields, then an empty line (RFC 9112 section 7.1.2)
        eol = _line_end(data, start)
        if eol < 0:
            return start, size, state
        if eol == start:
            return eol + 2, size, DONE
        if _FIELD_LINES.fullmatch(data, start, eol + 2) is None:
            raise ProtocolError(f"bad trailer field {bytes(data[start:eol])[:40]!r}")
        start = eol + 2


def chunked_body(data: bytearray, start: int) -> bytes:
    """The payload of a complete chunked body at ``start`` (checked by ``scan_chunks``)."""
    parts: list[bytes] = []
    while True:
        eol = data.find(b"\r\n", start)
        match = _CHUNK_SIZE.fullmatch(data, start, eol)
        assert match is not None
        chunk = int(match[1], 16)
        if chunk == 0:
            return b"".join(parts)
        parts.append(bytes(data[eol + 2 : eol + 2 + chunk]))
        start = eol + 4 + chunk


class ResponseFramer:
    """One connection's received bytes, and where each response in them ends.

    ``data[pos:]`` is not consumed yet; ``frame`` consumes one complete final response (1xx
    interim responses are skipped) and gives its offsets into ``data``, valid until the
    next ``feed``. Parsed heads are cached by their bytes.

    Args:
        max_body_bytes: a body above this raises ``ReplyTooLarge``.

    Attributes:
        data, pos: the buffer and the read offset into it.
        scan: where the search for the current head's end resumes, from ``pos``.
        eof: the server closed its side (``feed_eof``): a close-delimited body ends.
        closing: a response said the server closes the connection after it.
        interim: the bytes of the 1xx responses consumed since the last final one was
            taken (``take_interim``): they came for the request the next one answers.
    """

    __slots__ = ("_heads", "_max", "_resume", "closing", "data", "eof", "interim", "pos", "scan")

    def __init__(self, max_body_bytes: int) -> None:
        self.data = bytearray()
        self.pos = 0
        self.scan = 0
        self.eof = False
        self.closing = False
        self.interim = 0
        # The current response's chunked body so far: (offset from pos, size, scan state).
        self._resume: tuple[int, int, int] | None = None
        self._heads: dict[bytes, Head] = {}
        self._max = max_body_bytes

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        """Append received bytes, dropping the consumed prefix first (offsets kept in
        ``scan`` and the chunk progress are from ``pos``, so they stay valid)."""
        if self.pos:
            del self.data[: self.pos]
            self.pos = 0
        self.data += chunk

    def buffered(self) -> int:
        """How many bytes are not consumed yet."""
        return len(self.data) - self.pos

    def frame(self) -> tuple[Head, int, int, int] | None:
        """Consume the next complete final response: ``(head, start, body_start, stop)``.

        Returns:
            None while the response at ``pos`` is incomplete (``eof`` ends a
            close-delimited body; other incomplete responses are the caller's to judge).

        Raises:
            ProtocolError: the bytes are no HTTP/1.x response, or its framing is broken.
                ReplyTooLarge: the head passes ``MAX_HEAD_BYTES`` or the body the bound.
        """
        data = self.data
        while True:
            pos = self.pos
            end = data.find(_HEAD_END, pos + self.scan)
            if end < 0:
                self._check_partial_head(pos)
                return None
            if end - pos > MAX_HEAD_BYTES:
                raise ReplyTooLarge(f"response head above {MAX_HEAD_BYTES} bytes")
            raw = bytes(data[pos : end + 2])
            head = self._heads.get(raw) or self._parse_head(raw)
            body_start = end + 4
            stop = self._body_stop(head, pos, body_start)
            if stop < 0:
                self.scan = end - pos
                return None
            self.pos = stop
            self.scan = 0
            if head.status >= 200:
                if head.close:
                    self.closing = True
                return head, pos, body_start, stop
            # 1xx: an interim response (100 Continue, 103 Early Hints) answers nothing.
            self.interim += stop - pos
            if len(data) == stop:
                return None

    def take_interim(self) -> int:
        """The bytes of the 1xx responses before the final one just framed (0: none),
        counted once: a request's reply is all it was sent back."""
        interim, self.interim = self.interim, 0
        return interim

    def body(self, head: Head, body_start: int, stop: int) -> bytes:
        """The payload of a response ``frame`` just gave (chunks joined)."""
        if head.framing == CHUNKED:
            return chunked_body(self.data, body_start)
        return bytes(self.data[body_start:stop])

    def _body_stop(self, head: Head, pos: int, body_start: int) -> int:
        """Where the body ends, or -1 while it is incomplete."""
        framing = head.framing
        if framing >= 0:
            stop = body_start + framing
            return stop if stop <= len(self.data) else -1
        if framing == CHUNKED:
            return self._chunked_stop(pos, body_start)
        if len(self.data) - body_start > self._max:
            raise ReplyTooLarge(f"close-delimited body above {self._max} bytes")
        return len(self.data) if self.eof else -1

    def _check_partial_head(self, pos: int) -> None:
        data = self.data
        buffered = len(data) - pos
        prefix = min(buffered, len(_PREFIX))
        if data[pos : pos + prefix] != _PREFIX[:prefix]:
            raise ProtocolError(f"not an HTTP/1.x response: {bytes(data[pos : pos + 40])!r}")
        if buffered > MAX_HEAD_BYTES:
            raise ReplyTooLarge(f"response head above {MAX_HEAD_BYTES} bytes")
        self.scan = max(0, buffered - 3)

    def _parse_head(self, raw: bytes) -> Head:
        head = parse_head(raw, self._max)
        if len(self._heads) >= _HEAD_CACHE_LIMIT:
            self._heads.clear()
        self._heads[raw] = head
        return head

    def _chunked_stop(self, pos: int, body_start: int) -> int:
        if self._resume is None:
            at, size, state = body_start, 0, IN_CHUNKS
        else:
            at, size, state = self._resume
            at += pos
        at, size, state = scan_chunks(self.data, at, size, state, self._max)
        if state != DONE:
            self._resume = (at - pos, size, state)
            return -1
        self._resume = None
        return at
