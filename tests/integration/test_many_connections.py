"""A worker with 1,000 connections to a real memcached, on the compiled event loop.

What a connect storm and a run of many connections cost the worker is counted here, not
timed: while it opens them the collector makes one full pass (not one every few hundred
connections), the server's address is looked up once (not once per connection), every
connection opens once and stays live, and the in-flight count the worker samples for
Little's law (the compiled pumps' own, in their tally) is exactly one per connection at
pipeline 1 in every sample.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kvbench.config.load import load_config
from kvbench.engine import fastpath
from kvbench.engine import worker as worker_module
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.metrics.snapshot import IntervalSnapshot
from tests.support import pump_oracle, servers

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

pytestmark = pytest.mark.integration

CONNECTIONS = 1_000


def config(url: str) -> Any:
    return load_config(
        None,
        {
            "target.urls": ([url], "TARGET"),
            "load.connections": (str(CONNECTIONS), "-c"),
            "load.duration": ("1s", "--duration"),
            "workload.seed": (5, "--seed"),
        },
        1,
    )


# The open files this process and its memcached need: the connections and their server ends.
FILES = 2 * CONNECTIONS + 200


@pytest.fixture
def open_files() -> Iterator[None]:
    """The soft open-file limit raised to fit (the CLI raises it itself: runner/limits.py),
    and put back after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < FILES:
        pytest.skip(f"the hard open-files limit ({hard}) is below {FILES}")
    if soft != resource.RLIM_INFINITY and soft < FILES:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FILES, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.usefixtures("open_files")
def test_a_thousand_connections_open_once_stay_live_and_are_counted_in_c(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every tick the poller reads samples the requests in flight: at the worker's every
    # 10th, a loop starved of its core (the suite beside a busy loop, on a slow host) read
    # fewer than 10 ticks in the 1 s window and took no sample at all. What is asserted is
    # the count in each sample, not how many the scheduler allowed.
    monkeypatch.setattr(worker_module, "INFLIGHT_SAMPLE_EVERY", 1)
    full_passes: list[int] = []

    def passes(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full_passes.append(1)

    snapshots: list[IntervalSnapshot] = []
    with servers.memcached("-c", str(2 * CONNECTIONS)) as server:
        spec = WorkerSpec(config(f"memcached://{server.address}"), 0, 1, CONNECTIONS, None)
        loop = asyncio.new_event_loop()
        lookups: list[str] = []
        getaddrinfo = loop.getaddrinfo

        async def counted(host: str, *args: Any, **kwargs: Any) -> Any:
            lookups.append(host)
            return await getaddrinfo(host, *args, **kwargs)

        monkeypatch.setattr(loop, "getaddrinfo", counted)

        async def main() -> Any:
            worker = Worker(spec, snapshots.append)
            assert worker.loop is not None  # the compiled event loop's driver
            gc.callbacks.append(passes)
            try:
                await worker.connect()
            finally:
                gc.callbacks.remove(passes)
            opened = (worker.live_connections, worker.loop.poller.live, len(full_passes))
            summary = await worker.run(time.monotonic_ns() + 50_000_000)
            return opened, worker, summary

        try:
            opened, worker, summary = loop.run_until_complete(main())
        finally:
            loop.close()
            gc.unfreeze()  # (what connect froze, should a test stop between the two)
    assert opened == (CONNECTIONS, CONNECTIONS, 1)  # one full pass: the one after connecting
    assert lookups == [server.host]
    assert summary.status == "ok" and summary.errors == {}
    assert summary.driver == "compiled loop"
    measured = [s for s in snapshots if s.phase == "measure"]
    assert measured and all(s.stats["connections_live_min"] == CONNECTIONS for s in measured)
    sampled = [s.stats["inflight_mean"] for s in measured if "inflight_mean" in s.stats]
    assert sampled and all(mean == CONNECTIONS for mean in sampled)
    # the poller's ticks measured the loop's hiccups and sampled in C (no Python task),
    # the samples kept for measure intervals only
    assert worker.loop is not None and worker.loop.poller.ticks > 0
    assert all(s.hiccup is not None and s.hiccup.total_count > 0 for s in measured)
    assert not any("inflight_mean" in s.stats for s in snapshots if s.phase != "measure")
    events = {name: sum(s.stats.get(name, 0) for s in snapshots) for name in ("reconnects",)}
    assert events == {"reconnects": 0}
    assert worker.tally.inflight == 0  # every request answered in the drain
