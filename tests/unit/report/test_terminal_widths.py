"""The terminal fits the terminal: at 80, 100, 120 and 200 columns the summary shows the
columns that fit, by priority, every figure whole and equal to the document's, and says
which it left out; ``--wide`` shows them all; the live line and table likewise, with
exact whole rates; ``-q`` is one line per op."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from rich.console import Console

from kvbench.report import dumps, summarize
from kvbench.report.tables import PER_OP_COLUMNS, live_table
from kvbench.report.terminal import live_line, print_summary
from tests.support.runs import make_run
from tests.support.widths import check_summary

WIDTHS = (80, 100, 120, 200)
EVERY = {"op", "ops", "ops/s", "hit %", "errors", "p50", "p90", "p99", "p99.9", "p99.99"}
EVERY |= {"max", "mean"}


def big_run() -> Any:
    """Figures as wide as a busy run's: 9-digit counts, 7-digit rates."""
    return make_run("r", [{"get": (19_222_345, 1_000), "set": (1_922_234, 100)}])


def render(width: int, wide: bool = False, quiet: bool = False) -> tuple[str, dict[str, Any]]:
    model = summarize(big_run())
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, soft_wrap=wide)
    print_summary(console, model, wide=wide, quiet=quiet)
    return out.getvalue(), json.loads(dumps(model))


@pytest.mark.parametrize("width", WIDTHS)
def test_every_figure_is_whole_and_the_documents_at_each_width(width: int) -> None:
    text, doc = render(width)
    shown = check_summary(text, doc, width)
    left = EVERY - shown
    if left:  # one line names them, and where to see them
        line = " ".join(text[text.index("left out at") :].split())  # it may wrap
        for name in left:
            assert name in line
        assert "--wide" in line and "kvbench show r --wide" in line
    else:
        assert "left out" not in text
    if width >= 120:  # the most wanted after the first five
        assert {"p90", "p99.9"} <= shown


def test_the_narrowest_keeps_the_first_columns_and_leaves_the_last() -> None:
    text, doc = render(80)
    shown = check_summary(text, doc, 80)
    assert {"op", "ops/s", "errors", "p50", "p99"} <= shown
    assert "ops" not in shown and "hit %" not in shown  # last by priority
    assert shown == check_summary(render(80)[0], doc, 80)


def test_on_a_terminal_every_line_wraps_between_words() -> None:
    model = summarize(big_run())
    out = io.StringIO()
    console = Console(file=out, width=40, color_system=None, soft_wrap=True, force_terminal=True)
    print_summary(console, model)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 40 for line in lines), lines
    assert "19,222,345" in out.getvalue()  # the outcome line's count, whole


def test_wide_shows_every_column_whatever_the_width() -> None:
    text, doc = render(80, wide=True)
    assert check_summary(text, doc, None) == EVERY
    assert "left out" not in text
    assert max(len(line) for line in text.splitlines()) > 80  # the terminal wraps


def test_quiet_is_one_line_per_op_the_verdicts_and_the_status() -> None:
    text, doc = render(80, quiet=True)
    lines = text.splitlines()
    get = doc["ops"]["get"]
    assert lines[0].startswith(f"get: {round(get['throughput_per_s']):,} ops/s, p50 ")
    assert ", p99 " in lines[0]
    assert lines[1].startswith("set: ") and lines[2].startswith("total: ")
    assert lines[-1].startswith("status: ")
    assert not any("┃" in line or "│" in line for line in lines)


def _row(ops: dict[str, int], t_s: float = 3.0) -> dict[str, Any]:
    return {
        "round": 0,
        "t_s": t_s,
        "length_s": 1.0,
        "per_s": float(sum(ops.values())),
        "total": 3 * sum(ops.values()),
        "avg_per_s": 10_843.0,
        "errors": 0,
        "cpu_s": 0.5,
        "offered_per_s": None,
        "ops": {
            op: {"per_s": float(n), "succeeded": n, "p50_us": 310.0, "p99_us": 1020.0}
            for op, n in ops.items()
        },
    }


def test_the_live_line_gives_exact_rates_and_collapses_per_op_parts() -> None:
    row = _row({"get": 10_843, "set": 1_084})
    full = live_line(row)
    assert "11,927 ops/s" in full and "get 10,843/s" in full and "total 35,781" in full
    for width in WIDTHS:
        line = live_line(row, width)
        assert all(len(part) <= width for part in line.splitlines())
        assert "11,927 ops/s" in line and "total 35,781" in line
        assert ("get 10,843/s" in line) == (len(full) <= width)


def test_an_open_loops_live_line_and_table_give_its_late_sends() -> None:
    row = {**_row({"get": 10_843, "set": 1_084}), "offered_per_s": 12_000.0, "late": 4_959}
    for width in (None, *WIDTHS):
        line = live_line(row, width)
        assert "(offered 12,000/s)" in line and "late 4,959" in line
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(live_table([row]))
    header, cells = out.getvalue().splitlines()[:2]
    assert header.split()[5:7] == ["offered/s", "late"]
    assert cells.split()[5:7] == ["12,000", "4,959"]
    closed = _row({"get": 10_843})
    assert "late" not in live_line(closed)


def test_a_replays_eleven_ops_collapse_into_the_total_in_the_live_table() -> None:
    ops = ["add", "append", "cas", "decr", "delete", "get", "gets", "incr", "prepend"]
    row = _row({op: 1_000 + i for i, op in enumerate([*ops, "replace", "set"])})
    for width in WIDTHS:
        out = io.StringIO()
        Console(file=out, width=width, color_system=None).print(live_table([row]))
        text = out.getvalue()
        assert "…" not in text
        assert max(len(line) for line in text.splitlines()) <= width
        assert "11,055" in text and "33,165" in text  # ops/s and total, exact
        assert PER_OP_COLUMNS in text  # the per-op columns left out, all together
        assert "add /s" not in text


def test_the_live_table_shows_per_op_columns_when_they_fit() -> None:
    out = io.StringIO()
    row = _row({"get": 10_843, "set": 1_084})
    Console(file=out, width=120, color_system=None).print(live_table([row]))
    text = out.getvalue()
    assert "get /s" in text and "10,843" in text and "left out" not in text
