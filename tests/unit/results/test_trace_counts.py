"""A replay's feed counts merged across processes (results/trace.py)."""

from __future__ import annotations

from kvbench.results.trace import merge_counts

TRACE = {"lines_read": 10, "rows": 10, "requests": 9, "skipped": {"cas": 1}, "keys_clamped": 0}


def test_a_captures_counts_add_up_and_a_traces_gain_none() -> None:
    capture = {
        **TRACE,
        "selects_inserted": 2,
        "clients": 3,
        "truncated_lines": 0,
        "by_script": {"set": 1},
    }
    other = {**TRACE, "requests": 4, "skipped": {}, "by_script": {"set": 2, "del": 1}}
    merged = merge_counts([capture, other])
    assert merged["requests"] == 13 and merged["selects_inserted"] == 2
    assert merged["clients"] == 3 and merged["by_script"] == {"set": 3, "del": 1}
    assert merge_counts([TRACE, TRACE]) == {
        "lines_read": 20,
        "rows": 20,
        "requests": 18,
        "keys_clamped": 0,
        "ttls_clamped": 0,
        "skipped": {"cas": 2},
    }
