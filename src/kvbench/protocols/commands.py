"""Arbitrary commands (``--command``): templates compiled once, rendered into whole requests.

A command is a sequence of words. Each word is literal bytes, a ``KeySlot`` (the
workload's key, with optional bytes before and after it: memtier's ``__key__``) or
``DATA`` (a value: memtier's ``__data__``). ``resp_template`` and ``text_template`` check
the words against what their protocol can carry and frame, once, and return a template
whose ``render`` writes one whole request as a ``Request``: codecs append a ``Request``
as it is (``Op.COMMAND``), so the engine's send path does no per-request formatting.

Sans-IO and pure, like the codecs: no sockets, no clock, no randomness.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kvbench.protocols.base import Value


class DataSlot(enum.Enum):
    """Type of the ``DATA`` word: where a value goes (an enum of one member, like NEED_DATA)."""

    DATA = enum.auto()

    def __repr__(self) -> str:
        return "DATA"


DATA: Final = DataSlot.DATA


@dataclass(frozen=True, slots=True)
class KeySlot:
    """Where a key goes: ``prefix + key + suffix`` is one word."""

    prefix: bytes = b""
    suffix: bytes = b""


Word = bytes | KeySlot | DataSlot


class Request(bytes):
    """One command's whole request, rendered for one protocol by a template.

    ``encode(Op.COMMAND, request, ...)`` appends it unchanged; the codec only announces
    its reply.
    """

    __slots__ = ()


# Redis commands after which replies no longer answer requests one for one: the
# subscribe family and MONITOR turn the connection into a stream of pushes, SYNC/PSYNC
# into a replication stream, QUIT closes it, HELLO and RESET change its protocol, and
# CLIENT REPLY OFF/SKIP silences replies (redis.io command reference).
RESP_REFUSED: dict[bytes, str] = {
    b"subscribe": "a subscribed connection answers with pushes, not replies",
    b"psubscribe": "a subscribed connection answers with pushes, not replies",
    b"ssubscribe": "a subscribed connection answers with pushes, not replies",
    b"monitor": "MONITOR streams every command the server runs",
    b"sync": "SYNC streams the replication data set",
    b"psync": "PSYNC streams the replication data set",
    b"quit": "QUIT closes the connection",
    b"hello": "HELLO changes the connection's protocol (use ?resp=3 in the URL)",
    b"reset": "RESET changes the connection's state and protocol",
}

# memcached text commands that store a data block, and the index of the word that is
# the block's byte count (protocol.txt "Storage commands"; "Meta Set" for ms).
TEXT_STORAGE: dict[bytes, int] = {
    b"set": 4,
    b"add": 4,
    b"replace": 4,
    b"append": 4,
    b"prepend": 4,
    b"cas": 4,
    b"ms": 2,
}
# The meta commands (protocol.txt "Meta Commands"): a ``q`` flag hides their success
# replies, so a request may have none.
TEXT_META = frozenset({b"mg", b"ms", b"md", b"ma", b"me", b"mn"})
# Commands whose reply no grammar here can delimit, or that end the connection.
TEXT_REFUSED: dict[bytes, str] = {
    b"quit": "quit closes the connection",
    b"shutdown": "shutdown stops the server",
    b"watch": "watch streams log lines for as long as the connection lives",
    b"lru_crawler": "lru_crawler metadump/mgdump lines have no frame this codec knows",
}
# lru_crawler's subcommands that answer one status line.
_CRAWLER_LINE_SUBCOMMANDS = frozenset({b"crawl", b"enable", b"disable", b"sleep", b"tocrawl"})


class _Template:
    """A compiled command: constant pieces (framed once) between its key and data slots.

    Attributes:
        name: what results are kept under (``command_name``).
        keys: how many key slots ``render`` fills.
    """

    __slots__ = ("_pieces", "keys", "name")

    def __init__(self, name: str, pieces: Sequence[bytes | KeySlot | DataSlot], keys: int):
        self.name = name
        self.keys = keys
        self._pieces = tuple(pieces)

    def render(self, keys: Sequence[bytes], value: Value | None) -> Request:
        """One whole request: the key slots filled from ``keys`` in order, ``DATA`` from
        ``value``."""
        parts: list[bytes | Value] = []
        index = 0
        for piece in self._pieces:
            if piece.__class__ is bytes:
                parts.append(piece)
            elif piece is DATA:
                assert value is not None, "a DATA word needs a value"
                self._data(parts, value)
            else:
                self._key(parts, piece, keys[index])  # type: ignore[arg-type]
                index += 1
        self._end(parts, value)
        return Request(b"".join(parts))

    def _key(self, parts: list[bytes | Value], slot: KeySlot, key: bytes) -> None:
        raise NotImplementedError

    def _data(self, parts: list[bytes | Value], value: Value) -> None:
        raise NotImplementedError

    def _end(self, parts: list[bytes | Value], value: Value | None) -> None:
        """What follows the last word."""


class RespTemplate(_Template):
    """A command as RESP: an array of bulk strings (RESP "Sending commands")."""

    __slots__ = ()

    def pieces(self) -> tuple[Piece, ...]:
        """The template as the compiled pump renders it: the key's word and the value
        each one bulk string."""
        return tuple(_pieces(self._pieces, PIECE_KEY_BULK, PIECE_VALUE_BULK))

    def _key(self, parts: list[bytes | Value], slot: KeySlot, key: bytes) -> None:
        size = len(slot.prefix) + len(key) + len(slot.suffix)
        parts += (b"$%d\r\n" % size, slot.prefix, key, slot.suffix, b"\r\n")

    def _data(self, parts: list[bytes | Value], value: Value) -> None:
        parts += (b"$%d\r\n" % len(memoryview(value)), value, b"\r\n")


class TextTemplate(_Template):
    """A command as memcached text: a line of words, and the value as a data block when
    ``DATA`` is the line's byte count (protocol.txt "Commands")."""

    __slots__ = ("_block",)

    def __init__(
        self, name: str, pieces: Sequence[bytes | KeySlot | DataSlot], keys: int, block: bool
    ):
        super().__init__(name, pieces, keys)
        self._block = block

    def _key(self, parts: list[bytes | Value], slot: KeySlot, key: bytes) -> None:
        parts += (slot.prefix, key, slot.suffix)

    def _data(self, parts: list[bytes | Value], value: Value) -> None:
        parts.append(b"%d" % len(memoryview(value)))

    def _end(self, parts: list[bytes | Value], value: Value | None) -> None:
        parts.append(b"\r\n")
        if self._block:
            assert value is not None, "a DATA word needs a value"
            parts += (value, b"\r\n")

    def pieces(self) -> tuple[Piece, ...]:
        """The template as the compiled pump renders it: the key's word as it is, the
        value's size in the line, the value as the data block after it."""
        line = _pieces(self._pieces, PIECE_KEY, PIECE_VALUE_SIZE)
        block = ((PIECE_VALUE, b"", b""), b"\r\n") if self._block else ()
        return (*line, b"\r\n", *block)


RequestTemplate = RespTemplate | TextTemplate

# How the compiled pump renders a template (engine/_pump.h's PIECE_*): a piece is literal
# bytes or (kind, prefix, suffix): the key with the bytes around it, as one RESP bulk
# string or as it is; the value as one bulk string, its size in digits, or as it is.
PIECE_KEY_BULK, PIECE_VALUE_BULK, PIECE_KEY, PIECE_VALUE_SIZE, PIECE_VALUE = 1, 2, 3, 4, 5
Piece = bytes | tuple[int, bytes, bytes]


def _pieces(pieces: Sequence[bytes | KeySlot | DataSlot], key: int, value: int) -> list[Piece]:
    """A template's pieces for the compiled pump, its key slots and values of kinds
    ``key`` and ``value``."""
    out: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, KeySlot):
            out.append((key, piece.prefix, piece.suffix))
        elif piece is DATA:
            out.append((value, b"", b""))
        else:
            out.append(piece)
    return out


def command_name(words: Sequence[Word]) -> str:
    """The name results are kept under: the first word, lowercased (``hset``, ``touch``).

    Raises:
        ValueError: no words, or the first is a key or data slot.
    """
    if not words:
        raise ValueError("an empty command")
    first = words[0]
    if not isinstance(first, bytes) or not first:
        raise ValueError("the first word names the command: it cannot be __key__ or __data__")
    return first.decode("ascii", "backslashreplace").lower()


def _keys(words: Sequence[Word]) -> int:
    return sum(isinstance(word, KeySlot) for word in words)


def resp_template(words: Sequence[Word]) -> RespTemplate:
    """Compile ``words`` for RESP2/RESP3: any bytes go, as bulk strings.

    Raises:
        ValueError: no words, a slot as the name, or a command in ``RESP_REFUSED`` (or
            ``CLIENT REPLY``).
    """
    name = command_name(words)
    lowered = [word.lower() if isinstance(word, bytes) else b"" for word in words]
    reason = RESP_REFUSED.get(lowered[0])
    if lowered[:2] == [b"client", b"reply"]:
        reason = "CLIENT REPLY OFF/SKIP leaves requests without replies"
    if reason is not None:
        raise ValueError(f"{name}: {reason}")
    pieces: list[bytes | KeySlot | DataSlot] = [b"*%d\r\n" % len(words)]
    for word in words:
        if isinstance(word, bytes):
            constant = b"$%d\r\n%b\r\n" % (len(word), word)
            if pieces and isinstance(pieces[-1], bytes):
                pieces[-1] += constant
            else:
                pieces.append(constant)
        else:
            pieces.append(word)
    return RespTemplate(name, pieces, _keys(words))


def text_template(words: Sequence[Word]) -> TextTemplate:
    """Compile ``words`` for memcached's text protocol.

    A word may not hold spaces or control characters. ``DATA`` may only stand where a
    storage command's byte count goes (``set __key__ 0 0 __data__``, ``ms __key__
    __data__ T60``), and a storage command must have it there: its data block is then the
    value. ``noreply``, a meta command's ``q`` flag, and the commands in ``TEXT_REFUSED``
    are refused: a request must get exactly one reply this codec can frame.

    Raises:
        ValueError: saying which word or command and why.
    """
    name = command_name(words)
    verb: bytes = words[0]  # type: ignore[assignment]  # command_name checked it; memcached is case-sensitive
    for word in words:
        text = word if isinstance(word, bytes) else b""
        if isinstance(word, KeySlot):
            text = word.prefix + word.suffix
        if any(byte <= 0x20 or byte == 0x7F for byte in text) or word == b"":
            raise ValueError(
                f"{name}: {text!r}: memcached words hold no spaces or control characters"
            )
        if word == b"noreply":
            raise ValueError(f"{name}: noreply leaves the request without a reply to time")
    _refuse_text_command(verb, words)
    data_at = TEXT_STORAGE.get(verb, -1)
    slots = [i for i, word in enumerate(words) if word is DATA]
    if data_at >= 0:
        _check_storage_line(name, words, data_at)
    elif slots:
        raise ValueError(
            f"{name}: __data__ stands only for a storage command's byte count "
            "(set __key__ 0 0 __data__, ms __key__ __data__)"
        )
    return TextTemplate(name, _joined(words), _keys(words), data_at >= 0)


def _refuse_text_command(verb: bytes, words: Sequence[Word]) -> None:
    name = verb.decode("ascii", "backslashreplace")
    if verb == b"lru_crawler" and len(words) > 1 and words[1] in _CRAWLER_LINE_SUBCOMMANDS:
        return
    if verb in TEXT_REFUSED:
        raise ValueError(f"{name}: {TEXT_REFUSED[verb]}")
    if verb == b"stats" and list(words[1:3]) == [b"detail", b"dump"]:
        raise ValueError("stats detail dump: its PREFIX lines have no frame this codec knows")
    if verb in TEXT_META and b"q" in words[1:]:
        raise ValueError(f"{name}: the q flag hides success replies")


def _check_storage_line(name: str, words: Sequence[Word], data_at: int) -> None:
    """A storage line's numbers must parse: memcached refuses a bad line without reading
    its data block, which it then takes for a command (a second reply)."""
    if len(words) <= data_at or words[data_at] is not DATA:
        example = "ms __key__ __data__" if data_at == 2 else f"{name} __key__ 0 0 __data__"
        raise ValueError(f"{name}: put __data__ where the byte count goes ({example})")
    if sum(word is DATA for word in words) > 1:
        raise ValueError(f"{name}: one __data__ only (the byte count)")
    if data_at == 2:
        return  # ms: flags are checked by memcached, which then still reads the block
    expected = 6 if name == "cas" else 5
    if len(words) != expected:
        shape = "cas <key> <flags> <exptime> __data__ <cas unique>"
        if name != "cas":
            shape = f"{name} <key> <flags> <exptime> __data__"
        raise ValueError(f"{name}: expected {shape}")
    numbers = [(words[2], "flags"), (words[3], "exptime")]
    if name == "cas":
        numbers.append((words[5], "cas unique"))
    for word, what in numbers:
        if not isinstance(word, bytes) or not word.removeprefix(b"-").isdigit():
            raise ValueError(f"{name}: {what} must be a number, not {word!r}")
        if what != "exptime" and word.startswith(b"-"):
            raise ValueError(f"{name}: {what} must not be negative")


def _joined(words: Sequence[Word]) -> list[bytes | KeySlot | DataSlot]:
    """The line's pieces with the spaces between words: constants merged."""
    pieces: list[bytes | KeySlot | DataSlot] = []
    for index, word in enumerate(words):
        separator = b" " if index else b""
        if isinstance(word, bytes):
            if pieces and isinstance(pieces[-1], bytes):
                pieces[-1] += separator + word
            else:
                pieces.append(separator + word)
            continue
        if separator:
            if pieces and isinstance(pieces[-1], bytes):
                pieces[-1] += separator
            else:
                pieces.append(separator)
        pieces.append(word)
    return pieces
