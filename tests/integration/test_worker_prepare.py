"""A worker sets its run up before it reports ready, against a real memcached.

The coordinator picks the common start instant 50 ms after the last Ready (after the
preload, with one). The run's setup (pumps, an open loop's dispatcher and a timed
replay's first times, a full collection) took 0.55 s over 10,000 connections: done after
the Start message, a timed replay began half a second behind its start. So the worker
does it before Ready, or once its preload is done, on a schedule from time 0 that its
run shifts to the start instant. These tests hold what the worker decided at the moment
it reported, not how long anything took.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from typing import Any

import pytest

from kvbench.config import load_config
from kvbench.engine.pacing import Schedule
from kvbench.engine.spec import WorkerSpec
from kvbench.runner import messages as m
from kvbench.runner import process
from tests.support.servers import Server

pytestmark = pytest.mark.integration


def serve_until(
    monkeypatch: pytest.MonkeyPatch, server: Server, settings: dict[str, Any], commands: list[Any]
) -> list[tuple[Any, bool, Any]]:
    """Run a worker's ``serve`` on its own event loop, send it ``commands`` one per
    message it reports, and return, for each message it reported: the message, whether
    its run was set up by then, and its open loop's schedule (None: none)."""
    captured: list[Any] = []
    real = process._worker_for

    def capture(*args: Any) -> Any:
        captured.append(real(*args))
        return captured[-1]

    monkeypatch.setattr(process, "_worker_for", capture)
    overrides = {"target.urls": ([f"memcached://{server.address}"], "T")}
    overrides.update({name: (value, "--" + name) for name, value in settings.items()})
    spec = WorkerSpec(load_config(None, overrides, 1), 0, 1, 4, None)
    worker_end, coordinator_end = multiprocessing.Pipe()
    seen: list[tuple[Any, bool, Any]] = []

    async def main() -> None:
        served = asyncio.create_task(process.serve(spec, worker_end))
        for command in commands:
            message = await asyncio.to_thread(coordinator_end.recv)
            worker = captured[0]
            dispatcher = worker.dispatcher
            schedule = dispatcher.routes[0].schedule if dispatcher is not None else None
            seen.append((message, worker._prepared, schedule))
            coordinator_end.send(command)
        await asyncio.wait_for(served, 30)
        for conn in captured[0].connections:  # (a worker process would exit here)
            conn.close()
        await asyncio.sleep(0)

    if process.on_poller(spec):  # the compiled loop's own event loop, as run_worker does
        with asyncio.Runner(loop_factory=process.PollerLoop) as runner:
            runner.run(main())
    else:
        asyncio.run(main())
    return seen


def test_an_open_loop_is_set_up_before_the_worker_says_it_is_ready(
    monkeypatch: pytest.MonkeyPatch, memcached_server: Server
) -> None:
    [(ready, prepared, schedule)] = serve_until(
        monkeypatch, memcached_server, {"load.rate": "1000"}, [m.Stop()]
    )
    assert isinstance(ready, m.Ready)
    assert prepared  # pumps attached, the dispatcher made, its first times ready
    assert isinstance(schedule, Schedule) and schedule.start_ns == 0  # (run shifts it)


def test_a_preloading_worker_sets_up_after_its_preload_before_it_reports_it(
    monkeypatch: pytest.MonkeyPatch, memcached_server: Server
) -> None:
    settings = {"load.rate": "1000", "workload.preload": True, "workload.keys": "100"}
    seen = serve_until(monkeypatch, memcached_server, settings, [m.Preload(), m.Stop()])
    (ready, prepared_at_ready, _), (preloaded, prepared, schedule) = seen
    assert isinstance(ready, m.Ready) and not prepared_at_ready  # (the preload comes first)
    assert isinstance(preloaded, m.Snapshot) and prepared and schedule.start_ns == 0


def test_a_schedule_made_before_its_start_is_shifted_to_it() -> None:
    made, known = Schedule(1000, 250), Schedule(1000, 10**12 + 250)
    made.shift(10**12)
    assert made.intended_range(0, 5) == known.intended_range(0, 5)
    drawn = Schedule(1000, 0, "poisson", seed=1)
    drawn.intended_ns(3)
    with pytest.raises(RuntimeError, match="drawn"):
        drawn.shift(10**12)
