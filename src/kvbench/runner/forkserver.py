"""The fork server local workers are forked from (runner/local.py), started on first use.

The server is exec'd clean, like a spawned process, and imports only ``PRELOAD``, once;
every worker forked from it starts with those modules loaded and nothing of the
coordinator's. It is started when the first workers are, not earlier: started beside the
CLI's own imports it only slowed them on a busy 2-core machine (the preflight came later).
Standard library (and runner/interrupts, errors) only.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import tempfile
from collections.abc import Iterator
from multiprocessing import forkserver
from typing import Any

from kvbench.errors import ConfigError
from kvbench.runner.interrupts import SIGNALS

# What the server imports once, for every worker it forks (the worker's entry pulls in
# the engine, the codecs, numpy and uvloop: 1-1.5 s that a spawned worker paid each time;
# ``runner.local`` holds the target the coordinator names, ``worker_entry``).
# ``_server_signals`` comes first: it makes the server ignore the signals that end a run;
# ``_server_frozen`` last: it freezes what the others made, so the workers share it.
PRELOAD = [
    "kvbench.runner._server_signals",
    "kvbench.runner.process",
    "kvbench.runner.local",
    "kvbench.runner._server_frozen",
]


def context() -> Any:
    """The fork server's multiprocessing context, the server running (``start``)."""
    start()
    return multiprocessing.get_context("forkserver")


def start() -> None:
    """Start the server unless it runs, so that it and the workers it forks (they keep
    its dispositions) never die of a signal meant for the coordinator (_server_signals)."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    with signals_held():
        try:
            forkserver.ensure_running()
        except OSError:
            # The server listens on a Unix socket in a directory multiprocessing makes in
            # TMPDIR (TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX): past 107 bytes it cannot bind.
            where = tempfile.gettempdir()
            if len(os.fsencode(where)) + _SOCKET_NAME_BYTES <= _SUN_PATH_BYTES:
                raise
            raise ConfigError(
                "TMPDIR",
                f"{where} is too long a path for the workers' Unix socket "
                f"(at most {_SUN_PATH_BYTES - _SOCKET_NAME_BYTES} bytes here): "
                "set TMPDIR to a shorter directory",
            ) from None


# A Unix socket's path holds at most 107 bytes (sun_path, less its NUL), of which
# multiprocessing's directory and listener names take 32 after TMPDIR.
_SUN_PATH_BYTES = 107
_SOCKET_NAME_BYTES = len("/pymp-xxxxxxxx/listener-xxxxxxxx")


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Processes started inside begin with the signals that end a run blocked.

    A blocked signal stays blocked across fork and exec (POSIX), so the server is born
    with them blocked, and the first module it imports (_server_signals) ignores them, then
    unblocks them. The coordinator only blocks them while the server is started: one that
    arrives meanwhile waits, and is delivered (to the coordinator's handler) on leaving,
    never lost. (Was: the coordinator ignored SIGINT around each worker's start, which
    waited for the server to import the worker's modules, 1-1.5 s: a Ctrl-C then was
    lost, and the run went on to the end.)
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
