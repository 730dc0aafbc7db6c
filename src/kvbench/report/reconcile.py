"""Client counts against the server's own counters, and the server's CPU use.

Pure: computed from a stored run's snapshots and its server samples. The client side
counts every op sent in every phase and round (preload, warm-up, drain included: the
server saw them all); timeouts and connection errors may or may not have reached the
server, so they widen the tolerance instead of counting on either side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.server_stats import stat_number

# "late" and "mismatch" are notes counted besides an op's outcome, "dropped" was never sent.
_NOT_SENT = {"late", "mismatch", "dropped"}
_AMBIGUOUS = {"timeout", "conn_error"}


@dataclass(frozen=True, slots=True)
class Reconciled:
    """One counter compared: what the client sent vs what the server counted."""

    name: str
    client: int
    server: int
    ambiguous: int  # client ops whose fate is unknown (timeouts, connection errors)

    @property
    def matches(self) -> bool:
        return abs(self.server - self.client) <= self.ambiguous


def _ops(total: IntervalSnapshot, op: str, ambiguous: set[str] = _AMBIGUOUS) -> tuple[int, int]:
    """(surely sent and answered, fate unknown) for one op."""
    outcomes = total.counts.get(op, {})
    sure = sum(n for name, n in outcomes.items() if name not in _NOT_SENT | ambiguous)
    unsure = sum(n for name, n in outcomes.items() if name in ambiguous)
    return sure, unsure


def _number(stats: dict[str, Any], name: str) -> float:
    return stat_number(name, stats.get(name, "0")) or 0.0


def _delta(before: dict[str, Any], after: dict[str, Any], *names: str) -> int:
    return round(sum(_number(after, n) - _number(before, n) for n in names))


def reconcile(
    family: str, total: IntervalSnapshot, server: dict[str, Any], mget_width: int = 1
) -> list[Reconciled]:
    """Compare per-op client counts with the server's counter deltas (before -> after).

    Args:
        family: ``memcache``, ``redis``, or ``http``: a gateway whose stats are those of its
            backing memcached (its error replies, 502/504, may or may not have reached it);
            anything else is not reconciled.
        total: every snapshot of the run (all phases and rounds) merged.
        server: the run's server samples (``before``, ``after``).
        mget_width: keys per multi-get (memcached counts each key as a get).
    """
    before = (server.get("before") or {}).get("stats")
    after = (server.get("after") or {}).get("stats")
    if not before or not after or family not in ("memcache", "redis", "http"):
        return []
    ambiguous = _AMBIGUOUS | {"error_reply"} if family == "http" else _AMBIGUOUS
    rows: list[Reconciled] = []

    def add(name: str, client: tuple[int, int], *server_names: str) -> None:
        server_count = _delta(before, after, *server_names)
        if client[0] or client[1] or server_count:
            rows.append(Reconciled(name, client[0], server_count, client[1]))

    get, mget = _ops(total, "get", ambiguous), _ops(total, "mget", ambiguous)
    if family in ("memcache", "http"):
        mget_keys = total.keys.get("mget", 0)
        add("get (keys)", (get[0] + mget_keys, get[1] + mget[1] * mget_width), "cmd_get")
        hits = total.counts.get("get", {}).get("hit", 0) + total.keys_hit.get("mget", 0)
        add("get hits", (hits, get[1] + mget[1] * mget_width), "get_hits")
        add("set", _ops(total, "set", ambiguous), "cmd_set")
        add("delete", _ops(total, "delete", ambiguous), "delete_hits", "delete_misses")
        add("incr", _ops(total, "incr", ambiguous), "incr_hits", "incr_misses")
    else:
        add("get", get, "cmdstat_get")
        add("set", _ops(total, "set"), "cmdstat_set")
        add("delete", _ops(total, "delete"), "cmdstat_del")
        add("incr", _ops(total, "incr"), "cmdstat_incr", "cmdstat_incrby")
        add("mget", mget, "cmdstat_mget")
    return rows


@dataclass(frozen=True, slots=True)
class ServerCpu:
    """How busy the server was over the measured intervals."""

    cores: float  # CPU seconds per wall second
    threads: int  # worker threads it can use (memcached -t; Redis: 1)


def server_cpu(family: str, server: dict[str, Any]) -> ServerCpu | None:
    """Server CPU use between the first and last interval samples, or None."""
    samples = [s for s in server.get("intervals", []) if s.get("stats")]
    if len(samples) < 2:
        return None
    first, last = samples[0], samples[-1]
    wall_s = (last["taken_ns"] - first["taken_ns"]) / 1e9
    if wall_s <= 0:
        return None
    if family in ("memcache", "http"):  # http: the backing memcached (?stats=)
        names = ("rusage_user", "rusage_system")
        threads = int(_number(last["stats"], "threads") or 1)
    else:
        names = ("used_cpu_user", "used_cpu_sys")
        threads = 1
    cpu_s = sum(_number(last["stats"], n) - _number(first["stats"], n) for n in names)
    return ServerCpu(cores=cpu_s / wall_s, threads=threads)
