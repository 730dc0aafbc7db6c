"""A put/get batch run (engine/batches.py) as a RunResult, like any other run.

Preflight and server stats before and after come from the same side connection as a load
run's (runner/probe.py); the clients run on this process's event loop. The result's two
intervals are the batches, each spanning its first request sent to its last reply
received across every client (they overlap where one client got while another still
set), so an interval's rate is its batch's throughput over its wall-clock; the window
runs from the first set sent to the last get answered. Ctrl-C stops every client after
its current request (SIGTERM and SIGHUP too): the result is kept, status ``interrupted``.
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kvbench.config.model import RunConfig
from kvbench.engine.batches import BATCHES, BatchRun, run_batches
from kvbench.errors import TargetUnreachable
from kvbench.results.model import RunResult, TargetRecord, WorkerRecord
from kvbench.runner import interrupts, probe
from kvbench.runner.coordinator import fresh_result


def batch_config(config: RunConfig, clients: int) -> RunConfig:
    """``config`` for ``clients`` clients: each holds a connection to every server.

    The stored workload says what a batch run is: every get follows its key's set by the
    same client (``set_then_get``: a miss is an error, results/status.tally) and every hit
    is checked (``verify``: mismatches make a verdict, report/verification.py), so the
    status and verdicts of any run apply to it as they stand.
    """
    load = replace(config.load, connections=clients * len(config.targets), processes=1)
    workload = replace(config.workload, verify=True, set_then_get=True)
    return replace(config, load=load, workload=workload)


def run_batch_level(config: RunConfig, clients: int) -> RunResult:
    """``clients`` clients set every key, then get it; the run's result.

    Raises:
        TargetUnreachable: a server could not be reached (preflight or a client's connect).
    """
    config = batch_config(config, clients)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    timeout_s = config.load.timeout_ns / 1e9
    targets: list[TargetRecord] = [
        {"url": t.url, "protocol": t.protocol, "server_version": probe.preflight(t, timeout_s)[0]}
        for t in config.targets
    ]
    before = _sample(config, timeout_s)
    batch = asyncio.run(_run(config, clients))
    after = _sample(config, timeout_s)
    return _result(config, batch, started_at, targets, before, after)


async def _run(config: RunConfig, clients: int) -> BatchRun:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        interrupts.record(signum)
        stop.set()

    # SIGTERM and SIGHUP stop it as Ctrl-C does; the CLI's handlers are put back after
    # (the loop's removal would leave SIGTERM and SIGHUP to their default: death)
    previous = {signum: signal.getsignal(signum) for signum in interrupts.SIGNALS}
    for signum in interrupts.SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        return await run_batches(config, clients, stop.is_set)
    finally:
        for signum, handler in previous.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _sample(config: RunConfig, timeout_s: float) -> dict[str, Any] | None:
    """Every server's stats, summed, each kept under ``targets`` (as a load run's)."""
    try:
        return probe.sample_pool(config.targets, None, timeout_s)
    except TargetUnreachable:
        return None


def _result(
    config: RunConfig,
    batch: BatchRun,
    started_at: str,
    targets: list[TargetRecord],
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> RunResult:
    start = batch.times["set"].first_sent_ns
    end = max(t.last_reply_ns for t in batch.times.values())
    intervals = []
    for index, name in enumerate(BATCHES):
        recorder, times = batch.recorders[name], batch.times[name]
        for server, ops in enumerate(batch.server_ops[name]):
            recorder.add_stat(f"server{server}_completed", ops)
        # A batch that never began (Ctrl-C during the sets) is empty at the window's end.
        begin, finish = (
            (times.first_sent_ns, times.last_reply_ns) if times.first_sent_ns else (end, end)
        )
        intervals.append(recorder.cut("measure", index, begin, finish))
    status = "interrupted" if batch.interrupted else "ok"
    workers: list[WorkerRecord] = [
        {
            "index": i,
            "status": status,
            "ops": batch.client_ops[i],
            "set_s": times["set"].seconds,
            "get_s": times["get"].seconds,
        }
        for i, times in enumerate(batch.client_times)
    ]
    if batch.mismatch_keys:
        workers[0]["mismatch_keys"] = list(batch.mismatch_keys)
    return fresh_result(
        started_at=started_at,
        status=status,
        mode="closed",
        config=config.to_dict(),
        targets=targets,
        window_start_ns=start,
        window_end_ns=end,
        intervals=intervals,
        workers=workers,
        errors=list(batch.errors),
        driver="batches (python)",
        server={"before": before, "after": after, "settings": None, "intervals": []},
        rounds=[{"round": 0, "window_start_ns": start, "window_end_ns": end, "status": status}],
    )
