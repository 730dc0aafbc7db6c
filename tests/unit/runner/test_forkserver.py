"""Local workers are forked from a fork server that preloaded the worker's modules."""

from __future__ import annotations

import gc
import os
import signal
import sys
from multiprocessing.connection import Connection
from types import SimpleNamespace

import pytest

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


def test_a_worker_is_started_with_the_run_ending_signals_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C while the coordinator hands a new worker its preparation data cut it
    short: the worker read EOFError, and the fork server printed that traceback under the
    run's one line (3 in 190 start-up Ctrl-Cs). The coordinator holds the signals while
    each worker starts, and lists it before they are delivered."""
    from kvbench.runner import local

    held: list[set[int]] = []

    class Started:
        def __init__(self, **kwargs: object) -> None:
            pass

        def start(self) -> None:
            held.append(set(signal.pthread_sigmask(signal.SIG_BLOCK, [])))

    context = forkserver.context()
    monkeypatch.setattr(context, "Process", Started)
    monkeypatch.setattr(forkserver, "context", lambda: context)
    launcher = local.LocalLauncher()
    specs = [SimpleNamespace(process_name=f"w{i}") for i in range(2)]
    pipes = launcher.start(specs)  # type: ignore[arg-type]
    assert len(held) == 2 and all(set(interrupts.SIGNALS) <= mask for mask in held)
    assert not set(interrupts.SIGNALS) & set(signal.pthread_sigmask(signal.SIG_BLOCK, []))
    assert len(launcher._procs) == 2
    for pipe in pipes:
        pipe.close()


def test_the_main_module_a_worker_reimports_imports_no_cli() -> None:
    """A worker re-imports the coordinator's main module (multiprocessing): the kvbench
    script's is kvbench/__main__.py, which must not pull in the CLI (was: the whole CLI,
    jinja2 and the reports, in every worker of every round)."""
    import subprocess

    code = "import sys, kvbench.__main__; print(sorted(m for m in sys.modules if m.startswith('kvbench')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['kvbench', 'kvbench.__main__']"


# Starts the fork server as the kvbench command does (``start_in_place``), after opening a
# socket pair of its own, has it fork one worker (served once its preload is done), and
# prints what the server is: its command line against this process's, its descriptors'
# targets, and whether this process holds the workers' own modules.
_START_IN_PLACE = """
import json, os, socket, sys, threading, time
if sys.argv[1] == "threaded":
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
mine = socket.socketpair()
from kvbench.runner import forkserver
forkserver.start_in_place()
forkserver.start()  # what the first workers' start does: the server runs, so nothing
me = os.getpid()
def children():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
            except OSError:
                continue
            tracker = b"\\0-c\\0from multiprocessing.resource_tracker" in cmdline
            if int(stat.rsplit(")", 1)[1].split()[1]) == me and not tracker:
                yield int(entry), cmdline
def targets(pid):
    # A descriptor the server closes between the listing and the readlink (the one it
    # held for a worker it has just reaped) is gone, not a failure: what the test asks is
    # whether any it still holds is one of this process's.
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            yield os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
(server, cmdline), = children()
worker = forkserver.context().Process(target=os.getpid)  # served once the preload is done
worker.start()
worker.join(60)
status = open(f"/proc/{server}/status").read()
ignored = int(status.split("SigIgn:")[1].split()[0], 16)
print(json.dumps({
    "forked": cmdline == open("/proc/self/cmdline", "rb").read(),
    "exec'd": b"\\0-c\\0from multiprocessing.forkserver import main" in cmdline,
    "ignores": all(ignored >> (s - 1) & 1 for s in (2, 15, 1)),
    "worker_exit": worker.exitcode,
    "its_fds": sorted(targets(server)),
    "mine": sorted(os.readlink(f"/proc/self/fd/{s.fileno()}") for s in mine),
    "engine_here": "kvbench.engine.worker" in sys.modules or "asyncio" in sys.modules,
}))
"""


def start_in_place(mode: str, blas_threads: str = "1") -> dict[str, object]:
    """``_START_IN_PLACE`` in a fresh process (numpy's BLAS as the kvbench command sets
    it, unless ``blas_threads`` says otherwise)."""
    import json
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _START_IN_PLACE, mode],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "OPENBLAS_NUM_THREADS": blas_threads},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_kvbench_command_forks_its_fork_server_holding_none_of_its_descriptors() -> None:
    """Was: the server was exec'd clean at every run, a second interpreter that imported
    numpy, the config and the codecs again (about 0.25 s of CPU per run). Forked from the
    command before its CLI is imported, the server is that process's copy: it ignores the
    run's signals from its first instruction as an exec'd one did, holds none of the
    parent's descriptors, and the parent has not imported the workers' own modules (its
    memory: tests/unit/cli/test_coordinator_imports.py)."""
    found = start_in_place("single")
    assert found["forked"] and not found["exec'd"]
    assert found["ignores"] and found["worker_exit"] == 0
    its_fds, mine = found["its_fds"], found["mine"]
    assert isinstance(its_fds, list) and isinstance(mine, list)
    assert len(mine) == 2 and not set(mine) & set(its_fds)
    assert not found["engine_here"]


@pytest.mark.parametrize("thread", ["python", "blas"])
def test_a_process_with_a_second_thread_gets_an_execd_server(thread: str) -> None:
    """Forking a process that runs a second thread is unsafe (a lock it held stays held
    in the child): the server is exec'd clean instead, as before. numpy's BLAS threads
    count (a user's OPENBLAS_NUM_THREADS=2 starts one when numpy is imported)."""
    if thread == "python":
        found = start_in_place("threaded")
    else:
        found = start_in_place("single", blas_threads="2")
    assert found["exec'd"] and not found["forked"]
    assert found["ignores"] and found["worker_exit"] == 0


def test_the_command_starts_a_fork_server_first_only_for_what_runs_workers() -> None:
    from kvbench.__main__ import starts_workers

    assert starts_workers(["run", "memcached://127.0.0.1:11211"])
    assert starts_workers(["replay", "t.csv", "redis://127.0.0.1:6379", "--speed", "max"])
    assert not starts_workers(["history"])
    assert not starts_workers([])
    assert not starts_workers(["run", "--help"])
    assert not starts_workers(["run", "--cluster", "127.0.0.1:8786"])  # Dask's workers
    # put-get-batches runs its clients in the coordinator; other presets run workers
    assert not starts_workers(["run", "--preset", "put-get-batches"])
    assert not starts_workers(["run", "-q", "--preset=put-get-batches", "memcached://h"])
    assert starts_workers(["run", "--preset", "ycsb-a"])
    assert starts_workers(["run", "--preset", "no-such-preset"])  # (the CLI's error)
