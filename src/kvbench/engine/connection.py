"""The connection driver: an asyncio.Protocol that keeps requests in flight through its pump.

A ``Connection`` is the one place where a load run's transport failures become counters
(``conn_error``, ``timeout``) instead of exceptions; its life (transport, codec, setup,
refusals, closing) is ``Link``'s (engine/link.py). What it sends and how replies are
accounted is its pump's: the compiled ``Pump`` or the Python ``PyPump``, one interface
(engine/fastpath.py says which a run uses); the connection never asks which. Once the first
read has shown the server did not refuse the connection, the transport hands its reads
to the pump itself (``PumpReader``): no Python frame of the connection's per read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias

from kvbench.engine.link import Link, LinkHost, SetupWriter
from kvbench.engine.py_pump import CLOSING, IDLE, PumpMaker, PyPump, PyTally, Write
from kvbench.errors import ProtocolError
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import ClientCodec

if TYPE_CHECKING:
    from kvbench.engine._pump import Pump, Tally
    from kvbench.engine.shards import Shard
    from kvbench.workload.chunk import Cursor

_now = time.monotonic_ns
_TIMEOUT = int(Outcome.TIMEOUT)
_PROTOCOL_ERROR = int(Outcome.PROTOCOL_ERROR)


class DriverHost(LinkHost, Protocol):
    """What a load connection and the open-loop dispatcher need of their worker, beyond a
    link's events: the interval cut (called on the hot path when a read crosses the
    boundary) and the maker of the connections' pumps."""

    pumps: PumpMaker

    def cut(self, now: int) -> None:
        """Cut every interval whose boundary ``now`` has passed."""


# ``Connection``'s arguments, in its order: what a subclass passes on (engine/redirect.py).
ConnectionArgs: TypeAlias = (
    "tuple[DriverHost, Tally | PyTally, Recorder, Callable[[], ClientCodec], SetupWriter | None,"
    " int, Shard]"
)

# What a Python pump of a connection is made of, in ``PyPump``'s order (``_driver_parts``).
PumpParts: TypeAlias = (
    "tuple[Tally | PyTally, Recorder, ClientCodec, Cursor, Shard, Write | None,"
    " Callable[[int], None]]"
)


class PumpReader(asyncio.Protocol):
    """The protocol a transport reads into once its reads are the pump's: its
    ``data_received`` is the pump's own (a C method for the compiled pump), an attribute
    set once when the reader is made, so the event loop calls the pump with no Python
    frame between (2-4% of a P1 request's client CPU); the other events are the
    connection's. ``transport.set_protocol(reader)`` hands the reads over: whether the loop
    takes the attribute then (uvloop) or at every read (asyncio), it is the pump's.
    """

    __slots__ = ("_conn", "data_received")

    def __init__(self, conn: Connection, data_received: Callable[[bytes], object]) -> None:
        self.data_received = data_received  # type: ignore[assignment, method-assign]
        self._conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return self._conn.eof_received()

    def pause_writing(self) -> None:
        self._conn.pause_writing()

    def resume_writing(self) -> None:
        self._conn.resume_writing()


class Connection(Link):
    """One client connection of a load run, reconnected by its worker when it breaks.

    Its ``pump`` keeps the requests in flight: a Python one from the moment a transport
    is made (it reads the setup's codec), then the worker's (``host.pumps``) once the
    connection is ready (``attach``). The send state (issuing, budget, the next cut,
    bytes) is the worker's ``tally``, shared with the compiled pumps; replies go into the
    worker's ``recorder``.

    Args:
        host: the owning worker.
        tally: the worker's send state (engine/fastpath.py).
        recorder: the worker's counters and latency arrays.
        codec_factory: builds a fresh codec for each (re)connection.
        setup: appends setup requests (AUTH/SELECT/HELLO) to a buffer; returns their count.
        pipeline: requests kept in flight.
        shard: the server this connection talks to, and its request source (read
            through the shard's cursor, shared by its connections).
    """

    def __init__(
        self,
        host: DriverHost,
        tally: Tally | PyTally,
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
        # Where requests come from: the shared workload's cursor, or a replay lane's.
        self.cursor: Cursor = shard.cursor
        # The ttl its stores carry when it drew one from a --ttl range (its codec's,
        # engine/codec_choice.py; a compiled pump is given it); None: the run's.
        self.ttl_s: int | None = None
        self.pipeline = pipeline
        self.closed_loop = True
        # The transport's reader once the reads are the pump's (None: they are ours).
        self._reader: PumpReader | None = None
        # No transport yet: a pump that sends nothing.
        self.pump: Pump | PyPump = self.python_driver(None)
        # The compiled loop's open-loop dispatch (engine/loop_dispatch.py): told whenever
        # the pump or the state the dispatcher sends by changes (None: no one to tell).
        self.on_lane: Callable[[Connection], None] | None = None

    # -- lifecycle -------------------------------------------------------------------

    def python_driver(self, write: Write | None) -> PyPump:
        """A Python pump for the current transport (``write``: its write; None: none),
        sending from this connection's cursor with its codec."""
        return PyPump(*self._driver_parts(write), open_loop=not self.closed_loop)

    def _driver_parts(self, write: Write | None) -> PumpParts:
        """What a Python pump of this connection is made of, in ``PyPump``'s order: the
        worker's tally and recorder, this connection's codec, cursor, shard and ``write``,
        and the worker's interval cut (a cluster connection's pump takes the same)."""
        return (
            self._tally,
            self._recorder,
            self._codec,
            self.cursor,
            self.shard,
            write,
            self._host.cut,
        )

    def _clear(self) -> None:
        """A fresh Python pump for the transport just made (or none, once it is gone)."""
        transport = self._transport
        self.pump = self.python_driver(transport.write if transport is not None else None)
        self._lane_changed()

    def _lane_changed(self) -> None:
        """The pump, or whether the dispatcher may send here, changed: tell ``on_lane``."""
        if self.on_lane is not None:
            self.on_lane(self)

    @property
    def transport_open(self) -> bool:
        """A transport is there to send on (``issue_scheduled`` sends nothing without)."""
        return self._transport is not None

    def _abort(self) -> None:
        super()._abort()
        self._lane_changed()  # not connected: the dispatcher sends nothing more here

    def _became_ready(self) -> None:
        ttl = self.cursor.chunk.ttl_s  # a replay's chunk TTL, for this connection's new codec
        if ttl is not None:
            self._codec.set_ttl(ttl)
        self.attach()

    def _transport_gone(self) -> None:
        self.pump.on_stopped = None  # (a cycle: self -> pump -> self)
        self._reader = None
        self._clear()

    def _close_announced(self) -> None:
        """HTTP ``Connection: close``: send nothing more here; reopen as soon as it closes.

        Requests already sent after the announcing reply cannot be answered: they count
        as ``conn_error`` (with HTTP pipelining off, there are none).
        """
        self._close_expected = True
        self._closed_here = True
        self.connected = False  # as Link._abort: the dispatcher sends nothing more here
        self._lane_changed()
        if self._transport is not None:
            self._transport.close()

    def attach(self) -> None:
        """Take the worker's pump for this transport (``host.pumps``: compiled or Python).

        Called when the connection is ready (set up), and by the worker for every ready
        connection when its run starts and its pumps change; a pump with requests in
        flight is kept (they are its to account).
        """
        transport = self._transport
        if transport is None or self.pump.inflight:
            return
        old = self.pump
        if self._reader is not None:  # the next read shows the new pump to the transport
            old.on_stopped = None
            self._reader = None
            transport.set_protocol(self)
        self.pump = self._host.pumps.pump(self, transport.write)
        self._lane_changed()

    def take_cursor(self, cursor: Cursor) -> None:
        """Send from ``cursor`` from now on (the preload's sets, then the run's source
        again): the pump is made afresh for it, with nothing in flight."""
        self.cursor = cursor
        self.attach()

    def to_open_loop(self) -> None:
        """Send on the schedule from now on (``issue_scheduled``; the worker's dispatcher):
        the pumps made from now on are open-loop ones (the worker makes them at once)."""
        self.closed_loop = False
        self.attach()

    @property
    def inflight(self) -> int:
        return self.pump.inflight

    def oldest_sent_ns(self) -> int | None:
        """When the oldest unanswered request was sent, or None."""
        return self.pump.oldest_sent_ns()

    # -- the hot path ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        """A read before the transport hands them to the pump: the setup's replies, and
        the first reads (is the server refusing the connection?)."""
        if self._watching:
            self._watch_read(data)
        if self._setup_left:
            self._setup_read(data)
            return
        status = self.pump.received(data)
        if status:
            self._stopped(status)
        elif not self._watching:
            self._reads_to_reader()

    def _setup_read(self, data: bytes) -> None:
        """A read of the setup's replies (the codec's, as the Python pump reads them)."""
        now = _now()
        tally = self._tally
        if now >= tally.next_cut_ns:
            self._host.cut(now)
        tally.bytes_in += len(data)
        try:
            self._codec.feed(data)
            self._receive_setup()
        except ProtocolError as exc:
            self._protocol_broken(str(exc))

    def _reads_to_reader(self) -> None:
        """From now on the transport hands its reads straight to the pump, which calls
        ``_stopped`` only when it stops. Once the first read has shown the server did not
        refuse the connection (``_watch_read``); undone when the transport goes."""
        if self._transport is None or self._reader is not None:
            return
        self.pump.on_stopped = self._stopped
        self._reader = PumpReader(self, self.pump.data_received)
        self._transport.set_protocol(self._reader)

    def _stopped(self, status: int) -> None:
        """The pump stopped: it sent nothing (the worker may be finished), the server
        announced its close, or the replies broke the protocol."""
        if status == IDLE:
            self._host.maybe_finished()
        elif status == CLOSING:
            self._close_announced()
        else:
            self._protocol_broken(str(self.pump.error))

    def _protocol_broken(self, text: str) -> None:
        """The server's replies broke the protocol: discard the connection (reopened as a
        broken one is). Every request in flight, the ones the replies of the same read
        would have answered included (both pumps leave them unaccounted), ends as
        ``protocol_error``: once a reply cannot belong to its request, which request the
        others belonged to is not known, so none is attributed."""
        if self._refused:  # one error line, then the close: a refusal, counted as one
            self._abort()
            return
        self._host.note_error("protocol_error", text)
        self._fail_inflight(_PROTOCOL_ERROR)
        self._abort()

    def issue(self, n: int) -> None:
        """Send up to ``n`` more requests from the worker's source, in one write."""
        if self.pump.issue(n):
            self._host.maybe_finished()

    def issue_scheduled(self, intended_ns: list[int], now: int) -> None:
        """Open loop: send one request per intended time, in one write; record the lags."""
        if self._transport is None:
            return
        self.pump.issue_scheduled(intended_ns)

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
        at the timeout (open loop: from the intended time, as every open-loop latency);
        the younger ones still in flight count as ``conn_error``.
        """
        oldest = self.pump.oldest_sent_ns()
        if oldest is None or now - oldest < timeout_ns:
            return
        recorder = self._recorder
        ops, late_by = self.pump.expire(now, timeout_ns)
        for op, behind in zip(ops, memoryview(late_by).cast("q"), strict=True):
            recorder.counts[op][_TIMEOUT] += 1
            recorder.latency_ns[op].append(timeout_ns + behind)
            if not self.closed_loop:
                recorder.service_ns[op].append(timeout_ns)
        self._abort()

    def _fail_inflight(self, outcome: int) -> None:
        counts = self._recorder.counts
        for op in self.pump.drop():
            counts[op][outcome] += 1
