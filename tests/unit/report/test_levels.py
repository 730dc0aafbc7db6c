from __future__ import annotations

import pytest

from kvbench.errors import ConfigError
from kvbench.report.levels import LevelRow, knee, paired_ratio, parse_slo
from kvbench.report.stats import spread
from kvbench.runner.levels import parse_levels


def row(level: float, rate: float, p99_us: float) -> LevelRow:
    return LevelRow(level, "ok", None, spread([rate, rate]), {"p99": p99_us}, 0, "id")


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


def test_paired_ratio_of_interleaved_rounds() -> None:
    ratio = paired_ratio([100, 110, 90], [50, 55, 45])
    assert ratio is not None and ratio.mean == pytest.approx(0.5)
    assert ratio.ci95 == pytest.approx((0.5, 0.5))
