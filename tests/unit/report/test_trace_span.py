"""A trace of fractional times spans from its first row's time to its last's (10 s of
rows from 1000.37 s on touch 11 whole seconds: the span was 11 s, the mean rate 1/11 too
low, the offered rate at --speed 2 over 5.5 s); the terminal's trace lines give the TTL
profile the page gives."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kvbench.report.terminal import trace_lines
from kvbench.report.trace_figures import profile_summary
from kvbench.results.trace import merge_profiles
from kvbench.workload.trace import TraceReader
from kvbench.workload.trace_profile import TraceProfile
from tests.support.traces import write_trace

ROWS = 20_000  # 2,000/s over 10 s of trace time


def profile_of(path: Path) -> dict[str, Any]:
    profile = TraceProfile()
    for block in TraceReader(path, block_bytes=64 * 1024):
        profile.add(block)
    return profile.to_dict()


def test_a_fractional_trace_spans_its_first_to_its_last_time(tmp_path: Path) -> None:
    rows = [(1000.37 + i / 2000, f"k{i}", 4, 100, 1, "set", 3600) for i in range(ROWS)]
    data = profile_of(write_trace(tmp_path / "t.csv", rows, header=True))
    rate = profile_summary(data)["rate"]
    assert rate["span_s"] == pytest.approx(9.9995, abs=0.001)  # not the 11 seconds touched
    assert rate["mean_per_s"] == pytest.approx(2000, rel=0.001)
    # two workers' profiles: the earliest first time, the latest last one
    half = ROWS // 2
    first = profile_of(write_trace(tmp_path / "a.csv", rows[:half], header=True))
    second = profile_of(write_trace(tmp_path / "b.csv", rows[half:], header=True))
    merged = profile_summary(merge_profiles([second, first]))["rate"]
    assert merged["span_s"] == rate["span_s"] and merged["mean_per_s"] == rate["mean_per_s"]


def test_a_trace_shorter_than_a_second_peaks_no_lower_than_its_mean(tmp_path: Path) -> None:
    """12 rows in 0.03 s: 400/s over the span; the one whole-second bucket said 12/s."""
    rows = [(1000.5 + i * 0.03 / 11, f"k{i}", 4, 100, 1, "get", 0) for i in range(12)]
    rate = profile_summary(profile_of(write_trace(tmp_path / "t.csv", rows, header=True)))["rate"]
    assert rate["mean_per_s"] == pytest.approx(400, rel=0.01)
    assert rate["peak_per_s"] == rate["mean_per_s"]


def test_a_whole_second_trace_and_a_stored_run_keep_whole_seconds(tmp_path: Path) -> None:
    rows = [(100 + i // 2000, f"k{i}", 4, 0, 1, "get", 0) for i in range(ROWS)]
    data = profile_of(write_trace(tmp_path / "t.csv", rows))
    assert profile_summary(data)["rate"]["span_s"] == 10  # each row's second is whole
    older = {k: v for k, v in data.items() if not k.endswith("_time_s")}
    assert profile_summary(merge_profiles([older]))["rate"]["span_s"] == 10


def test_the_trace_lines_give_the_span_and_the_ttl_profile() -> None:
    profile = {
        "rows": 21_717,
        "ops": {"set": 21_717},
        "rate": {"mean_per_s": 2171.7, "peak_per_s": 2300.0, "span_s": 10.0},
        "key_size_bytes": {},
        "value_size_bytes": {"count": 21_717.0, "p50": 100, "p90": 100, "p99": 100, "max": 100},
        "ttls_s": [[3600, 21_717]],
    }
    sent = {
        "trace_span_s": 9.9995,
        "replay_span_s": 4.99975,
        "offered_per_s": 4343.7,
        "sent_as": {"set": "set"},
        "skipped": {},
        "total": 21_717,
        "in_drain": 0,
        "requests": 21_717,
        "keys_clamped": 0,
    }
    trace = {"path": "t.csv", "speed": 2.0, "profile": profile, "sent": sent}
    text = trace_lines(SimpleNamespace(trace=trace)).plain  # type: ignore[arg-type]
    assert "over 9.9995s of trace time" in text and "over 5.0s)" in text
    assert (
        "TTL of the stores, the most common first: 3,600 s \N{MULTIPLICATION SIGN} 21,717 "
        "(100.0% of 21,717)" in text
    )
