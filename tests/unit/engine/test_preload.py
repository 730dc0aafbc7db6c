"""The preload sends its sets from a source of its own (engine/worker.py).

Against in-memory transports that answer every set on the next loop turn: each key of
the worker's share is stored once, and the run's source, which the connections draw from
afterwards, is never touched, during the preload or after (it used to be borrowed: its
chunk replaced by the preload's sets, then put back).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kvbench.config import load_config
from kvbench.engine.setup import codec_factory_for
from kvbench.engine.shards import source_for
from kvbench.engine.worker import Worker, WorkerSpec

KEYS = 300


class Answering(asyncio.Transport):
    """Answers each set with STORED on the next loop turn, through whichever protocol
    reads now (the connection's, or its pump's reader)."""

    def __init__(self, conn: Any, check: Any) -> None:
        super().__init__()
        self.protocol: Any = conn
        self.keys: list[bytes] = []
        self._check = check

    def write(self, data: Any) -> None:
        self._check()
        lines = bytes(data).split(b"\r\n")
        sets = [line.split()[1] for line in lines if line.startswith(b"set ")]
        self.keys += sets
        asyncio.get_running_loop().call_soon(
            lambda: self.protocol.data_received(b"STORED\r\n" * len(sets))
        )

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def abort(self) -> None:
        raise AssertionError("nothing should fail")


def test_the_preload_stores_each_key_once_and_leaves_the_runs_source_as_it_was() -> None:
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "workload.keys": (str(KEYS), "--keys"),
            "workload.ratio": ("1:1", "--ratio"),
        },
        1,
    )
    worker = Worker(WorkerSpec(config, 0, 1, 3, None), lambda snap: None)
    shard = worker.shards[0]
    cursor = shard.cursor
    cursor.advance()  # the run's chunk, read up to 7
    cursor.pos = 7
    before = (cursor.chunk, cursor.pos, cursor.size)
    twin = source_for(shard.plan, shard.target)  # draws what the run's source draws
    twin.next_chunk()

    def untouched() -> None:  # at every write of the preload
        assert (cursor.chunk, cursor.pos, cursor.size) == before

    transports = []
    for _ in range(3):
        conn = worker.make_connection(codec_factory_for(shard.target), None, 1, shard)
        worker.connections.append(conn)
        transports.append(Answering(conn, untouched))
        conn.connection_made(transports[-1])
    snapshot = asyncio.run(asyncio.wait_for(worker.preload(), 30))
    stored = [key for t in transports for key in t.keys]
    assert sorted(stored) == sorted(shard.plan.key_table)  # each key once
    assert snapshot.counts == {"set": {"stored": KEYS}}
    assert (cursor.chunk, cursor.pos, cursor.size) == before
    assert all(conn.cursor is cursor and conn.inflight == 0 for conn in worker.connections)
    assert shard.source.next_chunk().keys == twin.next_chunk().keys  # nothing drawn
