"""Local workers: fresh processes (multiprocessing ``forkserver``) with a duplex pipe each.

Each worker is forked from a fork server (runner/forkserver.py): a process exec'd clean,
as ``spawn`` starts one (pyperf also starts workers clean), that only imported the
worker's modules. So no worker inherits the coordinator's state, and none pays the
imports again: a spawned worker re-imported the ``kvbench`` script, and with it the whole
CLI, numpy, asyncio and the codecs, before its first request (1-4 s on a busy 2-core
machine), in every round and level of a sweep; a forked one starts in milliseconds, and
the script it re-imports (kvbench/__main__.py) imports nothing. Workers share the host's
monotonic clock with the coordinator, so a start time needs no conversion. They are born
ignoring SIGINT (the fork server is started ignoring it, and its children keep its
handlers), so a Ctrl-C while one starts never kills it with a KeyboardInterrupt traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing.connection import Connection as Pipe
from typing import Any

from kvbench.runner import forkserver
from kvbench.runner.process import ProcessSpec, worker_main


class LocalLauncher:
    """Spawns one worker process per spec on this machine (a load run's workers, or a
    queue's producers and consumers)."""

    # Time for the Start message to reach every worker through its pipe (microseconds on
    # one host; the margin covers a worker not scheduled at once on a busy machine).
    start_delay_ns = 50_000_000

    def __init__(self) -> None:
        self._procs: list[Any] = []

    def open(self, wanted: int) -> int:
        return wanted

    def start(self, specs: Sequence[ProcessSpec]) -> list[Pipe]:
        context = forkserver.context()
        pipes: list[Pipe] = []
        self._procs = []
        for spec in specs:
            parent, child = context.Pipe(duplex=True)
            proc = context.Process(
                target=worker_main,
                args=(spec, child),
                name=spec.process_name,
                daemon=True,
            )
            with forkserver.children_ignore_sigint():
                proc.start()
            child.close()
            pipes.append(parent)
            self._procs.append(proc)
        return pipes

    def exited(self) -> dict[int, str]:
        return {
            index: f"worker process exited with code {proc.exitcode}"
            for index, proc in enumerate(self._procs)
            if proc.exitcode is not None
        }

    def stop(self) -> None:
        for proc in self._procs:
            proc.join(timeout=2)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=2)

    def close(self) -> None:
        self._procs = []
