"""How a run's workers are started and reached: the one thing local and cluster runs differ in.

A launcher starts one worker per WorkerSpec and hands the coordinator one duplex
``multiprocessing`` Connection per worker, in spec order; the coordinator's message loop
(``wait()`` on those connections) is the same whether they are pipes to local processes
or sockets from Dask workers on other machines.
"""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing.connection import Connection as Pipe
from typing import TYPE_CHECKING, Protocol

from kvbench.config.model import RunConfig

if TYPE_CHECKING:  # the worker entry and the engine: not in the coordinator
    from kvbench.runner.process import ProcessSpec


class WorkerLauncher(Protocol):
    """Starts workers and reports the ones that are gone.

    Attributes:
        start_delay_ns: the gap between "everyone is ready" and the common start: time
            for the Start message to reach every worker and for each to arm its timers.
    """

    start_delay_ns: int

    def open(self, wanted: int) -> int:
        """Get ready for the run; return how many workers it will have (at most ``wanted``).

        Raises:
            TargetUnreachable: the workers' home (a Dask scheduler) cannot be reached or
                has no workers.
        """
        ...

    def start(self, specs: Sequence[ProcessSpec]) -> list[Pipe]:
        """Start one worker per spec; return their connections, in spec order.

        Raises:
            WorkerFailed: a worker could not be started or did not connect.
        """
        ...

    def exited(self) -> dict[int, str]:
        """Workers (by index) known to have ended, with a few words saying how."""
        ...

    def stop(self) -> None:
        """End this round's workers (they have reported or failed by now)."""
        ...

    def close(self) -> None:
        """Release what ``open`` took. Called once, at the end of the run."""
        ...


def launcher_for(config: RunConfig) -> WorkerLauncher:
    """Local processes, or a Dask cluster's workers when ``load.cluster`` is set."""
    if config.load.cluster is not None:
        from kvbench.runner.cluster import DaskLauncher

        return DaskLauncher(config.load)
    from kvbench.runner.local import LocalLauncher

    return LocalLauncher()
