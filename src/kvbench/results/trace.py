"""A replay's own section of its ``RunResult``: the trace's profile and what was sent.

A replay is a run (mode ``closed`` at ``--speed max``, ``open`` at the trace's times): its
intervals, figures, verdicts and status are every run's. What only a replay has lives
here, stored with it (``to_json``/``from_json``; the store keeps it in ``runs.trace``):
the profile of the rows replayed (op mix, rows per second of trace time, key and value
sizes, TTLs: the counters of workload/trace_profile.py as plain data) and the feed's
counts (rows read, queued, skipped by reason, keys clamped) with the op each trace op was
sent as. The workers' parts are added up here (``from_reports``: counter addition, so
their order does not matter); report/trace_figures.py computes the figures.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# The profile's counters kept as [[value, count], ...] pairs (sizes, seconds, TTLs).
_PAIR_COUNTERS = ("per_second", "key_sizes", "value_sizes", "ttls_s")
# A MONITOR capture's feed counts, beside a trace's: SELECTs put before a command whose
# database differs from its connection's, the clients (one connection each), a last line
# cut off mid-line.
_CAPTURE_COUNTS = ("selects_inserted", "clients", "truncated_lines")


@dataclass(slots=True)
class TraceSection:
    """What a replay adds to a run.

    Attributes:
        path: the trace file as given.
        speed: the ``--speed`` factor; None: ``max`` (closed loop).
        profile: the rows of the replayed slice, every worker's (``TraceProfile.to_dict``).
        counts: rows read, queued, skipped, keys clamped, every worker's
            (``ReplayCounts.to_dict``).
        sent_as: per trace op, the op it was sent as on the target's protocol.
        from_s, to_s, limit: the slice asked for (None: none).
    """

    path: str
    speed: float | None
    profile: dict[str, Any]
    counts: dict[str, Any]
    sent_as: dict[str, str] = field(default_factory=dict)
    from_s: float | None = None
    to_s: float | None = None
    limit: int | None = None

    @classmethod
    def from_reports(cls, replay: dict[str, Any], reports: list[dict[str, Any]]) -> TraceSection:
        """The section of a run whose workers reported ``reports`` (``ReplayFeed.report``).

        Args:
            replay: the run's replay config as stored (``RunConfig.to_dict()["replay"]``).
        """
        sent_as: dict[str, str] = {}
        for report in reports:
            sent_as.update(report["mapping"])
        return cls(
            path=str(replay["path"]),
            speed=replay["speed"],
            profile=merge_profiles([r["profile"] for r in reports]),
            counts=merge_counts([r["counts"] for r in reports]),
            sent_as=sent_as,
            from_s=replay.get("from_s"),
            to_s=replay.get("to_s"),
            limit=replay.get("limit"),
        )

    def to_json(self) -> dict[str, Any]:
        """The section as a JSON-ready dict."""
        return {
            "path": self.path,
            "speed": self.speed,
            "profile": self.profile,
            "counts": self.counts,
            "sent_as": dict(self.sent_as),
            "from_s": self.from_s,
            "to_s": self.to_s,
            "limit": self.limit,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceSection:
        """``to_json`` read back."""
        return cls(
            path=str(data["path"]),
            speed=data["speed"],
            profile=merge_profiles([data["profile"]]),
            counts=merge_counts([data["counts"]]),
            sent_as={str(k): str(v) for k, v in data["sent_as"].items()},
            from_s=data.get("from_s"),
            to_s=data.get("to_s"),
            limit=data.get("limit"),
        )


def merge_profiles(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several processes' profiles as one (the same shape, counters added; the first
    time the earliest, the last the latest; runs stored before these had none)."""
    ops: Counter[str] = Counter()
    pairs: dict[str, Counter[int]] = {name: Counter() for name in _PAIR_COUNTERS}
    rows = 0
    for part in parts:
        rows += int(part["rows"])
        ops.update({str(k): int(v) for k, v in part["ops"].items()})
        for name in _PAIR_COUNTERS:
            pairs[name].update({int(k): int(v) for k, v in part[name]})
    firsts = [p["first_time_s"] for p in parts if p.get("first_time_s") is not None]
    lasts = [p["last_time_s"] for p in parts if p.get("last_time_s") is not None]
    times = (
        {
            "first_time_s": min(firsts),
            "last_time_s": max(lasts),
            "whole_seconds": all(p.get("whole_seconds", True) for p in parts),
        }
        if firsts and lasts
        else {}
    )
    return {
        "rows": rows,
        "ops": dict(ops),
        **{name: [[k, v] for k, v in sorted(c.items())] for name, c in pairs.items()},
        **times,
    }


def merge_counts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several processes' feed counts as one (skipped reasons added up by reason)."""
    skipped: Counter[str] = Counter()
    by_script: Counter[str] = Counter()  # a capture's commands run by scripts, by name
    totals = dict.fromkeys(("lines_read", "rows", "requests", "keys_clamped", "ttls_clamped"), 0)
    # A MONITOR capture's (workload/monitor_feed.py): kept where any part has them.
    extra = dict.fromkeys(_CAPTURE_COUNTS, 0)
    for part in parts:
        for name in totals:
            totals[name] += int(part.get(name, 0))  # ttls_clamped: not in older runs
        for name in _CAPTURE_COUNTS:
            if name in part:
                extra[name] += int(part[name])
        skipped.update({str(k): int(v) for k, v in part["skipped"].items()})
        by_script.update({str(k): int(v) for k, v in part.get("by_script", {}).items()})
    present = {name for part in parts for name in _CAPTURE_COUNTS if name in part}
    merged = {
        **totals,
        "skipped": dict(skipped),
        **{k: v for k, v in extra.items() if k in present},
    }
    if any("by_script" in part for part in parts):
        merged["by_script"] = dict(by_script)
    return merged
