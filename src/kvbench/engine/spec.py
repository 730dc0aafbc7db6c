"""What a load worker is asked to do and what it reports (``WorkerSpec``,
``WorkerSummary``), and what its shards would refuse (``check_shards``): plain data, in a module of their own so the coordinator, which makes
the one and reads the other, does not import the engine that runs them (the event loop's
modules, the compiled pumps: runner/coordinator.py stays lighter during a run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvbench.config.model import RunConfig
from kvbench.workload.commands import check_commands

if TYPE_CHECKING:
    from kvbench.workload.slots import SlotMap

# The driver of the compiled pumps on the compiled event loop (engine/fastpath.py
# ``driver_name``), whose workers wait in their poller (runner/process.py).
COMPILED_LOOP = "compiled loop"


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What one worker process is asked to do.

    Attributes:
        config: the whole run's config.
        worker_index, n_workers: this worker's place among all workers.
        connections: connections this worker opens.
        requests: this worker's share of ``--requests`` (None: run for the duration).
        slot_map: a Redis Cluster run: which master (``config.targets[i]``) serves each
            hash slot, as discovered before the run (runner/redis_cluster.py).
    """

    config: RunConfig
    worker_index: int
    n_workers: int
    connections: int
    requests: int | None
    slot_map: SlotMap | None = None

    @property
    def process_name(self) -> str:
        return f"kvbench-worker-{self.worker_index}"


@dataclass(slots=True)
class WorkerSummary:
    """What a worker reports when its run ends."""

    status: str  # "ok", "interrupted" (Ctrl-C) or "failed" (a bug ended it early)
    measure_start_ns: int
    measure_end_ns: int
    errors: dict[str, int] = field(default_factory=dict)
    # When the worker really began, after waiting for the common start instant (it is
    # late when Start reached it late, or its loop was busy): the start skew across hosts.
    began_ns: int = 0
    last_error: str | None = None
    mismatch_keys: list[str] = field(default_factory=list)  # --verify: example keys
    # "compiled loop", "compiled (transports[: <why>])" or "python (<why>)"
    # (engine/fastpath.py driver_name)
    driver: str = "python"
    # A replay: this worker's trace profile and counts (``ReplayFeed.report``), else None.
    trace: dict[str, Any] | None = None
    peak_rss_bytes: int | None = None  # the process's, set as it sends this (runner/process.py)
    # The first error reply its compiled pumps read: (the request's op, the server's words,
    # ``Tally.take_said``); None: none, or the Python driver (it keeps no words).
    error_said: tuple[str, str] | None = None


def check_shards(config: RunConfig) -> None:
    """What every worker compiles for its shards and could refuse, checked once up front
    (the commands, for each target's protocol), so it is one ConfigError before any worker
    starts or socket opens.

    Raises:
        ConfigError: a command a target's protocol cannot carry.
    """
    check_commands(config)
