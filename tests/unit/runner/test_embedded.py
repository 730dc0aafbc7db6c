"""The throwaway memcached's share of the machine, and its end."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import pytest

from kvbench.runner import embedded
from kvbench.runner.embedded import split_cpus
from tests.support import servers


@pytest.mark.parametrize(
    ("cpus", "server", "client"),
    [
        ({0, 1}, {0}, {1}),
        ({0, 1, 2, 3}, {0, 1}, {2, 3}),
        ({1, 2, 5}, {1}, {2, 5}),
        ({3}, {3}, {3}),  # one CPU: shared
    ],
)
def test_the_server_gets_the_lower_half_and_the_client_the_rest(
    cpus: set[int], server: set[int], client: set[int]
) -> None:
    assert split_cpus(cpus) == (server, client)


def test_the_throwaway_memcached_is_killed_not_left_to_its_graceful_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its graceful stop (SIGTERM) took 0.7-1 s after the run had ended; nothing in it is
    worth keeping."""
    servers.require_binary("memcached", "memcached")
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(embedded.subprocess, "Popen", popen)
    with embedded.throwaway_memcached(memory_mb=16) as url:
        assert url.startswith("memcached://127.0.0.1:")
    (proc,) = started
    assert proc.returncode == -signal.SIGKILL
