"""The connections section, per-interval connection errors and the live-count verdict,
from fixed runs (figures as engine/worker.py records them)."""

from __future__ import annotations

from typing import Any

from kvbench.metrics import IntervalSnapshot
from kvbench.report.connections import connection_verdicts, connections_section
from kvbench.report.json_report import document
from kvbench.report.summary import summarize
from kvbench.report.terminal import live_line
from kvbench.results.model import RunResult
from tests.support.runs import summary_text

S = 1_000_000_000


def interval(index: int, ops: int, conn_error: int = 0, **stats: float) -> IntervalSnapshot:
    counts = {"get": {"miss": ops, **({"conn_error": conn_error} if conn_error else {})}}
    start = index * S
    return IntervalSnapshot("measure", index, start, start + S, counts, {}, stats=dict(stats))


def run(intervals: list[IntervalSnapshot], asked: int, **kw: Any) -> RunResult:
    return RunResult(
        "r", "t", "ok", "closed", "0", {"load": {"connections": asked}},
        [{"url": "memcached://h:1", "protocol": "memcache-text"}], 0, len(intervals) * S,
        intervals, **kw,
    )  # fmt: skip


def outage() -> RunResult:
    """4 connections; the server dies in interval 1 (8 requests in flight lost, 6 refused
    reconnects) and is back in interval 2."""
    return run(
        [
            interval(0, 1000, connects=4, connections_live_min=4),
            interval(
                1, 300, conn_error=8, reconnects=4, reconnect_attempts=6, connect_failures=6,
                connections_live_min=0,
            ),
            interval(2, 500, reconnect_attempts=4, connects=4, connections_live_min=0),
            interval(3, 1000, connections_live_min=4),
        ],
        asked=4,
    )  # fmt: skip


def test_refused_reconnects_are_errors_of_their_interval_and_of_the_run() -> None:
    model = summarize(outage())
    rows = model.intervals
    assert [r["errors"] for r in rows] == [0, 8 + 6, 0, 0]
    assert [r["connection_errors"] for r in rows] == [0, 6, 0, 0]
    assert [r["connections_live"] for r in rows] == [4, 0, 0, 4]
    assert model.total_errors == 8 + 6  # the op's conn_error and the failed attempts
    assert sum(r.errors for r in model.ops) == 8
    doc = document(model)
    assert doc["totals"]["errors"] == 14
    assert doc["connections"] == {
        "asked": 4,
        "live_min": 0,
        "live_min_last": 4,
        "connects": 8,
        "connect_failures": 6,
        "connect_resets": 0,
        "connect_resets_before": 0,
        "reconnect_attempts": 10,
        "reconnects": 4,
        "errors": 6,
    }
    line = live_line({**doc["intervals"][1], "connections_asked": 4})
    assert "err 14" in line and "reconnects 4" in line and "live conns 0/4" in line
    assert "live conns" not in live_line({**doc["intervals"][3], "connections_asked": 4})


def test_fewer_live_connections_than_asked_is_a_warning_with_the_figures() -> None:
    refused = run(
        [interval(i, 1000, connections_live_min=997) for i in range(3)],
        asked=5000,
        phases={
            "preload": IntervalSnapshot(
                "preload", 0, 0, 0, {}, {}, stats={"connects": 5000, "connect_resets_before": 4003}
            )
        },
    )
    section = connections_section(refused)
    [verdict] = connection_verdicts(section, refused)
    assert verdict.id == "connections.live" and verdict.level == "warning"
    assert "997 of the 5,000" in verdict.message and "refused 4,003" in verdict.message
    assert verdict.evidence["refused_at_accept"] == 4003
    assert "lost" not in verdict.message  # 4,003 refused: all of the 4,003 short
    fewer = run(
        [interval(i, 1000, connections_live_min=900) for i in range(3)],
        asked=5000,
        phases=refused.phases,
    )
    [also_lost] = connection_verdicts(connections_section(fewer), fewer)
    assert "refused 4,003 right after accepting them (over its connection limit?); other " in (
        also_lost.message
    )
    assert "connections were lost and not all reopened; the load was lighter" in also_lost.message
    assert section["errors"] == 0  # refused before the start: the live count says it
    assert "connections.live" in {v.id for v in summarize(refused).verdicts}


def test_connections_lost_are_said_reopened_only_when_all_were_live_again_at_the_end() -> None:
    """The outage's 4 connections were all live again in its last interval; a run whose
    last interval still misses one did not reopen them all (was: both 'not all
    reopened')."""
    [back] = connection_verdicts(connections_section(outage()), outage())
    assert back.message == (
        "only 0 of the 4 connections asked for were live (the fewest at any moment of the "
        "window): connections were lost and reopened (4 reconnects; all live again in the "
        "window's last interval); the load was lighter than asked while they were down"
    )
    assert back.evidence["live_min_last"] == 4
    short = outage()
    short.intervals[-1] = interval(3, 1000, connections_live_min=3)
    [not_back] = connection_verdicts(connections_section(short), short)
    assert not_back.message.endswith(
        "connections were lost and not all reopened; the load was lighter than asked"
    )
    assert not_back.evidence["live_min_last"] == 3


def test_all_connections_live_says_nothing() -> None:
    fine = run([interval(0, 1000, connects=4, connections_live_min=4)], asked=4)
    assert connection_verdicts(connections_section(fine), fine) == []
    assert summarize(fine).total_errors == 0


def test_many_connections_all_live_are_said_to_be_live() -> None:
    few = run([interval(0, 1000, connects=4, connections_live_min=4)], asked=4)
    assert "connections:" not in summary_text(few)
    many = run([interval(0, 1000, connects=10_000, connections_live_min=10_000)], asked=10_000)
    assert (
        "connections: 10,000 asked, 10,000 live at the fewest; opened 10,000, none refused, "
        "lost or failed"
    ) in summary_text(many)


def test_runs_stored_before_connections_were_counted_still_report() -> None:
    old = run([interval(0, 1000)], asked=4)
    section = connections_section(old)
    assert section["live_min"] is None and connection_verdicts(section, old) == []
    assert summarize(old).intervals[0]["connections_live"] is None


def test_the_summary_says_what_the_total_errors_are_made_of() -> None:
    text = summary_text(outage())
    assert (
        "connections: 4 asked, 0 live at the fewest; opened 8, refused at accept 0 (0 before "
        "the start), reconnect attempts 10, failed 6; 6 connection errors in the window"
    ) in text
    assert "get: conn_error 8  miss 2,800" in text
