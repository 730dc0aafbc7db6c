"""Opening links, and reopening the ones that break: one routine for every worker.

``open_links`` opens a worker's links before its run (a failure is one line, exit 3).
``LinkKeeper``, what every worker is to its links, keeps the connection accounting and
reopens a link that broke while the worker wants it: at once when the server announced the close, after
RECONNECT_FIRST_NS otherwise, the wait doubling up to RECONNECT_MAX_NS while attempts
fail or the server keeps refusing the connection right after accepting it.

Counted per interval in the recorder's stats (added up across workers): ``connects``
(opened), ``connect_failures`` (attempts refused, timed out or refused at setup),
``connect_resets`` (live connections the server refused right after accepting them;
``connect_resets_before`` before the run; in a run of several servers also
``server<i>_refused``, both counted by the run's i-th server), ``reconnect_attempts``,
``reconnects`` (connections lost while running, then reopened) and
``connections_live_min``. Failures and resets while running are errors of their interval
(report/connections.py).

A server none of whose links has been live for ``gone_ns`` (twice ``--timeout``), at
the first reopening that fails after that, is gone (``_server_gone``): a load worker counts
it, which fails the run, and a run that ends when its work is done (a replay,
``--requests``, a preload), not at a window's end, ends then: it would otherwise reopen
the links of a server that is gone for ever (engine/worker.py). A run with a window counts,
at its end, the servers down then, gone or not (``servers_down``): what it measured after
they went down was no load on them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from itertools import zip_longest
from typing import Any, TypeVar

from kvbench.engine.connect_errors import connect_error_text as connect_error_text  # (its home)
from kvbench.engine.link import Link
from kvbench.errors import SetupRefused, TargetUnreachable
from kvbench.metrics.recorder import Recorder

T = TypeVar("T")

# Reconnect backoff: start fast (a restarted server is back in milliseconds), cap at 1 s.
RECONNECT_FIRST_NS = 50_000_000
RECONNECT_MAX_NS = 1_000_000_000


def backoff(delay_ns: int) -> int:
    """The next wait before reopening: doubled, from RECONNECT_FIRST_NS to RECONNECT_MAX_NS."""
    return min(max(delay_ns, RECONNECT_FIRST_NS) * 2, RECONNECT_MAX_NS)


async def open_link(link: Link, timeout_ns: int) -> None:
    """Open ``link``'s transport to its server (TLS for rediss://, a Unix socket for
    ``+unix`` URLs; its ``opener``'s, where it has one) and wait for its setup.

    Raises:
        OSError, TimeoutError: the connection could not be opened in time.
        SetupRefused: the server refused the setup.
    """
    loop = asyncio.get_running_loop()
    link.ready = loop.create_future()
    target, context = link.target, link.ssl_context
    try:
        async with asyncio.timeout(timeout_ns / 1e9):
            if link.opener is not None:  # the compiled event loop's sockets (engine/loop.py)
                await link.opener(link)
            elif target.socket_path is not None:
                await loop.create_unix_connection(lambda: link, target.socket_path)
            else:
                await loop.create_connection(
                    lambda: link,
                    target.host,
                    target.port,
                    ssl=context,
                    server_hostname=target.host if context else None,
                )
            await link.ready
    except BaseException:
        # A connection this attempt made and did not set up (its setup unanswered in
        # time, or the attempt cancelled) is closed here: the next attempt's would
        # otherwise share the link with it, and its replies be read as the new one's.
        link.close()
        raise


# Connects in flight at once to one server while a run's workers open their links. A
# server's listen backlog (memcached -b: 1024, Redis tcp-backlog: 511) holds the
# connections it has not accepted yet; 10,000 connects at once overflowed it, the kernel
# dropped the SYNs over it, and their retries (1 s, then 3 s) ran out the connect
# timeout: the run failed "timed out". A few hundred at a time keep it under the smallest
# default, and each link's timeout counts from its own connect. The workers of a run share
# this among them (six workers at 256 each overflowed memcached's 1,024 while it was slow
# to accept: 501 listen overflows), and a worker opens its links to its servers in turn.
CONNECTS_IN_FLIGHT = 256
# The fewest a worker keeps in flight however many workers share a server.
CONNECTS_IN_FLIGHT_MIN = 16


def connects_in_flight(servers: int, workers: int) -> int:
    """How many connects one of ``workers`` keeps in flight, its links spread over
    ``servers``: ``CONNECTS_IN_FLIGHT`` at each server from all the workers together."""
    return max(CONNECTS_IN_FLIGHT_MIN, CONNECTS_IN_FLIGHT * servers // max(workers, 1))


def interleaved(groups: Sequence[Sequence[T]]) -> list[T]:
    """The links of ``groups`` (one per server) in turn: one of each, then the next."""
    return [link for links in zip_longest(*groups) for link in links if link is not None]


async def open_links(
    links: Sequence[Link], timeout_ns: int, in_flight: int = CONNECTS_IN_FLIGHT
) -> None:
    """Open every link and run its setup, ``in_flight`` at a time, in the order given.

    Raises:
        TargetUnreachable: one could not be opened or set up (the others are closed).
    """
    gate = asyncio.Semaphore(in_flight)

    async def open_gated(link: Link) -> None:
        async with gate:
            await open_link(link, timeout_ns)

    results = await asyncio.gather(*(open_gated(link) for link in links), return_exceptions=True)
    for link, result in zip(links, results, strict=True):
        if isinstance(result, BaseException):
            for other in links:
                other.close()
            raise TargetUnreachable(
                f"cannot connect to {link.target.url}: {connect_error_text(result)}"
            )


class LinkKeeper:
    """The host every worker is to its links (``LinkHost``): their events counted per
    interval, the broken ones reopened, the problems the run went on after logged.

    engine/worker.py and engine/queue_worker.py extend it: they set ``_running`` while
    their run is on (and ``_interrupted`` when it was stopped before its work was done),
    implement ``maybe_finished``, and may narrow ``_wants_links`` (a queue's producer
    wants none once its messages are sent) and ``_link_ready``.

    Args:
        recorder: the worker's recorder (the counts go into its stats).
        connect_timeout_ns: how long one reopening attempt may take.
        gone_ns: how long a server may have no live link, its reopenings failing,
            before it is taken for gone (``_server_gone``); None: never.

    Attributes:
        live_connections: links set up and usable now.
        errors: problem kind -> count; last_error: the latest one's text.
    """

    def __init__(
        self, recorder: Recorder, connect_timeout_ns: int, gone_ns: int | None = None
    ) -> None:
        self.recorder = recorder
        self._connect_timeout_ns = connect_timeout_ns
        self._gone_ns = gone_ns
        # Live links per server URL, and since when a server has had none (monotonic ns).
        self._live_by_url: dict[str, int] = {}
        self._down_since_ns: dict[str, int] = {}
        # Servers with no live link whose reopening has failed since (``servers_down``).
        self._reopen_failing: set[str] = set()
        # A run of several servers: each server's URL -> its index among the run's
        # targets, by which its refusals at accept are counted (``server<i>_refused``).
        self.server_index: dict[str, int] = {}
        self._running = False
        self._interrupted = False
        self._failed = False  # a bug ended the run early (engine/worker.py)
        self.errors: dict[str, int] = {}
        self.last_error: str | None = None
        # The problem that ended the work (``_server_gone``): the summary's line whatever the
        # reopenings still under way noted after it.
        self.final_error: str | None = None
        self.live_connections = 0
        self._live_min = 0
        self._reopening: set[asyncio.Task[None]] = set()

    # -- what the subclasses decide ------------------------------------------------------

    def maybe_finished(self) -> None:
        raise NotImplementedError

    def _wants_links(self) -> bool:
        """A broken link should be reopened now (by default: while the run is on)."""
        return self._running

    def _link_ready(self, link: Link) -> None:
        link.fill()

    def _server_gone(self, link: Link, text: str) -> None:
        """``link``'s server has had no live link for ``gone_ns`` and the last reopening
        failed (``text`` says so). Nothing by default (engine/worker.py counts it)."""

    # -- LinkHost ------------------------------------------------------------------------

    def connection_opened(self) -> None:
        self.recorder.add_stat("connects", 1)

    def connection_ready(self, link: Link) -> None:
        self.live_connections += 1
        url = link.target.url
        self._live_by_url[url] = self._live_by_url.get(url, 0) + 1
        self._down_since_ns.pop(url, None)
        self._reopen_failing.discard(url)
        self._link_ready(link)

    def connection_broken(self, link: Link, announced: bool, was_live: bool, refused: bool) -> None:
        """Count a lost link and, if wanted, reopen it: at once when the server announced the
        close, with a growing wait while the server keeps refusing it at accept."""
        if was_live:
            self.live_connections -= 1
            self._live_min = min(self._live_min, self.live_connections)
            url = link.target.url
            self._live_by_url[url] -= 1
            if not self._live_by_url[url]:
                self._down_since_ns.setdefault(url, time.monotonic_ns())
        if was_live and refused:
            name = "connect_resets" if self._running else "connect_resets_before"
            self.recorder.add_stat(name, 1)
            if (index := self.server_index.get(link.target.url)) is not None:
                self.recorder.add_stat(f"server{index}_refused", 1)
        # A link that was not live yet was lost in the middle of an attempt to open it:
        # that attempt's failure is counted, and retried, where it was made (``_reopen``,
        # or the run's ``open_links``); reopening it here too made two reopenings of one
        # link, each with its own connection (``_reopen``).
        if was_live and self._running and self._wants_links():
            self.recorder.add_stat("reconnects", 1)
            if refused:
                link.reconnect_delay_ns = backoff(link.reconnect_delay_ns)
                first_ns = link.reconnect_delay_ns
            else:
                link.reconnect_delay_ns = 0
                first_ns = 0 if announced else RECONNECT_FIRST_NS
            self.reopen(link, first_ns)
        self.maybe_finished()

    def note_error(self, kind: str, text: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        self.last_error = text

    def summary_fields(self) -> dict[str, Any]:
        """What every worker's summary says of the worker itself: ``status`` (``ok``,
        ``interrupted``: stopped before its work was done, or ``failed``: a bug ended it
        early) and the problems it went on after (``errors`` by kind, ``last_error``)."""
        status = "failed" if self._failed else "interrupted" if self._interrupted else "ok"
        last = self.final_error or self.last_error
        return {"status": status, "errors": dict(self.errors), "last_error": last}

    # -- the live count and reopening ----------------------------------------------------

    def restart_live_min(self) -> None:
        """The fewest-live count starts again from the links live now (a run's start)."""
        self._live_min = self.live_connections

    def take_live_min(self) -> int:
        """The fewest links live at once since the last call (an interval's cut)."""
        fewest, self._live_min = self._live_min, self.live_connections
        return fewest

    def servers_down(self, now_ns: int) -> dict[str, int]:
        """The servers down at ``now_ns``: none of their links live and a reopening failed
        since (a link lost a moment ago, its reopening not yet tried, is not), each with
        how long it has had no live link (ns)."""
        return {
            url: now_ns - since
            for url, since in self._down_since_ns.items()
            if url in self._reopen_failing
        }

    def reopen(self, link: Link, first_delay_ns: int = RECONNECT_FIRST_NS) -> None:
        """Reopen ``link`` in the background until it is open or no longer wanted."""
        task = asyncio.get_running_loop().create_task(self._reopen(link, first_delay_ns))
        self._reopening.add(task)
        task.add_done_callback(self._reopening.discard)

    async def _reopen(self, link: Link, delay_ns: int) -> None:
        """Open ``link`` again, after ``delay_ns`` and a growing wait after each failed
        attempt; done once an attempt has opened it, whatever happens to the link next.

        One reopening per loss of a live link, so a link is never in two: its next loss
        (the first reply can break the protocol, before the attempt returns here) starts
        the next one. Going on while the link was not connected gave one link two
        sockets, and the replies read on the forgotten one were taken for the other's."""
        while self._running and self._wants_links() and not link.connected:
            await asyncio.sleep(delay_ns / 1e9)
            if not (self._running and self._wants_links()):
                return
            self.recorder.add_stat("reconnect_attempts", 1)
            try:
                await open_link(link, self._connect_timeout_ns)
            except (OSError, TimeoutError, SetupRefused) as exc:
                self.recorder.add_stat("connect_failures", 1)
                reason = connect_error_text(exc)
                self.note_error("connect_error", f"reconnect to {link.target.url}: {reason}")
                self._reopen_failed(link, reason)
                delay_ns = backoff(delay_ns)
            else:
                return

    def _reopen_failed(self, link: Link, reason: str) -> None:
        """A reopening failed: the server is gone when it has had no live link for
        ``gone_ns``."""
        url = link.target.url
        since = self._down_since_ns.get(url)
        if since is not None:
            self._reopen_failing.add(url)
        if since is None or self._gone_ns is None:
            return
        down_ns = time.monotonic_ns() - since
        if down_ns >= self._gone_ns:
            self._server_gone(
                link,
                f"{url}: no connection to it for {down_ns / 1e9:.1f}s, reconnects failing "
                f"({describe_failure(reason)})",
            )


def describe_failure(reason: str) -> str:
    """A failed connect's text with what it tells: a refused connect means nothing listens
    at the address (the server is gone), not that a server refused the connection."""
    if reason == "connection refused":
        return "connection refused: nothing listens there"
    return reason
