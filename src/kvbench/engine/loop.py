"""The compiled event loop's Python side: connections whose sockets a ``Poller`` owns.

With the loop driver (the compiled pumps' default, engine/fastpath.py) a worker's load
connections are not asyncio transports: each is a non-blocking socket connected here
(``loop.sock_connect``, ``TCP_NODELAY``) and handed to the worker's ``_pump.Poller``
(engine/_pump_loop.c), an epoll set of its own. The worker's event loop is a
``PollerLoop``: asyncio's selector loop whose wait is ``Poller.wait``, so C waits on the
poller's epoll set (every load connection, and the selector's own epoll fd), reads every
ready socket, runs each connection's compiled pump (scan, tally, issue) and sends its
requests with one ``send``, and waits again, with no Python frame per read, write,
request or wake-up, until the loop's own descriptors are ready, a callback into Python
was made, or its next timer is due. The hiccup timer is the poller's too
(``start_ticks``: a periodic timerfd in its epoll set, read in C, each tick's lateness
and a sample of the requests in flight recorded into the worker's tally), and so is an
open loop's schedule (``--rate``: a timerfd of its own, engine/loop_dispatch.py); the
other timers (interval cuts, timeouts) stay asyncio's. On any other loop (a test's
uvloop) the loop watches the poller's epoll fd and calls ``poll`` once per wake-up.

A ``LoopTransport`` is what the connection (a ``Link``) sees: the few transport methods it
uses, over the poller. Until the connection's reads are its compiled pump's (the setup,
the preload's Python pump, the first reads that tell a refusal) the poller hands each read
to the protocol's ``data_received``, as a transport would; when the connection hands its
reads to a compiled pump (``set_protocol`` with a ``PumpReader``), the poller gives them to
the pump in C. A connection's end (EOF, a reset, a failed send) comes back as
``on_end(handle, errno)``: the socket is closed already, and the connection hears
``connection_lost`` as from any transport, so ``LinkKeeper`` counts and reopens it.
"""

from __future__ import annotations

import asyncio
import math
import os
import selectors
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvbench.engine._pump import Poller, Tally
    from kvbench.engine.link import Link

try:
    from kvbench.engine import _pump
except ImportError:  # no extension: fastpath never picks this driver
    _pump = None  # type: ignore[assignment]


class LoopTransport(asyncio.Transport):
    """One connection's socket in the poller, as the transport its ``Link`` talks to."""

    def __init__(self, driver: LoopDriver, fd: int, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self._driver = driver
        self._protocol = protocol
        # The protocol it was opened for (its Link), whichever protocol reads it now (a
        # compiled pump's PumpReader, once the run starts).
        self.link = protocol
        self._closed = False
        try:
            self.handle = driver.poller.add(fd, protocol.data_received)
        except BaseException:
            os.close(fd)
            raise
        driver.transports[self.handle] = self

    # -- what Link, Connection and the pumps call ----------------------------------------

    def write(self, data: Any) -> None:
        if not self._closed and not self._driver.closed:
            self._driver.poller.write(self.handle, data)

    def is_closing(self) -> bool:
        return self._closed

    def close(self) -> None:
        self.abort()

    def abort(self) -> None:
        """Close the socket now (unsent bytes dropped); ``connection_lost`` follows."""
        if self._closed:
            return
        self._lost()
        if not self._driver.closed:  # (else its socket is closed already)
            self._driver.poller.close(self.handle)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        """Reads go to ``protocol`` from now on: to a compiled pump in C when it is a
        ``PumpReader`` of one (its ``data_received`` is the pump's bound method), else to
        its ``data_received``."""
        assert isinstance(protocol, asyncio.Protocol)
        self._protocol = protocol
        if self._closed or self._driver.closed:
            return
        poller = self._driver.poller
        pump = getattr(protocol.data_received, "__self__", None)
        if _pump is not None and isinstance(pump, _pump.Pump):
            poller.set_pump(self.handle, pump)
        else:
            poller.set_pump(self.handle, None)
            poller.set_reader(self.handle, protocol.data_received)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    # -- its end -------------------------------------------------------------------------

    def ended(self, errno: int) -> None:
        """The poller closed the socket (the server closed it: ``errno`` 0, or an error)."""
        if not self._closed:
            exc = ConnectionResetError(errno, os.strerror(errno)) if errno else None
            self._lost(exc)

    def _lost(self, exc: Exception | None = None) -> None:
        self._closed = True
        self._driver.transports.pop(self.handle, None)
        asyncio.get_running_loop().call_soon(self._protocol.connection_lost, exc)


class LoopDriver:
    """A worker's poller, registered with its asyncio loop, and the connections in it.

    ``open(link)`` is a ``Link``'s opener (engine/reconnect.py ``open_link`` calls it for
    the first connection and every reopening): it connects, and the link's transport is a
    ``LoopTransport``.
    """

    def __init__(
        self, on_error: Callable[[Exception], object] | None = None, busy_poll_ns: int = 0
    ) -> None:
        assert _pump is not None
        self.poller: Poller = _pump.Poller(self._ended)
        self.poller.busy_poll_ns = busy_poll_ns
        # Told of an exception a callback raised inside the poller (the worker ends the
        # run failed); None: the event loop's exception handler logs it.
        self._on_error = on_error
        self.transports: dict[int, LoopTransport] = {}
        self._addresses: dict[tuple[str, int], asyncio.Task[list[Any]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    def start(self) -> None:
        """Service the poller from the running loop (once): a ``PollerLoop`` waits in it,
        any other loop watches its epoll fd and calls ``poll``."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            if isinstance(self._loop, PollerLoop):
                self._loop.attach(self.poller, self._on_error)
            else:
                self._loop.add_reader(self.poller.fileno(), self._poll)

    def _poll(self) -> None:
        try:
            self.poller.poll()
        except Exception as exc:
            if self._on_error is None:
                raise
            self._on_error(exc)

    def start_ticks(self, tally: Tally, period_ns: int, sample_every: int) -> None:
        """Measure the loop's hiccups in C from now on: how late the poll wakes for a timer
        due every ``period_ns``, into ``tally`` (its requests in flight sampled every
        ``sample_every`` ticks), where the worker's hiccup task measured them in Python."""
        self.start()
        self.poller.start_ticks(tally, period_ns, sample_every)

    def overdue(self, before_ns: int) -> list[asyncio.Protocol]:
        """The links (each transport's ``link``) that may have a request timed out: those
        whose pump has one in flight sent at or before ``before_ns``, and those whose reads
        go to Python (``Poller.overdue``: one scan in C instead of a call per link)."""
        transports = self.transports
        return [
            transports[handle].link
            for handle in self.poller.overdue(before_ns)
            if handle in transports
        ]

    def close(self) -> None:
        """Stop watching, close every socket (no ``connection_lost``: the run is over); a
        connection opened from now on fails."""
        if self.closed:
            return
        self.closed = True
        if self._loop is not None:
            if isinstance(self._loop, PollerLoop):
                self._loop.detach(self.poller)
            else:
                self._loop.remove_reader(self.poller.fileno())
            self._loop = None
        self.transports.clear()
        self.poller.shutdown()

    async def open(self, link: Link) -> None:
        """Connect ``link``'s socket (Unix, or TCP with ``TCP_NODELAY``) and make its
        transport: the link's setup then runs as over any transport.

        Raises:
            OSError: the connection was refused or failed.
        """
        self._check_open()
        self.start()
        loop = asyncio.get_running_loop()
        target = link.target
        addresses: list[tuple[int, Any]]
        if target.socket_path is not None:
            addresses = [(socket.AF_UNIX, target.socket_path)]
        else:  # each address in turn, as create_connection tries them (localhost: ::1, ...)
            addresses = await self._resolve(target.host, target.port)
        error: OSError | None = None
        for family, address in addresses:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                if family != socket.AF_UNIX:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await loop.sock_connect(sock, address)
                self._check_open()  # (the run may have ended meanwhile)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            except BaseException:
                sock.close()
                raise
            link.connection_made(LoopTransport(self, sock.detach(), link))
            return
        raise error or OSError(f"no address for {target.host}")

    async def _resolve(self, host: str, port: int) -> list[tuple[int, Any]]:
        """``host:port``'s addresses, looked up once per run (a failed lookup is asked
        again): 10,000 connections to one server asked the resolver, a thread of the
        loop's pool, 10,000 times."""
        lookup = self._addresses.get((host, port))
        if lookup is None:
            loop = asyncio.get_running_loop()
            lookup = self._addresses[host, port] = loop.create_task(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            )
        try:
            infos = await asyncio.shield(lookup)
        except OSError:
            if self._addresses.get((host, port)) is lookup:
                del self._addresses[host, port]
            raise
        return [(family, address) for family, _, _, _, address in infos]

    def _check_open(self) -> None:
        if self.closed:
            raise ConnectionAbortedError("the worker's event loop is closed: the run is over")

    def _ended(self, handle: int, errno: int) -> None:
        transport = self.transports.get(handle)
        if transport is not None:
            transport.ended(errno)


class _PollerSelector(selectors.EpollSelector):
    """asyncio's epoll selector for the loop's own descriptors (the coordinator's pipe,
    timers, connects), whose wait is the poller's once one is attached.

    ``select(timeout)`` then calls ``Poller.wait``: C waits on the poller's epoll set,
    which holds every load connection and this selector's epoll fd, and services the
    connections until this selector's descriptors are ready, a callback into Python was
    made, or asyncio's next timer is due; then the loop's own descriptors are read without
    waiting. On uvloop the poller's epoll fd was a reader: a wake-up was uvloop's
    ``epoll_pwait``, a Python call of ``poll`` and the poller's ``epoll_wait``; here it is
    one ``epoll_wait`` and no Python.
    """

    def __init__(self) -> None:
        super().__init__()
        self._poller: Poller | None = None
        self._on_error: Callable[[Exception], object] = lambda exc: None

    def attach(self, poller: Poller, on_error: Callable[[Exception], object]) -> None:
        poller.wake_on(self.fileno())
        self._poller = poller
        self._on_error = on_error

    def detach(self, poller: Poller) -> None:
        if self._poller is poller:
            self._poller = None
            poller.wake_on(-1)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        poller = self._poller
        if poller is None:
            return super().select(timeout)
        # (milliseconds rounded up, as asyncio's own epoll selector waits)
        wait_ms = -1 if timeout is None else 0 if timeout <= 0 else math.ceil(timeout * 1e3)
        try:
            poller.wait(wait_ms)
        except Exception as exc:  # a callback's: reported as a reader's would be
            self._on_error(exc)
        return super().select(0)


class PollerLoop(asyncio.SelectorEventLoop):
    """The worker's event loop when its connections are a ``Poller``'s: asyncio's selector
    loop whose wait is the poller's (``_PollerSelector``), so between two of the loop's
    timers or its own descriptors' events no Python runs (runner/process.py starts a
    compiled-loop run's worker on it)."""

    def __init__(self) -> None:
        self._poller_selector = _PollerSelector()
        super().__init__(self._poller_selector)

    def attach(self, poller: Poller, on_error: Callable[[Exception], object] | None = None) -> None:
        """Wait in ``poller`` from now on; ``on_error`` hears what a callback inside it
        raised (None: the loop's exception handler)."""
        self._poller_selector.attach(poller, on_error or self._poller_failed)

    def detach(self, poller: Poller) -> None:
        """Wait in the selector alone again."""
        self._poller_selector.detach(poller)

    def _poller_failed(self, exc: Exception) -> None:
        self.call_exception_handler(
            {"message": "Exception in callback Poller.wait()", "exception": exc}
        )
