"""Client counts against the server's own counters, and the server's CPU use.

Pure: computed from a stored run's snapshots and its server samples. The client side
counts every op sent in every phase and round (preload, warm-up, drain included: the
server saw them all); timeouts and connection errors may or may not have reached the
server, so they widen the tolerance instead of counting on either side; so do error
replies, which a server may refuse before its counter (memcached's ``SERVER_ERROR object
too large`` is not in ``cmd_set``, a 502 never reached memcached) or count (Redis counts a
command that failed while executing in ``calls``).

A server restarted during the run (``server_restarts``: another pid or run_id, or an
uptime that went backwards, between two samples) starts its counters again: the before ->
after deltas are then not comparable with the client's counts and are not computed, and
the CPU figure leaves out the sample gaps the restart fell in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any
from urllib.parse import urlsplit

from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.server_stats import stat_number

# "late" and "mismatch" are notes counted besides an op's outcome, "dropped" was never sent.
_NOT_SENT = {"late", "mismatch", "dropped"}
_AMBIGUOUS = {"timeout", "conn_error", "protocol_error", "error_reply"}


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


def _ops_of(total: IntervalSnapshot, *ops: str) -> tuple[int, int]:
    """``_ops`` summed over several ops (a server counter that counts them all)."""
    parts = [_ops(total, op) for op in ops]
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def _number(stats: dict[str, Any], name: str) -> float:
    return stat_number(name, stats.get(name, "0")) or 0.0


Pairs = list[tuple[dict[str, Any], dict[str, Any]]]


def _delta(pairs: Pairs, *names: str) -> float:
    """The counters' growth, summed over the (before, after) sample pairs."""
    return sum(_number(after, n) - _number(before, n) for before, after in pairs for n in names)


def counter_deltas(server: dict[str, Any], names: Sequence[str]) -> dict[str, int | None]:
    """Each counter's growth (after minus before, summed over the sample pairs, as
    ``reconcile`` compares them), or None when a sample is missing or does not hold it."""
    pairs = _stat_pairs(server)
    return {
        name: round(_delta(pairs, name))
        if pairs and all(name in b and name in a for b, a in pairs)
        else None
        for name in names
    }


def _stat_pairs(server: dict[str, Any]) -> Pairs:
    """(before, after) stats: the run's, or one pair per round of a comparison's target.

    A compared target's rounds are separate runs with other targets' traffic between them,
    so each round has its own pair (``results.model.combine_rounds``). No pair at all when
    any sample is missing: a partial reconciliation would only mislead.
    """
    pairs = [(b["stats"], a["stats"]) for b, a in _stat_pairs_of(server)]
    return pairs if all(b and a for b, a in pairs) else []


def _stat_pairs_of(server: dict[str, Any]) -> Pairs:
    """The (before, after) samples themselves (stats and each server's under
    ``targets``), as ``_stat_pairs`` picks them; none when any is missing."""
    if "rounds" in server and "before" not in server:
        spans = [(r.get("before"), r.get("after")) for r in server["rounds"]]
    else:
        spans = [(server.get("before"), server.get("after"))]
    if not spans or any(not (b or {}).get("stats") or not (a or {}).get("stats") for b, a in spans):
        return []
    return [(b, a) for b, a in spans if b and a]


# The fixed ops' counters: memcached ``stats`` and Redis ``INFO commandstats``. An op may
# be counted by two groups (memcached counts a cas in cmd_set and in cas_*); ops whose
# counters overlap become one row (_merged). A replay sends every op of its trace:
# memcached counts every storage command in cmd_set, Redis's SET NX/XX (add, replace)
# are SETs and a gets is a GET.
_MEMCACHED_OPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    *((op, ("cmd_set",)) for op in ("set", "add", "replace", "append", "prepend", "cas")),
    ("delete", ("delete_hits", "delete_misses")),
    ("incr", ("incr_hits", "incr_misses")),
    ("decr", ("decr_hits", "decr_misses")),
    ("cas", ("cas_hits", "cas_badval", "cas_misses")),
)
_REDIS_OPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    *((op, ("cmdstat_get",)) for op in ("get", "gets")),
    *((op, ("cmdstat_set",)) for op in ("set", "add", "replace")),
    ("delete", ("cmdstat_del",)),
    ("incr", ("cmdstat_incr", "cmdstat_incrby")),
    ("decr", ("cmdstat_decr", "cmdstat_decrby")),
    ("append", ("cmdstat_append",)),
    ("mget", ("cmdstat_mget",)),
)
# memcached text commands (``--command``) with a counter, and whether it counts keys (a
# ``gat`` of two keys adds 2 to cmd_touch). Measured on memcached 1.6: every meta get is a
# get, every meta set a set, ma counts as incr or decr as its mode says.
_MEMCACHED_COMMANDS: dict[str, tuple[tuple[str, ...], bool]] = {
    "get": (("cmd_get",), True),
    "gets": (("cmd_get",), True),
    "mg": (("cmd_get",), False),
    "gat": (("cmd_touch",), True),
    "gats": (("cmd_touch",), True),
    "touch": (("cmd_touch",), False),
    **dict.fromkeys(
        ("set", "add", "replace", "append", "prepend", "cas", "ms"), (("cmd_set",), False)
    ),
    "delete": (("delete_hits", "delete_misses"), False),
    "md": (("delete_hits", "delete_misses"), False),
    "incr": (("incr_hits", "incr_misses"), False),
    "decr": (("decr_hits", "decr_misses"), False),
    "ma": (("incr_hits", "incr_misses", "decr_hits", "decr_misses"), False),
    "flush_all": (("cmd_flush",), False),
}
# A read-modify-write (engine/rmw.py) is a get and a set: the server counts one of each,
# and the rmw's outcome is its get's hit or miss.
RMW = "rmw"
_RMW_COUNTED_AS = ("get", "set")
_FIXED_OPS = frozenset({"get", "mget", RMW, *(op for op, _ in _MEMCACHED_OPS + _REDIS_OPS)})


def _commands(total: IntervalSnapshot) -> list[str]:
    """The names of the run's commands: any name but the fixed ops', and a fixed op's name
    that has ``ok`` replies (a command's replies are ok or error; a fixed op's never ok)."""
    return sorted(
        name
        for name, outcomes in total.counts.items()
        if name not in _FIXED_OPS or "ok" in outcomes
    )


@dataclass(slots=True)
class _Row:
    """Client ops that one group of server counters counts."""

    names: list[str]
    sure: int
    unsure: int
    counters: set[str]


def _plus_rmw(total: IntervalSnapshot, op: str, counts: tuple[int, int]) -> tuple[int, int]:
    """(sure, unsure) of ``op``, with the read-modify-writes' where it is one of their
    halves."""
    if op not in _RMW_COUNTED_AS:
        return counts
    rmw = _ops(total, RMW)
    return counts[0] + rmw[0], counts[1] + rmw[1]


def _command_counts(total: IntervalSnapshot, name: str, per_key: bool) -> tuple[int, int]:
    """A command's (sure, unsure) ops, in keys when its counter counts keys."""
    sure, unsure = _ops(total, name)
    completed = total.completed(name)
    width = total.keys.get(name, completed) // completed if per_key and completed else 1
    return sure * width, unsure * width


def _commandstats(pairs: Pairs, name: str) -> tuple[str, ...]:
    """``cmdstat_<name>``, and the ``cmdstat_<name>|<subcommand>`` entries of Redis 7."""
    names = {f"cmdstat_{name}"}
    for _, after in pairs:
        names.update(n for n in after if n.startswith(f"cmdstat_{name}|"))
    return tuple(sorted(names))


def _rows(family: str, total: IntervalSnapshot, pairs: Pairs, mget_width: int) -> list[_Row]:
    """Every op and command with the counters that count it (none: left out)."""
    rows: list[_Row] = []
    commands = _commands(total)
    get, mget = (
        _plus_rmw(
            total, "get", _ops_of(total, *(op for op in ("get", "gets") if op not in commands))
        ),
        _ops(total, "mget"),
    )  # a command named get or gets: counted below, in keys
    memcache = family in ("memcache", "http")
    if memcache and (any(get) or any(mget) or "get" not in commands):
        mget_keys = total.keys.get("mget", 0)
        rows.append(
            _Row(["get (keys)"], get[0] + mget_keys, get[1] + mget[1] * mget_width, {"cmd_get"})
        )
    fixed = _MEMCACHED_OPS if memcache else _REDIS_OPS
    for op, counters in fixed:
        if op not in commands:
            names = [op, RMW] if op in _RMW_COUNTED_AS and total.ops(RMW) else [op]
            rows.append(_Row(names, *_plus_rmw(total, op, _ops(total, op)), set(counters)))
    for name in commands:
        if memcache and name in _MEMCACHED_COMMANDS:
            counters, per_key = _MEMCACHED_COMMANDS[name]
            rows.append(_Row([name], *_command_counts(total, name, per_key), set(counters)))
        elif not memcache:
            rows.append(_Row([name], *_ops(total, name), set(_commandstats(pairs, name))))
    return rows


def _merged(rows: list[_Row]) -> list[_Row]:
    """Rows whose counters overlap, as one (a ``--command add`` beside --ratio's set both
    count in cmd_set); named by the ops that sent any, else by the first."""
    merged: list[_Row] = []
    for row in rows:
        for other in [m for m in merged if m.counters & row.counters]:
            merged.remove(other)
            row = _Row(
                other.names + row.names,
                other.sure + row.sure,
                other.unsure + row.unsure,
                other.counters | row.counters,
            )
        merged.append(row)
    return merged


def reconcile(
    family: str,
    total: IntervalSnapshot,
    server: dict[str, Any],
    mget_width: int = 1,
    by_script: dict[str, int] | None = None,
) -> list[Reconciled]:
    """Compare per-op client counts with the server's counter deltas (before -> after).

    Commands (``--command``) are compared with their own counters: Redis's
    ``cmdstat_<name>``, memcached's where it keeps one (``_MEMCACHED_COMMANDS``). Ops
    counted by the same counters are one row.

    Args:
        family: ``memcache``, ``redis``, or ``http``: a gateway whose stats are those of its
            backing memcached; anything else is not reconciled.
        total: every snapshot of the run (all phases and rounds) merged.
        server: the run's server samples (``before``, ``after``; or per round, ``rounds``).
        mget_width: keys per multi-get (memcached counts each key as a get).
        by_script: a replayed MONITOR capture's commands that its scripts ran, by name:
            the server runs them again for the EVAL replayed, and counts them (in the
            client's column, named so).
    """
    pairs = _stat_pairs(server)
    if not pairs or family not in ("memcache", "redis", "http"):
        return []
    result: list[Reconciled] = []
    scripted = by_script or {}
    for row in _merged(_rows(family, total, pairs, mget_width)):
        server_count = round(_delta(pairs, *sorted(row.counters)))
        extra = sum(scripted.get(name, 0) for name in row.names)
        if row.sure or row.unsure or server_count:
            # (a row the rmws are counted in keeps the name of the op they are counted as,
            # plain ones sent or not: "set + rmw"; Redis counts an rmw's halves in two
            # rows, which "rmw" alone would name alike)
            rmw = RMW in row.names and total.ops(RMW)
            sent = [
                n
                for n in row.names
                if total.ops(n.removesuffix(" (keys)")) or (rmw and n in _RMW_COUNTED_AS)
            ] or row.names
            name = " + ".join(sent) + (f" (+{extra:,} run by scripts)" if extra else "")
            result.append(Reconciled(name, row.sure + extra, server_count, row.unsure))
        if row.names == ["get (keys)"] and family != "redis":
            result += _hits(total, pairs, mget_width)
    return result


def _hits(total: IntervalSnapshot, pairs: Pairs, mget_width: int) -> list[Reconciled]:
    """memcached's ``get_hits`` and ``get_misses`` against the gets' hits and misses
    (a multi-get's keys included: the values it returned, and the keys it asked for
    that it did not return); left out when a command gets too (its replies are ok or
    error, not hits). An all-miss run reconciles its misses as a warm one its hits."""
    if any(_MEMCACHED_COMMANDS.get(n, ((), False))[0] == ("cmd_get",) for n in _commands(total)):
        return []
    gets = ("get", "gets", RMW)  # an rmw's outcome is its get's
    unsure = _ops_of(total, *gets)[1] + _ops(total, "mget")[1] * mget_width
    mget_hits = total.keys_hit.get("mget", 0)
    hits = sum(total.counts.get(op, {}).get("hit", 0) for op in gets) + mget_hits
    misses = sum(total.counts.get(op, {}).get("miss", 0) for op in gets)
    misses += total.keys.get("mget", 0) - mget_hits
    rows = []
    for name, client, counter in (
        ("get hits", hits, "get_hits"),
        ("get misses", misses, "get_misses"),
    ):
        server_count = round(_delta(pairs, counter))
        if client or unsure or server_count:
            rows.append(Reconciled(name, client, server_count, unsure))
    return rows


# The commands a load run sends Redis, as INFO commandstats names them (cmdstat_<name>).
REDIS_LOAD_COMMANDS = ("get", "set", "del", "incr", "incrby", "mget")


def reconcile_nodes(
    total: IntervalSnapshot, server: dict[str, Any], urls: list[str]
) -> list[Reconciled]:
    """Per master of a Redis Cluster run: what the client counted against its commandstats.

    Two rows per master: ``<host:port>``, the commands the client had it execute (the
    replies that ended a request there, ``server<i>_completed``, all phases, and the calls
    beyond them, ``server<i>_extra_calls``: an rmw's second command, a half of one served
    before its pair was sent on, less a request ended on a redirect) against the calls of
    the load's commands; and
    ``<host:port> redirected``, the requests it sent elsewhere (``server<i>_redirected``,
    and ``server<i>_extra_rejected``: an rmw's second half redirected with its first)
    against those commands' ``rejected_calls`` (Redis 7.0), shown when either is not 0.
    Every op whose fate is unknown widens both (which master it reached is unknown too).

    Args:
        total: every snapshot of the run (all phases and rounds) merged.
        server: the run's server samples; each master's own under ``targets``.
        urls: the masters' URLs, in the order of the ``server<i>_*`` stats.
    """
    unsure = sum(_ops(total, op)[1] for op in total.counts)
    rows: list[Reconciled] = []
    for index, url in enumerate(urls):
        pairs = _node_pairs(server, url, len(urls))
        if not pairs:
            return []
        name = urlsplit(url).netloc.rpartition("@")[2] or url
        calls = _commands_delta(pairs, "calls")
        client = int(
            total.stats.get(f"server{index}_completed", 0)
            + total.stats.get(f"server{index}_extra_calls", 0)
        )
        rows.append(Reconciled(name, client, calls, unsure))
        rejected = _commands_delta(pairs, "rejected_calls")
        redirected = int(
            total.stats.get(f"server{index}_redirected", 0)
            + total.stats.get(f"server{index}_extra_rejected", 0)
        )
        if rejected or redirected:
            rows.append(Reconciled(f"{name} redirected", redirected, rejected, unsure))
    return rows


def _node_pairs(server: dict[str, Any], url: str, n_urls: int) -> Pairs:
    """(before, after) stats of one server of the run (one pair per round's span)."""
    pairs = []
    for before, after in _stat_pairs_of(server):
        b, a = _by_server(before), _by_server(after)
        key = None if n_urls == 1 and None in b else url
        if key not in b or key not in a:
            return []
        pairs.append((b[key], a[key]))
    return pairs


def _commands_delta(pairs: Pairs, field: str) -> int:
    """The growth of ``field`` summed over the load's commands' commandstats entries."""
    total = 0.0
    for before, after in pairs:
        for command in REDIS_LOAD_COMMANDS:
            name = f"cmdstat_{command}"
            total += (stat_number(name, after.get(name, ""), field) or 0.0) - (
                stat_number(name, before.get(name, ""), field) or 0.0
            )
    return round(total)


# Stats naming the server process (memcached ``pid``; Redis ``process_id``, ``run_id``), and
# its uptime in seconds (memcached ``uptime``, Redis ``uptime_in_seconds``).
PROCESS_STATS = ("pid", "process_id", "run_id")
UPTIME_STATS = ("uptime", "uptime_in_seconds")


@dataclass(frozen=True, slots=True)
class Restart:
    """The server was another process at a sample than at the sample before it.

    Attributes:
        after, before: the two samples the restart fell between ("the start",
            "interval 3", "round 2 interval 1", "the end").
        evidence: what changed, e.g. ``pid 4120 -> 4388``.
        url: the server, when the run had several (sharded); else None.
        after_ns, before_ns: when those samples were taken (monotonic clock), so a report
            can place the restart in time (report/over_time.py); None when not known.
    """

    after: str
    before: str
    evidence: str
    url: str | None = None
    after_ns: int | None = None
    before_ns: int | None = None

    def describe(self) -> str:
        where = f"{self.url} " if self.url else ""
        return f"{where}{self.evidence}, between the samples at {self.after} and {self.before}"


def restart_evidence(previous: dict[str, Any], current: dict[str, Any]) -> str | None:
    """What shows that ``current`` comes from another server process than ``previous``
    (two stats samples, in time order), or None when nothing does."""
    for name in PROCESS_STATS:
        old, new = previous.get(name), current.get(name)
        if old is not None and new is not None and str(old) != str(new):
            return f"{name} {old} -> {new}"
    for name in UPTIME_STATS:
        old_s = stat_number(name, previous.get(name, ""))
        new_s = stat_number(name, current.get(name, ""))
        if old_s is not None and new_s is not None and new_s < old_s:
            return f"{name} {old_s:.0f} s -> {new_s:.0f} s"
    return None


def _labelled_samples(server: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every sample with stats, labelled, in the order taken (before, intervals, after;
    a comparison's per-round before/after samples by their time)."""
    rounds = {int(s.get("round", 0)) for s in server.get("intervals", [])}
    samples: list[tuple[str, dict[str, Any]]] = []
    for sample in server.get("intervals", []):
        index = int(sample.get("index", 0)) + 1
        label = f"interval {index}"
        samples.append(
            (label if len(rounds) < 2 else f"round {sample['round'] + 1} {label}", sample)
        )
    ends = [(server.get("before"), server.get("after"))]
    ends += [(r.get("before"), r.get("after")) for r in server.get("rounds", [])]
    for before, after in ends:
        samples += [("the start", before or {}), ("the end", after or {})]
    kept = [(label, s) for label, s in samples if s.get("stats") and "taken_ns" in s]
    return sorted(kept, key=lambda item: int(item[1]["taken_ns"]))


def _by_server(sample: dict[str, Any]) -> dict[str | None, dict[str, Any]]:
    """A sample's stats per server: a sharded run keeps each server's under ``targets``."""
    if sample.get("targets"):
        return {t.get("url"): t.get("stats") or {} for t in sample["targets"]}
    return {None: sample["stats"]}


def _names_process(stats: dict[str, Any]) -> bool:
    """The sample says which process it came from (interval samples of runs stored before
    kvbench kept these did not: they are passed over, not taken for a restart's proof)."""
    return any(name in stats for name in PROCESS_STATS + UPTIME_STATS)


def server_restarts(server: dict[str, Any]) -> list[Restart]:
    """Every restart of a server seen between consecutive samples of a run."""
    restarts: list[Restart] = []
    last: dict[str | None, tuple[str, dict[str, Any], int]] = {}
    for label, sample in _labelled_samples(server):
        taken_ns = int(sample["taken_ns"])
        for url, stats in _by_server(sample).items():
            if not _names_process(stats):
                continue
            if url in last:
                previous_label, previous_stats, previous_ns = last[url]
                evidence = restart_evidence(previous_stats, stats)
                if evidence is not None:
                    restarts.append(
                        Restart(previous_label, label, evidence, url, previous_ns, taken_ns)
                    )
            last[url] = (label, stats, taken_ns)
    return restarts


def _restarted_between(first: dict[str, Any], second: dict[str, Any]) -> bool:
    a, b = _by_server(first), _by_server(second)
    return any(url in a and restart_evidence(a[url], stats) for url, stats in b.items())


@dataclass(frozen=True, slots=True)
class ServerCpu:
    """How busy the server was over the measured intervals."""

    cores: float  # CPU seconds per wall second
    threads: int  # worker threads it can use (memcached -t; Redis: 1), over every server


def server_cpu(family: str, server: dict[str, Any]) -> ServerCpu | None:
    """Server CPU use over the interval samples, or None.

    Summed over consecutive samples of the same round (the same as first to last when
    nothing happened between), leaving out every gap a restart fell in: the new process's
    CPU counters start again from zero. A CPU counter that went backwards tells a restart
    too (samples stored without the process's name).
    """
    memcache = family in ("memcache", "http")  # http: the backing memcached (?stats=)
    names = ("rusage_user", "rusage_system") if memcache else ("used_cpu_user", "used_cpu_sys")
    samples = [s for s in server.get("intervals", []) if s.get("stats")]
    gaps = [
        (first["stats"], second["stats"], (second["taken_ns"] - first["taken_ns"]) / 1e9)
        for first, second in pairwise(samples)
        if first.get("round", 0) == second.get("round", 0) and not _restarted_between(first, second)
    ]
    used = [[_number(after, n) - _number(before, n) for n in names] for before, after, _ in gaps]
    kept = [(sum(cpu), gap[2]) for cpu, gap in zip(used, gaps, strict=True) if min(cpu) >= 0]
    wall_s = sum(seconds for _, seconds in kept)
    if wall_s <= 0:
        return None
    # memcached: its -t, summed over a pool's servers (probe.sum_stats); Redis: one
    # thread per server (a Redis Cluster's masters, a sharded pool's servers).
    servers = len(samples[-1].get("targets") or ()) or 1
    threads = int(_number(samples[-1]["stats"], "threads") or 1) if memcache else servers
    return ServerCpu(cores=sum(cpu for cpu, _ in kept) / wall_s, threads=threads)
