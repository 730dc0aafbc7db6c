"""The receive buffer the codecs parse from: a bytearray plus a read offset.

Sans-IO: bytes go in through ``feed`` and are consumed by moving ``pos``; nothing here
reads a socket. Parsers read ``data``/``pos`` directly on their hot paths (no method call
per reply) and use ``find_line``/``take`` elsewhere. Shape after h11 ``_receivebuffer``.
"""

from __future__ import annotations

from kvbench.errors import ReplyTooLarge

CRLF = b"\r\n"


class ReceiveBuffer:
    """Unparsed bytes from the server.

    ``data[pos:]`` is what has not been consumed yet. The consumed prefix is dropped once
    per ``feed`` (not once per reply): ``del bytearray[:n]`` only moves the buffer's
    logical start in CPython, so compaction is cheap and parsing never copies the tail.

    Attributes:
        data: the buffered bytes; ``data[:pos]`` is already consumed.
        pos: read offset into ``data``; parsers advance it past each complete reply.
    """

    __slots__ = ("data", "pos")

    def __init__(self) -> None:
        self.data = bytearray()
        self.pos = 0

    def __len__(self) -> int:
        """How many bytes are buffered and not consumed yet."""
        return len(self.data) - self.pos

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        """Append received bytes, dropping the consumed prefix first.

        Args:
            chunk: bytes as read from the transport.
        """
        if self.pos:
            del self.data[: self.pos]
            self.pos = 0
        self.data += chunk

    def find_line(self, start: int, limit: int) -> int:
        """Find the CRLF ending the line that begins at ``start``.

        Args:
            start: index in ``data`` where the line begins (``pos`` or later).
            limit: the most bytes a line may take before it is too large.

        Returns:
            The index of the ``\\r`` of the line's CRLF, or -1 when it has not arrived yet;
            the caller then returns ``NEED_DATA`` and retries after the next ``feed``.

        Raises:
            ReplyTooLarge: no CRLF yet and more than ``limit`` bytes are buffered after
                ``start``, so the line can never fit.
        """
        eol = self.data.find(CRLF, start)
        if eol < 0 and len(self.data) - start > limit:
            raise ReplyTooLarge(f"no line end within {limit} bytes")
        return eol

    def take(self, nbytes: int) -> bytes:
        """Consume ``nbytes`` bytes and return them (the caller checked they are there)."""
        pos = self.pos
        self.pos = pos + nbytes
        return bytes(self.data[pos : pos + nbytes])
