"""``kvbench diff`` logic on fixed RunResults: Welch intervals, flags, single-round runs."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
from rich.console import Console
from scipy import stats as scipy_stats

from kvbench.report.diff import (
    IMPROVEMENT,
    NO_CI,
    NOT_AVAILABLE,
    REGRESSION,
    WITHIN_NOISE,
    diff_runs,
    render,
    to_dict,
    welch_interval,
)
from kvbench.report.stats import t_critical_95
from tests.support.runs import make_run


def change(diff: Any, metric: str, op: str) -> Any:
    return next(c for c in diff.changes if c.metric == metric and c.op == op)


def test_welch_interval_by_hand() -> None:
    a, b = [10.0, 12.0, 14.0], [20.0, 21.0, 22.0, 23.0]
    va, vb = 4.0 / 3, (5.0 / 3) / 4  # sample variances 4 and 5/3, over n
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    half = t_critical_95(math.floor(df)) * math.sqrt(va + vb)
    lo, hi = welch_interval(a, b) or (0, 0)
    assert lo == pytest.approx(9.5 - half) and hi == pytest.approx(9.5 + half)


def test_welch_interval_contains_scipys_and_is_barely_wider() -> None:
    """Flooring the degrees of freedom widens the interval a little, never narrows it."""
    a = [1000.0, 1012.0, 991.0, 1004.0, 998.0]
    b = [980.0, 1001.0, 969.0, 990.0]
    exact = scipy_stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    lo, hi = welch_interval(a, b) or (0, 0)
    assert lo <= exact.low and hi >= exact.high
    assert (hi - lo) < 1.1 * (exact.high - exact.low)


def test_welch_interval_needs_two_values_on_each_side() -> None:
    assert welch_interval([1.0], [1.0, 2.0]) is None
    assert welch_interval([1.0, 1.0], [2.0, 2.0]) == (1.0, 1.0)  # no spread: the difference


def test_throughput_drop_beyond_the_noise_is_a_regression() -> None:
    a = make_run(
        "a", [{"get": (10_000, 500_000)}, {"get": (10_100, 500_000)}, {"get": (9_900, 500_000)}]
    )
    b = make_run(
        "b", [{"get": (9_000, 500_000)}, {"get": (9_050, 500_000)}, {"get": (8_950, 500_000)}]
    )
    diff = diff_runs(a, b)
    assert diff.has_ci
    for op in ("get", "total"):
        tp = change(diff, "throughput_per_s", op)
        assert tp.a == pytest.approx(10_000) and tp.b == pytest.approx(9_000)
        assert tp.delta == pytest.approx(-1_000) and tp.relative == pytest.approx(-0.1)
        assert tp.ci95 is not None and tp.ci95[1] < 0
        assert tp.flag == REGRESSION
        assert tp.basis == "mean of rounds"
    assert {(c.metric, c.op) for c in diff.regressions} == {
        ("throughput_per_s", "get"),
        ("throughput_per_s", "total"),
    }
    # the same runs the other way round: an improvement
    assert change(diff_runs(b, a), "throughput_per_s", "total").flag == IMPROVEMENT


def test_overlapping_rounds_are_within_noise() -> None:
    a = make_run(
        "a", [{"get": (10_000, 500_000)}, {"get": (11_000, 500_000)}, {"get": (10_500, 500_000)}]
    )
    b = make_run(
        "b", [{"get": (10_400, 500_000)}, {"get": (10_500, 500_000)}, {"get": (10_600, 500_000)}]
    )
    diff = diff_runs(a, b)
    assert change(diff, "throughput_per_s", "total").flag == WITHIN_NOISE
    assert not diff.regressions


def test_p99_up_beyond_the_rounds_spread_is_a_regression() -> None:
    a = make_run(
        "a",
        [{"get": (10_000, 1_000_000)}, {"get": (10_000, 1_010_000)}, {"get": (10_000, 990_000)}],
    )
    b = make_run(
        "b",
        [{"get": (10_000, 2_000_000)}, {"get": (10_000, 2_020_000)}, {"get": (10_000, 1_980_000)}],
    )
    p99 = change(diff_runs(a, b), "p99_us", "get")
    assert p99.a == pytest.approx(1000, rel=0.01) and p99.b == pytest.approx(2000, rel=0.01)
    assert p99.ci95 is not None and p99.ci95[0] > 0
    assert p99.flag == REGRESSION
    assert p99.basis == "merged histograms"
    assert change(diff_runs(a, b), "throughput_per_s", "get").flag == WITHIN_NOISE


def test_two_rounds_are_too_few_for_an_interval() -> None:
    a = make_run("a", [{"get": (10_000, 500_000)}, {"get": (10_100, 500_000)}])
    b = make_run("b", [{"get": (5_000, 500_000)}, {"get": (5_050, 500_000)}])
    diff = diff_runs(a, b)
    assert not diff.has_ci and change(diff, "throughput_per_s", "total").flag == NO_CI
    assert "a CI needs 3 rounds in both" in rendered(diff)


def test_the_runs_statuses_are_shown() -> None:
    a = make_run("a", [{"get": (10_000, 500_000)}])
    b = make_run("b", [{"get": (10_000, 500_000)}])
    b.intervals[0].counts["get"]["error_reply"] = 5_000  # a third of its ops failed
    diff = diff_runs(a, b)
    assert (diff.status_a, diff.status_b) == ("ok", "failed")
    assert to_dict(diff)["status"] == {"a": "ok", "b": "failed"}
    text = rendered(diff)
    assert "A=a (ok)  B=b (failed)" in text and "run B is failed" in text


def test_single_round_runs_show_the_plain_change_without_a_flag() -> None:
    a = make_run("a", [{"get": (10_000, 500_000)}])
    b = make_run("b", [{"get": (5_000, 900_000)}, {"get": (5_000, 900_000)}])
    diff = diff_runs(a, b)
    assert not diff.has_ci and (diff.rounds_a, diff.rounds_b) == (1, 2)
    tp = change(diff, "throughput_per_s", "total")
    assert tp.ci95 is None and tp.flag == NO_CI and tp.basis == "whole run"
    assert tp.a == pytest.approx(10_000) and tp.b == pytest.approx(5_000)
    assert not diff.regressions
    text = rendered(diff)
    assert "no confidence interval is possible" in text
    assert to_dict(diff)["method"].startswith("no confidence interval")


def test_an_op_only_one_run_has_is_not_available() -> None:
    a = make_run("a", [{"get": (10_000, 500_000)}, {"get": (10_000, 500_000)}])
    b = make_run(
        "b",
        [
            {"get": (10_000, 500_000), "set": (1_000, 500_000)},
            {"get": (10_000, 500_000), "set": (1_000, 500_000)},
        ],
    )
    diff = diff_runs(a, b)
    assert change(diff, "throughput_per_s", "set").flag == NOT_AVAILABLE
    assert change(diff, "throughput_per_s", "set").delta is None
    assert [c.op for c in diff.changes] == ["get", "get", "set", "set", "total", "total"]


def test_differences_name_config_environment_and_settings_but_not_instance_ids() -> None:
    a = make_run("a", [{"get": (10_000, 500_000)}])
    b = make_run(
        "b",
        [{"get": (10_000, 500_000)}],
        config={"load": {"connections": 100}, "workload": {"seed": 1}},
        settings={"maxbytes": "1073741824", "tcpport": "22122"},
    )
    assert diff_runs(a, b).differences == [
        ("config.load.connections", "50", "100"),
        ("server.maxbytes", "67108864", "1073741824"),
    ]


def rendered(diff: Any) -> str:
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(render(diff))
    return out.getvalue()


def test_render_shows_ci_flags_and_differences() -> None:
    a = make_run(
        "a", [{"get": (10_000, 500_000)}, {"get": (10_100, 500_000)}, {"get": (10_050, 500_000)}]
    )
    b = make_run(
        "b",
        [{"get": (8_000, 500_000)}, {"get": (8_010, 500_000)}, {"get": (8_005, 500_000)}],
        config={"load": {"connections": 100}, "workload": {"seed": 1}},
    )
    text = rendered(diff_runs(a, b))
    assert "95% CI: Welch's t over 3 and 3 rounds" in text
    assert "regression beyond the noise: get ops/s, total ops/s" in text
    assert "config.load.connections: 50 -> 100" in text
    assert "-2,045/s (-20.3%)" in text  # (8,005 - 10,050) / 10,050
    doc = to_dict(diff_runs(a, b))
    assert doc["regressions"] == 2
    total = next(
        c for c in doc["changes"] if c["op"] == "total" and c["metric"] == "throughput_per_s"
    )
    assert total["ci95"][1] < 0 and total["flag"] == "regression"
