"""Parse human quantities from flags and config: "10k", "250us", "2m", "64KiB".

Every parser returns an int in an explicit unit (its name says which) and raises
ConfigError naming the flag or config path on bad input. Units are converted here (input)
and in report/ (output), nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kvbench.errors import ConfigError

_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_DURATION = re.compile(_NUMBER + r"\s*(ns|us|µs|ms|s|m|h)?$")
_COUNT = re.compile(_NUMBER + r"\s*([kKmMgG]?)$")
_FRACTION = re.compile(_NUMBER + r"\s*(%?)$")
_SIZE = re.compile(_NUMBER + r"\s*(B|KB|KiB|MB|MiB|GB|GiB|k|K|m|M)?$")

_NS_PER = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_COUNT_MULT = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}
_SIZE_MULT = {
    None: 1,
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "k": 1024,
    "K": 1024,
    "m": 1024**2,
    "M": 1024**2,
}


def parse_duration_ns(
    text: str | int | float, where: str, default_unit: str = "s", minimum_ns: int = 0
) -> int:
    """Parse a duration ("10s", "250ms", "1.5m", bare numbers in ``default_unit``) to ns.

    Args:
        minimum_ns: the shortest duration accepted; 1 means "above 0".
    """
    if isinstance(text, bool):
        raise ConfigError(where, f"expected a duration, got {text!r}")
    if isinstance(text, int | float):
        text = f"{text}{default_unit}"
    match = _DURATION.match(text.strip())
    if not match:
        raise ConfigError(where, f"{text!r} is not a duration (examples: 10s, 250ms, 2m)")
    value = round(float(match.group(1)) * _NS_PER[match.group(2) or default_unit])
    if value < minimum_ns:
        floor = "above 0" if minimum_ns == 1 else f"at least {plain_duration(minimum_ns)}"
        raise ConfigError(where, f"must be {floor}, got {text!r}")
    return value


def plain_duration(value_ns: int | float) -> str:
    """A duration as one would type it: the largest unit that divides it, 10ms, 3s, 250us."""
    whole_ns = round(value_ns)
    for unit in ("h", "m", "s", "ms", "us"):
        if whole_ns and whole_ns % _NS_PER[unit] == 0:
            return f"{whole_ns // _NS_PER[unit]}{unit}"
    return f"{whole_ns}ns"


def parse_count(text: str | int, where: str, minimum: int = 0) -> int:
    """Parse a count ("100000", "100k", "1M") to an int no smaller than ``minimum``."""

    def whole(match: re.Match[str]) -> int:
        number = float(match.group(1)) * _COUNT_MULT[match.group(2).lower()]
        if number != int(number):
            raise ConfigError(where, f"{text!r} is not a whole number")
        return int(number)

    return _parse_scaled(
        text, where, minimum, ("number", "count", "50, 10k, 1M", ""), _COUNT, whole
    )


def parse_size_bytes(text: str | int, where: str, minimum: int = 0) -> int:
    """Parse a size ("100", "1KiB", "4k" meaning 4096) to bytes."""

    def size(match: re.Match[str]) -> int:
        return round(float(match.group(1)) * _SIZE_MULT[match.group(2)])

    words = ("size", "size", "100, 1KiB, 64k", " bytes")
    return _parse_scaled(text, where, minimum, words, _SIZE, size)


def _parse_scaled(
    text: str | int,
    where: str,
    minimum: int,
    words: tuple[str, str, str, str],
    pattern: re.Pattern[str],
    scale: Callable[[re.Match[str]], int],
) -> int:
    """An int given as itself, or as text ``pattern`` matches and ``scale`` converts.

    Args:
        words: what is expected, what the text is not, examples, the minimum's unit.
    """
    expected, kind, examples, unit = words
    if isinstance(text, bool):
        raise ConfigError(where, f"expected a {expected}, got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        match = pattern.match(str(text).strip())
        if not match:
            raise ConfigError(where, f"{text!r} is not a {kind} (examples: {examples})")
        value = scale(match)
    if value < minimum:
        raise ConfigError(where, f"must be at least {minimum}{unit}, got {value}")
    return value


def parse_fraction(text: str | int | float, where: str) -> float:
    """Parse a share ("1%", "0.5%", or a bare fraction "0.01") to a float in [0, 1]."""
    if isinstance(text, bool):
        raise ConfigError(where, f"expected a share such as 1% or 0.01, got {text!r}")
    match = _FRACTION.match(str(text).strip())
    if not match:
        raise ConfigError(where, f"{text!r} is not a share (examples: 1%, 0.5%, 0.01)")
    value = float(match.group(1)) / (100 if match.group(2) else 1)
    if value > 1:
        raise ConfigError(where, f"{text!r} is more than 100%")
    return value


# A value's unit ladders for the formatters below: (below, divisor, format) rows; the first
# row whose bound the value is below formats it, the last row the values beyond them all.
_DURATION_UNITS = (
    (1_000, 1, "{:.0f}ns"),
    (1_000_000, 1_000, "{:.1f}us"),
    (1_000_000_000, 1_000_000, "{:.2f}ms"),
    (0, 1_000_000_000, "{:.2f}s"),
)
_RATE_UNITS = ((10_000, 1, "{:,.0f}"), (1_000_000, 1_000, "{:.1f}k"), (0, 1_000_000, "{:.2f}M"))


def _in_unit(value: float, units: tuple[tuple[int, int, str], ...]) -> str:
    """``value`` in the first unit of ``units`` whose bound it is below (else the last)."""
    for below, divisor, form in units[:-1]:
        if value < below:
            return form.format(value / divisor)
    _, divisor, form = units[-1]
    return form.format(value / divisor)


def format_duration_ns(value_ns: float) -> str:
    """Render ns with a unit a reader can take in at a glance: 812ns, 35.2us, 1.25ms, 3.40s."""
    return _in_unit(value_ns, _DURATION_UNITS)


def format_us(value_us: float) -> str:
    """A latency in microseconds as every terminal line writes one: ``85.4us``, ``1.84ms``,
    ``2.10s`` (the pages put a space and ``µs``: report/html.py's ``format_us``)."""
    return format_duration_ns(value_us * 1000)


def format_rate(per_s: float) -> str:
    """Render a rate compactly: 812, 35.2k, 1.25M."""
    return _in_unit(per_s, _RATE_UNITS)


def format_byte_rate(per_s: float) -> str:
    """Bytes per second, one rule everywhere (the summary's network line and TX / RX
    columns, the page): ``12.35 MB/s`` from 1 MB/s up, ``812.3 KB/s`` below (decimal units,
    as mutilate's RX/TX)."""
    if per_s >= 1_000_000:
        return f"{per_s / 1_000_000:,.2f} MB/s"
    return f"{per_s / 1_000:,.1f} KB/s"


def share_out(total: int, parts: int) -> list[int]:
    """``total`` shared out as evenly as possible: share_out(10, 3) == [4, 3, 3].

    Used for connections, requests and messages across workers, and connections across
    servers; the shares always add up to ``total``.
    """
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]
