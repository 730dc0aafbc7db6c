"""kvbench side by side with the peer tools: the same work, measured the same way, as ratios.

The method (DESIGN.md §7): the server pinned to one core, every client to the other
(taskset); 50 connections, 100-byte values, set:get 1:1 (against memtier_benchmark in its
order, a set then a get: ``--op-order cycle``), 100,000 keys of the same length
on both sides, each connection drawing its own key sequence (memtier_benchmark with
--distinct-client-seed: checked before the rounds); a fresh server per tool and round,
prefilled with that tool's keys, so gets hit alike (each side's hit rate is measured from
the server's counters, and no ratio is printed when they differ by more than 3 points);
>= 5 rounds alternating A B, B A, ...; per cell, each tool's median ops/s, the median of
the paired round ratios (which a machine's drifting speed does not skew) and each side's
server CPU per op (the server's own CPU counters over the server's own count of gets and
sets: where the server saturates, the client's traffic pattern decides the figure).

Peers: memtier_benchmark when a binary is on PATH (memcached text and binary, Redis;
kvbench's meta protocol is compared with memtier's text; and arbitrary commands, a
``SET __key__ __data__`` then a ``GET __key__`` as ``--command`` on both sides, against
Redis; and a Redis Cluster of three masters, all on the server's core, against memtier's
``--cluster-mode``, the servers' counters and CPU added up), redis-benchmark (redis-tools),
memaslap (libmemcached-tools installs it as memcaslap), and wrk (apt-get install wrk)
against nginx with the memc module in front of memcached (the gateway and memcached both
on the server's core; its CPU per op is both's, over memcached's count of gets and sets;
wrk sends a set then a get in turn, as kvbench with ``--op-order cycle``, one thread).
Last, the peak RSS of a kvbench run with 2 worker processes at 100,000 keys
(bench/rss.py).

    python bench/peers.py                          # every cell, 5 rounds of 5 s
    python bench/peers.py --rounds 7 --only 'redis-*' --json rounds.json
    python bench/peers.py --list                   # the cells' names
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import rss
from peer_tools import (
    CONNECTIONS,
    KEYS,
    MEMC_MODULE,
    VALUE_BYTES,
    BenchError,
    Counters,
    Cpus,
    KeySpace,
    RedisBenchmark,
    ToolRun,
    expected_distinct,
    gateway,
    kvbench,
    kvbench_argv,
    memaslap,
    memtier,
    memtier_argv,
    pinned,
    redis_cluster,
    run_tool,
    server,
    versions,
    wrk,
)

# Hit rates further apart than this (fraction) make two runs different work: no ratio.
HIT_RATE_TOLERANCE = 0.03
FAIR_ROUNDS = 5
# The distinct-keys check: this many sets, then the server's item count.
SPREAD_SETS = 10_000
# Both tools' keys are 14 bytes: memtier's numbers 100000..199999 (it numbers from 1 and
# cannot pad), kvbench's 000000..099999.
KVBENCH_KEYS = KeySpace("kvbench:", 0, 6)
MEMTIER_KEYS = KeySpace("kvbench:", 100_000, 6)
MEMASLAP_KEY_BYTES = 16


@dataclass(frozen=True)
class Side:
    """One tool's half of a cell."""

    tool: str
    keys: KeySpace | None  # what its fresh server is prefilled with (None: nothing)
    run: Callable[[int, int, Cpus], ToolRun]  # (port, seconds, cpus) -> its report
    processes: int = 1  # client processes (kvbench) or threads (memtier)


@dataclass(frozen=True)
class Cell:
    """kvbench against one peer on one server, protocol and pipeline depth."""

    name: str
    title: str
    # memcached, redis, gateway (nginx + memc in front of memcached) or redis-cluster
    server: str
    threads: int  # server threads (memcached -t)
    ours: Side
    peer: Side


@dataclass(frozen=True)
class Sample:
    """One tool's run in one round, with the server's view of it."""

    tool: str
    round: int
    ops_per_s: float
    tool_ops: int
    server_ops: int
    server_us_per_op: float
    hit_rate: float | None  # None: the server counted no gets
    client_us_per_op: float
    client_cores: float
    driver: str


@dataclass
class CellResult:
    cell: Cell
    ours: list[Sample] = field(default_factory=list)
    theirs: list[Sample] = field(default_factory=list)

    def median(self, samples: list[Sample], attr: str) -> float | None:
        values = [getattr(s, attr) for s in samples if getattr(s, attr) is not None]
        return statistics.median(values) if values else None

    @property
    def paired(self) -> list[float]:
        """Each round's kvbench / peer: a drifting machine speed cancels within a pair."""
        return [a.ops_per_s / b.ops_per_s for a, b in zip(self.ours, self.theirs, strict=False)]

    @property
    def same_work(self) -> bool:
        ours, theirs = self.median(self.ours, "hit_rate"), self.median(self.theirs, "hit_rate")
        if ours is None or theirs is None:  # a side without gets: the same only if both
            return ours is theirs
        return abs(ours - theirs) <= HIT_RATE_TOLERANCE

    @property
    def ratio(self) -> float | None:
        """The median of the paired ratios; None when the hit rates say different work."""
        return statistics.median(self.paired) if self.paired and self.same_work else None

    def as_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell.name,
            "title": self.cell.title,
            "peer": self.cell.peer.tool,
            "server_threads": self.cell.threads,
            "kvbench_median_ops_per_s": self.median(self.ours, "ops_per_s"),
            "peer_median_ops_per_s": self.median(self.theirs, "ops_per_s"),
            "paired_ratios": self.paired,
            "median_paired_ratio": self.ratio,
            "same_work": self.same_work,
            "rounds": [asdict(s) for s in self.ours + self.theirs],
        }


# memtier_benchmark sends its --ratio in turn (1:1: a set, then a get); kvbench draws each
# op at random unless asked for the same order. The orders cost memcached differently: a
# text get flushes the replies queued before it, so a pipelined batch that ends in sets
# costs the server one more sendmsg (0.53 against 0.50 per op at P16, 1:1).
IN_TURN = ("--op-order", "cycle")
# The commands of the --command cells (memtier's syntax and kvbench's agree).
COMMANDS = ("SET __key__ __data__", "GET __key__")


def kvbench_side(
    scheme: str,
    keys: KeySpace,
    pipeline: int,
    processes: int = 1,
    extra: tuple[str, ...] = (),
    path: str = "",
) -> Side:
    def run(port: int, seconds: int, cpus: Cpus) -> ToolRun:
        url = f"{scheme}://127.0.0.1:{port}{path}"
        return kvbench(url, keys, processes, pipeline, seconds, cpus, extra)

    return Side("kvbench", keys, run, processes)


def memtier_side(
    protocol: str,
    pipeline: int,
    threads: int = 1,
    commands: tuple[str, ...] = (),
    cluster: bool = False,
) -> Side:
    def run(port: int, seconds: int, cpus: Cpus) -> ToolRun:
        return memtier(
            protocol, port, MEMTIER_KEYS, threads, pipeline, seconds, cpus, commands, cluster
        )

    return Side("memtier_benchmark", MEMTIER_KEYS, run, threads)


def cells(more: tuple[str, ...] = ()) -> tuple[list[Cell], list[str]]:
    """Every cell whose peer is installed, and a note for each that is not; ``more``:
    options every kvbench run takes too (``--kvbench-arg``)."""
    found: list[Cell] = []
    missing: list[str] = []
    if shutil.which("memtier_benchmark"):
        for name, server_kind, scheme, protocol, title in (
            ("mc-text", "memcached", "memcached", "memcache_text", "memcached text"),
            ("mc-binary", "memcached", "memcached+binary", "memcache_binary", "memcached binary"),
            ("mc-meta", "memcached", "memcached+meta", "memcache_text", "memcached meta"),
            ("redis", "redis", "redis", "redis", "Redis"),
        ):
            vs_text = " (memtier: text)" if name == "mc-meta" else ""
            for p in (1, 16):
                found.append(
                    Cell(f"{name}-p{p}", f"{title}, P{p}{vs_text}", server_kind, 1,
                         kvbench_side(scheme, KVBENCH_KEYS, p, extra=(*IN_TURN, *more)),
                         memtier_side(protocol, p))
                )  # fmt: skip
        # Arbitrary commands (--command): a SET and a GET in turn, as templates on both
        # sides, so that the server's counters are the cells' above.
        as_commands = tuple(arg for text in COMMANDS for arg in ("--command", text))
        for p in (1, 16):
            found.append(
                Cell(f"redis-cmd-p{p}", f"Redis --command SET/GET, P{p}", "redis", 1,
                     kvbench_side("redis", KVBENCH_KEYS, p, extra=(*as_commands, *IN_TURN, *more)),
                     memtier_side("redis", p, commands=COMMANDS))
            )  # fmt: skip
        # A Redis Cluster of three masters on the server's core: kvbench's redis+cluster://
        # against memtier's --cluster-mode, each key to the master of its slot (no slot
        # moves: memtier answers a MOVED with the next request, kvbench sends it on).
        for p in (1, 16):
            found.append(
                Cell(f"redis-cluster-p{p}", f"Redis Cluster (3 masters), P{p}", "redis-cluster", 1,
                     kvbench_side("redis+cluster", KVBENCH_KEYS, p, extra=(*IN_TURN, *more)),
                     memtier_side("redis", p, cluster=True))
            )  # fmt: skip
        # Issue item 5: two client processes (threads) against a two-thread memcached.
        found.append(
            Cell("mc-text-p1-2proc", "memcached -t 2 text, P1, 2 processes / memtier -t 2",
                 "memcached", 2,
                 kvbench_side("memcached", KVBENCH_KEYS, 1, processes=2, extra=(*IN_TURN, *more)),
                 memtier_side("memcache_text", 1, threads=2))
        )  # fmt: skip
    else:
        missing.append("memtier_benchmark is not on PATH: its cells are left out")
    if shutil.which("redis-benchmark"):
        for p in (1, 16):
            rb = RedisBenchmark(p)
            found.append(
                Cell(f"redis-p{p}-rb", f"Redis, P{p} (redis-benchmark)", "redis", 1,
                     kvbench_side("redis", rb.keys, p, extra=more), Side("redis-benchmark", rb.keys, rb))
            )  # fmt: skip
    else:
        missing.append("redis-benchmark is not installed (redis-tools): its cells are left out")
    if shutil.which("memaslap") or shutil.which("memcaslap"):
        keys = KeySpace("kvbench:", 0, MEMASLAP_KEY_BYTES - len("kvbench:"))
        found.append(
            Cell("mc-text-p1-memaslap", "memcached text, P1 (memaslap)", "memcached", 1,
                 kvbench_side("memcached", keys, 1, extra=more), Side("memaslap", None, memaslap))
        )  # fmt: skip
    else:
        missing.append("memaslap is not installed (libmemcached-tools): its cell is left out")
    if shutil.which("wrk") and shutil.which("nginx") and os.path.exists(MEMC_MODULE):
        found.append(
            Cell("http-p1-wrk", "nginx+memc gateway, P1 (wrk)", "gateway", 1,
                 kvbench_side("http+memc", KVBENCH_KEYS, 1, extra=(*IN_TURN, *more), path="/memc"),
                 Side("wrk", KVBENCH_KEYS, lambda port, seconds, cpus: wrk(port, KVBENCH_KEYS, seconds, cpus)))
        )  # fmt: skip
    else:
        missing.append(
            "wrk, nginx or the memc module is not installed (apt-get install wrk nginx "
            "libnginx-mod-http-memc): the gateway cell is left out"
        )
    return found, missing


def measure(cell: Cell, side: Side, round_index: int, seconds: int, cpus: Cpus) -> Sample:
    """One tool's run on a fresh server prefilled with its keys; counters around the run."""
    serving = (
        gateway(cpus)
        if cell.server == "gateway"
        else redis_cluster(cpus)
        if cell.server == "redis-cluster"
        else server(cell.server, cell.threads, cpus)
    )
    with serving as srv:
        if side.keys is not None:
            srv.prefill(side.keys)
        before = srv.counters()
        run = side.run(srv.port, seconds, cpus)
        delta: Counters = srv.counters() - before
    if delta.ops <= 0 or run.ops > delta.ops * 1.01:
        raise BenchError(
            f"{cell.name}: {side.tool} reported {run.ops:,} ops, the server counted {delta.ops:,}"
        )
    gets = delta.hits + delta.misses
    return Sample(
        tool=side.tool,
        round=round_index,
        ops_per_s=run.ops_per_s,
        tool_ops=run.ops,
        server_ops=delta.ops,
        server_us_per_op=delta.cpu_s * 1e6 / delta.ops,
        hit_rate=delta.hits / gets if gets else None,
        client_us_per_op=run.client_cpu_s * 1e6 / run.ops if run.ops else 0.0,
        client_cores=run.client_cores,
        driver=run.driver,
    )


def describe(sample: Sample) -> str:
    hits = "-" if sample.hit_rate is None else f"{sample.hit_rate:.1%}"
    return (
        f"{sample.tool:17} {sample.ops_per_s:>10,.0f} ops/s  server {sample.server_us_per_op:5.2f}"
        f" us/op  hits {hits:>6}  client {sample.client_us_per_op:5.2f} us/op"
        f" ({sample.client_cores:.2f} cores){'  ' + sample.driver if sample.driver else ''}"
    )


def run_cell(result: CellResult, rounds: int, seconds: int, cpus: Cpus) -> None:
    """Fill ``result`` with ``rounds`` rounds, which tool goes first alternating: A B, B A,
    A B, ... (in place: an interrupted cell keeps the rounds it finished)."""
    cell = result.cell
    for r in range(rounds):
        sides = [(cell.ours, result.ours), (cell.peer, result.theirs)]
        for side, samples in sides if r % 2 == 0 else sides[::-1]:
            sample = measure(cell, side, r + 1, seconds, cpus)
            samples.append(sample)
            print(f"  {cell.name} round {r + 1}/{rounds}  {describe(sample)}", flush=True)


def spread_argv(tool: str, clients: int, port: int) -> list[str]:
    """``tool`` storing SPREAD_SETS keys with ``clients`` processes (threads), 50 connections."""
    if tool == "kvbench":
        argv = kvbench_argv(f"memcached://127.0.0.1:{port}", KVBENCH_KEYS, clients, 1)
        return [*argv, "--ratio", "1:0", "-n", str(SPREAD_SETS)]
    argv = memtier_argv(port, "memcache_text", MEMTIER_KEYS, clients, 1)
    return [*argv, "--ratio=1:0", f"--requests={SPREAD_SETS // CONNECTIONS}"]


def distinct_keys(cells: list[Cell], cpus: Cpus) -> dict[str, int]:
    """Distinct keys SPREAD_SETS sets touch on an empty memcached, per tool and client count.

    Independent uniform draws from 100,000 keys touch ~9,516; connections that all repeat
    one sequence touch SPREAD_SETS / 50 (memtier without --distinct-client-seed: 200).
    """
    sides = {(c.ours.tool, c.ours.processes) for c in cells}
    sides |= {(c.peer.tool, c.peer.processes) for c in cells if c.peer.tool == "memtier_benchmark"}
    expected = expected_distinct(KEYS, SPREAD_SETS)
    found: dict[str, int] = {}
    for tool, clients in sorted(sides):
        name = f"{tool} with {clients} {'process' if tool == 'kvbench' else 'thread'}(s)"
        with server("memcached", 1, cpus) as srv:
            run_tool(tool, pinned(cpus.client, spread_argv(tool, clients, srv.port)), 10)
            found[name] = count = srv.counters().items
        print(
            f"distinct keys in {SPREAD_SETS:,} sets: {name}: {count:,} (uniform: {expected:,.0f})"
        )
        if count < 0.9 * expected:
            raise BenchError(f"{name} repeats key sequences across connections ({count:,} keys)")
    return found


def table(results: list[CellResult]) -> str:
    """The issue's table: cell, both tools' medians, the ratio, kvbench's driver, and what
    explains the ratio (server and client CPU per op, hit rates)."""
    lines = [
        "| cell | kvbench ops/s | peer | peer ops/s | kvbench / peer (paired, range) | driver"
        " | kvbench client CPU | server us/op kvbench / peer | client us/op kvbench / peer"
        " | hit % kvbench / peer |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        m = res.median
        ratio = res.ratio
        spread = f"{min(res.paired):.2f}-{max(res.paired):.2f}" if res.paired else ""
        shown = (
            f"{ratio:.2f} ({spread})" if ratio is not None else f"- (hit rates differ; {spread})"
        )
        drivers = sorted({s.driver for s in res.ours})
        lines.append(
            f"| {res.cell.title} | {m(res.ours, 'ops_per_s'):,.0f} | {res.cell.peer.tool}"
            f" | {m(res.theirs, 'ops_per_s'):,.0f} | {shown} | {', '.join(drivers)}"
            f" | {m(res.ours, 'client_cores'):.2f} cores"
            f" | {m(res.ours, 'server_us_per_op'):.2f} / {m(res.theirs, 'server_us_per_op'):.2f}"
            f" | {m(res.ours, 'client_us_per_op'):.2f} / {m(res.theirs, 'client_us_per_op'):.2f}"
            f" | {_percent(m(res.ours, 'hit_rate'))} / {_percent(m(res.theirs, 'hit_rate'))} |"
        )
    return "\n".join(lines)


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=FAIR_ROUNDS, help="rounds per cell [5]")
    parser.add_argument("--seconds", type=int, default=5, help="measured seconds per run [5]")
    parser.add_argument(
        "--only", nargs="+", metavar="CELL", help="cells by name or glob (rss: the RSS check)"
    )
    parser.add_argument("--json", metavar="FILE", help="write every round's figures here")
    parser.add_argument("--list", action="store_true", help="print the cells' names and exit")
    parser.add_argument("--server-cpus", default="0", help="taskset list for servers [0]")
    parser.add_argument("--client-cpus", default="1", help="taskset list for clients [1]")
    parser.add_argument(
        "--kvbench-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for every kvbench run, again for each (--kvbench-arg=--busy-poll "
        "--kvbench-arg=50us)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds < 1:
        parser.error("--rounds and --seconds must be at least 1")
    return args


def cpu_count(cpus: str) -> int:
    """CPUs in a taskset list ("0", "0-1,4")."""
    total = 0
    for part in cpus.split(","):
        low, _, high = part.partition("-")
        total += int(high or low) - int(low) + 1
    return total


def selected(all_cells: list[Cell], patterns: list[str] | None) -> list[Cell]:
    if not patterns:
        return all_cells
    return [c for c in all_cells if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cpus = Cpus(args.server_cpus, args.client_cpus)
    all_cells, missing = cells(tuple(args.kvbench_arg))
    if args.list:
        print("\n".join([f"{c.name:20} {c.title}" for c in all_cells] + ["rss"]))
        return 0
    chosen = selected(all_cells, args.only)
    with_rss = not args.only or any(fnmatch.fnmatchcase("rss", p) for p in args.only)
    if not chosen and not with_rss:
        print(f"peers: no cell matches {args.only} (--list names them)", file=sys.stderr)
        return 2
    for note in missing:
        print(f"note: {note}")
    if args.rounds < FAIR_ROUNDS:
        print(f"note: {args.rounds} rounds: the fair method asks for at least {FAIR_ROUNDS}")
    print(
        f"server on CPUs {cpus.server}, clients on CPUs {cpus.client}; {CONNECTIONS} connections,"
        f" {VALUE_BYTES}-byte values, set:get 1:1, {KEYS:,} keys, {args.rounds} rounds of"
        f" {args.seconds} s per tool and cell",
        flush=True,
    )
    for cell in chosen:
        if cell.threads > cpu_count(cpus.server):
            print(f"note: {cell.name}: {cell.threads} server threads share CPUs {cpus.server}")
    results: list[CellResult] = []
    report: dict[str, Any] = {"settings": vars(args), "versions": versions(), "cells": []}
    print("; ".join(f"{name}: {text}" for name, text in report["versions"].items()))
    status = 0
    try:
        report["distinct_keys"] = distinct_keys(chosen, cpus)
        for cell in chosen:
            print(f"{cell.name}: {cell.title}, kvbench vs {cell.peer.tool}", flush=True)
            results.append(CellResult(cell))
            run_cell(results[-1], args.rounds, args.seconds, cpus)
        if with_rss:
            report["rss"] = rss_check(args.seconds)
    except BenchError as exc:
        print(f"peers: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        print("peers: interrupted; the cells finished so far follow", file=sys.stderr)
        status = 130
    report["cells"] = [r.as_json() for r in results]
    paired = [r for r in results if r.paired]  # an interrupted cell may have no pair yet
    if paired:
        print()
        print(table(paired))
        print(
            "\nratio: the median over rounds of kvbench / peer in the same round; server us/op:"
            " the server's CPU seconds over its own count of gets and sets during the run"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2, default=str)
    return status


def rss_check(seconds: int) -> dict[str, Any]:
    """Peak RSS of coordinator + 2 workers at 100,000 keys (bench/rss.py; target <= 150 MB)."""
    try:
        peak = rss.peak_rss_bytes(None, keys=KEYS, processes=2, seconds=seconds)
    except RuntimeError as exc:
        raise BenchError(f"rss: {exc}") from None  # a BenchError (its server) passes as is
    verdict = "under" if peak <= rss.TARGET_BYTES else "OVER"
    print(
        f"peak RSS, kvbench coordinator + 2 workers, {KEYS:,} keys: {peak / 1e6:.0f} MB"
        f" ({peak / 2**20:.0f} MiB), {verdict} the {rss.TARGET_BYTES / 1e6:.0f} MB target",
        flush=True,
    )
    return {"peak_rss_bytes": peak, "processes": 2, "keys": KEYS}


if __name__ == "__main__":
    sys.exit(main())
