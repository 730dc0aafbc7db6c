"""A worker's snapshots reach the coordinator whole, however big, under uvloop too."""

from __future__ import annotations

import asyncio
import fcntl
import multiprocessing
import sys
import termios
import threading
import time

import pytest

from kvbench.runner.process import watch_pipe

uvloop = pytest.importorskip("uvloop")


def queued(fd: int) -> int:
    """Bytes waiting to be read on a socket (FIONREAD)."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


def test_a_message_bigger_than_the_socket_buffer_is_sent_whole() -> None:
    worker_end, coordinator_end = multiprocessing.Pipe()
    message = {"histograms": [bytes([k]) * 1_000_000 for k in range(4)]}  # ~4 MB
    received: list[object] = []

    def coordinator() -> None:
        # not reading yet when the worker sends: wait until its send has filled the
        # pipe's buffer (bytes queued to read), then read
        deadline = time.monotonic() + 30
        while queued(coordinator_end.fileno()) < 64 * 1024:
            assert time.monotonic() < deadline, "the worker never sent"
            time.sleep(0.005)
        received.append(coordinator_end.recv())

    async def worker() -> None:
        watch_pipe(worker_end, lambda: None)
        worker_end.send(message)
        asyncio.get_running_loop().remove_reader(worker_end.fileno())

    reader = threading.Thread(target=coordinator)
    reader.start()
    try:
        uvloop.run(worker())
    finally:
        reader.join(timeout=10)
    assert received == [message]


class _Spec:
    worker_index = 3


def _failing_serve(*args: object) -> object:
    async def serve() -> None:
        raise BrokenPipeError(32, "Broken pipe")  # as its send of Ready to a closed pipe

    return serve()


def test_a_worker_whose_coordinator_closed_the_pipe_ends_quietly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C while a worker starts: the coordinator closes its end, the worker's send
    of Ready breaks, and its report of that as a bug breaks too. Nobody is left to tell:
    the worker ends without raising (was: multiprocessing printed both tracebacks, which
    the interrupted run's stderr then showed)."""
    from kvbench.runner import process

    monkeypatch.setattr(process, "serve", _failing_serve)
    worker_end, coordinator_end = multiprocessing.Pipe()
    coordinator_end.close()
    process.run_worker(_Spec(), worker_end)  # type: ignore[arg-type]  # (serve ignores it)
    assert worker_end.closed


def test_a_worker_bug_is_still_reported_and_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvbench.runner import process

    monkeypatch.setattr(process, "serve", _failing_serve)
    worker_end, coordinator_end = multiprocessing.Pipe()
    with pytest.raises(BrokenPipeError):
        process.run_worker(_Spec(), worker_end)  # type: ignore[arg-type]
    failed = coordinator_end.recv()
    assert (failed.worker, failed.kind) == (3, "bug") and "BrokenPipeError" in failed.message


def _serve_out_of_memory(*args: object) -> object:
    async def serve() -> None:
        raise MemoryError  # as a key table too big for the address-space limit

    return serve()


def test_a_worker_out_of_memory_reports_one_line_and_raises_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A limit, not a bug: the coordinator gets one line saying which limit, and the
    worker ends without the traceback multiprocessing printed for each worker (was:
    "preflight: worker 1: MemoryError" under two tracebacks)."""
    import resource

    from kvbench.runner import process

    monkeypatch.setattr(process, "serve", _serve_out_of_memory)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (3 << 30, resource.RLIM_INFINITY))
    worker_end, coordinator_end = multiprocessing.Pipe()
    process.run_worker(_Spec(), worker_end)  # type: ignore[arg-type]
    failed = coordinator_end.recv()
    assert (failed.worker, failed.kind) == (3, "memory")
    assert failed.message.startswith(
        "ran out of memory (MemoryError): this process's address-space limit (ulimit -v) is "
        "3.0 GiB; every worker holds the whole key table"
    )
    assert "\n" not in failed.message
