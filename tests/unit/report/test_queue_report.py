"""The queue report from a fixed QueueRunResult: document figures, verdicts, terminal text."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console

from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.metrics.delivery import Acknowledged, DeliveryLedger
from kvbench.report.queue_report import (
    print_queue_summary,
    queue_document,
    queue_interval_row,
    queue_live_line,
)
from kvbench.results.queue import QueueIntervalRecord, QueueRunResult

S = 1_000_000_000
MS = 1_000_000


def interval(
    index: int, puts: int, gets: int, empties: int, e2e_ms: list[int]
) -> QueueIntervalRecord:
    latency = Histogram()
    latency.record_many([100_000] * (puts + gets + empties))
    e2e = Histogram()
    e2e.record_many([v * MS for v in e2e_ms])
    snapshot = IntervalSnapshot(
        "measure",
        index,
        index * S,
        (index + 1) * S,
        {"put": {"stored": puts}, "get": {"hit": gets, "miss": empties}},
        {"put": latency, "get": latency},
        stats={"cpu_ns": S // 2},
    )
    return QueueIntervalRecord(
        snapshot, e2e if e2e_ms else None, puts * (index + 1), gets * (index + 1)
    )


def result(lost_seq: int | None = None, **kw: Any) -> QueueRunResult:
    ledger = DeliveryLedger([1000, 1000])
    for producer in (0, 1):
        seqs = [s for s in range(1000) if not (producer == 0 and s == lost_seq)]
        ledger.add(producer, [producer] * len(seqs), seqs)
    return QueueRunResult(
        run_id="20261129-000000-abcdef",
        started_at="2026-11-29T00:00:00+00:00",
        status=kw.pop("status", "ok"),
        kvbench_version="0.0",
        config={
            "queue": "q",
            "backend": "memcacheq",
            "pop_command": "get",
            "messages": 2000,
            "message_size_bytes": 100,
            "producers": 2,
            "consumers": 2,
        },
        targets=[{"url": "memcacheq://h/q", "protocol": "memcache-text", "server_version": "x"}],
        start_ns=0,
        produce_end_ns=2 * S,
        consume_start_ns=0,
        consume_end_ns=4 * S,
        intervals=[interval(0, 1000, 1000, 5, [1] * 1000), interval(1, 1000, 1000, 5, [3] * 1000)],
        delivery=ledger.finish([Acknowledged(1000), Acknowledged(1000)]),
        empties=10,
        backlog_peak=1234,
        backlog_peak_ns=S // 2,
        workers=[{"role": "producer", "index": 0, "cpu_s": 1.9, "active_s": 2.0}],
        server={"before": {"backlog": 0}, "after": {"backlog": 0}},
        **kw,
    )


def test_rates_come_from_each_sides_own_window() -> None:
    doc = queue_document(result())
    queue = doc["queue"]
    assert queue["puts_per_s"] == 1000.0  # 2000 stored over the 2 s produce window
    assert queue["gets_per_s"] == 500.0  # 2000 received over the 4 s consume window
    assert doc["window_s"] == 4.0 and doc["totals"]["throughput_per_s"] == 500.0
    assert (queue["lost"], queue["duplicated"], queue["out_of_order"]) == (0, 0, 0)


def test_e2e_percentiles_come_from_the_merged_histogram() -> None:
    latency = queue_document(result())["queue"]["e2e_latency_us"]
    assert 999 <= latency["p50"] <= 1001 and 2997 <= latency["p90"] <= 3003
    assert latency["p99_99"] is None  # 2,000 samples cannot support p99.99


def test_a_lost_message_is_an_error_verdict_with_its_seq() -> None:
    doc = queue_document(result(lost_seq=17))
    assert doc["queue"]["lost"] == 1
    assert doc["queue"]["producers"][0]["lost_examples"] == [17]
    ids = {v["id"]: v["level"] for v in doc["verdicts"]}
    assert ids["delivery.lost"] == "error"


def test_a_run_ended_by_the_limit_warns_that_lost_may_be_queued() -> None:
    doc = queue_document(result(drained=False, stop_reason="--duration limit reached"))
    assert any(v["id"] == "queue.not_drained" for v in doc["verdicts"])


def test_a_lost_message_fails_the_run_in_the_document() -> None:
    doc = queue_document(result(lost_seq=17))
    assert (doc["status"], doc["process_status"]) == ("failed", "ok")
    assert doc["status_reasons"] == ["1 acknowledged messages were never received"]
    assert queue_document(result())["status"] == "ok"
    # not drained: the message may still be queued, the run is not failed for it
    undrained = queue_document(result(lost_seq=17, drained=False, stop_reason="limit"))
    assert undrained["status"] == "ok"
    # an interrupted run is interrupted, lost messages or not
    assert queue_document(result(lost_seq=17, status="interrupted"))["status"] == "interrupted"


def test_a_busy_client_is_flagged() -> None:
    assert any(v["id"] == "client.cpu" for v in queue_document(result())["verdicts"])


def test_the_document_is_json_and_has_the_run_document_keys() -> None:
    doc = json.loads(json.dumps(queue_document(result())))
    for key in (
        "schema_version",
        "run_id",
        "mode",
        "targets",
        "config",
        "window_s",
        "totals",
        "ops",
        "intervals",
        "verdicts",
    ):
        assert key in doc
    assert doc["mode"] == "queue" and doc["ops"]["get"]["outcomes"] == {"hit": 2000, "miss": 10}
    assert Histogram.decode(doc["queue"]["e2e_latency_hdr"]).total_count == 2000


def test_interval_rows_carry_rates_backlog_and_e2e() -> None:
    row = queue_interval_row(interval(0, 800, 500, 3, [2] * 500), 0)
    assert (row["puts_per_s"], row["gets_per_s"], row["backlog"], row["empties"]) == (
        800.0,
        500.0,
        300,
        3,
    )
    assert 1990 <= row["e2e_p50_us"] <= 2010
    line = queue_live_line(row)
    assert "put 800/s" in line and "backlog 300" in line and "empty 3" in line


def test_the_terminal_summary_names_every_delivery_figure() -> None:
    out = io.StringIO()
    print_queue_summary(
        Console(file=out, width=160, color_system=None), queue_document(result(lost_seq=3))
    )
    text = out.getvalue()
    for needle in (
        "end to end",
        "delivery per producer",
        "lost 1",
        "backlog peak 1,234",
        "get: message 2,000  empty 10",
    ):
        assert needle in text, needle


def test_duplicated_messages_fail_the_run_drained_or_not() -> None:
    from kvbench.report.queue_report import delivery_problem

    assert delivery_problem({"lost": 0, "duplicated": 3, "drained": False}) == (
        "3 messages were received twice or more"
    )
    assert delivery_problem({"lost": 2, "duplicated": 1, "drained": True}) == (
        "2 acknowledged messages were never received; 1 messages were received twice or more"
    )
    assert delivery_problem({"lost": 2, "duplicated": 0, "drained": False}) is None
