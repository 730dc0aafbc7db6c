"""The worker entry: one event loop (uvloop when installed) driving one Worker.

A local worker process ignores SIGINT: Ctrl-C reaches the coordinator, which sends Stop,
so every worker ends its window at the same moment and still reports what it measured.
Cluster workers run the same ``run_worker`` in a Dask worker's thread (runner/cluster.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import traceback
from dataclasses import replace
from multiprocessing.connection import Connection as Pipe

from kvbench.engine.clock import NEVER
from kvbench.engine.worker import Worker, WorkerSpec, WorkerSummary
from kvbench.errors import TargetUnreachable
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.runner import messages as m


def event_loop_name() -> str:
    """``uvloop`` when it is importable, else ``asyncio``."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def worker_main(spec: WorkerSpec, pipe: Pipe) -> None:
    """Process target: run ``spec`` and talk to the coordinator over ``pipe``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run_worker(spec, pipe)


def run_worker(spec: WorkerSpec, pipe: Pipe, offset_ns: int = 0) -> None:
    """Run ``serve`` on a fresh event loop in the calling thread; close ``pipe`` after.

    Installs no signal handler, so it may run in any thread (a Dask worker's task thread).
    """
    try:
        if event_loop_name() == "uvloop":
            import uvloop

            uvloop.run(serve(spec, pipe, offset_ns))
        else:
            asyncio.run(serve(spec, pipe, offset_ns))
    except Exception:
        pipe.send(m.Failed(spec.worker_index, "bug", traceback.format_exc()))
        raise
    finally:
        pipe.close()


def _shift_summary(summary: WorkerSummary, offset_ns: int) -> WorkerSummary:
    def shift(t_ns: int) -> int:
        return t_ns if t_ns == NEVER else t_ns + offset_ns

    return replace(
        summary,
        measure_start_ns=shift(summary.measure_start_ns),
        measure_end_ns=shift(summary.measure_end_ns),
    )


async def serve(spec: WorkerSpec, pipe: Pipe, offset_ns: int = 0) -> None:
    """Connect, report Ready, then follow the coordinator's commands.

    Args:
        offset_ns: the coordinator's monotonic clock minus this host's (0 on one host):
            Start is converted to this host's clock, and every time sent back to the
            coordinator's, so its window arithmetic sees one clock.
    """
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[m.Message] = asyncio.Queue()

    def on_readable() -> None:
        try:
            inbox.put_nowait(m.check(pipe.recv()))
        except (EOFError, OSError):  # the coordinator went away: end as if told to stop
            loop.remove_reader(pipe.fileno())
            inbox.put_nowait(m.Stop())

    index = spec.worker_index

    def send_snapshot(snap: IntervalSnapshot) -> None:
        if offset_ns:
            snap = replace(snap, start_ns=snap.start_ns + offset_ns, end_ns=snap.end_ns + offset_ns)
        pipe.send(m.Snapshot(index, snap))

    worker = Worker(spec, send_snapshot)
    try:
        await worker.connect()
    except TargetUnreachable as exc:
        pipe.send(m.Failed(index, "unreachable", str(exc)))
        return
    pipe.send(m.Ready(index, socket.gethostname(), os.getpid()))
    loop.add_reader(pipe.fileno(), on_readable)
    command = await inbox.get()
    if isinstance(command, m.Preload):
        send_snapshot(await worker.preload())
        command = await inbox.get()
    if not isinstance(command, m.Start):
        return

    async def follow_stop() -> None:
        while True:
            if isinstance(await inbox.get(), m.Stop):
                worker.stop()

    follower = asyncio.create_task(follow_stop())
    summary = await worker.run(command.start_ns - offset_ns)
    follower.cancel()
    loop.remove_reader(pipe.fileno())
    pipe.send(m.Done(index, _shift_summary(summary, offset_ns) if offset_ns else summary))
