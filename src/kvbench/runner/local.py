"""Local workers: fresh processes (multiprocessing ``spawn``) with a duplex pipe each.

Processes are spawned, not forked, so each starts clean (pyperf does the same); they share
the host's monotonic clock with the coordinator, so a start time needs no conversion.
They are born ignoring SIGINT, so a Ctrl-C while one is still importing (before
``worker_main`` could ignore it) never kills it with a KeyboardInterrupt traceback.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection as Pipe
from typing import Any

from kvbench.runner.process import ProcessSpec, worker_main


class LocalLauncher:
    """Spawns one worker process per spec on this machine (a load run's workers, or a
    queue's producers and consumers)."""

    start_delay_ns = 200_000_000

    def __init__(self) -> None:
        self._procs: list[Any] = []

    def open(self, wanted: int) -> int:
        return wanted

    def start(self, specs: Sequence[ProcessSpec]) -> list[Pipe]:
        context = multiprocessing.get_context("spawn")
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
            with _children_ignore_sigint():
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


@contextlib.contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Processes started inside ignore SIGINT from their first instruction.

    An ignored signal stays ignored across fork and exec (POSIX), and Python leaves an
    ignored SIGINT alone at startup, so the child needs no handler of its own in time.
    The coordinator ignores it for as long as the fork and exec take (about a
    millisecond); a Ctrl-C in that moment is lost and the next one works. Signal
    dispositions can only be changed from the main thread: elsewhere nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        # None: the handler was not installed from Python; the default is the best guess
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
