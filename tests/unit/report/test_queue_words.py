"""A queue run's page uses the terminal's words: a get found a message or the queue empty."""

from __future__ import annotations

import re

from kvbench.report.html import render
from tests.unit.report.test_queue_report import result


def test_the_queue_page_says_message_and_empty_not_hit_and_miss() -> None:
    """The page had 'miss' and a 'hit %' (95.8%) where the terminal says 'empty'."""
    page = render([result()])
    outcomes = page[page.index('class="figures outcomes"') :]
    outcomes = outcomes[: outcomes.index("</table>")]
    cells = [c.strip() for c in re.findall(r"<td>([^<]*)</td>", outcomes)]
    assert {"message", "empty"} <= set(cells)
    assert not {"hit", "miss"} & set(cells)
    summary = page[page.index('class="figures summary"') :]
    assert "message %" in summary[: summary.index("</thead>")]


def test_notes_come_after_the_outcomes_with_no_share() -> None:
    from tests.support.runs import make_run

    run = make_run("20261201-120000-abcdef", [{"get": (1000, 100_000)}])
    run.intervals[0].counts["get"].update({"miss": 500, "late": 300})
    page = render([run])
    outcomes = page[page.index('class="figures outcomes"') :]
    rows = re.findall(r"<td>([^<]*)</td>\s*<td[^>]*>([^<]*)</td>\s*<td[^>]*>([^<]*)</td>", outcomes)
    names = [name.strip() for name, _, _ in rows]
    assert names[-1] == "late (noted)" and names.index("hit") < names.index("late (noted)")
    assert rows[-1][2].strip() == ""  # a note is no share of the op
