"""A throwaway memcached for ``kvbench run`` with no target: started, benchmarked, stopped."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kvbench.errors import ConfigError, RunAborted

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


@contextmanager
def throwaway_memcached(memory_mb: int = 256, threads: int = 4) -> Iterator[str]:
    """Start memcached on a free loopback port; yield its URL; stop it afterwards.

    Raises:
        ConfigError: memcached is not installed (the message says how to install it).
        RunAborted: it did not start.
    """
    binary = find_memcached()
    if binary is None:
        raise ConfigError("target", INSTALL_HINT)
    port = _free_port()
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
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
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
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
