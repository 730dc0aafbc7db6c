"""Open-loop dispatch: send requests when the schedule says, whatever the replies do.

Each tick (timers are millisecond-grained, so dispatch is batched) the dispatcher takes
every request that has come due, drops those more than ``max_lag`` behind (counted
``dropped``, never sent), and hands the rest to connections with room below their
pipeline depth, round robin, one write per connection. What finds no room waits for the
next tick (the backlog) and is dropped once too far behind. Latency is measured from each
request's intended time; service time from its actual send; the lag of every send goes
into its own histogram, and a send more than ``LATE_NS`` (engine/pacing.py) behind is
counted ``late``. A connection's ``issue_scheduled`` does the sending: in Python, or in C
when the worker runs the compiled pumps (engine/fastpath.py); the dispatch is the same.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kvbench.engine.pacing import Schedule
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder

if TYPE_CHECKING:
    from kvbench.engine.connection import Connection, DriverHost
    from kvbench.engine.shards import Shard

_now = time.monotonic_ns
# The dispatcher wakes at least this often; asyncio timers are about 1 ms grained.
TICK_NS = 1_000_000
_DROPPED = int(Outcome.DROPPED)


class OpenLoopDispatcher:
    """Feeds a worker's connections from a schedule.

    Args:
        host: the worker (told when the phase may be over).
        tally: the worker's send state: ``issuing``, and ``budget`` (requests left to
            send, -1 for no limit), which the dispatcher draws down.
        recorder: where dropped requests are counted.
        connections: the worker's connections.
        shards: the worker's servers (dropped requests are taken from their sources).
        schedule: the intended send times.
        max_lag_ns: a request this far behind its slot is dropped, not sent.
    """

    def __init__(
        self,
        host: DriverHost,
        tally: Any,
        recorder: Recorder,
        connections: Sequence[Connection],
        shards: Sequence[Shard],
        schedule: Schedule,
        max_lag_ns: int,
    ) -> None:
        self._host = host
        self._tally = tally
        self._recorder = recorder
        self._connections = connections
        self._shards = shards
        self.schedule = schedule
        self._max_lag_ns = max_lag_ns
        self.next_index = 0
        self._turn = 0
        self._dropped = 0
        # Requests the schedule had put before the last interval boundary (``offered``).
        self._offered_mark = 0

    async def run(self) -> None:
        """Dispatch until the worker stops issuing."""
        tally = self._tally
        while tally.issuing and not self.exhausted():
            self.dispatch(_now())
            wait_ns = min(self.schedule.intended_ns(self.next_index) - _now(), TICK_NS)
            await asyncio.sleep(max(wait_ns, 0) / 1e9)
        self._host.maybe_finished()

    def exhausted(self) -> bool:
        return bool(self._tally.budget == 0)

    def dispatch(self, now: int) -> None:
        """Send (or drop) everything due by ``now``."""
        due = self.schedule.due_by(now)
        budget = self._tally.budget
        if budget >= 0:  # -1: no limit
            due = min(due, self.next_index + budget)
        if due <= self.next_index:
            return
        oldest_ok_ns = now - self._max_lag_ns
        if self.schedule.intended_ns(self.next_index) < oldest_ok_ns:
            self._drop(min(due, self.schedule.due_by(oldest_ok_ns - 1)) - self.next_index)
        # Round robin from this tick's turn, asking only until everything due has a place:
        # at 10k/s the dispatcher wakes about every 100 us with one request due, and asking
        # each of 50 connections for its room every time cost about 40% of a core.
        connections = self._connections
        count = len(connections)
        remaining = due - self.next_index
        start = self._turn
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
        if self._tally.budget >= 0:
            self._tally.budget -= n

    def _drop(self, n: int) -> None:
        """Count ``n`` requests as dropped (by op) and skip them in the request sequence.

        In a sharded run the dropped requests are taken from the servers' sequences in
        turn, so no server's key sequence is skipped ahead of the others'.
        """
        # A Redis Cluster master that serves none of the keys has no requests to skip.
        shards = [s for s in self._shards if not s.source.empty]
        counts = self._recorder.counts
        self._take_budget(n)
        first, stop = self._dropped, self._dropped + n
        for index, shard in enumerate(shards):
            # the drops i in [first, stop) with i % len(shards) == index
            k = len(range(first + (index - first) % len(shards), stop, len(shards)))
            for op in self._skip(shard, k):
                counts[op][_DROPPED] += 1
        self._dropped += n
        self.next_index += n

    def _skip(self, shard: Shard, k: int) -> Iterable[int]:
        """The ops of the next ``k`` requests of ``shard``, taken unsent: from its pumps'
        stream while the compiled pumps send (it holds the rest of the source's chunk),
        else from its source."""
        pumps = self._host.pumps
        skipped = pumps.skip(shard, k) if pumps is not None and k else None
        if skipped is not None:
            return skipped
        source = shard.source
        ops = []
        for _ in range(k):
            if source.pos == source.size:
                source.refill()
            ops.append(source.record_ops[source.pos])
            source.pos += 1
        return ops
