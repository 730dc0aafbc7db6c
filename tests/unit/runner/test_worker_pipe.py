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
