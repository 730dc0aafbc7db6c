"""A timed replay's schedules run by the compiled event loop's ``Poller`` (``per_lane``: each
connection its own times, engine/_pump_loop.c), held to the Python dispatcher's routes
(engine/open_loop.py).

Over socket pairs, no server: each lane is handed the same intended times, in the same
order, by the poller as by the Python dispatcher, across its feeds of 128 and through a
lane with none; no request goes before its time, whichever lane's comes next; a lane
that is down keeps its times, and its backlog beyond max_lag is that lane's to drop
(``on_behind`` with its index) while the others send on; the schedule stops by itself
once every lane's feed has ended; a failing feed reaches ``on_stop``. ``make sanitize``
runs these under AddressSanitizer.
"""

from __future__ import annotations

import asyncio
import random
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from kvbench.engine import fastpath
from kvbench.engine.open_loop import OpenLoopDispatcher
from kvbench.engine.pacing import TraceSchedule
from tests.support import pump_oracle

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]
from kvbench.engine.loop_dispatch import LoopDispatcher
from tests.unit.engine.test_loop_dispatch import Lanes, Reference, driver, host, run_until

pytestmark = pytest.mark.unit

S = 1_000_000_000
MS = 1_000_000
LANE_FEED = 128  # (engine/_pump_loop.c: the times a lane is fed at a time)


@dataclass
class Done:
    done: bool = True


@dataclass
class ListLane:
    """A timed lane whose offsets are a list (workload/trace_source.py ``Lane``'s
    questions), all of them read before the replay, as a feed's are."""

    times: list[int]
    feed: Done = field(default_factory=Done)
    taken: int = 0

    def offsets(self, first: int, stop: int) -> list[int]:
        return self.times[first:stop]

    def due_count(self, offset_ns: int) -> int:
        return bisect_right(self.times, offset_ns)

    def pending(self) -> int:
        return 0


def poll_until(poller: _pump.Poller, done: Callable[[], bool]) -> None:
    """Poll until ``done()`` (10 s at most)."""
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, "waited 10 s"
        poller.poll()


def schedules(lanes: list[list[int]], start: int) -> list[TraceSchedule]:
    return [TraceSchedule(ListLane(offsets), start) for offsets in lanes]


def test_each_lane_gets_its_own_times_as_the_python_dispatcher_hands_them() -> None:
    """Lanes of 300, 129 and no requests, every one due (their trace began 1 s ago), none
    behind max_lag: each connection gets its lane's times, in order, in one write (its
    feeds of 128 joined first), as the Python dispatcher's route of that connection hands
    them; then every lane has ended and the schedule stops by itself (no budget)."""
    start = time.monotonic_ns() - S
    offsets = [[i * 1_000_000 for i in range(300)], [7 * i for i in range(129)], []]
    pipeline = 1000

    refs = [Reference(pipeline) for _ in offsets]
    reference_tally = _pump.Tally()
    python = OpenLoopDispatcher(
        host(), reference_tally, None, refs, [], schedules(offsets, start), 10 * S
    )  # type: ignore[arg-type]
    python.dispatch(time.monotonic_ns())
    assert [len(ref.intended) for ref in refs] == [300, 129, 0]

    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    lanes = Lanes(poller, tally, len(offsets), pipeline)
    dispatcher = LoopDispatcher(
        host(), tally, None, lanes.conns, [], schedules(offsets, start), 10 * S, driver(poller)
    )  # type: ignore[arg-type]
    try:
        asyncio.run(run_until(dispatcher, poller, lambda: not poller.scheduling))
        assert lanes.intended() == [ref.intended for ref in refs]
        assert [route.next_index for route in dispatcher.routes] == [300, 129, 0]
        assert dispatcher.next_index == 429 and tally.budget == -1
        _, lag, _, sent = tally.take_open()
        assert sent == 429 and min(memoryview(lag).cast("q")) >= 0
    finally:
        lanes.close()
        poller.shutdown()


@dataclass
class AskedLane(ListLane):
    """A ``ListLane`` that records where each ``offsets`` question began."""

    asked: list[int] = field(default_factory=list)

    def offsets(self, first: int, stop: int) -> list[int]:
        self.asked.append(first)
        return super().offsets(first, stop)


def test_primed_lanes_are_not_asked_their_first_times_in_the_window() -> None:
    """``prime``, before the start instant, reads each lane's first times (was: the first
    dispatch asked every lane, 0.32 s over 10,000 lanes, while the window's first
    requests waited). The poller's first ask of each lane is answered from them: once the
    schedule runs, no lane is asked for its times from 0 again, and each connection gets
    the times it got unprimed (the first test's lanes, as the Python dispatcher hands
    them)."""
    start = time.monotonic_ns() - S
    offsets = [[i * 1_000_000 for i in range(300)], [7 * i for i in range(129)], []]
    pipeline = 1000
    refs = [Reference(pipeline) for _ in offsets]
    python = OpenLoopDispatcher(
        host(), _pump.Tally(), None, refs, [], schedules(offsets, start), 10 * S
    )  # type: ignore[arg-type]
    python.dispatch(time.monotonic_ns())

    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    lanes = Lanes(poller, tally, len(offsets), pipeline)
    asked = [AskedLane(times) for times in offsets]
    dispatcher = LoopDispatcher(
        host(),
        tally,
        None,
        lanes.conns,
        [],
        [TraceSchedule(lane, start) for lane in asked],
        10 * S,
        driver(poller),
    )  # type: ignore[arg-type]
    try:
        dispatcher.prime()
        assert [lane.asked for lane in asked] == [[0], [0], [0]]
        asyncio.run(run_until(dispatcher, poller, lambda: not poller.scheduling))
        assert [lane.asked[1:] for lane in asked] == [[128, 256, 300], [128, 129], []]
        assert lanes.intended() == [ref.intended for ref in refs]
    finally:
        lanes.close()
        poller.shutdown()


def test_no_request_goes_before_its_time_whichever_lane_is_next() -> None:
    """Two lanes whose times interleave over 40 ms from now (the heap's order), one with
    times that come in a burst: every send's lag is at least 0, each lane sends all its
    requests, and the schedule ends when both have."""
    start = time.monotonic_ns() + 5 * MS
    offsets = [
        [i * 4 * MS for i in range(10)],
        [2 * MS + i * 4 * MS for i in range(5)] + [30 * MS] * 20,
    ]
    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    lanes = Lanes(poller, tally, 2, 1000)
    dispatcher = LoopDispatcher(
        host(), tally, None, lanes.conns, [], schedules(offsets, start), 10 * S, driver(poller)
    )  # type: ignore[arg-type]
    try:
        asyncio.run(run_until(dispatcher, poller, lambda: not poller.scheduling))
        assert [conn.pump.inflight for conn in lanes.conns] == [10, 25]
        _, lag, _, sent = tally.take_open()
        lags = memoryview(lag).cast("q")
        assert sent == 35 and len(lags) == 35 and min(lags) >= 0
    finally:
        lanes.close()
        poller.shutdown()


def test_a_lane_that_is_down_keeps_its_times_and_drops_only_its_own_backlog() -> None:
    """Lane 1 is down (no pump) and its first 40 requests are far behind max_lag (1 s):
    ``on_behind`` is asked for lane 1 only, drops them, and lane 1, once up, sends on from
    the 41st (due, within max_lag); lane 0, due within max_lag, sends all its own
    meanwhile."""
    now = time.monotonic_ns()
    times = [
        [now - 5 * MS + i for i in range(20)],
        [now - 2 * S + i * MS for i in range(40)]
        + [now - 100 * MS + i for i in range(10)]
        + [now + 2 * MS + i for i in range(10)],
    ]
    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    lanes = Lanes(poller, tally, 2, 1000)
    stopped: list[BaseException | None] = []
    behind: list[tuple[int, int]] = []

    def feed(lane: int, first: int, count: int) -> bytes:
        return array("q", times[lane][first : first + count]).tobytes()

    def on_behind(lane: int, now: int, next_index: int) -> tuple[int, bool]:
        behind.append((lane, next_index))
        return 40, False

    poller.schedule(tally, 2, feed, on_behind, stopped.append, S, 100_000, MS, per_lane=True)
    poller.set_lane(0, lanes.conns[0].pump, 1000)
    try:
        poll_until(poller, lambda: poller.scheduled_of(0) == 20)
        assert behind == [(1, 0)]  # asked once: the next is within max_lag
        assert poller.scheduled_of(1) == 40 and lanes.conns[1].pump.inflight == 0
        poller.set_lane(1, lanes.conns[1].pump, 1000)
        poll_until(poller, lambda: bool(stopped))
        assert stopped == [None] and behind == [(1, 0)]
        assert [poller.scheduled_of(i) for i in (0, 1)] == [20, 60] and poller.scheduled == 80
        assert [conn.pump.inflight for conn in lanes.conns] == [20, 20]
        assert lanes.intended()[1][:10] == times[1][40:50]  # (its first write's)
    finally:
        lanes.close()
        poller.shutdown()


def test_a_lane_feed_that_raises_stops_the_schedule_and_reaches_on_stop() -> None:
    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    stopped: list[BaseException | None] = []

    def feed(lane: int, first: int, count: int) -> bytes:
        if lane == 2:
            raise RuntimeError("lane 2 unreadable")
        return array("q", [0] * min(count, 5 - first)).tobytes()

    poller.schedule(
        tally, 3, feed, lambda *a: (0, False), stopped.append, S, 100_000, MS, per_lane=True
    )
    poll_until(poller, lambda: bool(stopped))
    assert isinstance(stopped[0], RuntimeError) and str(stopped[0]) == "lane 2 unreadable"
    assert not poller.scheduling
    with pytest.raises(IndexError):
        poller.scheduled_of(3)
    poller.unschedule()
    with pytest.raises(IndexError):  # a shared schedule has no lanes of their own
        poller.scheduled_of(0)
    poller.shutdown()


def test_a_dispatch_sends_every_due_lane_and_no_lane_early() -> None:
    """Seven lanes, three of whose next request is an hour away (the heap's top must be
    the earliest lane, or the due ones wait behind it): the due lanes send all theirs,
    the others nothing, and the schedule runs on."""
    now = time.monotonic_ns()
    later = now + 3600 * S
    times = [[now - (lane + 1) * MS + i for i in range(3)] for lane in range(7)]
    for lane in (1, 3, 4):
        times[lane] = [later + lane]
    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    lanes = Lanes(poller, tally, 7, 1000)
    stopped: list[BaseException | None] = []

    def feed(lane: int, first: int, count: int) -> bytes:
        return array("q", times[lane][first : first + count]).tobytes()

    poller.schedule(
        tally, 7, feed, lambda *a: (0, False), stopped.append, S, 100_000, MS, per_lane=True
    )
    for index, conn in enumerate(lanes.conns):
        poller.set_lane(index, conn.pump, 1000)
    try:
        poll_until(poller, lambda: poller.scheduled == 12)
        assert [conn.pump.inflight for conn in lanes.conns] == [3, 0, 3, 0, 0, 3, 3]
        assert poller.scheduling and not stopped
    finally:
        lanes.close()
        poller.shutdown()


@pytest.mark.parametrize("seed", range(8))
def test_random_lanes_get_what_the_python_dispatchers_routes_hand_them(seed: int) -> None:
    """Seeded: 1-120 lanes of 0-400 requests each, their offsets in order with repeats,
    every one due, each lane with a pipeline of 1-500 (so some lanes fill up, and their
    feeds of 128 are crossed at every place): each connection is handed the times the
    Python dispatcher's route hands it, in order, and no more than its room."""
    rng = random.Random(seed)
    start = time.monotonic_ns() - 2 * S
    offsets = [
        sorted(
            rng.randrange(S) for _ in range(rng.choice((0, 1, 127, 128, 129, rng.randrange(400))))
        )
        for _ in range(rng.randrange(1, 121))
    ]
    pipelines = [rng.randrange(1, 501) for _ in offsets]

    refs = [Reference(pipeline) for pipeline in pipelines]
    python = OpenLoopDispatcher(
        host(), _pump.Tally(), None, refs, [], schedules(offsets, start), 10 * S
    )  # type: ignore[arg-type]
    python.dispatch(time.monotonic_ns())
    expected = [ref.intended for ref in refs]
    assert [len(e) for e in expected] == [
        min(len(o), p) for o, p in zip(offsets, pipelines, strict=True)
    ]

    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    lanes = Lanes(poller, tally, len(offsets), 1)
    for conn, pipeline in zip(lanes.conns, pipelines, strict=True):
        conn.pipeline = pipeline
    dispatcher = LoopDispatcher(
        host(), tally, None, lanes.conns, [], schedules(offsets, start), 10 * S, driver(poller)
    )  # type: ignore[arg-type]
    sent = sum(len(e) for e in expected)
    try:

        async def until_sent() -> None:
            loop = asyncio.get_running_loop()
            loop.add_reader(poller.fileno(), poller.poll)
            task = asyncio.create_task(dispatcher.run())
            try:
                deadline = time.monotonic() + 10
                while poller.scheduled < sent:
                    assert time.monotonic() < deadline, "waited 10 s"
                    await asyncio.sleep(0.001)
            finally:
                loop.remove_reader(poller.fileno())
                task.cancel()

        asyncio.run(until_sent())
        assert [conn.pump.inflight for conn in lanes.conns] == [len(e) for e in expected]
        assert lanes.intended() == expected
    finally:
        lanes.close()
        poller.shutdown()


def test_a_lane_is_fed_more_only_while_every_time_it_holds_is_due() -> None:
    """A lane of 1,000 requests, 3 due now and the rest an hour away, with room for 500:
    it sends the 3 from its first feed of 128 and asks for no more (times due later are
    not fetched early); a lane of 300 all due asks until it has them all, and sends them
    in one write."""
    now = time.monotonic_ns()
    times = [
        [now - 3 * MS + i for i in range(3)] + [now + 3600 * S + i for i in range(997)],
        [now - 3 * MS + i for i in range(300)],
    ]
    asked: list[tuple[int, int]] = []

    def feed(lane: int, first: int, count: int) -> bytes:
        asked.append((lane, first))
        return array("q", times[lane][first : first + count]).tobytes()

    poller = _pump.Poller()
    tally = _pump.Tally()
    tally.issuing = True
    lanes = Lanes(poller, tally, 2, 500)
    poller.schedule(
        tally, 2, feed, lambda *a: (0, False), lambda exc: None, S, 100_000, MS, per_lane=True
    )
    for index, conn in enumerate(lanes.conns):
        poller.set_lane(index, conn.pump, 500)
    try:
        poll_until(poller, lambda: poller.scheduled == 303)
        assert [first for lane, first in asked if lane == 0] == [0]
        assert [first for lane, first in asked if lane == 1] == [0, 128, 256, 300]
        assert [conn.pump.inflight for conn in lanes.conns] == [3, 300]
        assert lanes.intended()[1] == times[1]  # (one write)
    finally:
        lanes.close()
        poller.shutdown()
