"""The fork server local workers are forked from (runner/local.py), started on first use.

The server is exec'd clean, like a spawned process, and imports only ``PRELOAD``, once;
every worker forked from it starts with those modules loaded and nothing of the
coordinator's. It is started when the first workers are, not earlier: started beside the
CLI's own imports it only slowed them on a busy 2-core machine (the preflight came later).
Standard library only.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Iterator
from multiprocessing import forkserver
from typing import Any

# What the server imports once, for every worker it forks (the worker's entry pulls in
# the engine, the codecs, numpy and uvloop: 1-1.5 s that a spawned worker paid each time).
PRELOAD = ["kvbench.runner.process"]


def context() -> Any:
    """The fork server's multiprocessing context, the server running (``start``)."""
    start()
    return multiprocessing.get_context("forkserver")


def start() -> None:
    """Start the server unless it runs: ignoring SIGINT, so that it and the workers it
    forks (they keep its handlers) never die of a Ctrl-C meant for the coordinator."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    with children_ignore_sigint():
        forkserver.ensure_running()


@contextlib.contextmanager
def children_ignore_sigint() -> Iterator[None]:
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
