"""What every connection driver shares: a connection's life, and the host it reports to.

``Link`` is the asyncio.Protocol part both drivers have (engine/connection.py for load
runs, engine/queue_link.py for a queue's producers and consumers): a fresh codec per
(re)connection, the setup requests (AUTH/SELECT/HELLO) and their replies, the ready
future, telling a server that refuses a connection right after accepting it from one that
answers, and closing. The drivers add their in-flight FIFO and their hot path
(``data_received``). ``LinkHost`` is all a link knows of its worker; engine/reconnect.py
counts what a host hears and reopens the links that break.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from kvbench.config.model import TargetConfig
from kvbench.errors import SetupRefused
from kvbench.metrics.outcome import Outcome
from kvbench.protocols.base import NEED_DATA, ClientCodec, ReplyKind

_CONN_ERROR = int(Outcome.CONN_ERROR)
# How a server refuses a connection it accepted: one error line, then it closes. memcached
# over its -c limit writes "ERROR Too many open connections" (in every protocol), Redis
# over maxclients "-ERR max number of clients reached".
_REFUSALS = (b"ERROR", b"SERVER_ERROR", b"CLIENT_ERROR", b"-")

# Appends a connection's setup requests (AUTH/SELECT/HELLO) to a buffer; returns their count.
SetupWriter = Callable[[Any, bytearray], int]


# Stopped by a signal, a run waits this long for the replies in flight, then abandons
# them (``Link.abandon``; engine/worker.py, engine/queue_worker.py): a healthy server
# answers within a round trip, and a stalled one held a Ctrl-C for --timeout (59 s of a
# replay at --timeout 60s).
STOP_DRAIN_S = 1.0


class LinkHost(Protocol):
    """What a link tells its worker (engine/worker.py, engine/queue_worker.py)."""

    def connection_opened(self) -> None:
        """A transport opened; its setup follows."""

    def connection_ready(self, link: Link) -> None:
        """``link`` is set up: it may send."""

    def connection_broken(self, link: Link, announced: bool, was_live: bool, refused: bool) -> None:
        """``link``'s transport closed (see ``Link.connection_lost`` for the flags)."""

    def note_error(self, kind: str, text: str) -> None:
        """A problem the run goes on after (``protocol_error``, ...): counted, the text kept."""

    def maybe_finished(self) -> None:
        """Replies arrived or requests were given up: the phase may be over."""


class Link(asyncio.Protocol):
    """One connection's life; reopened by its worker (engine/reconnect.py) when it breaks.

    Args:
        host: the worker.
        target: the server.
        ssl_context: TLS for ``rediss://``, else None.
        codec_factory: builds a fresh codec for each (re)connection.
        setup: appends the setup requests; None when none are needed.

    Attributes:
        ready: set by whoever opens the link; done once the setup is answered.
        connected: the transport is open. live: set up and usable.
        setup_error: the server's answer when it refused the setup.
        reconnect_delay_ns: the wait before the next reopening after refusals at accept.
        opener: connects the link and makes its transport instead of the event loop's
            ``create_connection`` (the compiled event loop's, engine/loop.py), or None.
    """

    def __init__(
        self,
        host: LinkHost,
        target: TargetConfig,
        ssl_context: ssl.SSLContext | None,
        codec_factory: Callable[[], ClientCodec],
        setup: SetupWriter | None,
    ) -> None:
        self._host = host
        self.target = target
        self.ssl_context = ssl_context
        self._codec_factory = codec_factory
        self._setup = setup
        self._codec: ClientCodec = codec_factory()
        # The codec above has seen no transport yet: the first one takes it instead of a
        # fresh one (a codec is ~25 bound methods, and 10,000 connections made 20,000).
        self._codec_fresh = True
        self._transport: asyncio.Transport | None = None
        self._setup_left = 0
        self._close_expected = False
        self.ready: asyncio.Future[None] | None = None
        self.connected = False
        self.live = False
        self.setup_error: str | None = None
        # What the first reads said (see connection_lost); whether we closed it ourselves.
        self._watching = False
        self._read_once = False
        self._refused = False
        self._closed_here = False
        # Requests of ours (the setup's included) were unanswered when the server closed it.
        self._unanswered = False
        self.reconnect_delay_ns = 0
        self.opener: Callable[[Link], Awaitable[None]] | None = None

    # -- what a driver adds ------------------------------------------------------------

    @property
    def inflight(self) -> int:
        """Requests sent and not yet answered."""
        raise NotImplementedError

    def fill(self) -> None:
        """Top the pipeline up, if the worker lets it send."""
        raise NotImplementedError

    def _fail_inflight(self, outcome: int) -> None:
        """Count every request in flight as ``outcome`` and forget them."""
        raise NotImplementedError

    def _clear(self) -> None:
        """Start a fresh in-flight FIFO (a new transport)."""
        raise NotImplementedError

    def _became_ready(self) -> None:
        """Called once the setup is answered, before the host hears of it."""

    def _transport_gone(self) -> None:
        """Called when the transport closed, after the in-flight requests were failed."""

    # -- lifecycle -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        if self._codec_fresh:
            self._codec_fresh = False
        else:
            self._codec = self._codec_factory()
        self._clear()
        self.connected = True
        self._watching, self._read_once, self._refused = True, False, False
        self._closed_here = False
        self._host.connection_opened()
        out = bytearray()
        self._setup_left = self._setup(self._codec, out) if self._setup else 0
        if self._setup_left:
            self._transport.write(bytes(out))
        else:
            self._set_ready()

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail what is in flight and tell the host: ``announced`` (the server said it would
        close: HTTP ``Connection: close``), ``was_live`` (set up: a link that never was is
        a failed attempt, counted where the attempt was made) and ``refused`` (the server
        refused it right after accepting it)."""
        self._unanswered = self._setup_left > 0 or self.inflight > 0
        self.connected = False
        self._transport = None
        self._fail_inflight(_CONN_ERROR)
        self._transport_gone()
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(ConnectionError(str(exc) if exc else "closed by the server"))
        announced, self._close_expected = self._close_expected, False
        was_live, self.live = self.live, False
        if was_live and not self._closed_here and not self.refused_at_accept:
            # The server (or the network) ended a live connection: counted as conn_error
            # and reopened by the host, and noted, so the run says why.
            reason = str(exc) if exc else "closed by the server"
            self._host.note_error("conn_lost", f"{self.target.url}: connection lost: {reason}")
        self._host.connection_broken(self, announced, was_live, self.refused_at_accept)

    @property
    def refused_at_accept(self) -> bool:
        """The server refused this connection after accepting it: its first read was one
        error line (memcached over ``-c``, Redis over ``maxclients``) and nothing followed,
        or it closed the connection with requests of ours unanswered before any reply (the
        reset of a server closing on unread requests loses its error line).

        A connection that sent nothing and heard nothing was not refused when the server
        closed it: it was idle (a replay's lane with no rows, an open loop between sends),
        and the server went away or hung up on it. Counted as a refusal, a server killed
        mid-replay read as one over its connection limit ("the server refused 1 right after
        accepting them (its limit: maxconns 1024)") while nothing listened any more."""
        return self._refused or (not self._read_once and not self._closed_here and self._unanswered)

    def _watch_read(self, data: bytes) -> None:
        """The first reads of a connection: is this a server refusing it?"""
        if self._read_once:  # a second read: the first was an answer, not a refusal
            self._refused = self._watching = False
            return
        self._read_once = True
        self._refused = self._watching = data.startswith(_REFUSALS)

    def _set_ready(self) -> None:
        self._became_ready()
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(None)
        self.live = True
        self._host.connection_ready(self)

    def close(self) -> None:
        """Close it; what is still in flight counts as ``conn_error``."""
        self._closed_here = True
        if self._transport is not None:
            self._transport.abort()

    def abandon(self) -> None:
        """Close it now, what is in flight counted as ``conn_error`` at once: the run ends
        without waiting for their replies (``close`` counts them when the transport
        reports its end, a turn of the loop later)."""
        self._abort()

    def _abort(self) -> None:
        """Close it after a failure, failing what is in flight at once."""
        self._fail_inflight(_CONN_ERROR)
        # Closing from now on: the open-loop dispatcher sends only where ``connected``, and
        # a request written here before connection_lost came would never reach the server.
        self.connected = False
        self._closed_here = True
        if self._transport is not None:
            self._transport.abort()

    def _receive_setup(self) -> None:
        """Read the setup's replies; an error reply refuses the link (SetupRefused)."""
        while self._setup_left and (reply := self._codec.next_reply()) is not NEED_DATA:
            self._setup_left -= 1
            if reply.kind == ReplyKind.ERROR_REPLY:
                payload = reply.payload or b"error"
                self.setup_error = payload.decode("utf-8", "replace").strip()
                if self.ready is not None and not self.ready.done():
                    self.ready.set_exception(SetupRefused(self.setup_error))
                self._abort()
                return
        if not self._setup_left:
            self._set_ready()
