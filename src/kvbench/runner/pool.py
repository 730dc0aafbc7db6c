"""A round's worker processes, as both coordinators see them: one stream of messages.

A launcher (runner/local.py, runner/cluster.py) starts the workers and hands over one
duplex connection each; the pool sends them commands and receives what they send: every
message waiting on every connection, checked (runner/messages.py). A worker that is gone
without a word (its connection closed, or its process or Dask task ended before Done)
comes out of the same stream as a ``Failed`` message of kind ``exited``, once, so the
load coordinator (runner/coordinator.py) and the queue coordinator (runner/queue.py)
handle deaths where they handle everything else.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import wait
from typing import TYPE_CHECKING

from kvbench.runner import interrupts
from kvbench.runner import messages as m
from kvbench.runner.launcher import WorkerLauncher

if TYPE_CHECKING:  # the worker entry and the engine: not in the coordinator
    from kvbench.runner.process import ProcessSpec

EXITED = "exited"
# How long to wait, once a worker's pipe has closed, for its exit status to say how it
# ended (a process's files are closed as it exits, just before it can be waited for).
EXIT_STATUS_WAIT_S = 0.5


class WorkerPool:
    """The workers of one round, started by ``launcher``.

    Args:
        launcher: starts the workers and says which ones ended.
    """

    def __init__(self, launcher: WorkerLauncher) -> None:
        self._launcher = launcher
        self._pipes: list[Pipe] = []
        self._over: set[int] = set()  # said Done or Failed, or found gone

    def start(self, specs: Sequence[ProcessSpec]) -> None:
        """Start one worker per spec (their indices are the specs' positions).

        Raises:
            WorkerFailed: the launcher could not start them.
        """
        self._over = set()
        self._pipes = self._launcher.start(specs)

    def __len__(self) -> int:
        return len(self._pipes)

    def send(self, index: int, message: m.Message) -> None:
        """Send to one worker; one that is gone is noticed by ``receive``, not here."""
        if index in self._over:
            return
        with contextlib.suppress(OSError):  # BrokenPipeError included
            self._pipes[index].send(message)

    def broadcast(self, message: m.Message) -> None:
        for index in range(len(self._pipes)):
            self.send(index, message)

    def receive(self, timeout_s: float) -> list[tuple[int, m.Message]]:
        """Wait up to ``timeout_s`` for messages; every one waiting, by worker index.

        Raises:
            MessageError: a worker sent something that is not a message of this version.
            Interrupted: a signal came where Python ignored the interrupt its handler
                raised (runner/interrupts.py): both coordinators wait here, so it ends
                the run from their next wait, as a signal anywhere else does.
        """
        interrupts.raise_lost()
        received: list[tuple[int, m.Message]] = []
        live = {pipe: i for i, pipe in enumerate(self._pipes) if i not in self._over}
        for pipe in wait(list(live), timeout=timeout_s):
            assert isinstance(pipe, Pipe)
            index = live[pipe]
            while index not in self._over:
                try:
                    if not pipe.poll():
                        break
                    message = m.check(pipe.recv())
                except (EOFError, OSError):
                    received.append(self._gone(index, self._exit_reason(index)))
                    break
                received.append((index, message))
                if isinstance(message, m.Done | m.Failed):
                    self._over.add(index)
        for index, reason in self._launcher.exited().items():
            if index not in self._over and not self._pipes[index].poll():
                received.append(self._gone(index, reason))
        return received

    def _exit_reason(self, index: int) -> str:
        """How worker ``index``, whose pipe just closed, ended: its process closes its
        pipe as it exits, a moment before its exit status can be read (was: "worker process
        exited", never that the kernel had killed it)."""
        deadline = time.monotonic() + EXIT_STATUS_WAIT_S
        while True:
            reason = self._launcher.exited().get(index)
            if reason is not None:
                return reason
            if time.monotonic() >= deadline:
                return "worker process exited"
            time.sleep(EXIT_STATUS_WAIT_S / 50)

    def _gone(self, index: int, reason: str) -> tuple[int, m.Message]:
        self._over.add(index)
        return index, m.Failed(index, EXITED, reason)

    def stop(self) -> None:
        """End the round's workers (they have reported or failed by now); close the pipes."""
        self._launcher.stop()
        for pipe in self._pipes:
            pipe.close()
