"""The ops as plain ints: how the engine passes them to ``encode_many`` and how the codecs'
pending FIFOs hold them. The codecs' hot loops compare against these, which is faster than
against the enum's members (``Op``, protocols/base.py)."""

from __future__ import annotations

from kvbench.protocols.base import Op

OP_GET = int(Op.GET)
OP_SET = int(Op.SET)
OP_DELETE = int(Op.DELETE)
OP_INCR = int(Op.INCR)
OP_DECR = int(Op.DECR)
OP_MGET = int(Op.MGET)
OP_STATS = int(Op.STATS)
OP_COMMAND = int(Op.COMMAND)
