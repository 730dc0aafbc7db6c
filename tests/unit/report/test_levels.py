from __future__ import annotations

import math

import pytest

from kvbench.errors import ConfigError
from kvbench.report.levels import LevelRow, knee, paired_ratio, parse_slo
from kvbench.report.stats import spread
from kvbench.runner.levels import parse_levels


def row(level: float, rate: float, p99_us: float, status: str = "ok") -> LevelRow:
    return LevelRow(level, status, None, spread([rate, rate]), {"p99": p99_us}, 0, "id")


def curve(points: list[tuple[float, float, float]]) -> list[LevelRow]:
    return [row(level, rate, p99) for level, rate, p99 in points]


def test_knee_is_where_throughput_flattens_and_p99_climbs() -> None:
    rows = [
        row(64, 100_000, 200),
        row(128, 180_000, 250),
        row(192, 185_000, 600),
        row(256, 186_000, 1500),
    ]
    assert knee(rows) == 128


def test_no_knee_while_throughput_keeps_rising() -> None:
    assert knee([row(1, 10, 100), row(2, 20, 150), row(3, 30, 300)]) is None


def test_a_plateau_that_rises_again_is_not_the_knee() -> None:
    """The case seen: flat from pipeline 2 to 4 with p99 up, then +52% at 8 and 16. The
    old rule ("gain < 5% while p99 > +10%") marked 2; the knee is where the rise ends."""
    rows = curve(
        [
            (1, 100_000, 100),
            (2, 130_000, 150),
            (4, 131_000, 250),
            (8, 190_000, 300),
            (16, 198_000, 500),
            (32, 199_000, 1_200),
        ]
    )
    assert knee(rows) == 8  # 190k is 95% of 199k; p99 rises 300 -> 1,200 us after it


def test_a_saturating_curve_has_its_knee_where_it_reaches_the_top() -> None:
    rows = curve(
        [
            (1, 50_000, 100),
            (2, 90_000, 110),
            (4, 150_000, 140),
            (8, 160_000, 300),
            (16, 161_000, 700),
            (32, 160_500, 1_600),
        ]
    )
    assert knee(rows) == 8  # the first at 95% of 161k (152.95k)


def test_a_noisy_plateau_takes_the_first_level_within_the_noise_band() -> None:
    rows = curve([(1, 100_000, 200), (2, 97_000, 210), (3, 102_000, 260), (4, 99_000, 400)])
    assert knee(rows) == 1  # every level is within 5% of 102k; p99 doubles later


def test_no_knee_when_the_top_has_no_later_latency_growth() -> None:
    # saturated, but p99 never grows 10% after the first level at the top: no sign of it
    rows = curve([(1, 50_000, 100), (2, 100_000, 200), (4, 101_000, 210), (8, 100_500, 215)])
    assert knee(rows) is None


def test_levels_that_are_not_ok_are_left_out_of_the_knee() -> None:
    rows = curve([(1, 100_000, 100), (2, 180_000, 150), (4, 185_000, 600)])
    rows.append(row(8, 400_000, 2_000, status="interrupted"))  # a cut-short level's figure
    rows.append(row(16, 500_000, 3_000, status="failed"))
    assert knee(rows) == 2


@pytest.mark.parametrize(
    ("text", "percentile", "limit_us", "inclusive"),
    [
        ("p99<1ms", "p99", 1000, False),
        ("p99.9<=250us", "p99_9", 250, True),
        ("p50 < 2s", "p50", 2e6, False),
    ],
)
def test_slo_forms(text: str, percentile: str, limit_us: float, inclusive: bool) -> None:
    slo = parse_slo(text)
    assert (slo.percentile, slo.limit_us, slo.inclusive) == (percentile, limit_us, inclusive)
    assert slo.met({percentile: limit_us}) is inclusive
    assert slo.met({percentile: None}) is None


@pytest.mark.parametrize("text", ["p98<1ms", "p99>1ms", "1ms", "p99<fast"])
def test_bad_slos_name_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--slo: "):
        parse_slo(text)


def test_levels_forms() -> None:
    assert parse_levels("64:256:64", "--connections") == [64, 128, 192, 256]
    assert parse_levels("1,2,4", "--pipeline") == [1, 2, 4]
    for bad in ("0:4:1", "4:1:1", "a,b", "1:100000:1"):
        with pytest.raises(ConfigError):
            parse_levels(bad, "--connections")


OK3 = [True, True, True]


def test_paired_ratio_of_interleaved_rounds() -> None:
    ratio = paired_ratio([100, 110, 90], [50, 55, 45], OK3, OK3)
    assert ratio is not None and ratio.mean == pytest.approx(0.5)
    assert ratio.ci95 == pytest.approx((0.5, 0.5))


def test_paired_ratio_is_the_geometric_mean_with_a_log_interval() -> None:
    a, b = [100.0, 100.0, 100.0], [50.0, 100.0, 200.0]
    ratio = paired_ratio(a, b, OK3, OK3)
    assert ratio is not None and ratio.n == 3
    assert ratio.mean == pytest.approx(1.0)  # 0.5 x 1 x 2: B is A on the whole
    assert ratio.ci95 is not None
    low, high = ratio.ci95
    assert 0 < low < 1 < high and low * high == pytest.approx(1.0)  # symmetric in logs
    # t(2) = 4.303, s = ln 2 on the logs
    assert high == pytest.approx(math.exp(4.303 * math.log(2) / math.sqrt(3)), rel=1e-3)
    # A against B is the reciprocal, interval included
    back = paired_ratio(b, a, OK3, OK3)
    assert back is not None and back.ci95 is not None
    assert back.ci95 == pytest.approx((1 / high, 1 / low))


def test_a_wide_spread_gives_no_negative_ratio_bound() -> None:
    """Seen: "95% CI -43%-244%" from arithmetic means of the per-round ratios."""
    ratio = paired_ratio([100.0, 100.0, 100.0], [10.0, 300.0, 100.0], OK3, OK3)
    assert ratio is not None and ratio.ci95 is not None and ratio.ci95[0] > 0


def test_rounds_not_complete_on_both_sides_are_left_out() -> None:
    # round 3 of B was interrupted: its 5 ops/s would pull the ratio down
    ratio = paired_ratio([100, 100, 100, 100], [50, 50, 50, 5], [True] * 4, [True] * 3 + [False])
    assert ratio is not None and ratio.n == 3 and ratio.mean == pytest.approx(0.5)


def test_below_three_pairs_there_is_no_ratio_interval() -> None:
    ratio = paired_ratio([100, 90], [50, 60], [True] * 2, [True] * 2)
    assert ratio is not None and ratio.n == 2 and ratio.ci95 is None


def test_a_target_without_successes_has_a_ratio_of_zero() -> None:
    ratio = paired_ratio([100, 90, 110], [0, 0, 0], OK3, OK3)
    assert ratio is not None and ratio.mean == 0 and ratio.ci95 is None


def test_a_comparison_whose_rounds_disagree_says_it_is_unstable() -> None:
    """gateway 144.8% of native with a 95% CI of 44.7-418.7% printed no word of caution."""
    from kvbench.report.levels import comparison_sentence, instability, share_sentence

    wide = [0.447, 4.187]
    row = {"target": "B", "baseline": "A", "throughput_ratio": 1.448, "rounds_paired": 5,
           "throughput_ratio_ci95": wide, "p99_ratio": None, "status": "ok",
           "baseline_status": "ok"}  # fmt: skip
    assert comparison_sentence(row).endswith(
        " - unstable: the rounds disagree, the 95% CI runs from 44.7% to 418.7% (9.4x); "
        "rerun with more --rounds, on a quieter machine"
    )
    assert "unstable" not in comparison_sentence({**row, "throughput_ratio_ci95": [0.7, 0.75]})
    assert instability(None) is None and instability([0.9, 1.3]) is None
    side = {"url": "A", "mean_per_s": 14_480}
    share = {"first": side, "second": {**side, "url": "B", "mean_per_s": 10_000},
             "first_pct_of_second": 144.8, "paired_ratio_ci95": wide}  # fmt: skip
    assert "unstable: the rounds disagree" in share_sentence("connections", 320, share)
