"""The connection driver: an asyncio.Protocol that keeps requests in flight (closed loop).

It owns the transport, the codec, the write buffer and the in-flight FIFO, and is the one
place where transport failures become counters (``conn_error``, ``timeout``) instead of
exceptions. Hot path rules: one clock read per socket read and one per write batch,
requests appended to one bytearray and written once, latencies appended to arrays.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from kvbench.errors import ProtocolError
from kvbench.metrics.outcome import Outcome
from kvbench.protocols.base import NEED_DATA, ClientCodec, Op, ReplyKind

if TYPE_CHECKING:
    from kvbench.engine.worker import Worker

_now = time.monotonic_ns
_CONN_ERROR = int(Outcome.CONN_ERROR)
_TIMEOUT = int(Outcome.TIMEOUT)
_MGET = int(Op.MGET)


class SetupFailed(Exception):
    """The server refused a connection's setup (AUTH, SELECT, HELLO)."""


class Connection(asyncio.Protocol):
    """One client connection, reconnected by its worker when it breaks.

    Args:
        worker: the owning worker (request source, recorder, phase flags).
        codec_factory: builds a fresh codec for each (re)connection.
        setup: appends setup requests (AUTH/SELECT/HELLO) to a buffer; returns their count.
        pipeline: requests kept in flight.
    """

    def __init__(
        self,
        worker: Worker,
        codec_factory: Callable[[], ClientCodec],
        setup: Callable[[Any, bytearray], int] | None,
        pipeline: int,
    ) -> None:
        self._worker = worker
        self._codec_factory = codec_factory
        self._setup = setup
        self._pipeline = pipeline
        self._codec: ClientCodec = codec_factory()
        self._transport: asyncio.Transport | None = None
        self._inflight: deque[tuple[int, int]] = deque()
        self._setup_left = 0
        self.ready: asyncio.Future[None] | None = None
        self.connected = False
        self.setup_error: str | None = None

    # -- lifecycle -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._codec = self._codec_factory()
        self._inflight.clear()
        self.connected = True
        out = bytearray()
        self._setup_left = self._setup(self._codec, out) if self._setup else 0
        if self._setup_left:
            transport.write(bytes(out))
        else:
            self._set_ready()

    def connection_lost(self, exc: Exception | None) -> None:
        self.connected = False
        self._transport = None
        self._fail_inflight(_CONN_ERROR)
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(ConnectionError(str(exc) if exc else "closed by the server"))
        self._worker.connection_broken(self)

    def _set_ready(self) -> None:
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(None)
        self._worker.connection_ready(self)

    def close(self) -> None:
        """Close without counting in-flight requests (they were counted already)."""
        if self._transport is not None:
            self._transport.abort()

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    # -- the hot path ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        now = _now()
        worker = self._worker
        if now >= worker.next_cut_ns:
            worker.cut(now)
        codec = self._codec
        worker.bytes_in += len(data)
        try:
            codec.feed(data)
            if self._setup_left:
                self._receive_setup()
                return
            next_reply = codec.next_reply
            popleft = self._inflight.popleft
            recorder = worker.recorder
            latency = recorder.latency_ns
            counts = recorder.counts
            done = 0
            while (reply := next_reply()) is not NEED_DATA:
                sent_ns, op = popleft()
                latency[op].append(now - sent_ns)
                counts[op][reply[0]] += 1  # type: ignore[index]
                if op == _MGET:
                    recorder.keys_hit[op] += reply[3]  # type: ignore[index]
                done += 1
        except ProtocolError as exc:
            worker.protocol_error(str(exc))
            self._abort()
            return
        if done:
            self.issue(done)

    def issue(self, n: int) -> None:
        """Send up to ``n`` more requests from the worker's source, in one write."""
        worker = self._worker
        if not worker.issuing or self._transport is None:
            worker.maybe_finished()
            return
        if worker.budget is not None:
            n = min(n, worker.budget)
            if n <= 0:
                worker.maybe_finished()
                return
            worker.budget -= n
        source = worker.source
        encode = self._codec.encode
        append = self._inflight.append
        out = bytearray()
        sent_ns = _now()
        position = source.pos
        for _ in range(n):
            if position == source.size:
                source.refill()
                position = 0
            op = source.ops[position]
            if encode(op, source.keys[position], source.values[position], out):  # type: ignore[arg-type]
                append((sent_ns, op))
            position += 1
        source.pos = position
        worker.bytes_out += len(out)
        self._transport.write(out)

    def fill(self) -> None:
        """Top the pipeline up (after connecting, or when issuing resumes)."""
        missing = self._pipeline - len(self._inflight)
        if missing > 0:
            self.issue(missing)

    # -- failures ------------------------------------------------------------------------

    def _receive_setup(self) -> None:
        while self._setup_left and (reply := self._codec.next_reply()) is not NEED_DATA:
            self._setup_left -= 1
            if reply.kind == ReplyKind.ERROR_REPLY:  # type: ignore[union-attr]
                payload = reply.payload or b"error"  # type: ignore[union-attr]
                self.setup_error = payload.decode("utf-8", "replace").strip()
                if self.ready is not None and not self.ready.done():
                    self.ready.set_exception(SetupFailed(self.setup_error))
                self._abort()
                return
        if not self._setup_left:
            self._set_ready()

    def check_timeout(self, now: int, timeout_ns: int) -> None:
        """Count requests unanswered for ``timeout_ns`` as timeouts and drop the connection.

        Replies come back in order, so a stuck oldest request stalls all behind it; the
        connection is closed and reopened. Timed-out requests enter the latency histogram
        at the timeout; the younger ones still in flight count as ``conn_error``.
        """
        inflight = self._inflight
        if not inflight or now - inflight[0][0] < timeout_ns:
            return
        recorder = self._worker.recorder
        while inflight and now - inflight[0][0] >= timeout_ns:
            _, op = inflight.popleft()
            recorder.counts[op][_TIMEOUT] += 1
            recorder.latency_ns[op].append(timeout_ns)
        self._abort()

    def _fail_inflight(self, outcome: int) -> None:
        counts = self._worker.recorder.counts
        while self._inflight:
            _, op = self._inflight.popleft()
            counts[op][outcome] += 1

    def _abort(self) -> None:
        self._fail_inflight(_CONN_ERROR)
        if self._transport is not None:
            self._transport.abort()
