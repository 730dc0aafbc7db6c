"""The run's connections: opened, refused, reset at accept, reconnected, and how many
were live against how many were asked.

Pure: computed from the interval snapshots' worker stats (engine/worker.py counts them
per interval; merging adds them up across workers). A connect attempt that failed during
the run, or a connection the server refused right after accepting it, is an error of the
interval it happened in (``connection_failures``); refusals before the start show in the
live count and in the ``connections.live`` verdict.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.verdicts import Verdict
from kvbench.results.model import RunResult
from kvbench.results.status import CONNECTION_FAILURE_STATS, refusers

# Stats that are errors of their interval: attempts refused or timed out, refusals at accept.
FAILURE_STATS = CONNECTION_FAILURE_STATS


def connection_failures(snap: IntervalSnapshot) -> int:
    """Connect attempts that failed and connections refused at accept in ``snap``."""
    return int(sum(snap.stats.get(name, 0) for name in FAILURE_STATS))


def live_min(intervals: Iterable[IntervalSnapshot]) -> int | None:
    """The fewest connections live at once in any of ``intervals`` (None: not recorded)."""
    values = [
        int(s.stats["connections_live_min"]) for s in intervals if "connections_live_min" in s.stats
    ]
    return min(values) if values else None


def _asked(run: RunResult) -> int:
    """Connections the run asked for: ``--connections``, or a queue's producers and
    consumers (one connection each)."""
    config = run.config
    if run.queue is not None:
        return int(config.get("producers", 0)) + int(config.get("consumers", 0))
    return int(config.get("load", {}).get("connections", 0))


class ConnectionsSection(TypedDict):
    """The document's ``connections``: asked and live in the window, events in the run."""

    asked: int
    live_min: int | None  # the fewest live at once in the window (None: not recorded)
    live_min_last: int | None  # the same, in the window's last interval
    connects: int
    connect_failures: int
    connect_resets: int  # refused right after accept
    connect_resets_before: int  # so, before the start
    reconnect_attempts: int
    reconnects: int
    errors: int  # connection errors in the window (in the total's errors)


def connections_section(run: RunResult) -> ConnectionsSection:
    """The document's ``connections``: asked, live at the worst moment of the window, and
    the events of the whole run (preflight and every phase)."""
    snaps = list(run.intervals) + list(run.phases.values())

    def events(name: str) -> int:
        """An event's count added up over the whole run (every phase)."""
        return int(sum(s.stats.get(name, 0) for s in snaps))

    asked = _asked(run)
    # A queue's producers leave as they finish: live counts only while every one runs.
    during = [s for s in run.intervals if run.queue is None or s.workers >= asked]
    return {
        "asked": asked,
        "live_min": live_min(during),
        "live_min_last": live_min(during[-1:]),
        "connects": events("connects"),
        "connect_failures": events("connect_failures"),
        "connect_resets": events("connect_resets"),
        "connect_resets_before": events("connect_resets_before"),
        "reconnect_attempts": events("reconnect_attempts"),
        "reconnects": events("reconnects"),
        "errors": sum(connection_failures(s) for s in run.intervals),
    }


def connection_verdicts(section: ConnectionsSection, run: RunResult) -> list[Verdict]:
    """A warning when fewer connections were live than asked, with the figures."""
    asked, live = section["asked"], section["live_min"]
    if live is None or not asked or live >= asked:
        return []
    refused = section["connect_resets"] + section["connect_resets_before"]
    lighter = "the load was lighter than asked"
    if refused:
        why = refusers(run, refused)
        if refused < asked - live:  # more short than refused: the rest were lost
            why += "; other connections were lost and not all reopened"
    elif (last := section["live_min_last"]) is not None and last >= asked:
        reconnects = section["reconnects"]
        why = (
            f"connections were lost and reopened ({reconnects:,} "
            f"{'reconnect' if reconnects == 1 else 'reconnects'}; all live again in the "
            "window's last interval)"
        )
        lighter += " while they were down"
    else:
        why = "connections were lost and not all reopened"
    return [
        Verdict(
            "connections.live",
            "warning",
            f"only {live:,} of the {asked:,} connections asked for were live (the fewest at "
            f"any moment of the window): {why}; {lighter}",
            {
                "asked": asked,
                "live_min": live,
                "live_min_last": section["live_min_last"],
                "refused_at_accept": refused,
                "connect_failures": section["connect_failures"],
                "reconnects": section["reconnects"],
            },
        )
    ]
