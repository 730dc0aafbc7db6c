"""The fork server local workers are forked from (runner/local.py).

The server holds the workers' modules (``PRELOAD``), imported once: every worker forked
from it starts with them loaded, in milliseconds, and holds nothing of a run's. It is
made in one of two ways:

- **Forked in place** (``start_in_place``), the usual way. The kvbench command calls it
  first, for a command that runs workers, before it imports its CLI: the process imports
  what it and the server both need (``SHARED``: numpy, the config, the codecs, the
  metrics), then forks, and the child becomes the server and imports the rest (asyncio,
  the engine) while the parent imports its CLI. So the server pays for neither a second
  interpreter nor a second import of the shared modules (about 0.25 s of CPU at every
  run here), and holds what a clean one would: the workers' modules, and none of the
  CLI, the history or a run's state, which do not exist yet. The coordinator imports
  nothing it would not have imported anyway.
- **Exec'd clean**, like a spawned process, when the first workers start (``context``):
  for a command not known to run workers, a process with a second thread by then
  (forking one is unsafe: a lock another thread held stays held in the child; numpy's
  BLAS starts threads when a user asks for them), and on platforms other than Linux.

Standard library (and runner/interrupts, errors) only; ``start_in_place`` imports the
shared modules by name.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import multiprocessing
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Iterator, Sequence
from multiprocessing import forkserver, util
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


# What the coordinator and the server both import, imported before the fork so that the
# server has them for nothing: numpy, the config, the codecs, the metrics, the workload's
# models (three quarters of the server's imports). Only modules a run's coordinator
# imports anyway: those the workers alone need (asyncio, ssl, the engine, numpy.random,
# the workload plan) are the server's own imports after the fork, so the coordinator does
# not hold them (tests/unit/runner/test_forkserver.py holds both).
SHARED = (
    "numpy",
    "kvbench.config.limits",
    "kvbench.config.queue",
    "kvbench.engine.connect_errors",
    "kvbench.engine.setup",
    "kvbench.metrics.recorder",
    "kvbench.metrics.snapshot",
    "kvbench.protocols.registry",
    "kvbench.results.environment",
    "kvbench.runner.local",
    "kvbench.runner.messages",
    "kvbench.workload.models",
    "kvbench.workload.slots",
)


def context() -> Any:
    """The fork server's multiprocessing context, the server running (``start``)."""
    start()
    return multiprocessing.get_context("forkserver")


def start_in_place() -> None:
    """Import ``SHARED`` and start the server as a fork of this process (see the
    module's docstring); unless this process runs a second thread by then, or is not on
    Linux: then ``context`` starts it exec'd clean, when the workers start."""
    if not sys.platform.startswith("linux"):
        return
    for name in SHARED:
        importlib.import_module(name)
    if not single_threaded():
        return
    try:
        start(in_place=True)
    except Exception:
        # Started again when the workers start, where the CLI says what failed in one
        # line (a TMPDIR too long for the server's socket, no descriptor left).
        return


def single_threaded() -> bool:
    """Whether this process runs one thread (Linux: /proc/self/task), native ones counted."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def start(*, in_place: bool = False) -> None:
    """Start the server unless it runs, so that it and the workers it forks (they keep
    its dispositions) never die of a signal meant for the coordinator (_server_signals).
    ``in_place``: fork this process to make it (``start_in_place`` decides when)."""
    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    with signals_held():
        try:
            with _forking_in_place() if in_place else contextlib.nullcontext():
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


@contextlib.contextmanager
def _forking_in_place() -> Iterator[None]:
    """While inside, multiprocessing starts its fork server by forking this process
    instead of exec'ing a new interpreter: it runs the same command (``-c CODE``), in the
    child. The resource tracker, started the same way, is still exec'd: a fork of this
    process would hold its memory for nothing."""
    spawn = util.spawnv_passfds

    def fork_server(path: bytes, args: Sequence[Any], passfds: Sequence[int]) -> int:
        code = str(args[-1]) if len(args) >= 2 and args[-2] == "-c" else ""
        if "multiprocessing.forkserver" not in code:
            return spawn(path, args, passfds)
        for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
            stream.flush()
        pid = os.fork()
        if pid == 0:
            _serve(code, passfds)
        return pid

    util.spawnv_passfds = fork_server
    try:
        yield
    finally:
        util.spawnv_passfds = spawn


def _serve(code: str, passfds: Sequence[int]) -> None:
    """The forked child: become the server as an exec'd one would (only ``passfds``
    open), and never return into the caller's frames (their ``finally`` blocks and
    ``with`` exits are the coordinator's)."""
    status = 1
    try:
        # Nothing the parent made is ever collected here: an object owning one of the
        # descriptors closed below would otherwise close whatever reuses its number.
        gc.freeze()
        signal.set_wakeup_fd(-1)
        _close_all_but(passfds)
        exec(code, {"__name__": "__kvbench_fork_server__"})  # multiprocessing's own command
        status = 0
    except SystemExit as stop:  # the server's way to end: the coordinator has gone
        status = stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(status)


def _close_all_but(keep: Sequence[int]) -> None:
    """Close every descriptor from 3 up except ``keep``, as spawning a process does."""
    low = 3
    for fd in sorted(set(keep)):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


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
