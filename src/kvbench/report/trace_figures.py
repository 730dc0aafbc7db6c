"""A replay's own figures: the trace's profile, and what was sent against it.

Computed from the run alone (its ``trace`` section and its intervals), as every figure:
the profile's op mix, rate per second of trace time and size percentiles
(``TraceProfile.summary``); the feed's counts; and against them, the requests the run
recorded by op (every sent request is counted once: answered, failed, timed out or
dropped, counted apart), the trace's offered rate at the replay's speed, and each interval's offered and
achieved rates (the run's ``intervals``).
"""

from __future__ import annotations

from typing import Any

from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.model import RunResult

# Counted besides a request's outcome ("late", "mismatch"), or never sent ("dropped").
_NOT_SENT = frozenset({"late", "mismatch", "dropped"})


def trace_figures(run: RunResult, total: IntervalSnapshot | None) -> dict[str, Any] | None:
    """The ``trace`` section of a replay's summary and document (None for other runs).

    Args:
        total: the run's measure intervals merged (its ``total()``).
    """
    section = run.trace
    if section is None:
        return None
    profile = section.profile.summary()
    counts = section.counts.to_dict()
    counted = total.counts if total else {}
    sent_by_op = {
        name: sum(n for outcome, n in row.items() if outcome not in _NOT_SENT)
        for name, row in sorted(counted.items())
    }
    sent_by_op = {name: n for name, n in sent_by_op.items() if n}
    dropped = sum(row.get("dropped", 0) for row in counted.values())
    rate = profile["rate"]
    speed = section.speed
    span_s = (len(rate["points"]) * rate["bucket_s"]) if rate["points"] else 0
    return {
        "path": section.path,
        "speed": "max" if speed is None else speed,
        "slice": {"from_s": section.from_s, "to_s": section.to_s, "limit": section.limit},
        "profile": profile,
        "sent": {
            **counts,
            "sent_as": dict(section.sent_as),
            "by_op": sent_by_op,
            "total": sum(sent_by_op.values()),
            "dropped": dropped,
            # At --speed S the trace offers S times its own rate over 1/S of its span.
            "offered_per_s": None if speed is None else rate["mean_per_s"] * speed,
            "trace_span_s": span_s,
            "replay_span_s": None if speed is None else span_s / speed,
        },
    }
