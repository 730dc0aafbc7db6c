"""Local workers are forked from a fork server that preloaded the worker's modules."""

from __future__ import annotations

import os
import signal
import sys
from multiprocessing.connection import Connection

from kvbench.runner import forkserver, interrupts


def report(pipe: Connection) -> None:
    pipe.send(
        (
            os.getppid(),
            all(signal.getsignal(s) == signal.SIG_IGN for s in interrupts.SIGNALS),
            "kvbench.engine.worker" in sys.modules,
        )
    )
    pipe.close()


def test_a_worker_starts_with_its_modules_loaded_ignoring_the_run_signals() -> None:
    """Was: spawned, each worker imported numpy, asyncio and the codecs again (1-1.5 s
    before its first request, in every round of a sweep). It ignores SIGINT, SIGTERM and
    SIGHUP from its first instruction, without the coordinator ignoring them meanwhile."""
    context = forkserver.context()
    parent, child = context.Pipe()
    proc = context.Process(target=report, args=(child,), daemon=True)
    proc.start()
    child.close()
    assert parent.poll(60)
    parent_pid, ignores_sigint, preloaded = parent.recv()
    proc.join(10)
    assert parent_pid != os.getpid()  # the fork server's child, not the coordinator's
    assert ignores_sigint and preloaded
    assert proc.exitcode == 0
    assert "kvbench.runner.process" in forkserver.PRELOAD


def test_the_main_module_a_worker_reimports_imports_no_cli() -> None:
    """A worker re-imports the coordinator's main module (multiprocessing): the kvbench
    script's is kvbench/__main__.py, which must not pull in the CLI (was: the whole CLI,
    jinja2 and the reports, in every worker of every round)."""
    import subprocess

    code = "import sys, kvbench.__main__; print(sorted(m for m in sys.modules if m.startswith('kvbench')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['kvbench', 'kvbench.__main__']"
