"""The worker entry: one event loop driving one worker: a ``PollerLoop`` for the compiled
event loop's connections (engine/loop.py), else uvloop when installed.

One entry for both kinds of run: ``serve`` runs a load ``Worker`` or a queue's
``QueueWorker`` (engine) through the same small interface (``ServedWorker``: connect, run
from a start instant, stop), and answers the coordinator's commands; Preload only means
something to a load worker, Consume only to a queue's consumer.

A local worker process ignores SIGINT, SIGTERM and SIGHUP: they reach the coordinator,
which sends Stop, so every worker ends its window at the same moment and still reports
what it measured. It ends at once when the coordinator is gone, however it went (its
lifeline: ``watch_lifeline``).
Cluster workers run the same ``run_worker`` in a Dask worker's thread (runner/cluster.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import resource
import socket
import threading
import traceback
from dataclasses import replace
from multiprocessing.connection import Connection as Pipe
from typing import Any, Protocol

from kvbench.engine.clock import NEVER
from kvbench.engine.loop import PollerLoop
from kvbench.engine.queue_worker import QueueReport, QueueWorker, QueueWorkerSpec
from kvbench.engine.spec import WorkerSpec, WorkerSummary
from kvbench.engine.worker import Worker, driver_reasons
from kvbench.errors import ConfigError, TargetUnreachable
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.environment import peak_rss_bytes
from kvbench.runner import interrupts
from kvbench.runner import messages as m

# What a worker process is given: a load run's share, or a queue's producer or consumer.
ProcessSpec = WorkerSpec | QueueWorkerSpec


class ServedWorker(Protocol):
    """What ``serve`` needs of a worker (engine/worker.py, engine/queue_worker.py)."""

    async def connect(self) -> None:
        """Open the connections. Raises TargetUnreachable."""

    async def run(self, start_ns: int) -> Any:
        """Run from ``start_ns`` (monotonic clock) to the end; return the summary."""

    def stop(self) -> None:
        """End the run now (Ctrl-C, or the coordinator decided); what is in flight drains."""


def on_poller(spec: ProcessSpec) -> bool:
    """The worker's connections are a compiled ``Poller``'s: its event loop is a
    ``PollerLoop``, which waits in the poller (engine/loop.py), not uvloop."""
    return isinstance(spec, WorkerSpec) and driver_reasons(spec.config) == (None, None)


def event_loop_name() -> str:
    """``uvloop`` when it is importable, else ``asyncio``."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def worker_main(spec: ProcessSpec, pipe: Pipe, lifeline: Pipe | None = None) -> None:
    """Process target: run ``spec`` and talk to the coordinator over ``pipe``; exit when
    ``lifeline`` (the read end of a pipe only the coordinator writes to) ends."""
    interrupts.ignore_run_signals()
    if lifeline is not None:
        watch_lifeline(lifeline)
    run_worker(spec, pipe)


# A worker's exit status when its coordinator is gone (nobody is left to read it).
ORPHANED_EXIT = 3


def watch_lifeline(lifeline: Pipe) -> None:
    """Exit this process as soon as ``lifeline`` reads end-of-file: the coordinator is gone.

    Nothing is ever written to it, and only the coordinator holds its write end, so EOF
    means the coordinator exited or was killed (SIGKILL included: the kernel closes its
    descriptors). Watched from a thread of its own, it works whatever the event loop is
    doing (reading a trace, a preload). Not ``PR_SET_PDEATHSIG``: a forked worker's
    parent is the fork server, which outlives the coordinator as long as a worker holds
    its "alive" pipe; nor the command pipe: the event loop reads that one.
    """

    def wait() -> None:
        with contextlib.suppress(OSError):
            lifeline.poll(None)
        os._exit(ORPHANED_EXIT)

    threading.Thread(target=wait, name="kvbench-lifeline", daemon=True).start()


def run_worker(spec: ProcessSpec, pipe: Pipe, offset_ns: int = 0) -> None:
    """Run ``serve`` on a fresh event loop in the calling thread; close ``pipe`` after.

    Installs no signal handler, so it may run in any thread (a Dask worker's task thread).
    """
    try:
        if on_poller(spec):
            with asyncio.Runner(loop_factory=PollerLoop) as runner:
                runner.run(serve(spec, pipe, offset_ns))
        elif event_loop_name() == "uvloop":
            import uvloop

            uvloop.run(serve(spec, pipe, offset_ns))
        else:
            asyncio.run(serve(spec, pipe, offset_ns))
    except MemoryError:
        # A limit, not a bug: one line, and no traceback on the terminal (runner/limits.py
        # refuses the runs it can tell will not fit before any worker starts).
        with contextlib.suppress(OSError):  # (the coordinator gone: nobody to tell)
            pipe.send(m.Failed(spec.worker_index, "memory", out_of_memory()))
    except Exception:
        try:
            pipe.send(m.Failed(spec.worker_index, "bug", traceback.format_exc()))
        except OSError:
            # The coordinator closed its end: it is gone, or it stopped the run (a Ctrl-C
            # while this worker started) and the send that raised was to it too. Nobody
            # is left to tell; end quietly, as the lifeline would, not with a traceback.
            return
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
        began_ns=shift(summary.began_ns) if summary.began_ns else 0,
    )


def _on_coordinator_clock(snap: IntervalSnapshot, offset_ns: int) -> IntervalSnapshot:
    if not offset_ns:
        return snap
    return replace(snap, start_ns=snap.start_ns + offset_ns, end_ns=snap.end_ns + offset_ns)


def _worker_for(spec: ProcessSpec, pipe: Pipe, offset_ns: int) -> Worker | QueueWorker:
    """The worker ``spec`` asks for, sending what it emits to the coordinator.

    Args:
        offset_ns: the coordinator's monotonic clock minus this host's (0 on one host);
            snapshot times are sent on the coordinator's clock. Queue runs are one host's.
    """
    index = spec.worker_index
    if isinstance(spec, QueueWorkerSpec):

        def send_report(report: QueueReport) -> None:
            pipe.send(m.Report(index, report))

        return QueueWorker(spec, send_report)

    def send_snapshot(snap: IntervalSnapshot) -> None:
        pipe.send(m.Snapshot(index, _on_coordinator_clock(snap, offset_ns)))

    return Worker(spec, send_snapshot)


def _link_address(pipe: Pipe) -> str:
    """This end's IP address when the pipe is a TCP connection (a cluster worker), else "".

    It names the load machine as the coordinator's network sees it, which the host name
    may not (containers, network namespaces and cloud images often share one).
    """
    try:
        with socket.socket(fileno=os.dup(pipe.fileno())) as sock:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                return str(sock.getsockname()[0])
    except OSError:
        pass
    return ""


async def serve(spec: ProcessSpec, pipe: Pipe, offset_ns: int = 0) -> None:
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
    worker = _worker_for(spec, pipe, offset_ns)
    try:
        await worker.connect()
    except TargetUnreachable as exc:
        pipe.send(m.Failed(index, "unreachable", str(exc)))
        return
    except ConfigError as exc:  # a replay's bad trace row or unwritable spool: nothing sent
        pipe.send(m.Failed(index, "config", exc.message, exc.path))
        return
    # The run's setup before Ready (after the preload, with one): the start instant the
    # coordinator picks once every worker is ready need not cover it (Worker.prepare).
    # (A later round of a preloading run gets no Preload: it sets up after Start.)
    if isinstance(worker, Worker) and not worker.spec.config.workload.preload:
        worker.prepare()
    _settle_gc()
    pipe.send(m.Ready(index, socket.gethostname(), os.getpid(), _link_address(pipe), offset_ns))
    watch_pipe(pipe, on_readable)
    command = await inbox.get()
    if isinstance(command, m.Preload) and isinstance(worker, Worker):
        preloaded, stop = await _preload(inbox, worker)
        if stop is None:
            worker.prepare()
        release_freed_memory()  # the preload's lists and buffers
        pipe.send(m.Snapshot(index, _on_coordinator_clock(preloaded, offset_ns)))
        command = stop or await inbox.get()
    if not isinstance(command, m.Start):
        return
    follower = asyncio.create_task(_follow(inbox, worker))
    summary = await worker.run(command.start_ns - offset_ns)
    follower.cancel()
    loop.remove_reader(pipe.fileno())
    if offset_ns and isinstance(summary, WorkerSummary):
        summary = _shift_summary(summary, offset_ns)
    pipe.send(m.Done(index, replace(summary, peak_rss_bytes=peak_rss_bytes())))


async def _preload(
    inbox: asyncio.Queue[m.Message], worker: Worker
) -> tuple[IntervalSnapshot, m.Message | None]:
    """Preload, stopped early by a command (Stop); its record, and that command (None: it
    ran to its end, the next command is still to come)."""
    preload = asyncio.create_task(worker.preload())
    command = asyncio.create_task(inbox.get())
    await asyncio.wait({preload, command}, return_when=asyncio.FIRST_COMPLETED)
    if not command.done():
        command.cancel()  # a queue's get cancelled takes nothing
        return await preload, None
    worker.stop()  # what is in flight drains; preload returns what was stored
    return await preload, command.result()


def watch_pipe(pipe: Pipe, on_readable: Any) -> None:
    """Call ``on_readable`` when the coordinator's pipe has a message; sends stay whole.

    uvloop's ``add_reader`` makes the descriptor non-blocking, and ``Pipe.send`` does
    not finish a partial write: a snapshot bigger than the socket's buffer raised
    BlockingIOError halfway, and the coordinator read the rest as a corrupt message.
    Blocking again, a send waits for the coordinator to read.
    """
    asyncio.get_running_loop().add_reader(pipe.fileno(), on_readable)
    os.set_blocking(pipe.fileno(), True)


def _settle_gc() -> None:
    """Keep the cyclic garbage collector's full passes short during the run.

    What setup made (the worker, its connections, the workload's tables, the imported
    modules) lives until the run ends: collected once and frozen (``gc.freeze``), a full
    pass no longer walks it. Unfrozen, full passes over it stalled the event loop for
    15-18 ms a few times a run, and an open loop sent every request due meanwhile late.
    """
    gc.collect()
    gc.freeze()
    release_freed_memory()  # what setup built and dropped (the key table's pieces)


def release_freed_memory() -> None:
    """Give the C heap's free pages back to the kernel (glibc's ``malloc_trim``).

    What a worker builds and drops while it sets up and preloads (the key table's blocks,
    the preload's chunks and buffers) is freed, but glibc keeps freed heap memory for
    later allocations and the process's resident set keeps it: 2-3 MB a worker at
    100,000 keys. Nothing where the C library has no ``malloc_trim`` (not glibc).
    """
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


async def _follow(inbox: asyncio.Queue[m.Message], worker: ServedWorker) -> None:
    """Commands during the run: Stop ends it; Consume starts a waiting consumer."""
    while True:
        message = await inbox.get()
        if isinstance(message, m.Stop):
            worker.stop()
        elif isinstance(message, m.Consume) and isinstance(worker, QueueWorker):
            worker.begin_consuming()


def out_of_memory() -> str:
    """A worker's MemoryError in words, with the limit it most likely met."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    limit = (
        f"this process's address-space limit (ulimit -v) is {soft / 2**30:.1f} GiB"
        if soft != resource.RLIM_INFINITY
        else "the machine's (or its container's) memory is used up"
    )
    return (
        f"ran out of memory (MemoryError): {limit}; every worker holds the whole key table "
        "and a value blob twice the largest value: fewer --keys or a smaller --value-size "
        "need less"
    )
