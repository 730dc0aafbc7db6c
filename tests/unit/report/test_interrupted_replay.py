"""A replay interrupted while its trace was read: the summary says nothing was offered.

Was: Ctrl-C during "reading the trace" printed a TypeError traceback from the summary
(``format_rate(None)``: no request was offered, so there is no offered rate), exit 1, and
nothing was saved (issue 19, item 2).
"""

from __future__ import annotations

from types import SimpleNamespace

from kvbench.report.terminal import trace_lines
from kvbench.report.trace_figures import trace_figures
from kvbench.results.trace import TraceSection


def test_a_replay_stopped_before_its_clock_has_a_trace_line_without_a_rate() -> None:
    replay = {"path": "trace.csv", "speed": 1.0}
    section = TraceSection.from_reports(replay, [])  # no worker got to report its feed
    figures = trace_figures(SimpleNamespace(trace=section, phases={}), None)  # type: ignore[arg-type]
    assert figures is not None and figures["sent"]["offered_per_s"] is None
    text = trace_lines(SimpleNamespace(trace=figures)).plain  # type: ignore[arg-type]
    assert "nothing offered: the run ended before its clock started" in text
    assert "sent 0 of 0 queued" in text
