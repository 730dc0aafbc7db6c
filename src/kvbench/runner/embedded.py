"""A throwaway memcached for ``kvbench run`` with no target: started, benchmarked, stopped."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kvbench.errors import ConfigError, RunAborted

# prctl(2): the signal a child gets when its parent ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1

INSTALL_HINT = (
    "no target given and memcached is not installed: install it (apt-get install memcached, "
    "brew install memcached) or name a target, e.g. kvbench run memcached://HOST:11211"
)


def find_memcached() -> str | None:
    """The memcached binary on PATH, or None."""
    return shutil.which("memcached")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the server's child, before exec: the kernel kills it when this process ends,
    however it ends (SIGKILL included), so no throwaway server outlives its run. Linux's
    PR_SET_PDEATHSIG; elsewhere nothing (the ``finally`` below still stops it)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def split_cpus(cpus: set[int]) -> tuple[set[int], set[int]]:
    """(the server's, the client's) CPUs of ``cpus`` for a server started on this machine:
    the server the lower half (at least one), the client the rest; with one CPU both
    share it."""
    ordered = sorted(cpus)
    if len(ordered) < 2:
        return set(ordered), set(ordered)
    half = len(ordered) // 2
    return set(ordered[:half]), set(ordered[half:])


@contextmanager
def throwaway_memcached(memory_mb: int = 256) -> Iterator[str]:
    """Start memcached on a free loopback port; yield its URL; stop it afterwards.

    The server and the client share this machine, so each gets cores of its own
    (``split_cpus``): memcached one thread per server CPU, pinned to them, and this
    process (and the workers it starts, which inherit its CPUs) pinned to the rest, so
    the default ``--processes`` (one per CPU this process may use) leaves the server its
    cores. Sharing them, two workers and a 4-thread server on 2 cores each waited half
    the window for a core, and the first run a user saw warned about its own defaults.

    Raises:
        ConfigError: memcached is not installed (the message says how to install it).
        RunAborted: it did not start.
    """
    binary = find_memcached()
    if binary is None:
        raise ConfigError("target", INSTALL_HINT)
    port = _free_port()
    mine = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    server_cpus, client_cpus = split_cpus(mine)
    threads = max(1, len(server_cpus)) if mine else 4
    argv = [
        binary,
        "-l",
        "127.0.0.1",
        "-p",
        str(port),
        "-U",
        "0",
        "-m",
        str(memory_mb),
        "-t",
        str(threads),
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv += ["-u", "root"]  # memcached refuses to run as root without -u
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    if server_cpus != client_cpus:
        with contextlib.suppress(OSError):  # gone already: the wait below says why
            os.sched_setaffinity(proc.pid, server_cpus)
        os.sched_setaffinity(0, client_cpus)
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
                raise RunAborted(
                    "preflight", f"memcached exited at start: {err or proc.returncode}"
                )
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RunAborted(
                        "preflight", "memcached did not start listening in 10s"
                    ) from None
                time.sleep(0.02)
        yield f"memcached://127.0.0.1:{port}"
    finally:
        if mine and server_cpus != client_cpus:
            os.sched_setaffinity(0, mine)
        # Killed, not stopped: nothing in it is kept, and a SIGTERM stop waits most of a
        # second for memcached's background threads, after the user's run has ended.
        proc.kill()
        proc.wait()
