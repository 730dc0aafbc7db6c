"""Open-loop dispatch: send requests when the schedule says, whatever the replies do.

Each tick (timers are millisecond-grained, so dispatch is batched) the dispatcher takes
every request that has come due, drops those more than ``max_lag`` behind (counted
``dropped``, never sent), and hands the rest to connections with room below their
pipeline depth, round robin, one write per connection. What finds no room waits for the
next tick (the backlog) and is dropped once too far behind. Latency is measured from each
request's intended time; service time from its actual send; the lag of every send goes
into its own histogram, and a send more than ``LATE_NS`` behind is counted ``late``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from kvbench.engine.pacing import Schedule
from kvbench.metrics.outcome import Outcome

if TYPE_CHECKING:
    from kvbench.engine.worker import Worker

_now = time.monotonic_ns
# The dispatcher wakes at least this often; asyncio timers are about 1 ms grained.
TICK_NS = 1_000_000
_DROPPED = int(Outcome.DROPPED)


class OpenLoopDispatcher:
    """Feeds a worker's connections from a schedule.

    Args:
        worker: the worker whose connections and request source are used.
        schedule: the intended send times.
        max_lag_ns: a request this far behind its slot is dropped, not sent.
    """

    def __init__(self, worker: Worker, schedule: Schedule, max_lag_ns: int) -> None:
        self._worker = worker
        self.schedule = schedule
        self._max_lag_ns = max_lag_ns
        self.next_index = 0
        self._turn = 0
        self._dropped = 0
        # Requests the schedule had put before the last interval boundary (``offered``).
        self._offered_mark = 0

    async def run(self) -> None:
        """Dispatch until the worker stops issuing."""
        worker = self._worker
        while worker.issuing and not self.exhausted():
            self.dispatch(_now())
            wait_ns = min(self.schedule.intended_ns(self.next_index) - _now(), TICK_NS)
            await asyncio.sleep(max(wait_ns, 0) / 1e9)
        worker.maybe_finished()

    def exhausted(self) -> bool:
        return self._worker.budget == 0

    def dispatch(self, now: int) -> None:
        """Send (or drop) everything due by ``now``."""
        worker = self._worker
        due = self.schedule.due_by(now)
        if worker.budget is not None:
            due = min(due, self.next_index + worker.budget)
        if due <= self.next_index:
            return
        oldest_ok_ns = now - self._max_lag_ns
        if self.schedule.intended_ns(self.next_index) < oldest_ok_ns:
            self._drop(min(due, self.schedule.due_by(oldest_ok_ns - 1)) - self.next_index)
        connections = [c for c in worker.connections if c.connected and c.inflight < c.pipeline]
        remaining = due - self.next_index
        start = self._turn
        for k in range(len(connections)):
            if not remaining:
                break
            conn = connections[(start + k) % len(connections)]
            n = min(conn.pipeline - conn.inflight, remaining)
            intended = self.schedule.intended_range(self.next_index, self.next_index + n)
            self._take_budget(n)
            conn.issue_scheduled(intended, now)
            self.next_index += n
            remaining -= n
        self._turn += 1
        # Keep the times from the last boundary on: ``offered`` counts from there.
        self.schedule.release(min(self.next_index, self._offered_mark))

    def offered(self, end_ns: int) -> int:
        """How many requests the schedule put between the previous call's ``end_ns`` (the
        schedule's start, the first time) and ``end_ns``: the interval that ends there.

        Counted from schedule indices (the number due before each boundary), so it is exact
        however many requests an interval holds. ``end_ns`` must not go backwards.
        """
        due = self.schedule.due_by(end_ns - 1)
        offered, self._offered_mark = due - self._offered_mark, due
        return offered

    def _take_budget(self, n: int) -> None:
        if self._worker.budget is not None:
            self._worker.budget -= n

    def _drop(self, n: int) -> None:
        """Count ``n`` requests as dropped (by op) and skip them in the sources.

        In a sharded run the dropped requests are taken from the servers' sources in turn,
        so no server's key sequence is skipped ahead of the others'.
        """
        worker = self._worker
        shards = worker.shards
        counts = worker.recorder.counts
        self._take_budget(n)
        for i in range(self._dropped, self._dropped + n):
            source = shards[i % len(shards)].source
            if source.pos == source.size:
                source.refill()
            counts[source.ops[source.pos]][_DROPPED] += 1
            source.pos += 1
        self._dropped += n
        self.next_index += n
