"""Chunks of requests, and the read position a consumer keeps over them.

Every request source (the workload's ``RequestSource`` and the preload's ``FixedSource``:
workload/plan.py; a replay's ``Lane``: workload/trace_source.py; a capture's
``MonitorLane``: workload/monitor_feed.py) hands out its requests as ``Chunk`` values from
``next_chunk()``, each once: a source keeps no read position, so two consumers of one
source never see the same request. What has been read of a chunk is the consumer's:
a ``Cursor`` (the Python driver's pumps, the open loop's drops, the preload) or a
compiled ``Stream`` (engine/_pump.c), which takes the rest of a cursor's chunk through
its refill (engine/fastpath.py). The consumers that share a source's sequence share one
cursor: a server's connections share their shard's, as its compiled pumps share one
stream, so requests go out in the same order whichever driver sends them.

A chunk's columns are index-aligned lists the hot path indexes with no attribute lookup
per request: the consumer takes ``ops``, ``keys``, ``values`` once per batch and hands
them to the codec's ``encode_many`` with a start and a stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

# A packed chunk's columns (``ops, keys, key_starts, key_ends, values, value_starts,
# value_ends``: engine/_pump.c): buffers, no Python object per request.
Packed = tuple[Any, Any, Any, Any, Any, Any, Any]


@dataclass(frozen=True, slots=True)
class Chunk:
    """A run of requests, handed out once by its source.

    Attributes:
        ops: the op each request sends (``Op`` codes; ``Op.COMMAND`` for a rendered
            request); for a packed chunk its ``ops`` column (bytes-like, one per request;
            a ``--command`` as its entry's code, ``COMMAND_BASE + i``, which the compiled
            stream renders from its template).
        record_ops: the op number each request is recorded under: ``ops`` itself (the
            same object) unless they differ (``--command``s and a capture's commands are
            recorded per name: ``WorkloadPlan.op_names``). What a dropped request counts as.
        keys: each request's key; a tuple of them for ``Op.MGET``; the whole rendered
            request (``protocols.commands.Request``) for ``Op.COMMAND``. Empty when packed.
        values: each request's value (a store's; None or anything else for the rest).
            Empty when packed.
        packed: the compiled pump's packed columns, or None for a chunk of lists.
        ttl_s: the expiry of the chunk's stores (a replay's segment); None: each
            connection's codec sends its own.
        offsets_ns: a timed replay's send time of each request, from the replay's start.
    """

    ops: Sequence[int]
    record_ops: Sequence[int]
    keys: Sequence[Any]
    values: Sequence[Any]
    packed: Packed | None = None
    ttl_s: int | None = None
    offsets_ns: npt.NDArray[np.int64] | None = None

    @property
    def size(self) -> int:
        """Requests in the chunk."""
        return len(self.ops)


NO_REQUESTS = Chunk([], [], [], [])


class Held(Protocol):
    """What holds a source's chunks and has not sent all of them: a ``Cursor``, a compiled
    ``Stream``. ``size - pos`` requests of its current chunk are still to go."""

    @property
    def pos(self) -> int: ...

    @property
    def size(self) -> int: ...


class ChunkSource(Protocol):
    """What hands out requests in chunks."""

    @property
    def empty(self) -> bool:
        """No requests to draw now (a Redis Cluster master that serves none of the
        keys); a replay's lane never is, it ends instead (``next_chunk``: None)."""

    def next_chunk(self) -> Chunk | None:
        """The next chunk, or None when there is none (a replay's lane at its end)."""

    def pack(self) -> bool:
        """Hand out packed chunks from the next one on, where they can be; whether it
        will."""

    def hold(self, holder: Held) -> None:
        """``holder`` takes this source's chunks: what it has not sent is still this
        source's (a replay's lane counts it as pending)."""


class Cursor:
    """A consumer's read position over a source's chunks: the chunk being read and the
    next request of it. Shared by the consumers that share the source's sequence.

    Args:
        source: where the chunks come from (told it is held by this cursor).

    Attributes:
        chunk: the chunk being read (``NO_REQUESTS`` before the first one and after the
            source's last).
        pos: its next request.
        size: its requests.
    """

    __slots__ = ("chunk", "pos", "size", "source")

    def __init__(self, source: ChunkSource) -> None:
        self.source = source
        self.chunk = NO_REQUESTS
        self.pos = 0
        self.size = 0
        source.hold(self)

    def advance(self) -> bool:
        """Read the source's next chunk from its start (what is left of this one is
        dropped: call it at the end of a chunk).

        Returns:
            False when the source has none (a replay's lane at its end).
        """
        chunk = self.source.next_chunk()
        if chunk is None:
            self.chunk, self.pos, self.size = NO_REQUESTS, 0, 0
            return False
        self.chunk, self.pos, self.size = chunk, 0, chunk.size
        return True

    def restart(self) -> None:
        """Drop the rest of the chunk: the next request starts a fresh one (a Redis
        Cluster slot moved, and the source draws other keys now)."""
        self.chunk, self.pos, self.size = NO_REQUESTS, 0, 0

    def skip(self, n: int) -> list[int]:
        """Take the next ``n`` requests unsent (the open loop's dropped ones).

        Returns:
            What each is recorded under (``Chunk.record_ops``).

        Raises:
            RuntimeError: the source ran out first (a schedule counts what it holds).
        """
        ops: list[int] = []
        while len(ops) < n:
            if self.pos == self.size and not self.advance():
                raise RuntimeError("a skipped request was not in its source")
            stop = min(self.size, self.pos + n - len(ops))
            ops.extend(self.chunk.record_ops[self.pos : stop])
            self.pos = stop
        return ops
