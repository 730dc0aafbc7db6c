"""RESP replies of Redis list commands read as queue outcomes (LPUSH, RPOP, BRPOP).

``RespQueueCodec`` is ``RespCodec`` with one difference, for ``Op.COMMAND`` replies: an
integer (LPUSH's new list length) is ``STORED``; a bulk string (RPOP's element) or a
two-element array (BRPOP's ``[list, element]``) is ``HIT`` carrying the element as its
payload; a null (RPOP on an empty list, BRPOP timing out) is ``MISS``: the queue was
empty, which is neither an error nor a lost message. Sans-IO, like its base.
"""

from __future__ import annotations

from typing import Any

from kvbench.protocols.base import Reply, ReplyKind
from kvbench.protocols.resp import RespCodec, wire_nbytes

_STORED = ReplyKind.STORED
_HIT = ReplyKind.HIT


class RespQueueCodec(RespCodec):
    """A RESP codec whose ``Op.COMMAND`` replies are queue outcomes (see the module doc).

    Create it with ``CodecOptions(keep_payload=True)`` to get elements back: without it a
    HIT carries no payload. Every other op behaves as in ``RespCodec``.
    """

    def _on_command(self, value: Any) -> Reply:
        cls = value.__class__
        if cls is bytes:
            n = len(value)
            return Reply(_HIT, n + len(str(n)) + 5, value if self._keep else None, 1)
        if cls is int:
            return Reply(_STORED, len(str(value)) + 3)
        if value is None:
            return self._miss
        if cls is list and len(value) == 2 and value[1].__class__ is bytes:
            element = value[1]
            nbytes = wire_nbytes(value, self._null_nbytes)
            return Reply(_HIT, nbytes, element if self._keep else None, 1)
        return super()._on_command(value)
