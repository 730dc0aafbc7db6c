"""Local workers are forked from a fork server that preloaded the worker's modules."""

from __future__ import annotations

import gc
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


def frozen(pipe: Connection) -> None:
    pipe.send(gc.get_freeze_count())
    pipe.close()


def test_a_worker_starts_with_the_servers_objects_frozen() -> None:
    """The fork server froze what its imports made: the worker's own full collection
    (before its run) no longer writes to those objects' pages, so they stay shared with
    the server instead of being copied into every worker (~5 MB each at 100,000 keys)."""
    context = forkserver.context()
    parent, child = context.Pipe()
    proc = context.Process(target=frozen, args=(child,), daemon=True)
    proc.start()
    child.close()
    assert parent.poll(60)
    count = parent.recv()
    proc.join(10)
    assert count > 10_000  # numpy, asyncio, the engine and the codecs: ~30,000 objects
    assert forkserver.PRELOAD[-1] == "kvbench.runner._server_frozen"


def test_the_main_module_a_worker_reimports_imports_no_cli() -> None:
    """A worker re-imports the coordinator's main module (multiprocessing): the kvbench
    script's is kvbench/__main__.py, which must not pull in the CLI (was: the whole CLI,
    jinja2 and the reports, in every worker of every round)."""
    import subprocess

    code = "import sys, kvbench.__main__; print(sorted(m for m in sys.modules if m.startswith('kvbench')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['kvbench', 'kvbench.__main__']"
