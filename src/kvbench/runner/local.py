"""Local workers: fresh processes (multiprocessing ``forkserver``) with a duplex pipe each.

Each worker is forked from a fork server (runner/forkserver.py) that holds only the
worker's modules: forked from the kvbench command before its CLI was imported, or exec'd
clean, as ``spawn`` starts one (pyperf also starts workers clean). So no worker inherits
the coordinator's state, and none pays the imports again: a spawned worker re-imported
the ``kvbench`` script, and with it the whole CLI, numpy, asyncio and the codecs, before
its first request (1-4 s on a busy 2-core machine), in every round and level of a sweep;
a forked one starts in milliseconds, and the script it re-imports (kvbench/__main__.py)
imports nothing. What a worker must share with the coordinator as it is when the worker
starts (its open-files limit, its CPUs), the worker takes at its start (``Inherited``):
the server was made before the coordinator set them. Workers share the host's monotonic
clock with the coordinator, so a start time needs no conversion. They ignore the signals
that end a run from their first instruction (the fork server does, and its children keep
its dispositions): the coordinator stops them. And they end with it: each watches a
lifeline (runner/process.py), so none outlives a coordinator that was killed.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection as Pipe
from typing import TYPE_CHECKING, Any

from kvbench.runner import forkserver

if TYPE_CHECKING:
    from kvbench.runner.process import ProcessSpec


@dataclass(frozen=True)
class Inherited:
    """What a worker takes from its coordinator as it starts, as a process started from
    the coordinator then would have inherited: the soft open-files limit
    (runner/limits.py raises it for the run's connections) and the CPUs (a throwaway
    memcached keeps its own: runner/embedded.py). A fork server forked before the
    coordinator set them (runner/forkserver.py) passes on what it had then."""

    open_files: int  # the soft RLIMIT_NOFILE
    cpus: frozenset[int] | None  # None: the platform has no CPU affinity

    @classmethod
    def now(cls) -> Inherited:
        """The calling process's, now."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        affinity = getattr(os, "sched_getaffinity", None)
        return cls(soft, frozenset(affinity(0)) if affinity else None)

    def take(self) -> None:
        """Make them this process's (the hard limit is the same: neither side lowers it)."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if self.open_files != soft and (
            hard == resource.RLIM_INFINITY or 0 <= self.open_files <= hard
        ):
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, hard))
        if self.cpus is not None:
            with contextlib.suppress(OSError):  # (none of them left to it: it keeps its own)
                os.sched_setaffinity(0, self.cpus)


def worker_entry(
    spec: ProcessSpec, pipe: Pipe, lifeline: Pipe | None, inherited: Inherited | None = None
) -> None:
    """A worker process's target: runner/process.py's ``worker_main``, imported here, in
    the worker (the fork server preloaded it), so the coordinator, which names this
    function to the server, never imports the engine."""
    from kvbench.runner.process import worker_main

    if inherited is not None:
        inherited.take()
    worker_main(spec, pipe, lifeline)


class LocalLauncher:
    """Spawns one worker process per spec on this machine (a load run's workers, or a
    queue's producers and consumers)."""

    # Time for the Start message to reach every worker through its pipe (microseconds on
    # one host; the margin covers a worker not scheduled at once on a busy machine).
    start_delay_ns = 50_000_000
    # How long ``stop`` waits for the round's workers to exit before killing the rest:
    # they have reported (or were abandoned before their start) by then.
    STOP_GRACE_S = 1.0

    def __init__(self) -> None:
        self._procs: list[Any] = []
        self._lifeline: Pipe | None = None  # its write end: workers exit when it closes
        self._lifeline_reader: Pipe | None = None

    def open(self, wanted: int) -> int:
        return wanted

    def start(self, specs: Sequence[ProcessSpec]) -> list[Pipe]:
        context = forkserver.context()
        if self._lifeline is None:
            self._lifeline_reader, self._lifeline = context.Pipe(duplex=False)
        pipes: list[Pipe] = []
        self._procs = []
        inherited = Inherited.now()
        for spec in specs:
            parent, child = context.Pipe(duplex=True)
            proc = context.Process(
                target=worker_entry,
                args=(spec, child, self._lifeline_reader, inherited),
                name=spec.process_name,
                daemon=True,
            )
            # A Ctrl-C while the worker is handed its preparation data (the pickled spec)
            # cut it short: the worker read EOFError and the fork server printed that
            # traceback under the run's one line. Held, it ends the run once the worker
            # has the whole of it and is on the list the run stops.
            with forkserver.signals_held():
                proc.start()
                child.close()
                pipes.append(parent)
                self._procs.append(proc)
        return pipes

    def exited(self) -> dict[int, str]:
        return {
            index: describe_exit(proc.exitcode)
            for index, proc in enumerate(self._procs)
            if proc.exitcode is not None
        }

    def stop(self) -> None:
        """Wait up to ``STOP_GRACE_S`` in all for the workers to exit; kill the rest
        (they ignore SIGTERM, as every signal that ends a run)."""
        deadline = time.monotonic() + self.STOP_GRACE_S
        for proc in self._procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=2)

    def close(self) -> None:
        self._procs = []
        for end in (self._lifeline, self._lifeline_reader):
            if end is not None:
                end.close()
        self._lifeline = self._lifeline_reader = None


def describe_exit(exitcode: int) -> str:
    """How a worker process ended, from its exit code (``Process.exitcode``: minus the
    signal that killed it). A SIGKILL nobody sent by hand is most often the kernel's
    out-of-memory killer: said, with where to look."""
    if exitcode >= 0:
        return f"worker process exited with code {exitcode}"
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        name = f"signal {-exitcode}"
    if -exitcode == signal.SIGKILL:
        return (
            f"worker process was killed by {name} (the kernel's out-of-memory killer sends "
            "it: dmesg or journalctl -k says whether it did)"
        )
    return f"worker process was killed by {name}"
