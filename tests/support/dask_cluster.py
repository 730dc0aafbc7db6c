"""A real Dask cluster on loopback for tests: ``dask scheduler`` plus N ``dask worker``s.

Workers run without a nanny, one thread each, so each Popen is the very process a load
worker runs in (its pid is the one the result lists, and killing it loses that worker).
Every process has its own session and is stopped when the context ends; logs go to files
in the work directory and are quoted when the cluster fails to come up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import free_port, wait_listening

START_TIMEOUT_S = 60.0


@dataclass
class DaskCluster:
    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]


def require_distributed() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        message = "distributed is not installed (pip install 'kvbench[cluster]')"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as handle:
        return subprocess.Popen(
            argv, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_group(proc: subprocess.Popen[bytes], timeout_s: float = 10) -> None:
    """End ``proc`` and its process group: SIGTERM, then SIGKILL after ``timeout_s``."""
    if proc.poll() is not None:
        return
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout_s)


def _tails(workdir: Path) -> str:
    return "\n".join(
        f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        for log in sorted(workdir.glob("*.log"))
    )


def _wait_for_workers(address: str, count: int, workdir: Path) -> None:
    from distributed import Client

    deadline = time.monotonic() + START_TIMEOUT_S
    with Client(address, timeout=START_TIMEOUT_S, set_as_default=False) as client:
        while len(client.nthreads()) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} Dask workers did not register\n{_tails(workdir)}")
            time.sleep(0.2)


@contextmanager
def dask_cluster(n_workers: int, workdir: Path) -> Iterator[DaskCluster]:
    """A scheduler on a free loopback port and ``n_workers`` single-thread workers."""
    require_distributed()
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    python = [sys.executable, "-m"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        scheduler = _start(
            [*python, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
             str(port), "--no-dashboard"],
            workdir / "scheduler.log",
        )  # fmt: skip
        procs.append(scheduler)
        wait_listening("127.0.0.1", port, scheduler, timeout_s=START_TIMEOUT_S)
        workers = []
        for i in range(n_workers):
            worker = _start(
                [*python, "distributed.cli.dask_worker", address, "--nthreads", "1",
                 "--nworkers", "1", "--no-nanny", "--no-dashboard", "--name", f"w{i}",
                 "--local-directory", str(workdir / f"w{i}")],
                workdir / f"worker{i}.log",
            )  # fmt: skip
            procs.append(worker)
            workers.append(worker)
        _wait_for_workers(address, n_workers, workdir)
        yield DaskCluster(address, scheduler, workers)
    finally:
        for proc in reversed(procs):
            stop_group(proc)
