"""A replay's own section of its ``RunResult``: the trace's profile and what was sent.

A replay is a run (mode ``closed`` at ``--speed max``, ``open`` at the trace's times): its
intervals, figures, verdicts and status are every run's. What only a replay has lives
here, stored with it (``to_json``/``from_json``; the store keeps it in ``runs.trace``):
the profile of the rows replayed (op mix, rate per second of trace time, key and value
sizes, TTLs: workload/trace_profile.py) and the feed's counts (rows read, queued, skipped
by reason, keys clamped) with the op each trace op was sent as. The workers' parts are
merged by addition (``from_reports``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvbench.workload.trace_profile import TraceProfile
from kvbench.workload.trace_source import ReplayCounts


@dataclass(slots=True)
class TraceSection:
    """What a replay adds to a run.

    Attributes:
        path: the trace file as given.
        speed: the ``--speed`` factor; None: ``max`` (closed loop).
        profile: the rows of the replayed slice, every worker's.
        counts: rows read, queued, skipped, keys clamped (every worker's).
        sent_as: per trace op, the op it was sent as on the target's protocol.
        from_s, to_s, limit: the slice asked for (None: none).
    """

    path: str
    speed: float | None
    profile: TraceProfile
    counts: ReplayCounts
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
        profile = TraceProfile()
        counts = ReplayCounts()
        sent_as: dict[str, str] = {}
        for report in reports:
            profile.merge(TraceProfile.from_dict(report["profile"]))
            counts.merge(ReplayCounts.from_dict(report["counts"]))
            sent_as.update(report["mapping"])
        return cls(
            path=str(replay["path"]),
            speed=replay["speed"],
            profile=profile,
            counts=counts,
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
            "profile": self.profile.to_dict(),
            "counts": self.counts.to_dict(),
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
            profile=TraceProfile.from_dict(data["profile"]),
            counts=ReplayCounts.from_dict(data["counts"]),
            sent_as={str(k): str(v) for k, v in data["sent_as"].items()},
            from_s=data.get("from_s"),
            to_s=data.get("to_s"),
            limit=data.get("limit"),
        )
