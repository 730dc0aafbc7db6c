"""Client counts against the server's own counters, and the server's CPU use.

Pure: computed from a stored run's snapshots and its server samples. The client side
counts every op sent in every phase and round (preload, warm-up, drain included: the
server saw them all); timeouts and connection errors may or may not have reached the
server, so they widen the tolerance instead of counting on either side; so do error
replies, which a server may refuse before its counter (memcached's ``SERVER_ERROR object
too large`` is not in ``cmd_set``, a 502 never reached memcached) or count (Redis counts a
command that failed while executing in ``calls``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.server_stats import stat_number

# "late" and "mismatch" are notes counted besides an op's outcome, "dropped" was never sent.
_NOT_SENT = {"late", "mismatch", "dropped"}
_AMBIGUOUS = {"timeout", "conn_error", "error_reply"}


@dataclass(frozen=True, slots=True)
class Reconciled:
    """One counter compared: what the client sent vs what the server counted."""

    name: str
    client: int
    server: int
    ambiguous: int  # client ops whose fate is unknown (timeouts, connection errors, error replies)

    @property
    def matches(self) -> bool:
        return abs(self.server - self.client) <= self.ambiguous


def _ops(total: IntervalSnapshot, op: str) -> tuple[int, int]:
    """(surely sent and counted, fate unknown) for one op."""
    outcomes = total.counts.get(op, {})
    sure = sum(n for name, n in outcomes.items() if name not in _NOT_SENT | _AMBIGUOUS)
    unsure = sum(n for name, n in outcomes.items() if name in _AMBIGUOUS)
    return sure, unsure


def _number(stats: dict[str, Any], name: str) -> float:
    return stat_number(name, stats.get(name, "0")) or 0.0


Pairs = list[tuple[dict[str, Any], dict[str, Any]]]


def _delta(pairs: Pairs, *names: str) -> float:
    """The counters' growth, summed over the (before, after) sample pairs."""
    return sum(_number(after, n) - _number(before, n) for before, after in pairs for n in names)


def _stat_pairs(server: dict[str, Any]) -> Pairs:
    """(before, after) stats: the run's, or one pair per round of a comparison's target.

    A compared target's rounds are separate runs with other targets' traffic between them,
    so each round has its own pair (``results.model.combine_rounds``). No pair at all when
    any sample is missing: a partial reconciliation would only mislead.
    """
    if "rounds" in server and "before" not in server:
        spans = [(r.get("before"), r.get("after")) for r in server["rounds"]]
    else:
        spans = [(server.get("before"), server.get("after"))]
    pairs = [((b or {}).get("stats"), (a or {}).get("stats")) for b, a in spans]
    if not pairs or any(not b or not a for b, a in pairs):
        return []
    return [(b, a) for b, a in pairs if b and a]


def reconcile(
    family: str, total: IntervalSnapshot, server: dict[str, Any], mget_width: int = 1
) -> list[Reconciled]:
    """Compare per-op client counts with the server's counter deltas (before -> after).

    Args:
        family: ``memcache``, ``redis``, or ``http``: a gateway whose stats are those of its
            backing memcached; anything else is not reconciled.
        total: every snapshot of the run (all phases and rounds) merged.
        server: the run's server samples (``before``, ``after``; or per round, ``rounds``).
        mget_width: keys per multi-get (memcached counts each key as a get).
    """
    pairs = _stat_pairs(server)
    if not pairs or family not in ("memcache", "redis", "http"):
        return []
    rows: list[Reconciled] = []

    def add(name: str, client: tuple[int, int], *server_names: str) -> None:
        server_count = round(_delta(pairs, *server_names))
        if client[0] or client[1] or server_count:
            rows.append(Reconciled(name, client[0], server_count, client[1]))

    get, mget = _ops(total, "get"), _ops(total, "mget")
    if family in ("memcache", "http"):
        mget_keys = total.keys.get("mget", 0)
        add("get (keys)", (get[0] + mget_keys, get[1] + mget[1] * mget_width), "cmd_get")
        hits = total.counts.get("get", {}).get("hit", 0) + total.keys_hit.get("mget", 0)
        add("get hits", (hits, get[1] + mget[1] * mget_width), "get_hits")
        add("set", _ops(total, "set"), "cmd_set")
        add("delete", _ops(total, "delete"), "delete_hits", "delete_misses")
        add("incr", _ops(total, "incr"), "incr_hits", "incr_misses")
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
    """Server CPU use between the first and last interval samples of each round, or None.

    Rounds are taken one by one (their CPU seconds and wall seconds summed), so the gaps
    between rounds — other targets' rounds in a comparison — never count.
    """
    by_round: dict[int, list[dict[str, Any]]] = {}
    for sample in server.get("intervals", []):
        if sample.get("stats"):
            by_round.setdefault(int(sample.get("round", 0)), []).append(sample)
    spans = [(s[0], s[-1]) for s in by_round.values() if len(s) >= 2]
    wall_s = sum(last["taken_ns"] - first["taken_ns"] for first, last in spans) / 1e9
    if wall_s <= 0:
        return None
    if family in ("memcache", "http"):  # http: the backing memcached (?stats=)
        names = ("rusage_user", "rusage_system")
        threads = int(_number(spans[-1][1]["stats"], "threads") or 1)
    else:
        names = ("used_cpu_user", "used_cpu_sys")
        threads = 1
    cpu_s = _delta([(first["stats"], last["stats"]) for first, last in spans], *names)
    return ServerCpu(cores=cpu_s / wall_s, threads=threads)
