"""``protocol_error`` is an outcome of its own in every output that shows a count: the
terminal's outcome line and status, the result document, the CSV's errors, the HTML
outcome table and Prometheus; never folded into ``conn_error``."""

from __future__ import annotations

import csv
import io
import re

from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.metrics.outcome import ERROR_OUTCOMES, OUTCOME_NAMES, Outcome
from kvbench.report import document, summarize
from kvbench.report.exports import interval_csv
from kvbench.report.html import render
from kvbench.report.prometheus import LiveFigures
from kvbench.results.model import RunResult
from tests.support.runs import make_run, summary_text
from tests.unit.report.test_prometheus import scrape, values

S = 1_000_000_000
COUNTS = {"get": {"hit": 90, "protocol_error": 6, "conn_error": 1}}


def run_with_protocol_errors() -> RunResult:
    run = make_run("r1", [{"get": (97, 200_000)}])
    hist = Histogram()
    hist.record(100_000, 90)
    run.intervals[0] = IntervalSnapshot("measure", 0, 0, S, COUNTS, {"get": hist})
    return run


def test_protocol_error_is_an_error_outcome_numbered_after_the_others() -> None:
    # Stored runs name their outcomes; the number is new, so no old one changes meaning.
    assert int(Outcome.PROTOCOL_ERROR) == 28 and OUTCOME_NAMES[28] == "protocol_error"
    assert Outcome.PROTOCOL_ERROR in ERROR_OUTCOMES
    assert (int(Outcome.CONN_ERROR), int(Outcome.ASK)) == (22, 27)


def test_every_output_counts_protocol_errors_as_their_own() -> None:
    run = run_with_protocol_errors()
    text = summary_text(run)
    assert re.search(r"get: conn_error 1\s+hit 90\s+protocol_error 6", text), text
    [status] = [line for line in text.splitlines() if line.startswith("status:")]
    assert "protocol_error 6, conn_error 1" in status and status.startswith("status: failed")
    doc = document(summarize(run))
    assert doc["ops"]["get"]["outcomes"] == COUNTS["get"]
    [row] = list(csv.DictReader(io.StringIO(interval_csv(run))))
    assert row["errors"] == "7"
    page = render([run])
    assert re.search(r'<tr class="bad">\s*(<th[^>]*>get</th>)?\s*<td>protocol_error</td>', page)


def test_prometheus_serves_protocol_errors_under_their_name() -> None:
    figures = LiveFigures()
    figures.start_run("memcached://h:11211", "closed", 2)
    figures.interval(IntervalSnapshot("measure", 0, 0, S, COUNTS, {}))
    ops = values(scrape(figures)["kvbench_ops"], "op", "outcome")
    assert ops[("get", "protocol_error")] == 6 and ops[("get", "conn_error")] == 1
