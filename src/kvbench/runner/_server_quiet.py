"""Imported by the fork server (runner/forkserver.py's PRELOAD), and by nothing else: a
worker it forks whose start the coordinator cut short ends without a traceback.

The coordinator hands each new worker its preparation data through a pipe
(multiprocessing's spawn). A Ctrl-C while it does so ends the coordinator before the
data is whole, and the worker, reading it, gets EOFError; multiprocessing's fork server
then prints that traceback through ``sys.excepthook``, on the terminal the coordinator
prints its one line to (seen about once in 60 Ctrl-Cs at start-up). Nobody is left to
tell by then: the worker ends quietly. Any other error still prints.
"""

from __future__ import annotations

import sys
from types import TracebackType


def _quiet_when_the_coordinator_left(
    kind: type[BaseException], error: BaseException, trace: TracebackType | None
) -> None:
    if isinstance(error, EOFError | BrokenPipeError | ConnectionResetError):
        return  # (the coordinator is gone, or going: it reports the run)
    sys.__excepthook__(kind, error, trace)


sys.excepthook = _quiet_when_the_coordinator_left
