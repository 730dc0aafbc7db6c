"""The open-loop dispatcher's drops, without sockets."""

from __future__ import annotations

from typing import Any

import pytest

from kvbench.config import load_config
from kvbench.engine.clock import NEVER
from kvbench.engine.open_loop import MAX_DROPS_PER_TICK, OpenLoopDispatcher
from kvbench.engine.pacing import Schedule
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.metrics.outcome import Outcome
from kvbench.protocols.resp_cluster import Master
from kvbench.workload.slots import SlotMap

DROPPED = int(Outcome.DROPPED)
S = 1_000_000_000
MS = 1_000_000


def test_drops_are_counted_by_op_and_taken_from_every_server_in_turn() -> None:
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1", "memcached://127.0.0.2:1"], "T"),
            "load.rate": ("1000", "--rate"),
            "workload.seed": (5, "--seed"),
        },
        1,
    )
    worker = Worker(WorkerSpec(config, 0, 1, 2, None), lambda snap: None)
    dispatcher = OpenLoopDispatcher(*_parts(worker), Schedule(1000, 0, "uniform", seed=1), 10**9)
    dispatcher._drop(dispatcher.routes[0], 10)
    assert [shard.cursor.pos for shard in worker.shards] == [5, 5]
    expected = [op for shard in worker.shards for op in shard.cursor.chunk.record_ops[:5]]
    dropped = {op: row[DROPPED] for op, row in enumerate(worker.recorder.counts) if row[DROPPED]}
    assert sum(dropped.values()) == 10
    assert dropped == {op: expected.count(op) for op in set(expected)}
    assert dispatcher.next_index == 10


def test_dropped_commands_are_counted_under_their_names() -> None:
    config = load_config(
        None,
        {
            "target.urls": (["redis://127.0.0.1:1"], "T"),
            "load.rate": ("1000", "--rate"),
            "workload.seed": (5, "--seed"),
            "workload.commands": (
                [("HSET h:__key__ f __data__", 1), ("LPUSH l:__key__ x", 3)],
                "--command",
            ),
        },
        1,
    )
    worker = Worker(WorkerSpec(config, 0, 1, 1, None), lambda snap: None)
    dispatcher = OpenLoopDispatcher(*_parts(worker), Schedule(1000, 0, "uniform", seed=1), 10**9)
    dispatcher._drop(dispatcher.routes[0], 40)
    expected = list(worker.shards[0].cursor.chunk.record_ops[:40])
    names = worker.plan.op_names()
    dropped = {
        names[op]: row[DROPPED] for op, row in enumerate(worker.recorder.counts) if row[DROPPED]
    }
    assert dropped == {names[op]: expected.count(op) for op in set(expected)}
    assert set(dropped) == {"hset", "lpush"}


HALVES = SlotMap.from_masters(
    [Master("127.0.0.1", 1, ((0, 8191),)), Master("127.0.0.1", 2, ((8192, 16383),))], ""
)


def _cluster_worker(slot_map: SlotMap) -> Worker:
    config = load_config(
        None,
        {
            "target.urls": (["redis+cluster://127.0.0.1:1", "redis+cluster://127.0.0.1:2"], "T"),
            "load.rate": ("1000", "--rate"),
            "load.connections": ("2", "-c"),
            "workload.seed": (5, "--seed"),
        },
        1,
    )
    return Worker(WorkerSpec(config, 0, 1, 2, None, slot_map), lambda snap: None)


def test_cluster_drops_follow_masters_that_a_moved_empties_or_fills() -> None:
    # Master 1 serves nothing at the start; then every slot moves to it, then back.
    worker = _cluster_worker(SlotMap(HALVES.nodes, (0,) * 16384))
    first, second = (shard.cursor for shard in worker.shards)
    assert second.source.empty
    dispatcher = OpenLoopDispatcher(*_parts(worker), Schedule(1000, 0, "uniform", seed=1), 10**9)
    route = dispatcher.routes[0]
    dispatcher._drop(route, 4)
    assert first.pos == 4
    worker.router.apply(SlotMap(HALVES.nodes, (1,) * 16384))  # master 0 is emptied
    assert first.source.empty and not second.source.empty
    dispatcher._drop(route, 4)  # drew from the emptied source before ("draws nothing")
    assert second.pos == 4
    worker.router.apply(HALVES)  # both serve keys: drops are taken from both in turn
    dispatcher._drop(route, 6)
    assert (first.pos, second.pos) == (3, 3)
    assert sum(row[DROPPED] for row in worker.recorder.counts) == 14


def _parts(worker: Worker) -> tuple[Any, ...]:
    """What a dispatcher takes of its worker."""
    return worker, worker.tally, worker.recorder, worker.connections, worker.shards


class _Sink:
    """A connection that takes every request it is given and answers it at once."""

    connected = True
    inflight = 0
    pipeline = 1 << 30

    def __init__(self) -> None:
        self.sent = 0

    def issue_scheduled(self, intended_ns: list[int], now: int) -> None:
        self.sent += len(intended_ns)


def _open_loop_worker(rate: int) -> Worker:
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "load.rate": (str(rate), "--rate"),
        },
        1,
    )
    return Worker(WorkerSpec(config, 0, 1, 1, None), lambda snap: None)


@pytest.mark.parametrize("arrival", ["uniform", "poisson"])
@pytest.mark.parametrize("cut_late_ns", [0, 3 * MS])
def test_offered_per_interval_is_the_schedule_count_far_above_a_poisson_chunk(
    arrival: str, cut_late_ns: int
) -> None:
    """20k/s over 1 s intervals (rate x interval >> 8,192): every interval's offered count
    is the number of intended times in it, also when the cut comes after later sends."""
    rate = 20_000
    worker = _open_loop_worker(rate)
    sink = _Sink()
    worker.connections = [sink]  # type: ignore[list-item]
    dispatcher = OpenLoopDispatcher(*_parts(worker), Schedule(rate, 0, arrival, seed=3), S)
    reference = Schedule(rate, 0, arrival, seed=3)  # never released
    offered = []
    boundary = S
    for now in range(0, 8 * S, MS):  # a fake clock: one dispatcher tick per millisecond
        dispatcher.dispatch(now)
        if now >= boundary + cut_late_ns:
            offered.append(dispatcher.offered(boundary))
            boundary += S
    expected = [
        reference.due_by(k * S - 1) - reference.due_by((k - 1) * S - 1) for k in range(1, 8)
    ]
    assert offered == expected
    assert sum(offered) == pytest.approx(7 * rate, rel=0.01)
    assert sink.sent == dispatcher.next_index == reference.due_by(8 * S - MS)


def test_poisson_backlog_beyond_max_lag_is_dropped_exactly_after_releases() -> None:
    """The connection takes nothing for 0.5 s at 50k/s (many chunks due and released
    around it): what fell more than max_lag behind is dropped, the rest sent."""
    rate, max_lag_ns = 50_000, 100 * MS
    worker = _open_loop_worker(rate)
    sink = _Sink()
    worker.connections = [sink]  # type: ignore[list-item]
    dispatcher = OpenLoopDispatcher(
        *_parts(worker), Schedule(rate, 0, "poisson", seed=8), max_lag_ns
    )
    reference = Schedule(rate, 0, "poisson", seed=8)
    for now in range(0, 3 * S, MS):
        sink.connected = not (S <= now < S + S // 2)
        dispatcher.dispatch(now)
    stall_end = S + S // 2
    dropped = reference.due_by(stall_end - max_lag_ns - 1) - reference.due_by(S - MS)
    assert dispatcher.routes[0].dropped == dropped
    assert sink.sent + dropped == dispatcher.next_index == reference.due_by(3 * S - MS)


class _CountingSink(_Sink):
    """A sink that counts how often its room is asked for."""

    asked = 0

    @property  # type: ignore[override]
    def inflight(self) -> int:
        _CountingSink.asked += 1
        return 0


def test_a_tick_asks_only_as_many_connections_as_it_needs_in_turn() -> None:
    """One request due over 50 connections: one connection is asked for its room (each of
    the 50 was, on every wake-up, ~10k a second at 10k/s), and the next tick's request goes
    to the next connection."""
    worker = _open_loop_worker(1000)
    sinks = [_CountingSink() for _ in range(50)]
    worker.connections = sinks  # type: ignore[assignment]
    dispatcher = OpenLoopDispatcher(*_parts(worker), Schedule(1000, 0, "uniform"), S)
    _CountingSink.asked = 0
    for now in range(0, 3 * MS, MS):
        dispatcher.dispatch(now)
    assert _CountingSink.asked == 3
    assert [s.sent for s in sinks[:4]] == [1, 1, 1, 0]


class _BusySink(_Sink):
    """A connection at pipeline 1 whose replies have not come: full once given one."""

    pipeline = 1
    asked = 0

    @property  # type: ignore[override]
    def inflight(self) -> int:
        _BusySink.asked += 1
        return self.sent


def test_a_tick_starts_after_the_last_connection_the_one_before_filled() -> None:
    """Three requests due a tick over 12 connections at pipeline 1, none answered: each
    tick asks the next three (not the ones the tick before just filled first)."""
    worker = _open_loop_worker(3000)
    sinks = [_BusySink() for _ in range(12)]
    worker.connections = sinks  # type: ignore[assignment]
    dispatcher = OpenLoopDispatcher(*_parts(worker), Schedule(3000, 0, "uniform"), S)
    _BusySink.asked = 0
    for now in range(MS - 1, 4 * MS, MS):  # 3 due by each
        dispatcher.dispatch(now)
    assert [s.sent for s in sinks] == [1] * 12
    assert _BusySink.asked == 12


def test_a_reopened_connection_waits_for_the_dispatcher() -> None:
    """Open loop: a link that comes back sends nothing of its own (a closed-loop fill would
    send requests with no intended time, and shift every later latency by one)."""
    config = load_config(
        None,
        {"target.urls": (["memcached://127.0.0.1:1"], "T"), "load.rate": ("1000", "--rate")},
        1,
    )
    worker = Worker(WorkerSpec(config, 0, 1, 1, None), lambda snap: None)
    worker.dispatcher = worker._open_loop(0)
    worker.issuing = True

    class Link:
        filled = False

        def fill(self) -> None:
            self.filled = True

    link = Link()
    worker._link_ready(link)  # type: ignore[arg-type]
    assert not link.filled
    worker.dispatcher = None  # closed loop: a reopened link is topped up at once
    worker._link_ready(link)  # type: ignore[arg-type]
    assert link.filled


@pytest.mark.parametrize("wakeups", ["timerfd", "loop timers", "poller"])
def test_a_dispatcher_that_raises_ends_the_run_and_says_why(
    monkeypatch: pytest.MonkeyPatch, wakeups: str
) -> None:
    """A bug in the dispatcher ends the worker's run (its summary names the error); the
    worker never waits for ever for the requests the dead task would have sent. Whether
    the dispatch runs in the timerfd's callback or in the loop-timer fallback (the
    transports' Python dispatcher), or in the compiled loop's poll (the schedule's feed)."""
    import asyncio
    import time

    from kvbench.engine import fastpath
    from kvbench.engine.loop_dispatch import LoopDispatcher
    from kvbench.engine.timer import Timer

    if wakeups == "loop timers":
        monkeypatch.setattr(Timer, "open", classmethod(lambda cls, on_fire: None))
    if wakeups == "poller":
        if not fastpath.compiled():
            pytest.skip("the compiled pump is not built")

        def no_times(self: LoopDispatcher, first: int, count: int) -> bytes:
            raise RuntimeError("a scheduled request was not in its source")

        monkeypatch.setattr(LoopDispatcher, "_feed", no_times)
    else:
        monkeypatch.setenv(fastpath.DRIVER_ENV, fastpath.TRANSPORTS)

    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "load.rate": ("1000", "--rate"),
            "load.duration": ("1h", "--duration"),
        },
        1,
    )
    worker = Worker(WorkerSpec(config, 0, 1, 0, None), lambda snap: None)

    def broken(self: OpenLoopDispatcher, now: int) -> None:
        raise RuntimeError("a scheduled request was not in its source")

    monkeypatch.setattr(OpenLoopDispatcher, "dispatch", broken)

    async def run() -> Any:
        return await asyncio.wait_for(worker.run(time.monotonic_ns()), 5)

    summary = asyncio.run(run())
    assert summary.status == "failed"  # a bug, not a Ctrl-C (the run is partial, exit 4)
    assert summary.last_error == "RuntimeError: a scheduled request was not in its source"
    assert summary.errors == {"bug": 1}


def test_a_worker_far_behind_drops_a_bounded_number_per_tick() -> None:
    """A schedule the worker cannot keep up with (10^8/s, no connection taking anything):
    each tick drops at most MAX_DROPS_PER_TICK and sends nothing while that far behind,
    so no tick runs long enough to hold up the worker's intervals; the count stays exact
    (every request the schedule put is sent, dropped or still due)."""
    rate = 100_000_000
    worker = _open_loop_worker(1000)
    sink = _Sink()
    sink.connected = False
    worker.connections = [sink]  # type: ignore[list-item]
    dispatcher = OpenLoopDispatcher(*_parts(worker), Schedule(rate, 0, "uniform"), MS)
    route = dispatcher.routes[0]
    for tick, now in enumerate(range(10 * MS, 13 * MS, MS // 10), 1):
        dispatcher.dispatch(now)
        assert route.dropped == min(tick * MAX_DROPS_PER_TICK, route.dropped)
        assert route.dropped <= tick * MAX_DROPS_PER_TICK
    assert sink.sent == 0
    assert sum(row[DROPPED] for row in worker.recorder.counts) == route.dropped
    assert route.next_index == route.dropped


class _Lane:
    """A timed replay lane's schedule (``TraceSchedule``'s interface), its times given,
    counting how often it is asked when a request is due; rows may come later."""

    def __init__(self, times: list[int]) -> None:
        self.times = times
        self.asked = 0

    def intended_ns(self, i: int) -> int:
        self.asked += 1
        return self.times[i] if i < len(self.times) else NEVER

    def intended_range(self, first: int, stop: int) -> list[int]:
        return self.times[first:stop]

    def due_by(self, now: int) -> int:
        return sum(1 for t in self.times if t <= now)

    def release(self, below: int) -> None:
        pass

    def finished(self) -> bool:
        return False


def test_a_tick_asks_a_lane_when_its_next_request_is_due_once_per_request() -> None:
    """A timed replay has a route per connection and each tick wants the first due time of
    all of them: a route keeps its next request's time until that request is sent, so 50
    idle lanes are asked once, not at every tick (a third of a core at 60,000/s); a lane
    with no rows yet is asked again, and sends the rows that came."""
    worker = _open_loop_worker(1000)
    sinks = [_Sink() for _ in range(50)]
    lanes = [_Lane([10 * S]) for _ in range(49)] + [_Lane([])]
    worker.connections = sinks  # type: ignore[assignment]
    dispatcher = OpenLoopDispatcher(*_parts(worker), lanes, S)  # type: ignore[arg-type]
    for now in range(0, 5 * MS, MS):
        dispatcher.dispatch(now)
        assert min(route.due_next() for route in dispatcher.routes) == 10 * S
    assert [lane.asked for lane in lanes[:49]] == [1] * 49
    assert lanes[49].asked == 10  # (NEVER is asked again: dispatch, then the min)
    lanes[49].times.append(5 * MS)
    dispatcher.dispatch(6 * MS)
    assert sinks[49].sent == 1 and sum(s.sent for s in sinks) == 1
    dispatcher.dispatch(10 * S)
    assert sum(s.sent for s in sinks) == 50
