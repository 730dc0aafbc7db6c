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
