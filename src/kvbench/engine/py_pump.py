"""The Python driver's pump: the compiled ``Pump``'s interface, over the Python codecs.

A ``Connection`` (engine/connection.py) holds one pump and hands it every read and every
send; which pump it is, it never asks. ``engine/_pump.c`` is the compiled one (memcached
text, binary and meta, RESP2 and RESP3, fed by a shared ``Stream``); ``PyPump`` here does
the same for everything else (HTTP, Redis Cluster, ``--command``, any
build without the extension) and for every connection until its run starts (the setup
and the preload). Same methods, same results:

- ``received(data)`` accounts the replies of one read and sends as many new requests in
  one write (closed loop); returns ``OK``, ``IDLE`` (nothing could be sent: the worker
  may be finished) or ``ERROR`` (the replies broke the protocol: ``error`` says how, and
  none of the read's replies is accounted). ``data_received(data)`` is the same as the
  transport's read callback: a non-zero status goes to ``on_stopped``. The Python pump
  adds one status the C one never returns, ``CLOSING``: an HTTP server said it closes
  after this reply.
- ``issue(n)``, ``issue_scheduled(intended_ns)``: send, closed loop or on a schedule.
- ``expire(now, timeout_ns)``, ``drop()``, ``inflight``, ``oldest_sent_ns()``: the FIFO.

The in-flight FIFO is two lists, ``_sent_ops`` and ``_sent_ns`` (and an open loop's
``_intended_ns``), read from ``_head``: replies come back in request order, so the n
replies of a read are the n entries from the head, taken with one slice each. Hot path
rules: one clock read per socket read and one per write batch; requests encoded by the
codec in one call per batch and written once; replies counted in bulk (C-level list
slices and array extends), never with Python work per reply. Unlike the C pump, which
buffers its replies in the tally until the worker drains them, this one writes them
straight into the recorder (the same arrays the drain fills).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from itertools import groupby, repeat
from operator import sub
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kvbench.engine.clock import NEVER
from kvbench.engine.pacing import LATE_NS
from kvbench.errors import ProtocolError
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import ClientCodec

if TYPE_CHECKING:
    from kvbench.engine._pump import Pump, Tally
    from kvbench.engine.shards import Shard
    from kvbench.workload.chunk import Chunk, Cursor

_now = time.monotonic_ns
_LATE = int(Outcome.LATE)
# Compact the FIFO lists once this many answered entries sit at their front.
_COMPACT_AT = 4096

# received() / issue() results, as the compiled pump's (engine/_pump.c), and one of its own.
OK = 0
IDLE = 1  # nothing could be sent: the worker may be finished
ERROR = 2  # the replies broke the protocol (``error``)
CLOSING = 3  # the server said it closes after this reply (HTTP ``Connection: close``)

# The transport's write (None: no transport, nothing is sent).
Write = Callable[[Any], object]


class PyTally:
    """The worker's send state when no compiled pump runs (``_pump.Tally``'s fields).

    The Python pumps account their replies into the recorder directly, so ``take`` and
    ``take_open`` never have anything; the bytes by op are kept here, as the compiled
    tally keeps them, and taken at each interval cut.

    Attributes:
        tx: bytes of the requests written, by op (a pump adds each batch's share).
        rx_ops, rx_sizes: the op and wire bytes of each reply accounted (summed by op when
            taken: a reply costs two C-level extends per read, no Python work of its own).
    """

    def __init__(self) -> None:
        self.issuing = False
        self.budget = -1
        self.next_cut_ns = NEVER
        self.bytes_in = 0
        self.bytes_out = 0
        self.pending = 0
        self.tx: list[int] = []
        self.rx_ops = array("q")
        self.rx_sizes = array("q")

    def take(self) -> tuple[bytes, bytes, bytes]:
        return b"", b"", b""

    def take_open(self) -> tuple[bytes, bytes, bytes, int]:
        return b"", b"", b"", 0

    def take_said(self) -> tuple[int, bytes] | None:
        """The compiled tally's first error reply; the Python driver keeps no words."""
        return None

    def add_tx(self, op: int, nbytes: int) -> None:
        """Count ``nbytes`` of requests written as ``op``'s."""
        tx = self.tx
        if op >= len(tx):
            tx.extend(repeat(0, op + 1 - len(tx)))
        tx[op] += nbytes

    def take_bytes(self) -> tuple[bytes, bytes]:
        """As ``_pump.Tally.take_bytes``: the bytes by op since the last take (native int64
        bytes, an entry per op up to the highest seen): of the requests written, and of
        the replies accounted. Emptied."""
        ops = np.frombuffer(self.rx_ops, dtype=np.int64)
        sizes = np.frombuffer(self.rx_sizes, dtype=np.int64)
        rx_by_op = np.bincount(ops, weights=sizes)  # (float64: exact below 2**53 bytes)
        width = max(len(self.tx), len(rx_by_op))
        tx = np.zeros(width, np.int64)
        tx[: len(self.tx)] = self.tx
        rx = np.zeros(width, np.int64)
        rx[: len(rx_by_op)] = rx_by_op
        self.tx = []
        del ops, sizes  # (views of the arrays, which cannot shrink while they exist)
        del self.rx_ops[:], self.rx_sizes[:]
        return tx.tobytes(), rx.tobytes()


class Pumped(Protocol):
    """What a pump factory needs of the connection it makes a pump for."""

    shard: Shard
    cursor: Cursor
    # The ttl its stores carry, drawn for it from a --ttl range; None: the run's.
    ttl_s: int | None

    def python_driver(self, write: Write | None) -> PyPump:
        """A Python pump for this connection's current transport."""


class PumpMaker(Protocol):
    """Makes each connection's pump (engine/fastpath.py ``PumpFactory``: compiled ones;
    ``PyPumps``: Python ones), and skips unsent requests of a cursor's source (the open
    loop's dropped ones) where its pumps hold them."""

    def pump(self, conn: Pumped, write: Write) -> Pump | PyPump:
        """A pump for ``conn`` writing with ``write`` (its transport's)."""

    def skip(self, cursor: Cursor, n: int) -> bytes | None:
        """The ops of the next ``n`` requests of ``cursor``'s source, taken unsent; None
        when the cursor itself holds them."""

    def completed(self, shard: Shard) -> int:
        """Replies this maker's pumps received from ``shard`` since the last call and did
        not count in ``shard.completed`` themselves."""

    def restart(self, shard: Shard) -> None:
        """``shard``'s source draws other keys from now on (``Shard.rekey``): drop what
        this maker's pumps hold of its chunk."""


class PyPumps:
    """The Python driver's ``PumpMaker``: each connection makes its own (a Redis Cluster
    connection a ``ClusterPyPump``: engine/redirect.py), and the cursors hold their
    requests."""

    def pump(self, conn: Pumped, write: Write) -> PyPump:
        return conn.python_driver(write)

    def skip(self, cursor: Cursor, n: int) -> bytes | None:
        return None

    def completed(self, shard: Shard) -> int:
        return 0  # (a Python pump counts its replies in ``shard.completed``)

    def restart(self, shard: Shard) -> None:
        pass  # (a Python pump reads the shard's cursor, which the rekey restarted)


class PyPump:
    """One connection's closed or open loop in Python: the compiled ``Pump``'s interface.

    Args:
        tally: the worker's send state (issuing, budget, next cut, byte counts).
        recorder: the worker's counters and reply arrays.
        codec: the connection's codec (fresh per transport).
        cursor: where requests come from, and how far they were read (the shard's
            workload's, shared by its connections; a replay's lane's; the preload's).
        shard: the server (its ``completed`` counts the replies).
        write: the transport's write; None: no transport (nothing is sent).
        on_cut: called with ``now`` when a read arrives past the tally's next cut.
        open_loop: requests are sent only by ``issue_scheduled``, latency is measured
            from their intended times, and a send more than ``late_ns`` behind is late.
    """

    def __init__(
        self,
        tally: Tally | PyTally,
        recorder: Recorder,
        codec: ClientCodec,
        cursor: Cursor,
        shard: Shard,
        write: Write | None,
        on_cut: Callable[[int], None],
        open_loop: bool = False,
        late_ns: int = LATE_NS,
    ) -> None:
        self._tally = tally
        self._recorder = recorder
        self._codec = codec
        self.cursor = cursor
        self.shard = shard
        self._write = write
        self._on_cut = on_cut
        self.open_loop = open_loop
        self._late_ns = late_ns
        self.error: str | None = None
        self.on_stopped: Callable[[int], object] | None = None
        self._sent_ops: list[int] = []
        self._sent_ns: list[int] = []
        # Open loop only: when each in-flight request was due (latency is measured from it).
        self._intended_ns: list[int] = []
        self._head = 0
        self._codes: list[int] = []
        self._sizes: list[int] = []  # the wire bytes of each reply in ``_codes``
        # Where the bytes by op are counted: a Python run's tally (a compiled run's pumps
        # count their own; its Python pumps send and read nothing).
        self._bytes_tally = tally if isinstance(tally, PyTally) else None
        # The in-flight lists, index-aligned (a subclass may keep more: engine/redirect.py),
        # and what notes each batch taken from the source besides its ops (None: nothing).
        self._fifo: tuple[list[Any], ...] = (self._sent_ops, self._sent_ns, self._intended_ns)
        self._kept: Callable[[Chunk, int, int], None] | None = None
        self._taken = 0  # how many requests the last ``_take`` took
        # The TTL last set on the codec from the source's chunk (None: the codec's own).
        self._ttl_set: int | None = None
        self._status = OK  # what ``received`` returns

    @property
    def inflight(self) -> int:
        """Requests sent and not answered."""
        return len(self._sent_ops) - self._head

    def oldest_sent_ns(self) -> int | None:
        """When the oldest unanswered request was sent, or None."""
        return self._sent_ns[self._head] if self._head < len(self._sent_ns) else None

    # -- the hot path ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        """One read: account its replies, then send as many new requests (closed loop);
        a non-zero status goes to ``on_stopped``. The transport's read callback."""
        now = _now()
        tally = self._tally
        if now >= tally.next_cut_ns:
            self._on_cut(now)
        tally.bytes_in += len(data)
        codec = self._codec
        try:
            codec.feed(data)
            codec.read_kinds(self._codes, self._sizes)
            self._count_rx()
            done = self._account(now)
        except ProtocolError as exc:
            self.error = str(exc)
            self._codes.clear()
            self._sizes.clear()
            status = ERROR
        else:
            if codec.closing:  # the server said it closes after this reply
                status = CLOSING
            elif not done:
                return
            elif not self.open_loop:
                status = self.issue(done)
                if not status:
                    return
            elif tally.issuing and tally.budget != 0:
                return
            else:  # the dispatcher sends; the worker may be finished
                status = IDLE
        stopped = self.on_stopped
        if stopped is not None:
            stopped(status)

    def received(self, data: bytes) -> int:
        """``data_received``, returning its status instead of calling ``on_stopped``."""
        stopped, self.on_stopped, self._status = self.on_stopped, self._note, OK
        try:
            self.data_received(data)
        finally:
            self.on_stopped = stopped
        return self._status

    def _note(self, status: int) -> None:
        self._status = status

    def _count_rx(self) -> None:
        """Count the wire bytes of the replies just parsed by op (each is the answer to
        the request at its place from the FIFO's head, redirects included). More replies
        than requests in flight: none is counted (``_account`` refuses them all)."""
        sizes = self._sizes
        if not sizes:
            return
        tally, head = self._bytes_tally, self._head
        if tally is not None and head + len(sizes) <= len(self._sent_ops):
            tally.rx_ops.extend(self._sent_ops[head : head + len(sizes)])
            tally.rx_sizes.extend(sizes)
        sizes.clear()

    def _account(self, now: int) -> int:
        """Hand the replies just parsed (``self._codes``) to the recorder, in bulk.

        Returns:
            How many there were.

        Raises:
            ProtocolError: more replies than requests in flight; none of them is accounted
                (which of them answers nothing this connection sent is not known).
        """
        codes = self._codes
        done = len(codes)
        if not done:
            return 0
        head = self._head
        stop = head + done
        surplus = stop - len(self._sent_ops)
        if surplus > 0:
            raise ProtocolError(f"{surplus} more replies than requests in flight")
        recorder = self._recorder
        self.shard.completed += done
        recorder.reply_ops.extend(self._sent_ops[head:stop])
        recorder.reply_codes.extend(codes)
        sent = self._sent_ns[head:stop]
        if not self.open_loop:
            recorder.reply_latency_ns.extend(map(sub, repeat(now, done), sent))
        else:
            intended = self._intended_ns[head:stop]
            recorder.reply_latency_ns.extend(map(sub, repeat(now, done), intended))
            recorder.reply_service_ns.extend(map(sub, repeat(now, done), sent))
        codes.clear()
        if stop >= _COMPACT_AT and stop * 2 >= len(self._sent_ops):
            for fifo in self._fifo:
                del fifo[:stop]
            stop = 0
        self._head = stop
        return done

    def issue(self, n: int) -> int:
        """Closed loop: send up to ``n`` more requests from the source, in one write.

        Returns:
            ``IDLE`` when none could be sent (not issuing, the budget is spent, no
            transport, a replay's lane at its end, or an open loop's pump), else ``OK``.
        """
        tally = self._tally
        write = self._write
        if not tally.issuing or write is None or self.open_loop:
            return IDLE
        budget = tally.budget
        if budget >= 0:  # -1: no limit
            n = min(n, budget)
            if n <= 0:
                return IDLE
        out = bytearray()
        sent_ns = _now()
        try:
            self._take(n, out)
        finally:
            # A refill that raised: the requests taken before it are sent and in flight
            # (their send times beside their ops), as the compiled pump does; the error
            # goes on.
            taken = self._taken
            self._sent_ns.extend(repeat(sent_ns, taken))
            if budget >= 0:
                tally.budget = budget - taken
            if taken:
                tally.bytes_out += len(out)
                write(out)
        return OK if taken else IDLE  # (none: a replay's lane at its end)

    def issue_scheduled(self, intended_ns: list[int]) -> int:
        """Open loop: send one request per intended time, in one write; record the lags
        (and count the late sends by op) in the recorder. Returns ``OK``.

        Raises:
            RuntimeError: a closed loop's pump; or the source held fewer requests (the
                schedule counts what a replay's lane holds).
        """
        if not self.open_loop:
            raise RuntimeError("issue_scheduled() on a closed-loop pump")
        write = self._write
        if write is None:
            return OK
        n = len(intended_ns)
        out = bytearray()
        first = len(self._sent_ops)
        self._take(n, out)
        if self._taken != n:
            raise RuntimeError("a scheduled request was not in its source")
        sent_ns = _now()
        self._sent_ns.extend(repeat(sent_ns, n))
        self._intended_ns.extend(intended_ns)
        recorder = self._recorder
        lags = [sent_ns - t for t in intended_ns]
        recorder.lag_ns.extend(lags)
        ops = self._sent_ops
        late_ns = self._late_ns
        for i, lag in enumerate(lags):
            if lag > late_ns:
                recorder.counts[ops[first + i]][_LATE] += 1
        recorder.add_stat("sent", n)
        self._tally.bytes_out += len(out)
        write(out)
        return OK

    def _take(self, n: int, out: bytearray) -> None:
        """Encode the cursor's next ``n`` requests into ``out``; their ops go in flight.

        ``_taken`` says how many were taken: ``n``, or, when a refill raised, those taken
        before it (``out`` then holds exactly their bytes).
        """
        cursor = self.cursor
        chunk = cursor.chunk
        if chunk.ttl_s != self._ttl_set:  # once per batch: a chunk moved past unsent, a
            self._apply_ttl(chunk.ttl_s)  # fresh codec after a reconnect
        encode_many = self._codec.encode_many
        sent_ops = self._sent_ops
        kept = self._kept
        tx = self._bytes_tally
        position = cursor.pos
        size = cursor.size
        remaining = n
        encoded = 0  # bytes of the requests taken so far
        try:
            while remaining:
                if position == size:
                    position = 0
                    if not self._next_chunk(cursor):
                        break  # a replay's lane at its end
                    chunk = cursor.chunk
                    size = cursor.size
                stop = min(size, position + remaining)
                record_ops = chunk.record_ops
                # One encode per run of one op, so each run's bytes are its op's (a chunk
                # of 10:1 gets and sets is about two runs every eleven requests).
                for op, run in groupby(record_ops[position:stop]):
                    end = position + len(list(run))
                    encode_many(chunk.ops, chunk.keys, chunk.values, position, end, out)
                    sent_ops.extend(record_ops[position:end])
                    if kept is not None:
                        kept(chunk, position, end)
                    if tx is not None:
                        tx.add_tx(op, len(out) - encoded)
                    encoded = len(out)
                    remaining -= end - position
                    position = end
        finally:
            del out[encoded:]
            cursor.pos = position
            self._taken = n - remaining

    def _next_chunk(self, cursor: Cursor) -> bool:
        """Read the source's next chunk; False when it has none (a replay's lane at its
        end). A chunk that carries its stores' TTL has it set on the codec."""
        if not cursor.advance():
            return False
        self._apply_ttl(cursor.chunk.ttl_s)
        return True

    def _apply_ttl(self, ttl: int | None) -> None:
        """Set a chunk's TTL on the codec (a replay's chunk carries one; None: the codec
        keeps its own)."""
        if ttl is not None:
            self._codec.set_ttl(ttl)
        self._ttl_set = ttl

    # -- the FIFO ------------------------------------------------------------------------

    def expire(self, now: int, timeout_ns: int) -> tuple[list[int], bytes]:
        """Remove the requests at the head sent ``timeout_ns`` or more before ``now``:
        their ops, and how far behind its intended time each was sent (native int64
        bytes; 0 in a closed loop)."""
        head = stop = self._head
        sent = self._sent_ns
        while stop < len(sent) and now - sent[stop] >= timeout_ns:
            stop += 1
        if self.open_loop:
            late_by = array("q", map(sub, sent[head:stop], self._intended_ns[head:stop]))
        else:
            late_by = array("q", bytes(8 * (stop - head)))
        self._head = stop
        return self._sent_ops[head:stop], late_by.tobytes()

    def drop(self) -> list[int]:
        """Forget every request in flight; the ops that were in flight."""
        ops = self._sent_ops[self._head :]
        self._ttl_set = None  # a new transport's codec has its own TTL again
        for fifo in self._fifo:
            fifo.clear()
        self._codes.clear()
        self._head = 0
        return ops
