"""An op's outcome line adds up to the op: notes (late, mismatch) and redirects apart."""

from __future__ import annotations

from kvbench.report.terminal import outcome_counts


def test_late_is_a_note_shown_after_the_outcomes_not_among_them() -> None:
    """Was ``get: hit 26,951 late 3,862 miss 14,229``: summed to more than the ops."""
    line = outcome_counts({"hit": 26_951, "late": 3_862, "miss": 14_229, "mismatch": 2})
    assert line == "hit 26,951  miss 14,229; noted: late 3,862  mismatch 2"
    ends = line.split(";")[0].split()
    assert sum(int(n.replace(",", "")) for n in ends[1::2]) == 26_951 + 14_229


def test_redirects_are_noted_and_labels_apply() -> None:
    assert (
        outcome_counts({"stored": 10, "moved": 0} | {"ok": 1}) == "stored 10  ok 1; noted: moved 0"
    )
    assert outcome_counts({"stored": 10}, {"stored": "put"}) == "put 10"


def test_the_network_line_is_recomputable_from_its_bytes_and_the_window() -> None:
    from kvbench.report import summarize
    from kvbench.report.terminal import network_line
    from tests.support.runs import make_run

    run = make_run("r", [{"get": (1000, 100_000)}])
    run.intervals[0].stats.update({"bytes_in": 12_345_678, "bytes_out": 2_500_000})
    model = summarize(run)
    assert model.network == {
        "bytes_in": 12_345_678, "bytes_out": 2_500_000,
        "in_per_s": 12_345_678 / run.window_s, "out_per_s": 2_500_000 / run.window_s,
    }  # fmt: skip
    assert network_line(model).plain == (
        "network: received 12.35 MB/s (12,345,678 B), sent 2.50 MB/s (2,500,000 B) over the "
        "1.00s window\n"
    )
    run.intervals[0].stats.clear()
    assert summarize(run).network is None and network_line(summarize(run)).plain == ""


def test_bytes_by_op_are_in_the_document_and_the_table_and_add_up_to_the_totals() -> None:
    """The compiled driver's bytes_out.<op> / bytes_in.<op>: each op's TX and RX per
    second in its own columns (one unit rule: MB/s from 1 MB/s, KB/s below), the same
    figures in the document; with the bytes no reply took (a reply cut by the window's
    end) they give the totals."""
    import io

    from rich.console import Console

    from kvbench.report import document, summarize
    from kvbench.report.terminal import summary_table
    from kvbench.units import format_byte_rate
    from tests.support.runs import make_run
    from tests.support.widths import check_summary

    run = make_run("r", [{"get": (1000, 100_000), "set": (100, 100_000)}])
    run.intervals[0].stats.update(
        {
            "bytes_in": 2_400_030, "bytes_out": 160_000,
            "bytes_in.get": 2_300_000, "bytes_in.set": 100_000,
            "bytes_out.get": 40_000, "bytes_out.set": 120_000,
        }
    )  # fmt: skip
    doc = document(summarize(run))
    get, set_ = doc["ops"]["get"]["network"], doc["ops"]["set"]["network"]
    assert get == {"bytes_in": 2_300_000, "bytes_out": 40_000, "in_per_s": 2_300_000.0,
                   "out_per_s": 40_000.0}  # fmt: skip
    total = doc["totals"]["network"]
    assert get["bytes_out"] + set_["bytes_out"] + total["bytes_out_other"] == total["bytes_out"]
    assert get["bytes_in"] + set_["bytes_in"] + total["bytes_in_other"] == total["bytes_in"]
    assert total["bytes_in_other"] == 30 and total["bytes_out_other"] == 0
    assert format_byte_rate(2_300_000) == "2.30 MB/s" and format_byte_rate(40_000) == "40.0 KB/s"
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(summary_table(summarize(run)))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert {"TX", "RX"} <= check_summary(text, doc, 200)
    assert "2.30 MB/s" in text and "120.0 KB/s" in text
    # at every width a figure and its unit stay on one line (was: "27.2" / "KB/s" at 80
    # columns); they are the first columns left out
    shown = {}
    for width in (80, 100, 120, 160, 200):
        narrow = Console(file=io.StringIO(), width=width, color_system=None)
        narrow.print(summary_table(summarize(run)))
        shown[width] = check_summary(narrow.file.getvalue(), doc, width)  # type: ignore[attr-defined]
    assert "TX" not in shown[100] and "TX" in shown[200]
    # the Python driver counts totals only: no columns by op, blank cells
    for name in list(run.intervals[0].stats):
        if "." in name:
            del run.intervals[0].stats[name]
    doc = document(summarize(run))
    assert doc["ops"]["get"]["network"] is None and "bytes_in_other" not in doc["totals"]["network"]
