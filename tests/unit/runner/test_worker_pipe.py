"""A worker's snapshots reach the coordinator whole, however big, under uvloop too."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time

import pytest

from kvbench.runner.process import watch_pipe

uvloop = pytest.importorskip("uvloop")


def test_a_message_bigger_than_the_socket_buffer_is_sent_whole() -> None:
    worker_end, coordinator_end = multiprocessing.Pipe()
    message = {"histograms": [bytes([k]) * 1_000_000 for k in range(4)]}  # ~4 MB
    received: list[object] = []

    def coordinator() -> None:
        time.sleep(0.2)  # not reading yet when the worker sends
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
