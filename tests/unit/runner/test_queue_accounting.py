"""The queue coordinator's accounting when Ctrl-C lands while it folds reports in.

A scripted pool stands in for the worker processes; the interrupt is raised from inside
the ledger's fold, the interleaving that once left an interrupted run with receipts
counted and not marked (duplicates the server cannot make) and reports never folded.
"""

from __future__ import annotations

import signal
from array import array
from collections.abc import Iterator
from typing import Any

import pytest

from kvbench.config.model import ReportConfig
from kvbench.config.queue import build_queue_config
from kvbench.engine.queue_worker import QueueProgress, QueueSummary
from kvbench.metrics.delivery import DeliveryLedger
from kvbench.runner import messages as m
from kvbench.runner.queue import QueueCoordinator, _Worker, _worker_row
from kvbench.runner.queue import QueueWorkerSpec as Spec


class ScriptedPool:
    """Hands out one batch of messages per ``receive``."""

    def __init__(self, batches: list[list[tuple[int, m.Message]]]) -> None:
        self.batches = batches
        self.sent: list[tuple[int, m.Message]] = []

    def receive(self, timeout_s: float) -> list[tuple[int, m.Message]]:
        return self.batches.pop(0) if self.batches else []

    def send(self, index: int, message: m.Message) -> None:
        self.sent.append((index, message))

    def broadcast(self, message: m.Message) -> None:
        self.sent.append((-1, message))


def coordinator(batches: list[list[tuple[int, m.Message]]]) -> QueueCoordinator:
    config = build_queue_config(
        "memcacheq://127.0.0.1/q",
        {"producers": "2", "consumers": "1", "messages": "100"},
        ReportConfig(save=False, live=False),
    )
    coord = QueueCoordinator(config)
    specs = [
        Spec(config, "producer", 0, 50, coord.run_tag, 0),
        Spec(config, "producer", 1, 50, coord.run_tag, 1),
        Spec(config, "consumer", 0, 0, coord.run_tag, 2),
    ]
    coord._workers = [_Worker(spec) for spec in specs]
    coord._pool = ScriptedPool(batches)  # type: ignore[assignment]
    return coord


def receipts(taken_ns: int, received: int, pairs: list[tuple[int, int]]) -> m.Report:
    progress = QueueProgress(
        taken_ns,
        received=received,
        producers=array("I", [p for p, _ in pairs]),
        seqs=array("Q", [s for _, s in pairs]),
    )
    return m.Report(2, progress)


@pytest.fixture
def ctrl_c_inside_the_fold(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Ctrl-C arrives right after the first producer's receipts are folded in, to
    Python's own handler, installed here: a test worker's SIGINT may be left to another
    handler at the system's level by what ran before in it (three fresh-clone CI runs
    lost these interrupts, on one worker each; Python's record still said the default)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    original = DeliveryLedger._add_stream
    calls: list[int] = []

    def add_stream(self: DeliveryLedger, *args: Any) -> None:
        original(self, *args)
        calls.append(1)
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(DeliveryLedger, "_add_stream", add_stream)
    yield calls
    signal.signal(signal.SIGINT, old)


def test_ctrl_c_inside_a_fold_leaves_every_report_read_folded_whole(
    ctrl_c_inside_the_fold: list[int],
) -> None:
    first = receipts(1, 4, [(0, 0), (1, 0), (0, 1), (1, 1)])
    second = receipts(2, 6, [(0, 2), (1, 2)])
    coord = coordinator([[(2, first), (2, second)]])
    with pytest.raises(KeyboardInterrupt):  # still delivered, once the batch is folded
        coord._receive()
    ledger = coord._ledger
    assert (ledger.received_total, ledger.unique_total) == (6, 6)
    totals = ledger.finish([]).totals()
    assert totals["duplicated"] == 0
    assert coord._workers[2].progress is not None and coord._workers[2].progress.received == 6


def test_an_interrupted_collect_stops_everyone_and_keeps_the_counts(
    ctrl_c_inside_the_fold: list[int],
) -> None:
    batch = [(2, receipts(1, 3, [(0, 0), (1, 0), (0, 1)]))]
    coord = coordinator([batch])
    coord._start_ns = 0
    coord._receive = _once_then_done(coord, coord._receive)  # type: ignore[method-assign]
    coord._collect()
    assert coord._interrupted and coord._stop_reason == "interrupted"
    assert any(isinstance(message, m.Stop) for _, message in coord._pool.sent)  # type: ignore[attr-defined]
    assert (coord._ledger.received_total, coord._ledger.unique_total) == (3, 3)


def _once_then_done(coord: QueueCoordinator, receive: Any) -> Any:
    """``_receive``, then every worker over (as if each had said Done)."""
    rounds: list[int] = []

    def wrapped() -> Any:
        rounds.append(1)
        if len(rounds) > 1:
            for worker in coord._workers:
                worker.failure = worker.failure or "done"
            return []
        return receive()

    return wrapped


def test_the_backlog_base_is_unknown_to_a_drain_of_its_own_and_known_after_a_write() -> None:
    from kvbench.metrics.delivery import Acknowledged
    from kvbench.runner.queue import QueueCarry, _backlog_base

    def config(producers: str) -> Any:
        options = {"producers": producers, "consumers": "1", "messages": "100"}
        return build_queue_config("memcacheq://127.0.0.1/q", options, ReportConfig())

    assert _backlog_base(config("0"), None) is None  # the server's count or nothing
    assert _backlog_base(config("1"), None) == 0
    ledger = DeliveryLedger([60, 40])
    ledger.add(0, [0] * 10, list(range(10)))
    carry = QueueCarry(1, ledger, (Acknowledged(60, (5, 6)), Acknowledged(40)))
    assert _backlog_base(config("0"), carry) == 98 - 10  # a preset's drain after its write


def test_a_queue_workers_record_keeps_its_stored_keys_and_order() -> None:
    """``workers`` of a queue run, as the document and the history store them: a worker
    that said Ready and finished, and one that never said Ready nor finished."""
    coord = coordinator([])
    done, silent = coord._workers[0], coord._workers[2]
    done.host = ("h0", 11)
    done.summary = QueueSummary("ok", cpu_s=0.12345, active_s=1.5, cpu_wait_s=0.0006,
                                errors={"timeout": 2})  # fmt: skip
    assert list(_worker_row(done).items()) == [
        ("role", "producer"), ("index", 0), ("host", "h0"), ("pid", 11), ("ops", 0),
        ("status", "ok"), ("cpu_s", 0.123), ("peak_rss_bytes", None), ("active_s", 1.5),
        ("cpu_wait_s", 0.001),
        ("errors", {"timeout": 2}),
    ]  # fmt: skip
    assert list(_worker_row(silent).items()) == [
        ("role", "consumer"), ("index", 0), ("ops", 0), ("status", "unknown"),
        ("cpu_s", None), ("peak_rss_bytes", None), ("active_s", None), ("errors", {}),
    ]  # fmt: skip


def test_an_unanswered_backlog_ask_is_not_repeated_within_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each ask of a stalled server waits 2 s: asked at every interval cut, the live line
    fell behind and a Ctrl-C waited an ask per interval piled up (9 s in all)."""
    from kvbench.runner import queue

    asked: list[str] = []
    answers = iter([{"backlog": 5}, None, {"backlog": 7}])

    def server_backlog(config: Any) -> Any:
        asked.append("ask")
        return next(answers)

    now = [10**12]
    monkeypatch.setattr(queue, "server_backlog", server_backlog)
    monkeypatch.setattr(queue.time, "monotonic_ns", lambda: now[0])
    coord = coordinator([])
    assert coord._backlog() == {"backlog": 5}
    assert coord._backlog() is None  # unanswered
    wait_ns = max(coord.config.timeout_ns, queue.BACKLOG_AGAIN_NS)
    now[0] += wait_ns - 1
    assert coord._backlog() is None and len(asked) == 2  # not asked again yet
    now[0] += 1
    assert coord._backlog() == {"backlog": 7} and len(asked) == 3
