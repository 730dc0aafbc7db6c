"""The connection driver: an asyncio.Protocol that keeps requests in flight (closed loop).

It owns the write buffer and the in-flight FIFO, and is the one place where a load run's
transport failures become counters (``conn_error``, ``timeout``) instead of exceptions;
its life (transport, codec, setup, refusals, closing) is ``Link``'s (engine/link.py).
Hot path rules: one clock read per socket read and one per write batch; requests encoded
by the codec in one call per batch and written once; replies counted in bulk (C-level list
slices and array extends), never with Python work per reply.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import repeat
from operator import sub
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

from kvbench.engine.link import Link, LinkHost, SetupWriter
from kvbench.engine.pacing import LATE_NS
from kvbench.errors import ProtocolError
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import ClientCodec

if TYPE_CHECKING:
    from kvbench.engine.fastpath import PumpFactory
    from kvbench.engine.shards import Shard
    from kvbench.workload.plan import RequestSource
    from kvbench.workload.trace_source import Lane

_now = time.monotonic_ns
_TIMEOUT = int(Outcome.TIMEOUT)
_PROTOCOL_ERROR = int(Outcome.PROTOCOL_ERROR)
_LATE = int(Outcome.LATE)
_PUMP_IDLE = 1  # Pump.received / issue: nothing could be sent
# Compact the FIFO lists once this many answered entries sit at their front.
_COMPACT_AT = 4096


class DriverHost(LinkHost, Protocol):
    """What a load connection and the open-loop dispatcher need of their worker, beyond a
    link's events: the interval cut (called on the hot path when a read crosses the
    boundary) and, while a run uses them, the compiled pumps."""

    pumps: PumpFactory | None

    def cut(self, now: int) -> None:
        """Cut every interval whose boundary ``now`` has passed."""


# ``Connection``'s arguments, in its order: what a subclass passes on (engine/redirect.py).
ConnectionArgs: TypeAlias = (
    "tuple[DriverHost, Any, Recorder, Callable[[], ClientCodec], SetupWriter | None, int, Shard]"
)


class Connection(Link):
    """One client connection of a load run, reconnected by its worker when it breaks.

    The in-flight FIFO is two lists, ``_sent_ops`` and ``_sent_ns``, read from ``_head``:
    replies come back in request order, so the n replies of a read are the n entries from
    the head, taken with one slice each. The send state (issuing, budget, the next cut,
    bytes) is the worker's ``tally``, shared with the compiled pumps; replies go into the
    worker's ``recorder``. Both are attributes here, so the hot path reads no host.

    Args:
        host: the owning worker.
        tally: the worker's send state (engine/fastpath.py).
        recorder: the worker's counters and latency arrays.
        codec_factory: builds a fresh codec for each (re)connection.
        setup: appends setup requests (AUTH/SELECT/HELLO) to a buffer; returns their count.
        pipeline: requests kept in flight.
        shard: the server this connection talks to, and its request source.
    """

    def __init__(
        self,
        host: DriverHost,
        tally: Any,
        recorder: Recorder,
        codec_factory: Callable[[], ClientCodec],
        setup: SetupWriter | None,
        pipeline: int,
        shard: Shard,
    ) -> None:
        super().__init__(host, shard.target, shard.ssl, codec_factory, setup)
        self._host: DriverHost = host
        self._tally = tally
        self._recorder = recorder
        self.shard = shard
        # Where requests come from: the shared workload, or a replay's lane of the trace.
        self.source: RequestSource | Lane = shard.source
        self.pipeline = pipeline
        self._sent_ops: list[int] = []
        self._sent_ns: list[int] = []
        # Open loop only: when each in-flight request was due (latency is measured from it).
        self._intended_ns: list[int] = []
        self.closed_loop = True
        self._head = 0
        self._codes: list[int] = []
        # The in-flight lists, index-aligned (a subclass may keep more: engine/redirect.py),
        # and what notes each batch taken from the source besides its ops (None: nothing).
        self._fifo: tuple[list[Any], ...] = (self._sent_ops, self._sent_ns, self._intended_ns)
        # (A ``RequestSource`` or a replay's ``Lane``: engine/redirect.py keeps the former.)
        self._kept: Callable[[Any, int, int], None] | None = None
        self._taken = 0  # how many requests the last ``_take`` took
        # The TTL last set on the codec from the source's chunk (None: the codec's own).
        self._ttl_set: int | None = None
        # The compiled pump (engine/fastpath.py), while the worker runs them; it then owns
        # the in-flight FIFO (closed or open loop) and the codec is only used for the setup.
        self._pump: Any = None

    # -- lifecycle -------------------------------------------------------------------

    def _became_ready(self) -> None:
        ttl = self.source.ttl_s  # a replay's chunk TTL, for this connection's new codec
        if ttl is not None:
            self._codec.set_ttl(ttl)
        self.attach_pump()

    def _transport_gone(self) -> None:
        if self._pump is not None:
            self._pump.on_stopped = None  # (a cycle: self -> pump -> self)
            self.__dict__.pop("data_received", None)  # the next transport reads here again
        self._pump = None

    def _close_announced(self) -> None:
        """HTTP ``Connection: close``: send nothing more here; reopen as soon as it closes.

        Requests already sent after the announcing reply cannot be answered: they count
        as ``conn_error`` (with HTTP pipelining off, there are none).
        """
        self._close_expected = True
        self._closed_here = True
        self.connected = False  # as Link._abort: the dispatcher sends nothing more here
        if self._transport is not None:
            self._transport.close()

    def attach_pump(self) -> None:
        """Hand the closed loop to the compiled pump, if the worker runs them.

        Called when the connection is ready (set up, nothing in flight), and by the worker
        for every ready connection when its run starts.
        """
        pumps = self._host.pumps
        if pumps is None or self._transport is None or self._pump is not None:
            return
        assert self.inflight == 0, "a pump starts with nothing in flight"
        # The shard's shared stream, or a stream of this connection's own (a replay's lane).
        own = self.source if self.source is not self.shard.source else None
        self._pump = pumps.pump(self.shard, self._transport.write, own)

    @property
    def inflight(self) -> int:
        if self._pump is not None:
            return int(self._pump.inflight)
        return len(self._sent_ops) - self._head

    def oldest_sent_ns(self) -> int | None:
        """When the oldest unanswered request was sent, or None."""
        if self._pump is not None:
            return cast(int | None, self._pump.oldest_sent_ns())
        return self._sent_ns[self._head] if self._head < len(self._sent_ns) else None

    # -- the hot path ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._watching:
            self._watch_read(data)
        pump = self._pump
        if pump is not None:
            status = pump.received(data)
            if status:
                self._pump_stopped(status)
            elif not self._watching:
                self._reads_to_pump()
            return
        now = _now()
        worker = self._host
        tally = self._tally
        if now >= tally.next_cut_ns:
            worker.cut(now)
        tally.bytes_in += len(data)
        codec = self._codec
        codes = self._codes
        try:
            codec.feed(data)
            if self._setup_left:
                self._receive_setup()
                return
            codec.read_kinds(codes)
            done = self._account(now)
        except ProtocolError as exc:
            self._protocol_broken(str(exc))
            return
        if codec.closing:  # the server said it closes after this reply
            self._close_announced()
            return
        if done:
            if self.closed_loop:
                self.issue(done)
            elif not tally.issuing or tally.budget == 0:
                worker.maybe_finished()

    def _reads_to_pump(self) -> None:
        """From now on the transport hands its reads straight to the pump (no Python frame
        per read: 2-4% of a P1 request's client CPU), which calls ``_pump_stopped`` only
        when it stops. Once the first read has shown the server did not refuse the
        connection (``_watch_read``); undone when the transport goes."""
        if self._transport is None or "data_received" in self.__dict__:
            return
        self._pump.on_stopped = self._pump_stopped
        # The instance's attribute shadows the method; the transport takes (uvloop: and
        # keeps) its protocol's data_received when given the protocol.
        self.__dict__["data_received"] = self._pump.data_received
        self._transport.set_protocol(self)

    def _pump_stopped(self, status: int) -> None:
        """The pump sent nothing: the worker may be finished, or the replies broke."""
        if status == _PUMP_IDLE:
            self._host.maybe_finished()
        else:
            self._protocol_broken(str(self._pump.error))

    def _protocol_broken(self, text: str) -> None:
        """The server's replies broke the protocol: discard the connection (reopened as a
        broken one is). Every request in flight, the ones the replies of the same read
        would have answered included (both drivers leave them unaccounted), ends as
        ``protocol_error``: once a reply cannot belong to its request, which request the
        others belonged to is not known, so none is attributed."""
        self._codes.clear()
        if self._refused:  # one error line, then the close: a refusal, counted as one
            self._abort()
            return
        self._host.note_error("protocol_error", text)
        self._fail_inflight(_PROTOCOL_ERROR)
        self._abort()

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
        if self.closed_loop:
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

    def issue(self, n: int) -> None:
        """Send up to ``n`` more requests from the worker's source, in one write."""
        worker = self._host
        if self._pump is not None:
            if self._pump.issue(n):
                worker.maybe_finished()
            return
        tally = self._tally
        if not tally.issuing or self._transport is None:
            worker.maybe_finished()
            return
        budget = tally.budget
        if budget >= 0:  # -1: no limit
            n = min(n, budget)
            if n <= 0:
                worker.maybe_finished()
                return
        out = bytearray()
        sent_ns = _now()
        try:
            self._take(n, out)
        finally:
            # A refill that raised: the requests taken before it are sent and in flight
            # (their send times beside their ops), as the pump does; the error goes on.
            taken = self._taken
            self._sent_ns.extend(repeat(sent_ns, taken))
            if budget >= 0:
                tally.budget = budget - taken
            if taken:
                tally.bytes_out += len(out)
                self._transport.write(out)
            else:  # a replay's lane at its end
                worker.maybe_finished()

    def issue_scheduled(self, intended_ns: list[int], now: int) -> None:
        """Open loop: send one request per intended time, in one write; record the lags."""
        if self._transport is None:
            return
        if self._pump is not None:  # the same, in C (the lags go into the worker's tally)
            self._pump.issue_scheduled(intended_ns)
            return
        n = len(intended_ns)
        out = bytearray()
        first = len(self._sent_ops)
        self._take(n, out)
        if self._taken != n:  # the schedule counts what a replay's lane holds
            raise RuntimeError("a scheduled request was not in its source")
        sent_ns = _now()
        self._sent_ns.extend(repeat(sent_ns, n))
        self._intended_ns.extend(intended_ns)
        recorder = self._recorder
        lags = [sent_ns - t for t in intended_ns]
        recorder.lag_ns.extend(lags)
        ops = self._sent_ops
        for i, lag in enumerate(lags):
            if lag > LATE_NS:
                recorder.counts[ops[first + i]][_LATE] += 1
        recorder.add_stat("sent", n)
        self._tally.bytes_out += len(out)
        self._transport.write(out)

    def to_open_loop(self) -> None:
        """Send on the schedule from now on (``issue_scheduled``; the worker's dispatcher).

        The intended times join the FIFO aligned with the ops: a request still listed from
        the closed loop before (the preload's, answered or not) was due when it was sent.
        """
        self._intended_ns[:] = self._sent_ns
        self.closed_loop = False

    def _take(self, n: int, out: bytearray) -> None:
        """Encode the source's next ``n`` requests into ``out``; their ops go in flight.

        ``_taken`` says how many were taken: ``n``, or, when a refill raised, those taken
        before it (``out`` then holds exactly their bytes).
        """
        source = self.source
        if source.ttl_s != self._ttl_set:  # once per batch: a chunk moved past unsent, a
            self._apply_ttl(source)  # fresh codec after a reconnect
        encode_many = self._codec.encode_many
        sent_ops = self._sent_ops
        kept = self._kept
        position = source.pos
        remaining = n
        encoded = 0  # bytes of the requests taken so far
        try:
            while remaining:
                if position == source.size:
                    source.pos = position  # a lane counts what was taken of the chunk it leaves
                    position = 0
                    if not self._next_chunk(source):
                        break  # a replay's lane at its end
                stop = min(source.size, position + remaining)
                encode_many(source.ops, source.keys, source.values, position, stop, out)
                sent_ops.extend(source.record_ops[position:stop])
                if kept is not None:
                    kept(source, position, stop)
                encoded = len(out)
                remaining -= stop - position
                position = stop
        finally:
            del out[encoded:]
            source.pos = position
            self._taken = n - remaining

    def _next_chunk(self, source: Any) -> bool:
        """Make the source's next chunk current; False when it has none (a replay's
        lane at its end). A chunk that carries its stores' TTL has it set on the codec."""
        if not source.refill():
            return False
        self._apply_ttl(source)
        return True

    def _apply_ttl(self, source: Any) -> None:
        """Set the current chunk's TTL on the codec (a replay's chunk carries one; None:
        the codec keeps its own)."""
        ttl = source.ttl_s
        if ttl is not None:
            self._codec.set_ttl(ttl)
        self._ttl_set = ttl

    def fill(self, depth: int | None = None) -> None:
        """Top the pipeline up (after connecting, or when issuing resumes), to ``depth``
        requests in flight instead of ``pipeline`` when given (the preload's).

        Not in an open loop: only the schedule sends there (a request sent here would have
        no intended time, and a reconnected connection would send a burst off schedule).
        """
        if not self.closed_loop:
            return
        missing = (self.pipeline if depth is None else depth) - self.inflight
        if missing > 0:
            self.issue(missing)

    # -- failures ------------------------------------------------------------------------

    def check_timeout(self, now: int, timeout_ns: int) -> None:
        """Count requests unanswered for ``timeout_ns`` as timeouts and drop the connection.

        Replies come back in order, so a stuck oldest request stalls all behind it; the
        connection is closed and reopened. Timed-out requests enter the latency histogram
        at the timeout; the younger ones still in flight count as ``conn_error``.
        """
        oldest = self.oldest_sent_ns()
        if oldest is None or now - oldest < timeout_ns:
            return
        recorder = self._recorder
        if self._pump is not None:
            ops, late_by = self._pump.expire(now, timeout_ns)
            for op, behind in zip(ops, memoryview(late_by).cast("q"), strict=True):
                recorder.counts[op][_TIMEOUT] += 1
                recorder.latency_ns[op].append(timeout_ns + behind)
                if not self.closed_loop:  # as below
                    recorder.service_ns[op].append(timeout_ns)
            self._abort()
            return
        while self._head < len(self._sent_ops) and now - self._sent_ns[self._head] >= timeout_ns:
            op = self._sent_ops[self._head]
            recorder.counts[op][_TIMEOUT] += 1
            if self.closed_loop:
                recorder.latency_ns[op].append(timeout_ns)
            else:  # from the intended time, as every open-loop latency
                late_by = self._sent_ns[self._head] - self._intended_ns[self._head]
                recorder.latency_ns[op].append(timeout_ns + late_by)
                recorder.service_ns[op].append(timeout_ns)
            self._head += 1
        self._abort()

    def _fail_inflight(self, outcome: int) -> None:
        counts = self._recorder.counts
        for op in self._pump.drop() if self._pump is not None else self._sent_ops[self._head :]:
            counts[op][outcome] += 1
        self._clear()

    def _clear(self) -> None:
        self._ttl_set = None  # a new transport's codec has its own TTL again
        for fifo in self._fifo:
            fifo.clear()
        self._codes.clear()
        self._head = 0
