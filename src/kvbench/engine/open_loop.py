"""Open-loop dispatch: send requests when the schedule says, whatever the replies do.

Each tick the dispatcher takes every request that has come due, drops those more than
``max_lag`` behind (counted ``dropped``, never sent), and hands the rest to connections
with room below their pipeline depth, round robin, one write per connection. A tick comes
at the next request's slot, but no sooner than ``PERIOD_NS`` after the last one: at high
rates requests are sent in batches of one period (a send lags its slot by up to that
much when the client keeps up; latency from the intended time includes it, service time
does not), and one wake-up per request would cost more than the requests. The wake-ups
come from a timerfd (engine/timer.py): the event loops' own timers are millisecond-grained,
and sleeping on them either spun (a wait under 1 ms rounds to none) or woke 1-2 ms late. What finds no room waits for the
next tick (the backlog) and is dropped once too far behind. Latency is measured from each
request's intended time; service time from its actual send; the lag of every send goes
into its own histogram, and a send more than ``LATE_NS`` (engine/pacing.py) behind is
counted ``late``. A connection's ``issue_scheduled`` does the sending: in Python, or in C
when the worker runs the compiled pumps (engine/fastpath.py); the dispatch is the same.
On the compiled event loop a ``--rate`` schedule is dispatched by the loop's poller in C
instead, by these rules (engine/loop_dispatch.py: it feeds the poller this module's
schedule times and drops with ``_drop_behind``), a timed replay's schedules too (a
schedule per lane there); this dispatcher is the reference, and runs the transports' and
the Python driver's open loops.

A run at ``--rate`` has one schedule its connections share (a route of all of them). A
timed replay (``kvbench replay --speed S``) has one route per connection: each its own
``TraceSchedule`` (its clients' rows, at their trace times), so one client's requests go
out in order on its connection; the dispatch rules are the same for both.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvbench.config.limits import DISPATCH_PERIOD_NS
from kvbench.engine.clock import NEVER
from kvbench.engine.pacing import Schedule, TraceSchedule
from kvbench.engine.timer import Timer
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder

if TYPE_CHECKING:
    from kvbench.engine._pump import Tally
    from kvbench.engine.connection import Connection, DriverHost
    from kvbench.engine.py_pump import PyTally
    from kvbench.engine.shards import Shard
    from kvbench.workload.chunk import Cursor

_now = time.monotonic_ns
# The dispatcher wakes at least this often (to see the worker stop issuing).
TICK_NS = 1_000_000
# Ticks come at least this far apart (engine/timer.py wakes the loop to the microsecond):
# at 100k requests/s, 50 us ticks cost 10-15% more of the client's core than 100 us ones.
# It bounds the rate a run may ask for (config/limits.py ``check_rate``), so every tick's
# work is bounded by the connections' pipeline slots.
PERIOD_NS = DISPATCH_PERIOD_NS
_DROPPED = int(Outcome.DROPPED)
# The most requests one tick drops (each is taken from its source and counted by op, in
# Python: about 0.3 us): a worker far behind its schedule drops in steps of this many, a
# tick at a time, so every tick stays short (about 20 ms) and the worker's intervals go
# out on time however far behind it fell. It sends nothing while it is that far behind.
MAX_DROPS_PER_TICK = 1 << 16


@dataclass(slots=True)
class Route:
    """Connections that share one schedule, and where their dropped requests come from.

    Attributes:
        schedule: the intended send times of the route's requests.
        connections: who sends them (round robin among those with room).
        shards: where dropped requests are taken from, in turn: each one's ``cursor``
            (the one its connections send from), read at every drop, skipping those whose
            source is empty (a Redis Cluster MOVED rekeys a master's source: it may empty
            it, or give keys to one empty at the start).
            The worker's shards; a replay lane's connection.
        next_index: requests of the schedule sent or dropped so far.
    """

    schedule: Schedule | TraceSchedule
    connections: Sequence[Connection]
    shards: Sequence[Shard | Connection]
    next_index: int = 0
    turn: int = 0
    dropped: int = 0
    # Requests the schedule had put before the last interval boundary (``offered``).
    offered_mark: int = 0
    # When request ``next_due_of`` is due (``next_due``): a tick asks each route when its
    # next request is due, and a timed replay has one route per connection.
    next_due: int = NEVER
    next_due_of: int = -1

    def due_next(self) -> int:
        """When the route's next request (``next_index``) is due; ``NEVER``: none yet."""
        if self.next_due_of != self.next_index:
            self.next_due = self.schedule.intended_ns(self.next_index)
            # (NEVER is not kept: a lane may get rows later)
            self.next_due_of = self.next_index if self.next_due != NEVER else -1
        return self.next_due


class OpenLoopDispatcher:
    """Feeds a worker's connections from a schedule, or each from its own.

    Args:
        host: the worker (told when the phase may be over).
        tally: the worker's send state: ``issuing``, and ``budget`` (requests left to
            send, -1 for no limit), which the dispatcher draws down.
        recorder: where dropped requests are counted.
        connections: the worker's connections.
        shards: the worker's servers (dropped requests are taken from their cursors).
        schedule: the intended send times the connections share; or one schedule per
            connection (a replay's lanes: dropped requests come from the connection's
            own cursor).
        max_lag_ns: a request this far behind its slot is dropped, not sent.
    """

    def __init__(
        self,
        host: DriverHost,
        tally: Tally | PyTally,
        recorder: Recorder,
        connections: Sequence[Connection],
        shards: Sequence[Shard],
        schedule: Schedule | Sequence[TraceSchedule],
        max_lag_ns: int,
    ) -> None:
        self._host = host
        self._tally = tally
        self._recorder = recorder
        if isinstance(schedule, Schedule):
            self.routes = [Route(schedule, connections, shards)]
        else:
            self.routes = [
                Route(own, [conn], [conn]) for own, conn in zip(schedule, connections, strict=True)
            ]
        self._max_lag_ns = max_lag_ns
        self._timer: Timer | None = None
        self._done: asyncio.Future[None] | None = None

    @property
    def next_index(self) -> int:
        """Requests sent or dropped so far, every route's."""
        return sum(route.next_index for route in self.routes)

    def prime(self) -> None:
        """Before the start instant: what the dispatch can prepare (nothing here; the
        compiled loop's, engine/loop_dispatch.py)."""

    def shift(self, delta_ns: int) -> None:
        """Move the schedules ``delta_ns`` later, before the dispatch starts: they were
        made from time 0, before the start instant was known (``Worker.prepare``)."""
        for route in self.routes:
            route.schedule.shift(delta_ns)

    async def run(self) -> None:
        """Dispatch until the worker stops issuing."""
        self._timer = Timer.open(self._tick)
        if self._timer is None:
            await self._run_on_loop_timers()
        else:
            self._done = asyncio.get_running_loop().create_future()
            try:
                self._tick()
                await self._done
            finally:
                self._timer.close()
        self._host.maybe_finished()

    def _tick(self) -> None:
        """Dispatch what is due, and arm the timer for the next wake-up (the timer calls it)."""
        done, timer = self._done, self._timer
        assert done is not None and timer is not None
        if done.done():
            return
        try:
            if not self._tally.issuing or self.exhausted():
                done.set_result(None)
                return
            now = _now()
            self.dispatch(now)
            first_due = min(route.due_next() for route in self.routes)
            if first_due - now <= PERIOD_NS:
                timer.every(PERIOD_NS)
            else:
                timer.at(min(first_due, now + TICK_NS))
        except BaseException as exc:  # the timer's callback: the task reports it
            done.set_exception(exc)

    async def _run_on_loop_timers(self) -> None:
        """Where there is no timerfd: the loop's own (millisecond) timers."""
        tally = self._tally
        while tally.issuing and not self.exhausted():
            self.dispatch(_now())
            first_due = min(route.due_next() for route in self.routes)
            wait_ns = min(first_due - _now(), TICK_NS)
            await asyncio.sleep(max(wait_ns, 0) / 1e9)

    def exhausted(self) -> bool:
        """Nothing more to send: the budget is spent, or every schedule is at its end."""
        return self._tally.budget == 0 or all(r.schedule.finished() for r in self.routes)

    def dispatch(self, now: int) -> None:
        """Send (or drop) everything due by ``now``."""
        for route in self.routes:
            self._dispatch_route(route, now)

    def _due(self, route: Route, now: int) -> int:
        """How many of the route's requests may have gone by ``now``: those due, within
        the budget."""
        due = route.schedule.due_by(now)
        budget = self._tally.budget
        if budget >= 0:  # -1: no limit
            due = min(due, route.next_index + budget)
        return due

    def _drop_behind(self, route: Route, now: int, due: int) -> bool:
        """Drop the requests of the ``due`` more than ``max_lag`` behind at ``now`` (at most
        ``MAX_DROPS_PER_TICK``); True: more are, so the next tick drops on and nothing
        is sent now. (The compiled loop's dispatch asks this too: engine/loop_dispatch.py.)"""
        oldest_ok_ns = now - self._max_lag_ns
        behind = min(due, route.schedule.due_by(oldest_ok_ns - 1)) - route.next_index
        self._drop(route, min(behind, MAX_DROPS_PER_TICK))
        return behind > MAX_DROPS_PER_TICK

    def _dispatch_route(self, route: Route, now: int) -> None:
        if route.due_next() > now:  # nothing due (the schedule's times are in order)
            return
        schedule = route.schedule
        due = self._due(route, now)
        if due <= route.next_index:
            return
        behind = schedule.intended_ns(route.next_index) < now - self._max_lag_ns
        if behind and self._drop_behind(route, now, due):  # nothing is due yet: drops go on
            return
        # Round robin from this tick's turn, asking only until everything due has a place:
        # at 10k/s the dispatcher wakes about every 100 us with one request due, and asking
        # each of 50 connections for its room every time cost about 40% of a core. The next
        # tick starts after the last connection given requests: the ones just given them
        # are the likeliest to have no room (at 10,000 connections a tick that started one
        # further on asked again every connection the ticks before had just filled).
        connections = route.connections
        count = len(connections)
        remaining = due - route.next_index
        start, last = route.turn, -1
        for k in range(count):
            if not remaining:
                break
            conn = connections[(start + k) % count]
            if not conn.connected:
                continue
            room = conn.pipeline - conn.inflight
            if room <= 0:
                continue
            n = min(room, remaining)
            intended = schedule.intended_range(route.next_index, route.next_index + n)
            self._take_budget(n)
            conn.issue_scheduled(intended, now)
            route.next_index += n
            remaining -= n
            last = k
        route.turn = (start + last + 1) % count if count else 0
        # Keep the times from the last boundary on: ``offered`` counts from there.
        schedule.release(min(route.next_index, route.offered_mark))

    def offered(self, end_ns: int) -> int:
        """How many requests the schedules put between the previous call's ``end_ns`` (the
        schedule's start, the first time) and ``end_ns``: the interval that ends there.

        Counted from schedule indices (the number due before each boundary), so it is exact
        however many requests an interval holds. ``end_ns`` must not go backwards.
        """
        offered = 0
        for route in self.routes:
            due = route.schedule.due_by(end_ns - 1)
            offered += due - route.offered_mark
            route.offered_mark = due
        return offered

    def _take_budget(self, n: int) -> None:
        if self._tally.budget >= 0:
            self._tally.budget -= n

    def _drop(self, route: Route, n: int) -> None:
        """Count ``n`` requests as dropped (by op) and skip them in the request sequence.

        In a sharded run the dropped requests are taken from the servers' sequences in
        turn, so no server's key sequence is skipped ahead of the others'. A Redis Cluster
        master that serves none of the keys now has no requests to skip: the others'
        sequences are (a cluster's keys are always served by some master).
        """
        cursors = [shard.cursor for shard in route.shards if not shard.cursor.source.empty]
        counts = self._recorder.counts
        self._take_budget(n)
        first, stop = route.dropped, route.dropped + n
        for index, cursor in enumerate(cursors):
            # the drops i in [first, stop) with i % len(cursors) == index
            k = len(range(first + (index - first) % len(cursors), stop, len(cursors)))
            for op in self._skip(cursor, k):
                counts[op][_DROPPED] += 1
        route.dropped += n
        route.next_index += n

    def _skip(self, cursor: Cursor, k: int) -> Iterable[int]:
        """The ops of the next ``k`` requests of ``cursor``'s source, taken unsent: from
        the stream its compiled pumps draw on while they send (it holds the rest of the
        cursor's chunk), else from the cursor itself."""
        skipped = self._host.pumps.skip(cursor, k) if k else None
        if skipped is not None:
            return skipped
        return cursor.skip(k)
