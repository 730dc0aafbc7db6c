"""What ``kvbench replay`` replays: the trace file, its slice, and the speed.

A frozen section beside the run's others (``RunConfig.replay``; None for other runs).
Validated here, with the flag that gave each value in the error.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvbench.errors import ConfigError
from kvbench.units import parse_count, parse_duration_ns, parse_size_bytes

# ``--format``: what a replay reads (``auto``: told by the file's first bytes).
FORMATS = ("auto", "cache-trace", "redis-monitor")
MONITOR_FORMAT = "redis-monitor"


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """A replay's settings.

    Attributes:
        path: the trace file (plain or zstd).
        speed: how much faster than the trace's own times requests are sent (2.0: twice
            as fast); None: as fast as the server takes them (closed loop).
        from_s, to_s: the slice of trace time replayed, as the file's timestamps write it:
            rows with ``from_s <= timestamp < to_s`` (None: from the start / to the end).
        limit: replay at most this many rows of the slice (None: all).
        format: ``cache-trace`` (Twitter's or kvbench's CSV) or ``redis-monitor`` (a
            ``redis-cli monitor`` capture); ``auto`` until the file is looked at.
        commands: a MONITOR capture's commands that are sent, by name (lowercased), in
            the order results are recorded under (found before the run: cli/session.py).
        clients: a MONITOR capture's clients that send anything: one connection each.
        value_size_bytes: a MONITOR capture's values resent at this size (None: as
            captured).
    """

    path: str
    speed: float | None = None
    from_s: float | None = None
    to_s: float | None = None
    limit: int | None = None
    format: str = "auto"
    commands: tuple[str, ...] = ()
    clients: int = 0
    value_size_bytes: int | None = None

    @property
    def timed(self) -> bool:
        """Requests are sent at the trace's times (open loop), not as fast as possible."""
        return self.speed is not None


def parse_speed(text: str) -> float | None:
    """``--speed``: ``max`` (None), or a positive factor (``1``, ``2``, ``0.5``, ``2x``).

    Raises:
        ConfigError: neither.
    """
    value = text.strip().lower()
    if value == "max":
        return None
    value = value.removesuffix("x")
    try:
        speed = float(value)
    except ValueError:
        speed = 0.0
    if not 0 < speed < float("inf"):
        raise ConfigError("--speed", f"{text!r} is not 'max' or a positive factor (1, 2, 0.5)")
    return speed


def parse_trace_time(text: str, flag: str) -> float:
    """``--from``/``--to``: seconds of trace time (``3600``, ``1h``, ``90m``, ``2.5``)."""
    return parse_duration_ns(text, flag) / 1e9


def replay_config(
    path: str,
    speed: str = "1",
    from_text: str | None = None,
    to_text: str | None = None,
    limit: str | None = None,
    format_text: str = "auto",
    value_size: str | None = None,
) -> ReplayConfig:
    """Build and check the section from the command line's texts.

    Raises:
        ConfigError: a bad value, or ``--to`` not after ``--from``.
    """
    from_s = parse_trace_time(from_text, "--from") if from_text is not None else None
    to_s = parse_trace_time(to_text, "--to") if to_text is not None else None
    if from_s is not None and to_s is not None and to_s <= from_s:
        raise ConfigError("--to", f"must be after --from ({to_text} <= {from_text})")
    if format_text not in FORMATS:
        raise ConfigError("--format", f"{format_text!r} is not one of {', '.join(FORMATS)}")
    return ReplayConfig(
        path=path,
        speed=parse_speed(speed),
        from_s=from_s,
        to_s=to_s,
        limit=parse_count(limit, "--limit", minimum=1) if limit is not None else None,
        format=format_text,
        value_size_bytes=parse_size_bytes(value_size, "--value-size", minimum=1)
        if value_size
        else None,
    )
