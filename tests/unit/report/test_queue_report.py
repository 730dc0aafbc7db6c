"""A queue run is a run: its summary, document, verdicts and terminal text from a fixed
``RunResult`` (mode ``queue``) with its queue section."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console

from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.metrics.delivery import Acknowledged, DeliveryLedger
from kvbench.report import document, summarize
from kvbench.report.summary import queue_interval_row
from kvbench.report.terminal import print_summary, queue_live_line
from kvbench.results.model import RunResult
from kvbench.results.queue import QueueInterval, QueueSection
from kvbench.results.status import delivery_problem, run_status

S = 1_000_000_000
MS = 1_000_000


def interval(
    index: int, puts: int, gets: int, empties: int, e2e_ms: list[int]
) -> tuple[IntervalSnapshot, QueueInterval]:
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
    record = QueueInterval(index, e2e if e2e_ms else None, puts * (index + 1), gets * (index + 1))
    return snapshot, record


def result(lost_seq: int | None = None, **kw: Any) -> RunResult:
    ledger = DeliveryLedger([1000, 1000])
    for producer in (0, 1):
        seqs = [s for s in range(1000) if not (producer == 0 and s == lost_seq)]
        ledger.add(producer, [producer] * len(seqs), seqs)
    parts = [interval(0, 1000, 1000, 5, [1] * 1000), interval(1, 1000, 1000, 5, [3] * 1000)]
    section = QueueSection(
        produce_end_ns=2 * S,
        consume_start_ns=0,
        consume_end_ns=4 * S,
        intervals=[record for _, record in parts],
        delivery=ledger.finish([Acknowledged(1000), Acknowledged(1000)]),
        empties=10,
        backlog_peak=1234,
        backlog_peak_ns=S // 2,
        drained=kw.pop("drained", True),
        stop_reason=kw.pop("stop_reason", ""),
    )
    return RunResult(
        run_id="20261129-000000-abcdef",
        started_at="2026-11-29T00:00:00+00:00",
        status=kw.pop("status", "ok"),
        mode="queue",
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
        window_start_ns=0,
        window_end_ns=4 * S,
        intervals=[snapshot for snapshot, _ in parts],
        workers=kw.pop(
            "workers", [{"role": "producer", "index": 0, "cpu_s": 1.9, "active_s": 2.0}]
        ),
        server={"before": {"backlog": 0}, "after": {"backlog": 0}},
        queue=section,
        **kw,
    )


def doc_of(run: RunResult) -> dict[str, Any]:
    return document(summarize(run))


def rendered(run: RunResult) -> str:
    """The run's terminal summary as plain text."""
    out = io.StringIO()
    print_summary(Console(file=out, width=160, color_system=None), summarize(run))
    return out.getvalue()


def test_rates_come_from_each_sides_own_window() -> None:
    doc = doc_of(result())
    queue = doc["queue"]
    assert queue["puts_per_s"] == 1000.0  # 2000 stored over the 2 s produce window
    assert queue["gets_per_s"] == 500.0  # 2000 received over the 4 s consume window
    # The op rows carry the same rates: an empty answer is no get.
    assert doc["ops"]["put"]["throughput_per_s"] == 1000.0
    assert doc["ops"]["get"]["throughput_per_s"] == 500.0
    assert doc["window_s"] == 4.0 and doc["totals"]["throughput_per_s"] == 1500.0
    assert (queue["lost"], queue["duplicated"], queue["out_of_order"]) == (0, 0, 0)


def test_e2e_percentiles_come_from_the_merged_histogram() -> None:
    latency = doc_of(result())["queue"]["e2e_latency_us"]
    assert 999 <= latency["p50"] <= 1001 and 2997 <= latency["p90"] <= 3003
    assert latency["p99_99"] is None  # 2,000 samples cannot support p99.99


def test_a_lost_message_is_an_error_verdict_with_its_seq() -> None:
    doc = doc_of(result(lost_seq=17))
    assert doc["queue"]["lost"] == 1
    assert doc["queue"]["producers"][0]["lost_examples"] == [17]
    ids = {v["id"]: v["level"] for v in doc["verdicts"]}
    assert ids["delivery.lost"] == "error"


def test_a_run_ended_by_the_limit_warns_that_lost_may_be_queued() -> None:
    doc = doc_of(result(drained=False, stop_reason="--duration limit reached"))
    assert any(v["id"] == "queue.not_drained" for v in doc["verdicts"])


def test_a_lost_message_fails_the_run_in_the_document_and_the_status() -> None:
    doc = doc_of(result(lost_seq=17))
    assert (doc["status"], doc["process_status"]) == ("failed", "ok")
    assert doc["status_reasons"] == ["1 acknowledged messages were never received"]
    assert run_status(result(lost_seq=17)).name == "failed"
    assert doc_of(result())["status"] == "ok"
    # not drained: the message may still be queued, the run is not failed for it
    undrained = doc_of(result(lost_seq=17, drained=False, stop_reason="limit"))
    assert undrained["status"] == "ok"
    # an interrupted run is interrupted, lost messages or not
    assert doc_of(result(lost_seq=17, status="interrupted"))["status"] == "interrupted"


def test_a_busy_client_is_flagged_against_its_own_span() -> None:
    verdicts = [v for v in doc_of(result())["verdicts"] if v["id"] == "client.cpu"]
    assert verdicts and verdicts[0]["message"].startswith("producer 0 used 95% of a core")


def test_a_role_that_waited_for_its_core_is_flagged_with_both_shares() -> None:
    """A queue role is judged as a load worker (report/verdicts.py), over its own span."""
    starved = [{"role": "consumer", "index": 1, "cpu_s": 1.0, "active_s": 2.0, "cpu_wait_s": 0.9}]
    verdicts = [v for v in doc_of(result(workers=starved))["verdicts"] if v["id"] == "client.cpu"]
    assert verdicts[0]["message"].startswith(
        "consumer 1 used 50% of a core and waited 45% of the window for one"
    )
    assert verdicts[0]["evidence"]["cpu_wait_share"] == 0.45


def test_the_document_is_a_run_document_with_a_queue_section() -> None:
    doc = json.loads(json.dumps(doc_of(result())))
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
        "connections",
        "verdicts",
        "queue",
    ):
        assert key in doc
    assert doc["mode"] == "queue" and doc["ops"]["get"]["outcomes"] == {"hit": 2000, "miss": 10}
    assert Histogram.decode(doc["queue"]["e2e_latency_hdr"]).total_count == 2000
    assert doc["rounds"] == []  # a queue run has no rounds


def test_interval_rows_carry_rates_backlog_and_e2e() -> None:
    snapshot, record = interval(0, 800, 500, 3, [2] * 500)
    row = queue_interval_row(snapshot, record, 0)
    assert (row["puts_per_s"], row["gets_per_s"], row["backlog"], row["empties"]) == (
        800.0,
        500.0,
        300,
        3,
    )
    assert row["ops"]["get"]["per_s"] == 500.0 and row["per_s"] == 1300.0  # empties are no gets
    assert 1990 <= row["e2e_p50_us"] <= 2010
    line = queue_live_line(row)
    assert "put 800/s" in line and "backlog 300" in line and "empty 3" in line


def test_the_terminal_summary_names_every_delivery_figure() -> None:
    out = io.StringIO()
    print_summary(Console(file=out, width=160, color_system=None), summarize(result(lost_seq=3)))
    text = out.getvalue()
    for needle in (
        "end to end",
        "delivery per producer",
        "lost 1",
        "backlog peak 1,234",
        "get: message 2,000  empty 10",
        "status: failed - 1 acknowledged messages were never received",
    ):
        assert needle in text, needle


def test_duplicated_messages_fail_the_run_drained_or_not() -> None:
    run = result()
    assert run.queue is not None
    ledger = DeliveryLedger([2])
    ledger.add(0, [0, 0, 0], [0, 1, 1])
    run.queue.delivery = ledger.finish([Acknowledged(2)])
    run.queue.drained = False
    assert delivery_problem(run.queue) == "1 messages were received twice or more"
    assert run_status(run).name == "failed"
    lost = DeliveryLedger([3])
    lost.add(0, [0, 0], [0, 0])
    run.queue.delivery = lost.finish([Acknowledged(3)])
    run.queue.drained = True
    assert delivery_problem(run.queue) == (
        "2 acknowledged messages were never received; 1 messages were received twice or more"
    )
    run.queue.drained = False
    assert delivery_problem(run.queue) == "1 messages were received twice or more"


def test_the_html_report_draws_the_ledger_e2e_and_backlog_with_the_documents_figures() -> None:
    from kvbench.report.html import render
    from tests.support.report_page import parse, resolve

    run = result(lost_seq=17)
    doc = document(summarize(run))
    page = parse(render([run]))
    pointers = {pointer for pointer, _, _ in page.cells}
    for name in ("puts_per_s", "gets_per_s", "lost", "duplicated", "out_of_order", "empty_polls"):
        assert f"/0/queue/{name}" in pointers, name
    for name in ("p50", "p99"):
        assert f"/0/queue/e2e_latency_us/{name}" in pointers
    assert "/0/queue/backlog/peak" in pointers
    assert {"/0/queue/producers/0/lost", "/0/queue/producers/1/duplicated"} <= pointers
    for pointer, value, _ in page.cells:
        assert json.loads(value) == resolve([doc], pointer), pointer
    charts = {f.get("data-chart") for f in page.figures}
    assert {"e2e", "e2e-spectrum", "backlog"} <= charts
    assert "server-cpu" not in charts  # a queue's server is asked for its backlog only
    data = json.loads(page.data_text)
    assert data["runs"][0]["e2e_spectrum"] and data["runs"][0]["document"]["queue"]["lost"] == 1


def test_diff_of_two_queue_runs_compares_each_sides_rates_and_the_queue_figures() -> None:
    """Was: whole-window rates with empty answers counted as gets, and no queue figure."""
    from kvbench.report.diff import diff_runs, to_dict

    a, b = result(), result(lost_seq=3)
    changes = {(c["metric"], c["op"]): c for c in to_dict(diff_runs(a, b))["changes"]}
    assert (changes["throughput_per_s", "put"]["a"], changes["throughput_per_s", "get"]["a"]) == (
        1000.0,
        500.0,
    )
    assert changes["throughput_per_s", "get"]["b"] == 499.8  # 1,999 received over 4 s
    assert (changes["lost", "delivery"]["a"], changes["lost", "delivery"]["b"]) == (0, 1)
    doc = doc_of(a)
    assert changes["e2e_p99_us", "end to end"]["a"] == doc["queue"]["e2e_latency_us"]["p99"]
    assert changes["backlog_peak", "backlog"]["b"] == 1234


def test_a_phase_is_counted_in_the_originals_units() -> None:
    """puts and gets (messages dequeued) over the run's window, each rate recomputable from
    the count and the duration given; the server's stats queue before and after."""
    run = result()
    run.server = {
        "before": {"backlog": 0, "enqueued": 0, "dequeued": 0, "pid": "1"},
        "after": {"backlog": 0, "enqueued": 2000, "dequeued": 2000, "pid": "1"},
        "data_dir": {"path": "/var/lib/memcacheq", "bytes": 3 * 2**20},
    }
    phase = doc_of(run)["queue"]["phase"]
    assert (phase["puts"], phase["gets"], phase["duration_s"]) == (2000, 2000, 4.0)
    assert phase["puts_per_s"] == phase["puts"] / phase["duration_s"] == 500.0
    assert phase["gets_per_s"] == phase["gets"] / phase["duration_s"] == 500.0
    assert phase["stats_queue_before"] == {"enqueued": 0, "dequeued": 0, "backlog": 0}
    assert phase["stats_queue_after"] == {"enqueued": 2000, "dequeued": 2000, "backlog": 0}
    text = rendered(run)
    assert "puts 2,000  puts/s 500  gets 2,000  gets/s 500  duration 4.000s" in text
    assert "stats queue q (enqueued/dequeued): 0/0 before, 2,000/2,000 after" in text
    assert "data dir /var/lib/memcacheq: 3,145,728 bytes (3.0 MiB)" in text


def test_a_write_only_run_leaves_its_messages_queued_without_calling_them_lost() -> None:
    """--consumers 0: nothing read, nothing lost, no warning: the drain judges them."""
    ledger = DeliveryLedger([1000])
    snapshot, record = interval(0, 1000, 0, 0, [])
    run = result()
    run.config["consumers"] = 0
    run.intervals = [snapshot]
    assert run.queue is not None
    run.queue = QueueSection(
        produce_end_ns=S,
        consume_start_ns=None,
        consume_end_ns=0,
        intervals=[record],
        delivery=ledger.finish([Acknowledged(1000)]),
        drained=False,
        stop_reason="write only: the 1,000 messages stored stay in the queue",
    )
    doc = doc_of(run)
    assert (doc["queue"]["lost"], doc["queue"]["left_in_queue"]) == (0, 1000)
    assert [p["lost"] for p in doc["queue"]["producers"]] == [0]
    assert doc["status"] == "ok"
    assert not any(v["id"] == "queue.not_drained" for v in doc["verdicts"])
    assert "1,000 left in the queue for a drain to read" in rendered(run)


def test_a_later_phase_counts_its_own_puts_and_gets_and_the_ledger_so_far() -> None:
    """A drain continuing a write: the write's producers are carried rows; its gets/s
    counts only this run's receipts; a message the write stored and the drain never
    read is lost here."""
    ledger = DeliveryLedger([])
    ledger.extend([500, 500])
    ledger.add(0, [0] * 500, list(range(500)))  # received during an earlier phase
    carried_received = ledger.received_total
    ledger.extend([1000])  # this run's producer: id 2
    ledger.add(1, [1] * 499 + [2] * 1000, [*range(499), *range(1000)])
    run = result()
    assert run.queue is not None
    run.queue.delivery = ledger.finish([Acknowledged(500), Acknowledged(500), Acknowledged(1000)])
    run.queue.carried_producers = 2
    run.queue.carried_received = carried_received
    queue = doc_of(run)["queue"]
    assert queue["puts_per_s"] == 500.0  # its own 1,000 stored over the 2 s produce window
    assert queue["gets_per_s"] == round(
        1499 / 4, 1
    )  # 1,499 received in it over the 4 s consume window
    assert queue["lost"] == 1 and [p["lost"] for p in queue["producers"]] == [0, 1, 0]
    assert run_status(run).name == "failed"


def test_every_put_refused_fails_the_run_in_the_servers_words() -> None:
    ledger = DeliveryLedger([])
    ledger.extend([100])
    run = result()
    assert run.queue is not None
    run.queue.delivery = ledger.finish([Acknowledged(100, tuple(range(100)))])
    said = (
        "producer 0: a put was refused: SERVER_ERROR out of memory storing object (100 problem(s))"
    )
    run.errors = [said]
    status = run_status(run)
    assert status.name == "failed"
    assert status.reasons == (f"every put was refused (100 sent, none stored): {said}",)
    ledger.add(0, [0], [99])  # one stored, and received
    run.queue.delivery = ledger.finish([Acknowledged(100, tuple(range(99)))])
    assert run_status(run).name == "ok"


def test_a_drain_the_client_cannot_count_shows_the_servers_backlog_never_0() -> None:
    # A drain of messages no run of it stored: the client's stored count is 0, received
    # grows; its backlog is unknown, not 0 (seen: "backlog 0 (server 824,406)").
    snapshot, _ = interval(0, 0, 500, 0, [2] * 500)
    record = QueueInterval(0, None, 0, 500, server_backlog=824_406, backlog_base=None)
    row = queue_interval_row(snapshot, record, 0)
    assert row["backlog"] is None
    line = queue_live_line(row)
    assert "backlog (server 824,406)" in line and "backlog 0" not in line
    unknown = QueueInterval(0, None, 0, 500, server_backlog=None, backlog_base=None)
    assert "backlog" not in queue_live_line(queue_interval_row(snapshot, unknown, 0))
    run = result()
    assert run.queue is not None
    run.queue.backlog_peak, run.queue.backlog_peak_ns, run.queue.backlog_series = None, None, []
    run.server = {"before": {"backlog": 824_906}, "after": {"backlog": 0}}
    doc = doc_of(run)
    assert doc["queue"]["backlog"]["peak"] is None
    text = rendered(run)
    assert "backlog peak 0" not in text
    assert "backlog: not known to the client (it stored none of them); the server's count: " \
        "824,906 before, 0 after" in text  # fmt: skip
    again = QueueSection.from_json(run.queue.to_json())
    assert again.backlog_peak is None
    from kvbench.report.html import render

    assert "backlog not known to the client" in render([run])


def test_a_later_phase_counts_the_backlog_from_what_earlier_phases_left() -> None:
    record = QueueInterval(0, None, 0, 300, backlog_base=1000)
    assert record.backlog == 700


def test_e2e_ages_beyond_the_range_are_counted_and_max_never_below_a_percentile() -> None:
    # A 1M drain's messages were 94-105 s old: all beyond the histogram's 60 s.
    ages = Histogram()
    ages.record_many([(94 + k % 12) * S for k in range(2000)])
    run = result()
    assert run.queue is not None
    run.queue.intervals = [QueueInterval(i.index, None, i.stored_total, i.received_total)
                           for i in run.queue.intervals]  # fmt: skip
    run.queue.intervals[-1] = QueueInterval(1, ages, 2000, 2000)
    queue = doc_of(run)["queue"]
    latency = queue["e2e_latency_us"]
    assert queue["e2e_clipped"] == 2000
    assert latency["max"] == 105 * 1_000_000  # the largest age, not the range's top
    assert all(latency[p] <= latency["max"] for p in ("p50", "p90", "p99"))
    assert any(v["id"] == "queue.e2e_clipped" for v in doc_of(run)["verdicts"])
    text = rendered(run)
    assert ">60.00s" in text and "60.03s" not in text
    assert "2,000 of 2,000 ages were beyond 60.00s" in text
    snapshot, _ = interval(1, 0, 2000, 0, [])
    line = queue_live_line(queue_interval_row(snapshot, QueueInterval(1, ages, 0, 2000), 0))
    assert "e2e p50 >60.00s p99 >60.00s" in line


def test_a_consumer_keeps_the_age_of_a_message_older_than_the_range() -> None:
    import time

    from kvbench.config.model import ReportConfig
    from kvbench.config.queue import build_queue_config
    from kvbench.engine.queue_link import QUEUE_OPS, Consumer, QueueCommands
    from kvbench.metrics.recorder import Recorder
    from kvbench.workload.queue import MessageFormat

    class Host:
        def __getattr__(self, name: str) -> Any:
            return lambda *a: None

    class Transport:
        def write(self, data: Any) -> None:
            pass

    commands = QueueCommands(build_queue_config("memcacheq://127.0.0.1/q", {}, ReportConfig()))
    link = Consumer(Host(), commands, Recorder(QUEUE_OPS), 1, run_tag=7, poll_interval_ns=0)  # type: ignore[arg-type]
    link._transport = Transport()  # type: ignore[assignment]
    link.issuing = True
    link.fill()
    sent_ns = time.monotonic_ns() - 100 * S  # sent 100 s ago, on the same clock
    message = MessageFormat(7, 0, 40).build(seq=0, sent_ns=sent_ns)
    link.data_received(b"VALUE q 0 40\r\n" + message + b"\r\nEND\r\n")
    e2e = Histogram()
    e2e.record_many(link.e2e_ns)
    assert e2e.out_of_range == 1 and e2e.max_ns >= 100 * S
    assert e2e.max_ns >= e2e.value_at_percentile(50)


def test_wide_shows_every_delivery_column_at_80_and_the_narrow_line_offers_it() -> None:
    """Was: "out of order" left out of the delivery table at 80 columns even with --wide,
    and the line naming it offered only the JSON."""
    model = summarize(result())
    narrow, wide = io.StringIO(), io.StringIO()
    print_summary(Console(file=narrow, width=80, color_system=None), model)
    print_summary(Console(file=wide, width=80, color_system=None, soft_wrap=True), model, wide=True)
    delivery = narrow.getvalue()[narrow.getvalue().index("delivery per producer") :]
    assert "out of order" not in delivery.split("left out at 80 columns")[0]
    line = " ".join(delivery[delivery.index("left out at 80 columns") :].split())
    assert line.startswith("left out at 80 columns: out of order; every column: --wide")
    header = wide.getvalue().split("delivery per producer")[1].split("\n")[2]
    assert "duplicated" in header and "out of order" in header


def test_a_queue_presets_phase_table_honours_wide() -> None:
    from kvbench.report.tables import queue_phases_table

    phases = [("write", summarize(result())), ("read", summarize(result()))]
    narrow, wide = io.StringIO(), io.StringIO()
    Console(file=narrow, width=80, color_system=None).print(queue_phases_table("t", phases))
    Console(file=wide, width=80, color_system=None, soft_wrap=True).print(
        queue_phases_table("t", phases, wide=True)
    )
    left = " ".join(narrow.getvalue()[narrow.getvalue().index("left out at 80") :].split())
    assert "every column: --wide, or the JSON (--json)" in left
    for name in ("duplicated so far", "e2e p99", "status"):
        assert name.split()[0] in wide.getvalue(), name
    assert "left out" not in wide.getvalue()
