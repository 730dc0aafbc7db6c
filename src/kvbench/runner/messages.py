"""Messages between the coordinator and its workers (versioned, small, picklable).

Workers send snapshots, never raw samples. A message of another ``VERSION`` is refused
with MessageError, so a coordinator never merges what it does not understand.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvbench.engine.worker import WorkerSummary
from kvbench.errors import MessageError
from kvbench.metrics.snapshot import IntervalSnapshot

VERSION = 1


@dataclass(frozen=True, slots=True)
class Hello:
    """Cluster worker -> coordinator, first on a connection opened back to it: who I am."""

    worker: int
    kvbench_version: str
    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Ready:
    """Worker -> coordinator: every connection is open and set up."""

    worker: int
    host: str
    pid: int
    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Failed:
    """Worker -> coordinator: the worker cannot go on. ``kind`` is ``unreachable`` or ``bug``."""

    worker: int
    kind: str
    message: str
    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Preload:
    """Coordinator -> worker: store your share of the keyspace."""

    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Start:
    """Coordinator -> worker: begin at ``start_ns`` on the monotonic clock."""

    start_ns: int
    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Stop:
    """Coordinator -> worker: end the measured window now and drain."""

    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Worker -> coordinator: one interval (or the preload's whole record)."""

    worker: int
    snapshot: IntervalSnapshot
    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Done:
    """Worker -> coordinator: the run is over for this worker."""

    worker: int
    summary: WorkerSummary
    version: int = VERSION


Message = Hello | Ready | Failed | Preload | Start | Stop | Snapshot | Done


def check(message: object) -> Message:
    """Return ``message`` if it is a known message of this version.

    Raises:
        MessageError: anything else.
    """
    if not isinstance(message, Hello | Ready | Failed | Preload | Start | Stop | Snapshot | Done):
        raise MessageError(f"unexpected message {type(message).__name__}")
    check_version(message.version)
    return message


def check_version(version: int) -> None:
    """Raise MessageError unless ``version`` is this protocol's."""
    if version != VERSION:
        raise MessageError(f"message version {version}, expected {VERSION}")
