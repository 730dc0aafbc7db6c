"""The queue worker process entry: one event loop (uvloop when installed), one producer or
consumer, talking to the coordinator over a pipe.

The process ignores SIGINT: Ctrl-C reaches the coordinator, which sends Stop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import traceback
from multiprocessing.connection import Connection as Pipe

from kvbench.engine.queue_worker import QueueWorker, QueueWorkerSpec
from kvbench.errors import TargetUnreachable
from kvbench.runner import queue_messages as m
from kvbench.runner.process import event_loop_name


def queue_worker_main(spec: QueueWorkerSpec, worker: int, pipe: Pipe) -> None:
    """Process target: run ``spec`` as worker number ``worker``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if event_loop_name() == "uvloop":
            import uvloop

            uvloop.run(serve(spec, worker, pipe))
        else:
            asyncio.run(serve(spec, worker, pipe))
    except Exception:
        pipe.send(m.Failed(worker, "bug", traceback.format_exc()))
        raise
    finally:
        pipe.close()


async def serve(spec: QueueWorkerSpec, worker: int, pipe: Pipe) -> None:
    """Connect, report Ready, then follow Start / Consume / Stop."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[m.Message] = asyncio.Queue()

    def on_readable() -> None:
        try:
            inbox.put_nowait(m.check(pipe.recv()))
        except EOFError:  # the coordinator is gone: stop
            loop.remove_reader(pipe.fileno())
            inbox.put_nowait(m.Stop())

    runner = QueueWorker(spec, lambda report: pipe.send(m.Report(worker, report)))
    try:
        await runner.connect()
    except TargetUnreachable as exc:
        pipe.send(m.Failed(worker, "unreachable", str(exc)))
        return
    pipe.send(m.Ready(worker, socket.gethostname(), os.getpid()))
    loop.add_reader(pipe.fileno(), on_readable)
    command = await inbox.get()
    if not isinstance(command, m.Start):
        return

    async def follow() -> None:
        while True:
            message = await inbox.get()
            if isinstance(message, m.Consume):
                runner.begin_consuming()
            elif isinstance(message, m.Stop):
                runner.stop()

    follower = asyncio.create_task(follow())
    summary = await runner.run(command.start_ns, command.consume)
    follower.cancel()
    loop.remove_reader(pipe.fileno())
    pipe.send(m.Done(worker, summary))
