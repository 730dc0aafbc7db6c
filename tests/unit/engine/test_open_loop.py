"""The open-loop dispatcher's drops, without sockets."""

from __future__ import annotations

from kvbench.config import load_config
from kvbench.engine.open_loop import OpenLoopDispatcher
from kvbench.engine.pacing import Schedule
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.metrics.outcome import Outcome

DROPPED = int(Outcome.DROPPED)


def test_drops_are_counted_by_op_and_taken_from_every_server_in_turn() -> None:
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1", "memcached://127.0.0.2:1"], "T"),
            "load.rate": ("1000", "--rate"),
            "workload.seed": (5, "--seed"),
        },
        1,
    )
    worker = Worker(WorkerSpec(config, 0, 1, 2, None), lambda snap: None)
    dispatcher = OpenLoopDispatcher(worker, Schedule(1000, 0, "uniform", seed=1), 10**9)
    expected = [
        worker.shards[i % 2].source.ops[worker.shards[i % 2].source.pos + i // 2] for i in range(10)
    ]
    dispatcher._drop(10)
    assert [shard.source.pos for shard in worker.shards] == [5, 5]
    dropped = {op: row[DROPPED] for op, row in enumerate(worker.recorder.counts) if row[DROPPED]}
    assert sum(dropped.values()) == 10
    assert dropped == {op: expected.count(op) for op in set(expected)}
    assert dispatcher.next_index == 10
