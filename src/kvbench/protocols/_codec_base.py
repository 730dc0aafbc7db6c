"""What every codec keeps per connection, and the calls that only touch that.

``CodecBase`` holds the pending FIFO's head, the EOF mark and the failure that kills a
codec, with ``feed``, ``feed_eof`` and ``pending`` on top of them, and ``encode_many`` and
``read_kinds`` built on ``encode`` and ``next_reply``: the Python parser is the reference
the compiled pump's scanners are fuzzed against, kept once where a pump covers the protocol
(RESP and HTTP keep an inline ``read_kinds``: RESP3, a cluster and HTTP have no pump).
``op_table`` builds the per-op tables the codecs dispatch on. Sans-IO, like the codecs.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols.base import KEYS_SHIFT, NEED_DATA, Op, ReplyKind

if TYPE_CHECKING:  # names only annotations use
    from kvbench.protocols.base import CodecOptions, Key, Keys, NeedData, Ops, Reply, Value, Values

_Handler = TypeVar("_Handler", bound=Callable[..., object])

# Replies without a payload repeat (the same kind and size): a codec keeps the ones it made
# in a table, at most this many per table.
REPLY_CACHE_LIMIT = 1024
# ``Reply(...)`` as one C call, skipping the named tuple's Python ``__new__``: a hit with its
# payload, made on the hot path.
new_reply: Callable[[type[Reply], tuple[Any, ...]], Reply] = tuple.__new__


def op_table(handlers: Mapping[Op, _Handler], refusal: str) -> list[_Handler]:
    """``handlers`` as a list indexed by op; an op without one raises ``ValueError``.

    Args:
        handlers: op -> encoder (or parser).
        refusal: the error text for the other ops; ``{op}`` is replaced by the op's name.
    """
    return [handlers.get(op) or cast(_Handler, _refusing(refusal.format(op=op.name))) for op in Op]


def _refusing(message: str) -> Callable[..., NoReturn]:
    def refuse(*args: object) -> NoReturn:
        raise ValueError(message)

    return refuse


class CodecBase(abc.ABC):
    """Per-connection state every codec keeps, and the calls that only touch it.

    A codec passes its pending FIFO to ``__init__``: a sequence with an entry per
    announced reply, read from ``_head`` (a codec that keeps a second, aligned sequence
    extends ``_compact``). It sets ``_receive``, moves the head with ``_advance`` and
    raises every ProtocolError through ``_fail`` (or records it in ``_failure``): a failed
    codec refuses every later call (``_refuse``).

    Instances keep few attributes on purpose: CPython (3.11) shares an instance's
    attribute keys, and specializes reading them, only up to 30 of them.

    Args:
        options: per-connection settings (``keep_payload`` and ``max_reply_bytes`` here).
        pending: the pending FIFO.
    """

    # Drop the answered entries of the pending FIFO once at least this many are answered
    # and they are at least half of it: amortized O(1) per reply, bounded memory.
    COMPACT_AT = 1024
    # Buffers the bytes ``feed`` accepted. Each codec sets it in ``__init__``, to its
    # buffer's own ``feed`` where it can: a read then costs no call more than that.
    _receive: Callable[[Value], None]

    def __init__(self, options: CodecOptions, pending: list[int] | bytearray) -> None:
        self._keep = options.keep_payload
        self._max = options.max_reply_bytes
        self._eof = False
        self._failure: str | None = None
        self._pending = pending
        self._head = 0
        # The latest error reply's text (SERVER_ERROR ...), for ``read_kinds`` callers,
        # which get only its kind: a refused write is shown with the server's own words.
        self.last_error: bytes | None = None

    @abc.abstractmethod
    def encode(self, op: Op, key: Key, value: Value | None, out: bytearray, arg: int = 0) -> int:
        """See ``ClientCodec.encode``."""

    @abc.abstractmethod
    def next_reply(self) -> Reply | NeedData:
        """See ``ClientCodec.next_reply``."""

    @property
    def closing(self) -> bool:
        """Only HTTP announces a close; every other protocol keeps connections open."""
        return False

    def feed(self, data: Value) -> None:
        """Buffer bytes received from the server; then pull replies until ``NEED_DATA``.

        Raises:
            ProtocolError: the codec failed earlier, or ``feed_eof`` was called (which
                kills the codec too).
        """
        if self._failure is not None:
            self._refuse()
        if self._eof:
            self._fail("data fed after EOF")
        self._receive(data)

    def feed_eof(self) -> None:
        """Mark the end of the stream: a reply cut short or still owed then raises."""
        self._eof = True

    def pending(self) -> int:
        """How many announced replies have not been returned yet."""
        return len(self._pending) - self._head

    def encode_many(
        self, ops: Ops, keys: Keys, values: Values, start: int, stop: int, out: bytearray
    ) -> int:
        """See ``ClientCodec.encode_many``: here one ``encode`` per request."""
        encode = self.encode
        for i in range(start, stop):
            op = ops[i]
            step = 1 if op in (Op.INCR, Op.DECR) else 0
            # Plain int ops, as the engine passes them: every encoder indexes by int.
            encode(op, keys[i], values[i], out, step)  # type: ignore[arg-type]
        return stop - start

    def read_kinds(self, kinds: list[int], sizes: list[int] | None = None) -> int:
        """See ``ClientCodec.read_kinds``: here one ``next_reply`` per reply."""
        count = 0
        next_reply = self.next_reply
        append = kinds.append
        sized = (sizes if sizes is not None else []).append
        while (reply := next_reply()) is not NEED_DATA:
            append(reply.kind | reply.keys << KEYS_SHIFT)
            sized(reply.nbytes)
            if reply.kind is ReplyKind.ERROR_REPLY:
                self.last_error = reply.payload
            count += 1
        return count

    def _advance(self, head: int) -> None:
        """Move the FIFO head to ``head``, dropping the answered prefix now and then."""
        if head >= self.COMPACT_AT and head * 2 >= len(self._pending):
            self._compact(head)
            head = 0
        self._head = head

    def _compact(self, head: int) -> None:
        """Drop the first ``head`` (answered) entries of the pending FIFO."""
        del self._pending[:head]

    def _fail(self, message: str, too_large: bool = False) -> NoReturn:
        """Kill the codec and raise ``ProtocolError`` (``ReplyTooLarge`` if ``too_large``)."""
        self._failure = message
        raise (ReplyTooLarge if too_large else ProtocolError)(message)

    def _refuse(self) -> NoReturn:
        raise ProtocolError(f"codec unusable after an earlier error: {self._failure}")
