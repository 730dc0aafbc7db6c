"""Messages between a coordinator and its workers (versioned, small, picklable).

One set for both kinds of run: a load run's workers send interval snapshots, a queue
run's producers and consumers send progress reports and intervals (a consumer's receipts
travel in its progress reports as two compact arrays). Workers send snapshots, never raw
samples. A message of another ``VERSION`` is refused with MessageError, so a coordinator
never merges what it does not understand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvbench.errors import MessageError

if TYPE_CHECKING:  # what the messages carry: the coordinator imports these as they arrive
    from kvbench.engine.queue_worker import QueueInterval, QueueProgress, QueueSummary
    from kvbench.engine.spec import WorkerSummary
    from kvbench.metrics.snapshot import IntervalSnapshot

VERSION = 2  # (2: a worker's summary says its first error reply, error_said)


@dataclass(frozen=True, slots=True)
class _Versioned:
    """What every message carries: the version of this set (by keyword only, so each
    message's own fields come first)."""

    version: int = field(default=VERSION, kw_only=True)


@dataclass(frozen=True, slots=True)
class Hello(_Versioned):
    """Cluster worker -> coordinator, first on a connection opened back to it: who I am."""

    worker: int
    kvbench_version: str


@dataclass(frozen=True, slots=True)
class Ready(_Versioned):
    """Worker -> coordinator: every connection is open and set up."""

    worker: int
    host: str
    pid: int
    # On another machine: its address on the link to the coordinator, and its monotonic
    # clock's offset from the coordinator's (runner/cluster.py); "" and 0 for a local pipe.
    address: str = ""
    clock_offset_ns: int = 0


@dataclass(frozen=True, slots=True)
class Failed(_Versioned):
    """Worker -> coordinator: the worker cannot go on. ``kind`` is ``unreachable``,
    ``config`` (a replay's trace has a bad row, or its spool cannot be written: ``path``
    names the file and line, or ``TMPDIR``), ``memory`` (a MemoryError: a limit, said in
    one line) or ``bug``;
    the coordinator's pool (runner/pool.py) says ``exited`` for a worker gone without a
    word."""

    worker: int
    kind: str
    message: str
    path: str = ""


@dataclass(frozen=True, slots=True)
class Preload(_Versioned):
    """Coordinator -> worker: store your share of the keyspace."""


@dataclass(frozen=True, slots=True)
class Start(_Versioned):
    """Coordinator -> worker: begin at ``start_ns`` on the monotonic clock."""

    start_ns: int


@dataclass(frozen=True, slots=True)
class Stop(_Versioned):
    """Coordinator -> worker: end the measured window now and drain."""


@dataclass(frozen=True, slots=True)
class Consume(_Versioned):
    """Coordinator -> a queue's consumer: start dequeuing now (--consumers-start-after)."""


@dataclass(frozen=True, slots=True)
class Snapshot(_Versioned):
    """Worker -> coordinator: one interval (or the preload's whole record)."""

    worker: int
    snapshot: IntervalSnapshot


@dataclass(frozen=True, slots=True)
class Report(_Versioned):
    """A queue's producer or consumer -> coordinator: a progress report or an interval."""

    worker: int
    report: QueueProgress | QueueInterval


@dataclass(frozen=True, slots=True)
class Done(_Versioned):
    """Worker -> coordinator: the run is over for this worker."""

    worker: int
    summary: WorkerSummary | QueueSummary


Message = Hello | Ready | Failed | Preload | Start | Stop | Consume | Snapshot | Report | Done
_TYPES = (Hello, Ready, Failed, Preload, Start, Stop, Consume, Snapshot, Report, Done)


def check(message: object) -> Message:
    """Return ``message`` if it is a known message of this version.

    Raises:
        MessageError: anything else.
    """
    if not isinstance(message, _TYPES):
        raise MessageError(f"unexpected message {type(message).__name__}")
    check_version(message.version)
    return message


def check_version(version: int) -> None:
    """Raise MessageError unless ``version`` is this protocol's."""
    if version != VERSION:
        raise MessageError(f"message version {version}, expected {VERSION}")
