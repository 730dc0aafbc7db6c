"""Ctrl-C while a worker process is still starting: it ignores it, no traceback.

A terminal's Ctrl-C reaches every process of the foreground group, workers included. A
spawned worker spends its first ~0.1-1 s importing before ``worker_main`` can ignore
SIGINT; one hit then used to die with a KeyboardInterrupt traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.servers import Server

pytestmark = pytest.mark.integration

# Run in a session of its own, so its Ctrl-C (to its whole group, as a terminal sends it)
# reaches its workers and nothing else.
SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from kvbench.config import load_config
    from kvbench.runner import messages as m, worker_specs
    from kvbench.runner.local import LocalLauncher

    signal.signal(signal.SIGINT, lambda *_: print("coordinator: Ctrl-C seen", flush=True))
    config = load_config(None, {{"target.urls": (["memcached://{address}"], "T"),
                                "load.connections": ("2", "-c")}}, 2)
    launcher = LocalLauncher()
    pipes = launcher.start(worker_specs(config))
    os.killpg(0, signal.SIGINT)  # the workers are still importing
    for pipe in pipes:
        if not pipe.poll(60):
            sys.exit("no Ready within 60 s")
        print(type(m.check(pipe.recv())).__name__, flush=True)
        pipe.send(m.Stop())
    launcher.stop()
    print("exit codes", sorted(set(launcher.exited().values())), flush=True)
    """
)


def test_a_worker_that_was_starting_ignores_ctrl_c(memcached_server: Server) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(address=memcached_server.address)],
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "coordinator: Ctrl-C seen",
        "Ready",
        "Ready",
        "exit codes ['worker process exited with code 0']",
    ]
