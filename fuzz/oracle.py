"""The oracle every fuzz harness here checks: replies or ProtocolError, nothing else.

``check`` feeds a server's byte stream to a codec in pieces, then EOF, pulling replies with
``next_reply`` (or codes with ``read_kinds``). Anything but ``Reply`` values, ``NEED_DATA``
or a ``ProtocolError`` fails the run, and so does a codec that answers after raising one.
Not a harness itself: the ``fuzz_*.py`` files import it (run them from the repository root,
``python fuzz/fuzz_<codec>.py``, so this folder is on the import path).
"""

from __future__ import annotations

from kvbench.errors import ProtocolError
from kvbench.protocols.base import NEED_DATA, ClientCodec, Reply


def check(
    codec: ClientCodec, stream: bytes, step: int, batch: bool = False, exact_nbytes: bool = True
) -> int:
    """Feed ``stream`` in ``step``-byte pieces, then EOF; return the replies parsed.

    Args:
        batch: pull with ``read_kinds`` instead of ``next_reply``.
        exact_nbytes: every reply took bytes (not RESP's, whose sizes are estimates).

    Raises:
        AssertionError: the codec returned anything but replies, more replies than were
            announced, a reply of no bytes, or answered after a ProtocolError.
    """
    announced = codec.pending()
    count = 0
    try:
        for start in range(0, len(stream), step):
            codec.feed(stream[start : start + step])
            count += _drain(codec, batch, exact_nbytes)
        codec.feed_eof()
        count += _drain(codec, batch, exact_nbytes)
    except ProtocolError:
        for call in (codec.next_reply, lambda: codec.read_kinds([]), lambda: codec.feed(b"x")):
            try:
                call()
            except ProtocolError:
                continue
            raise AssertionError("the codec answered after a ProtocolError") from None
    if count > announced:
        raise AssertionError(f"{count} replies to {announced} requests")
    return count


def _drain(codec: ClientCodec, batch: bool, exact_nbytes: bool) -> int:
    if batch:
        kinds: list[int] = []
        count = codec.read_kinds(kinds)
        if count != len(kinds) or not all(isinstance(kind, int) for kind in kinds):
            raise AssertionError(f"read_kinds returned {count} and appended {kinds!r}")
        return count
    count = 0
    while (reply := codec.next_reply()) is not NEED_DATA:
        if not isinstance(reply, Reply) or (exact_nbytes and reply.nbytes <= 0):
            raise AssertionError(f"next_reply returned {reply!r}")
        count += 1
    return count
