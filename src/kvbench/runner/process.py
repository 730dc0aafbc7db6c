"""The worker process entry: one event loop (uvloop when installed) driving one Worker.

The process ignores SIGINT: Ctrl-C reaches the coordinator, which sends Stop, so every
worker ends its window at the same moment and still reports what it measured.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import traceback
from multiprocessing.connection import Connection as Pipe

from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.errors import TargetUnreachable
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
    try:
        if event_loop_name() == "uvloop":
            import uvloop

            uvloop.run(serve(spec, pipe))
        else:
            asyncio.run(serve(spec, pipe))
    except Exception:
        pipe.send(m.Failed(spec.worker_index, "bug", traceback.format_exc()))
        raise
    finally:
        pipe.close()


async def serve(spec: WorkerSpec, pipe: Pipe) -> None:
    """Connect, report Ready, then follow the coordinator's commands."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[m.Message] = asyncio.Queue()

    def on_readable() -> None:
        try:
            inbox.put_nowait(m.check(pipe.recv()))
        except EOFError:
            loop.remove_reader(pipe.fileno())
            inbox.put_nowait(m.Stop())

    index = spec.worker_index
    worker = Worker(spec, lambda snap: pipe.send(m.Snapshot(index, snap)))
    try:
        await worker.connect()
    except TargetUnreachable as exc:
        pipe.send(m.Failed(index, "unreachable", str(exc)))
        return
    pipe.send(m.Ready(index, socket.gethostname(), os.getpid()))
    loop.add_reader(pipe.fileno(), on_readable)
    command = await inbox.get()
    if isinstance(command, m.Preload):
        pipe.send(m.Snapshot(index, await worker.preload()))
        command = await inbox.get()
    if not isinstance(command, m.Start):
        return

    async def follow_stop() -> None:
        while True:
            if isinstance(await inbox.get(), m.Stop):
                worker.stop()

    follower = asyncio.create_task(follow_stop())
    summary = await worker.run(command.start_ns)
    follower.cancel()
    loop.remove_reader(pipe.fileno())
    pipe.send(m.Done(index, summary))
