"""Messages between the queue coordinator and its producer/consumer processes.

Versioned, small and picklable, like runner/messages.py (a run's and a queue run's
workers never talk to the other kind of coordinator). Consumers' receipts travel in the
progress reports as two compact arrays (producer ids, sequence numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvbench.engine.queue_worker import QueueInterval, QueueProgress, QueueSummary
from kvbench.errors import MessageError
from kvbench.runner.messages import VERSION, Failed, Ready, Stop, check_version


# Ready, Failed and Stop are the run's own messages (runner/messages.py), same version.
@dataclass(frozen=True, slots=True)
class Start:
    """Coordinator -> worker: begin at ``start_ns``; a consumer dequeues only if ``consume``."""

    start_ns: int
    consume: bool
    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Consume:
    """Coordinator -> consumer: start dequeuing now (--consumers-start-after reached)."""

    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Report:
    """Worker -> coordinator: a progress report or an interval."""

    worker: int
    report: QueueProgress | QueueInterval
    version: int = VERSION


@dataclass(frozen=True, slots=True)
class Done:
    """Worker -> coordinator: finished; its summary."""

    worker: int
    summary: QueueSummary
    version: int = VERSION


Message = Ready | Failed | Start | Consume | Stop | Report | Done

__all__ = [
    "VERSION",
    "Consume",
    "Done",
    "Failed",
    "Message",
    "Ready",
    "Report",
    "Start",
    "Stop",
    "check",
]


def check(message: object) -> Message:
    """Return ``message`` if it is a known queue message of this version.

    Raises:
        MessageError: anything else.
    """
    if not isinstance(message, Ready | Failed | Start | Consume | Stop | Report | Done):
        raise MessageError(f"unexpected message {type(message).__name__}")
    check_version(message.version)
    return message
