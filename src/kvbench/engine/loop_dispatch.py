"""The open loop's dispatch on the compiled event loop: the schedule runs in ``poll``.

With the Python dispatcher (engine/open_loop.py) a send waited for its timerfd's wake-up
to reach Python through asyncio (``add_reader``), behind whatever reply processing the
loop's iteration did first, then for a Python tick that asked each connection for its
room and called its pump. On the compiled event loop the ``Poller`` (engine/_pump_loop.c)
runs the schedule itself: its timerfd is in the poller's own epoll set, armed for the
next send; ``poll`` services it before any socket and again between ready sockets once
the clock has passed it, and sends what is due in C, round robin to the connections with
room below their pipeline, each connection's share in one write through its pump's
``issue_scheduled`` code (each send's lag recorded, one more than ``LATE_NS`` behind
counted late).

What stays Python, and why: the intended times (``feed``, asked for 4096 at a time, are
``Schedule.intended_range``'s: the same arrival process and seed give the same times as
the Python dispatcher's), the drops (a backlog beyond ``--max-lag`` is rare, and dropped
requests are taken from the shards' sources and counted by op: ``on_behind`` runs the
Python dispatcher's own ``_drop_behind``), ``offered`` (schedule arithmetic at interval
cuts), and which pump each connection sends with (``set_lane``: a connection tells it
when its pump or state changes, ``Connection.on_lane``). A connection that is down (not
connected, or closing after a failure) is skipped, as the Python dispatcher skips it; one
being set up is too (its pump is the Python one of its setup until it is ready; the
Python dispatcher would hand that one requests).

A timed replay's schedules (a ``TraceSchedule`` per connection: its lane's rows at their
trace times) run in the poller too, each connection's on its own (``per_lane``): the
poller keeps each lane's next times (``_feed_lane``, 128 at a time) and a heap of the
lanes by their next one, so a dispatch visits only the lanes with a request due, and
sends each one's due requests in one write, as many as its room; a lane's backlog beyond
``--max-lag`` is dropped by the Python dispatcher's code for that lane's route
(``_behind_lane``), from its connection's own source. Before, the Python dispatcher woke
for every tick and asked its routes in Python: at 60,000 requests/s on one worker about
2% of the sends went out more than 2 ms late (bench/replay.py --timed).
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kvbench.engine.open_loop import PERIOD_NS, TICK_NS, OpenLoopDispatcher
from kvbench.engine.pacing import Schedule, TraceSchedule

if TYPE_CHECKING:
    from kvbench.engine._pump import Poller, Tally
    from kvbench.engine.connection import Connection, DriverHost
    from kvbench.engine.loop import LoopDriver
    from kvbench.engine.shards import Shard
    from kvbench.metrics.recorder import Recorder

try:
    from kvbench.engine import _pump
except ImportError:  # no extension: the worker never makes one
    _pump = None  # type: ignore[assignment]


class LoopDispatcher(OpenLoopDispatcher):
    """An open loop's schedule run by the worker's ``Poller`` (the dispatch rules are the
    Python dispatcher's; this side feeds it times, drops, and keeps its lanes current).

    Args:
        driver: the worker's compiled event loop (engine/loop.py), whose poller runs it.
        (the others: ``OpenLoopDispatcher``'s: one ``Schedule``, or a timed replay's
        ``TraceSchedule`` per connection.)
    """

    def __init__(
        self,
        host: DriverHost,
        tally: Tally,
        recorder: Recorder,
        connections: Sequence[Connection],
        shards: Sequence[Shard],
        schedule: Schedule | Sequence[TraceSchedule],
        max_lag_ns: int,
        driver: LoopDriver,
    ) -> None:
        super().__init__(host, tally, recorder, connections, shards, schedule, max_lag_ns)
        self._driver = driver
        self._poller: Poller = driver.poller
        self._c_tally = tally
        self._per_lane = not isinstance(schedule, Schedule)
        # the poller's lanes: the route's connections, or each route's own
        self._lane_conns = (
            [route.connections[0] for route in self.routes] if self._per_lane else list(connections)
        )
        self._lanes = {id(conn): index for index, conn in enumerate(self._lane_conns)}
        self._started = False
        self._lanes_open = False  # set_lane is taken: from schedule() to unschedule()
        # per lane: its first times, asked before (shifted with the schedules)
        self._primed: dict[int, npt.NDArray[np.int64]] = {}

    def prime(self) -> None:
        """Before the start instant: each lane's first times (``_feed_lane``'s answer to
        the poller's first ask of it). The first dispatch asks every lane: over 10,000
        lanes that took 0.32 s of the window (a lane's few rows lie across many of the
        feed's segments), and the window's first requests waited behind it."""
        if self._per_lane and _pump is not None:
            for lane, route in enumerate(self.routes):
                schedule = route.schedule
                assert isinstance(schedule, TraceSchedule)
                self._primed[lane] = np.array(schedule.intended_from(0, _pump.LANE_FEED), np.int64)

    def shift(self, delta_ns: int) -> None:
        """``OpenLoopDispatcher.shift``, the primed times with the schedules."""
        super().shift(delta_ns)
        for lane, times in self._primed.items():
            self._primed[lane] = times + delta_ns

    @property
    def next_index(self) -> int:
        """Requests sent or dropped so far."""
        return self._poller.scheduled if self._started else super().next_index

    async def run(self) -> None:
        """Run the schedule in the poller until the worker stops issuing (or its budget is
        spent, or every lane's rows went); a failure there (a refill's, a feed's) is
        raised here."""
        poller = self._poller
        self._done = asyncio.get_running_loop().create_future()
        self._driver.start()  # (watched once a connection is opened; maybe none was)
        poller.schedule(
            self._c_tally,
            len(self._lane_conns),
            self._feed_lane if self._per_lane else self._feed,
            self._behind_lane if self._per_lane else self._behind,
            self._stopped,
            self._max_lag_ns,
            PERIOD_NS,
            TICK_NS,
            per_lane=self._per_lane,
        )
        self._started = self._lanes_open = True
        try:
            for conn in self._lane_conns:
                conn.on_lane = self.lane_changed
                self.lane_changed(conn)
            await self._done
        finally:
            self._lanes_open = False
            for conn in self._lane_conns:
                conn.on_lane = None
            if self._per_lane:
                for index, route in enumerate(self.routes):
                    route.next_index = poller.scheduled_of(index)
            else:
                self.routes[0].next_index = poller.scheduled
            poller.unschedule()
        self._host.maybe_finished()

    def lane_changed(self, conn: Connection) -> None:
        """``conn``'s pump or state changed: the poller sends with its compiled pump while
        it is connected, else not at all."""
        if not self._lanes_open or self._driver.closed:  # (the run is over)
            return
        pump = conn.pump
        up = conn.connected and conn.transport_open
        compiled = pump if up and _pump is not None and isinstance(pump, _pump.Pump) else None
        self._poller.set_lane(self._lanes[id(conn)], compiled, conn.pipeline)

    def _feed(self, first: int, count: int) -> bytes:
        """The intended times of requests ``first .. first + count - 1`` (the poller's
        next ones), as native int64; the times before the ones still needed are let go."""
        route = self.routes[0]
        route.next_index = self._poller.scheduled
        schedule = route.schedule
        assert isinstance(schedule, Schedule)  # (a timed replay's lanes: _feed_lane)
        schedule.release(min(route.next_index, route.offered_mark))
        return schedule.intended_array(first, first + count).tobytes()

    def _feed_lane(self, lane: int, first: int, count: int) -> bytes:
        """Per lane: the intended times of up to ``count`` of lane ``lane``'s requests from
        ``first`` on (none: the lane has no more); the first ask's were primed."""
        primed = self._primed.pop(lane, None)
        if primed is not None and first == 0 and _pump is not None and count == _pump.LANE_FEED:
            return primed.tobytes()  # (a lane's times are fixed once the trace is spooled)
        schedule = self.routes[lane].schedule
        assert isinstance(schedule, TraceSchedule)
        return array("q", schedule.intended_from(first, count)).tobytes()

    def _behind(self, now: int, next_index: int) -> tuple[int, bool]:
        """The oldest request due is more than ``max_lag`` behind: drop as the Python
        dispatcher does. (How many were dropped, and whether to send nothing now.)"""
        return self._behind_lane(0, now, next_index)

    def _behind_lane(self, lane: int, now: int, next_index: int) -> tuple[int, bool]:
        """``_behind`` for route ``lane`` (per lane: that connection's schedule)."""
        route = self.routes[lane]
        route.next_index = next_index
        stop = self._drop_behind(route, now, self._due(route, now))
        return route.next_index - next_index, stop

    def _stopped(self, exc: BaseException | None) -> None:
        done = self._done
        if done is None or done.done():
            return
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)
