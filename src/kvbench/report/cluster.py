"""A Redis Cluster run's own figures: redirects, per kind and per master, and their verdict.

Pure: from a stored run's snapshots. Workers count every redirect they follow as worker
stats (engine/redirect.py): ``redirect_moved``, ``redirect_ask``, ``slot_map_refreshes``
and, per master i, ``server{i}_redirected`` (requests that master sent elsewhere; Redis
counts them in its commands' ``rejected_calls``, which report/reconcile.py compares).
"""

from __future__ import annotations

from typing import TypedDict

from kvbench.metrics.snapshot import IntervalSnapshot, merge_snapshots
from kvbench.report.rows import Redirects
from kvbench.report.verdicts import Verdict
from kvbench.results.model import RunResult


def is_cluster(run: RunResult) -> bool:
    """The run loaded a Redis Cluster (``redis+cluster://`` targets)."""
    return any(t.get("cluster") for t in run.config.get("targets", []))


def interval_redirects(snap: IntervalSnapshot) -> Redirects:
    """One interval's redirects by kind."""
    return {
        "moved": int(snap.stats.get("redirect_moved", 0)),
        "ask": int(snap.stats.get("redirect_ask", 0)),
    }


class ClusterFigures(TypedDict):
    """The document's ``cluster``: redirects in the window, by kind and per master."""

    masters: list[str]
    moved: int
    ask: int
    redirected_share: float  # of the ops completed in the window
    map_refreshes: int  # the slot map asked again
    redirected_by_master: list[int]
    all_phases: Redirects


def cluster_figures(run: RunResult) -> ClusterFigures | None:
    """Redirects in the window (by kind, per master), map refreshes, and over all phases.

    Returns:
        None for a run that loaded no cluster.
    """
    if not is_cluster(run):
        return None
    window = merge_snapshots(run.intervals) if run.intervals else None
    everything = run.intervals + list(run.phases.values())
    every = merge_snapshots(everything) if everything else None
    stats = window.stats if window is not None else {}
    moved = int(stats.get("redirect_moved", 0))
    ask = int(stats.get("redirect_ask", 0))
    ops = window.ops() if window is not None else 0
    all_stats = every.stats if every is not None else {}
    return {
        "masters": [t["url"] for t in run.targets],
        "moved": moved,
        "ask": ask,
        "redirected_share": round((moved + ask) / ops, 6) if ops else 0.0,
        "map_refreshes": int(stats.get("slot_map_refreshes", 0)),
        "redirected_by_master": [
            int(stats.get(f"server{i}_redirected", 0)) for i in range(len(run.targets))
        ],
        "all_phases": {
            "moved": int(all_stats.get("redirect_moved", 0)),
            "ask": int(all_stats.get("redirect_ask", 0)),
        },
    }


def cluster_verdicts(figures: ClusterFigures | None) -> list[Verdict]:
    """Redirects in the window: the slot map changed while measuring (a note, with what
    it costs: a redirected request's latency includes the redirect). Redirects are
    counted, not requests: a request redirected twice counts twice."""
    if figures is None or not figures["moved"] + figures["ask"]:
        return []
    moved, ask = figures["moved"], figures["ask"]
    return [
        Verdict(
            "cluster.redirects",
            "info",
            f"{moved + ask:,} redirects (as many as {figures['redirected_share']:.2%} of the "
            f"requests completed; MOVED {moved:,}, ASK {ask:,}): slots moved during the "
            "window; each redirected request completed at the node named, its latency from "
            "its first send includes its redirects",
            {
                "moved": moved,
                "ask": ask,
                "map_refreshes": figures["map_refreshes"],
                "redirected_by_master": figures["redirected_by_master"],
            },
        )
    ]
