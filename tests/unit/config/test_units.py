from __future__ import annotations

import pytest

from kvbench.errors import ConfigError
from kvbench.units import (
    format_duration_ns,
    format_rate,
    parse_count,
    parse_duration_ns,
    parse_size_bytes,
    plain_duration,
)


@pytest.mark.parametrize(
    ("text", "expected_ns"),
    [
        ("10s", 10 * 10**9),
        ("250ms", 250 * 10**6),
        ("1.5m", 90 * 10**9),
        ("80us", 80_000),
        ("2", 2 * 10**9),
        ("1h", 3600 * 10**9),
        (3, 3 * 10**9),
    ],
)
def test_durations_parse_to_nanoseconds(text: str | int, expected_ns: int) -> None:
    assert parse_duration_ns(text, "--duration") == expected_ns


def test_bare_timeout_numbers_are_milliseconds_when_asked() -> None:
    assert parse_duration_ns("500", "--timeout", default_unit="ms") == 500_000_000


@pytest.mark.parametrize("text", ["", "ten", "10x", "-1s", "1..2s"])
def test_bad_durations_name_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--duration: "):
        parse_duration_ns(text, "--duration")


@pytest.mark.parametrize(
    ("text", "expected"), [("50", 50), ("10k", 10_000), ("1M", 1_000_000), ("1.5k", 1500)]
)
def test_counts(text: str, expected: int) -> None:
    assert parse_count(text, "--keys") == expected


def test_count_below_minimum_is_refused() -> None:
    with pytest.raises(ConfigError, match="--pipeline: must be at least 1, got 0"):
        parse_count("0", "--pipeline", minimum=1)


def test_fractional_count_is_refused() -> None:
    with pytest.raises(ConfigError, match="whole number"):
        parse_count("1.5", "--connections")


@pytest.mark.parametrize(
    ("text", "expected"), [("100", 100), ("1KiB", 1024), ("4k", 4096), ("1KB", 1000)]
)
def test_sizes(text: str, expected: int) -> None:
    assert parse_size_bytes(text, "--value-size") == expected


def test_formatting_picks_readable_units() -> None:
    assert format_duration_ns(812) == "812ns"
    assert format_duration_ns(35_200) == "35.2us"
    assert format_duration_ns(1_250_000) == "1.25ms"
    assert format_rate(35_200) == "35.2k"
    assert format_rate(1_250_000) == "1.25M"
    # each unit holds up to its bound, the next starts there; the last has none
    assert format_duration_ns(999) == "999ns"
    assert format_duration_ns(1_000) == "1.0us"
    assert format_duration_ns(3.4e12) == "3400.00s"
    assert format_rate(9_999) == "9,999"
    assert format_rate(10_000) == "10.0k"
    assert format_rate(5e9) == "5000.00M"


@pytest.mark.parametrize(
    ("text", "minimum_ns", "message"),
    [
        ("0", 1, "--timeout: must be above 0, got '0'"),
        ("0s", 1, "--timeout: must be above 0, got '0s'"),
        ("5ms", 10_000_000, "--timeout: must be at least 10ms, got '5ms'"),
    ],
)
def test_durations_below_their_minimum_are_refused(
    text: str, minimum_ns: int, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_duration_ns(text, "--timeout", minimum_ns=minimum_ns)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("value_ns", "text"),
    [
        (3e9, "3s"),
        (300_000_000, "300ms"),
        (90e9, "90s"),
        (120e9, "2m"),
        (1500, "1500ns"),
        (0, "0ns"),
    ],
)
def test_plain_durations_read_as_typed(value_ns: float, text: str) -> None:
    assert plain_duration(value_ns) == text
