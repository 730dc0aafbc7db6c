"""Opening links, and reopening the ones that break: one routine for every worker.

``open_links`` opens a worker's links before its run (a failure is one line, exit 3).
``Reconnector`` keeps a worker's connection accounting and reopens a link that broke
while the worker wants it: at once when the server announced the close, after
RECONNECT_FIRST_NS otherwise, the wait doubling up to RECONNECT_MAX_NS while attempts
fail or the server keeps refusing the connection right after accepting it.

Counted per interval in the recorder's stats (added up across workers): ``connects``
(opened), ``connect_failures`` (attempts refused, timed out or refused at setup),
``connect_resets`` (live connections the server refused right after accepting them;
``connect_resets_before`` before the run), ``reconnect_attempts``, ``reconnects``
(connections lost while running, then reopened) and ``connections_live_min``. Failures
and resets while running are errors of their interval (report/connections.py).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence

from kvbench.engine.link import Link
from kvbench.errors import SetupRefused, TargetUnreachable
from kvbench.metrics.recorder import Recorder

# Reconnect backoff: start fast (a restarted server is back in milliseconds), cap at 1 s.
RECONNECT_FIRST_NS = 50_000_000
RECONNECT_MAX_NS = 1_000_000_000


def backoff(delay_ns: int) -> int:
    """The next wait before reopening: doubled, from RECONNECT_FIRST_NS to RECONNECT_MAX_NS."""
    return min(max(delay_ns, RECONNECT_FIRST_NS) * 2, RECONNECT_MAX_NS)


def connect_error_text(exc: BaseException) -> str:
    """One line for a failed connect: ``connection refused``, ``timed out``, ..."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {getattr(exc, 'reason', None) or exc}"
    if isinstance(exc, SetupRefused):
        return f"the server refused the connection setup: {exc}"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return str(text).lower() if isinstance(exc, OSError) else str(text)


async def open_link(link: Link, timeout_ns: int) -> None:
    """Open ``link``'s transport to its server (TLS for rediss://) and wait for its setup.

    Raises:
        OSError, TimeoutError: the connection could not be opened in time.
        SetupRefused: the server refused the setup.
    """
    loop = asyncio.get_running_loop()
    link.ready = loop.create_future()
    target, context = link.target, link.ssl_context
    async with asyncio.timeout(timeout_ns / 1e9):
        await loop.create_connection(
            lambda: link,
            target.host,
            target.port,
            ssl=context,
            server_hostname=target.host if context else None,
        )
        await link.ready


async def open_links(links: Sequence[Link], timeout_ns: int) -> None:
    """Open every link and run its setup, all at once.

    Raises:
        TargetUnreachable: one could not be opened or set up (the others are closed).
    """
    results = await asyncio.gather(
        *(open_link(link, timeout_ns) for link in links), return_exceptions=True
    )
    for link, result in zip(links, results, strict=True):
        if isinstance(result, BaseException):
            for other in links:
                other.close()
            raise TargetUnreachable(
                f"cannot connect to {link.target.url}: {connect_error_text(result)}"
            )


class Reconnector:
    """A worker's connection accounting, and the routine that reopens its broken links.

    Args:
        recorder: the worker's recorder (the counts go into its stats).
        note_error: the worker's problem log (``connect_error`` and the attempt's text).
        running: the run is on (a refusal before it is counted apart).
        wanted: a broken link should be reopened now (the run is on, and, for a queue's
            producer, it has messages left to send).
        connect_timeout_ns: how long one attempt may take.

    Attributes:
        live: links set up and usable now.
    """

    def __init__(
        self,
        recorder: Recorder,
        note_error: Callable[[str, str], None],
        running: Callable[[], bool],
        wanted: Callable[[], bool],
        connect_timeout_ns: int,
    ) -> None:
        self._recorder = recorder
        self._note_error = note_error
        self._running = running
        self._wanted = wanted
        self._timeout_ns = connect_timeout_ns
        self.live = 0
        self._live_min = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def opened(self) -> None:
        self._recorder.add_stat("connects", 1)

    def ready(self) -> None:
        self.live += 1

    def restart_live_min(self) -> None:
        """The fewest-live count starts again from the links live now (a run's start)."""
        self._live_min = self.live

    def take_live_min(self) -> int:
        """The fewest links live at once since the last call (an interval's cut)."""
        fewest, self._live_min = self._live_min, self.live
        return fewest

    def broken(self, link: Link, announced: bool, was_live: bool, refused: bool) -> None:
        """Count a lost link and, if wanted, reopen it: at once when the server announced the
        close, with a growing wait while the server keeps refusing it at accept."""
        if was_live:
            self.live -= 1
            self._live_min = min(self._live_min, self.live)
        running = self._running()
        if was_live and refused:
            self._recorder.add_stat("connect_resets" if running else "connect_resets_before", 1)
        if not (running and self._wanted()):
            return
        self._recorder.add_stat("reconnects", 1)
        if refused:
            link.reconnect_delay_ns = backoff(link.reconnect_delay_ns)
            first_ns = link.reconnect_delay_ns
        else:
            link.reconnect_delay_ns = 0
            first_ns = 0 if announced else RECONNECT_FIRST_NS
        self.reopen(link, first_ns)

    def reopen(self, link: Link, first_delay_ns: int = RECONNECT_FIRST_NS) -> None:
        """Reopen ``link`` in the background until it is open or no longer wanted."""
        task = asyncio.get_running_loop().create_task(self._reopen(link, first_delay_ns))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reopen(self, link: Link, delay_ns: int) -> None:
        while self._wanted() and not link.connected:
            await asyncio.sleep(delay_ns / 1e9)
            if not self._wanted():
                return
            self._recorder.add_stat("reconnect_attempts", 1)
            try:
                await open_link(link, self._timeout_ns)
            except (OSError, TimeoutError, SetupRefused) as exc:
                self._recorder.add_stat("connect_failures", 1)
                self._note_error(
                    "connect_error", f"reconnect to {link.target.url}: {connect_error_text(exc)}"
                )
                delay_ns = backoff(delay_ns)
