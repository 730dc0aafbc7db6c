"""Does one worker carry 10,000 connections as it carries 50? The Scale target of issue 22.

Each round runs kvbench twice from one worker process (``--processes 1``), once with
``--few`` connections (50) and once with ``--many`` (10,000), in the order few, many, then
many, few in the next round, and so on. Every run gets a fresh memcached (``-c 20000 -t 1``,
its open-file limit raised to fit, prefilled with the keys so gets hit) pinned to the
server core, with kvbench on the client core, as bench/peers.py pins them; the load is
peers.py's: pipeline 1, 100-byte values, set:get 1:1 over 100,000 uniform keys, a 1 s
warm-up, then ``--seconds`` measured. Per run, from its result document:

- **status** and **live**: ``connections.live_min`` (the fewest live at any moment of the
  window) of ``connections.asked``, and ``connects`` (opened; more than asked means some
  were reopened). A run that is not ok, has errors, or had fewer live than asked stops the
  bench.
- **ops/s** and **client us/op**: the worker's CPU over the measured window
  (``intervals[].cpu_s``) over the ops completed in it.
- **worker peak RSS**: ``workers[0].peak_rss_bytes`` (the worker's ru_maxrss).

Then, over the rounds: the median of the paired CPU-per-op ratios (many / few within a
round; target <= 1.25) with their range, and the worker's RSS growth per connection,
(RSS(many) - RSS(few)) / (many - few) (median; target <= 64 KiB).

    python bench/connections.py                    # 3 rounds of 5 s, 50 vs 10,000
    python bench/connections.py --rounds 5 --many 5000 --json conns.json

RSS and the live counts do not depend on CPU speed: a loaded machine measures them as a
quiet one does. ops/s and CPU per op do: take those on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from peer_tools import (
    VALUE_BYTES,
    BenchError,
    Cpus,
    KeySpace,
    Server,
    pinned,
    run_tool,
    server,
)

KEYS = KeySpace("kvbench:", 0, 6)  # 100,000 keys (peer_tools.KEYS), 6 digits
# memcached's connection limit (-c): room for the many connections and the side ones.
SERVER_CONNECTIONS = 20_000
# Open files a process needs beside its connections.
SPARE_FILES = 64
TARGET_CPU_RATIO = 1.25
TARGET_RSS_PER_CONNECTION = 64 * 1024


@dataclass(frozen=True)
class Run:
    """One kvbench run's figures, from its result document."""

    round: int
    connections: int
    status: str
    live_min: int
    connects: int
    ops_per_s: float
    ops: int
    cpu_s: float
    peak_rss_bytes: int

    @property
    def us_per_op(self) -> float:
        return 1e6 * self.cpu_s / self.ops if self.ops else float("inf")


def raise_open_files(needed: int) -> None:
    """This process's soft open-file limit up to its hard one (memcached and kvbench
    inherit it; kvbench raises its own anyway).

    Raises:
        BenchError: the hard limit is below ``needed``.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise BenchError(
            f"the open-file limit is {hard:,} (ulimit -Hn); {needed:,} are needed: "
            f"raise it (ulimit -n {needed} as root) or give a smaller --many"
        )
    if soft != resource.RLIM_INFINITY and soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run(live: Server, connections: int, seconds: int, cpus: Cpus, round_: int) -> Run:
    """One kvbench run from one worker; its figures.

    Raises:
        BenchError: it did not end ok, had errors, or had fewer connections live than asked.
    """
    with tempfile.TemporaryDirectory(prefix="kvbench-conns-") as tmp:
        out = Path(tmp) / "run.json"
        argv = [
            sys.executable, "-m", "kvbench", "run", live.url(),
            "-c", str(connections), "--processes", "1", "-P", "1",
            "--keys", str(KEYS.count), "--key-prefix", KEYS.prefix,
            "--key-size", str(KEYS.key_bytes), "--key-pattern", "uniform",
            "--value-size", str(VALUE_BYTES), "--ratio", "1:1",
            "--duration", f"{seconds}s", "--warmup", "1s",
            "--no-save", "-q", "--json", str(out),
        ]  # fmt: skip
        run_tool("kvbench", pinned(cpus.client, argv), seconds + 1 + connections / 1000)
        doc: dict[str, Any] = json.loads(out.read_text())
    return run_of(doc, connections, round_)


def run_of(doc: dict[str, Any], connections: int, round_: int) -> Run:
    """A run's figures from its result document: the ops completed in the measured window
    (``totals.ops``; an interval's ``total`` is the count so far, not its own) and the
    worker's CPU in it (the intervals' ``cpu_s``).

    Raises:
        BenchError: it did not end ok, had errors, or had fewer connections live than asked.
    """
    asked, live_min = doc["connections"]["asked"], doc["connections"]["live_min"]
    errors = doc["totals"]["errors"]
    if doc["status"] != "ok" or errors or live_min is None or live_min < asked:
        raise BenchError(
            f"{connections:,} connections: status {doc['status']}, {errors:,} errors, "
            f"{live_min} of {asked:,} live: {doc.get('status_reasons')}"
        )
    return Run(
        round=round_,
        connections=connections,
        status=doc["status"],
        live_min=int(live_min),
        connects=int(doc["connections"]["connects"]),
        ops_per_s=float(doc["totals"]["throughput_per_s"]),
        ops=int(doc["totals"]["ops"]),
        cpu_s=sum(float(row["cpu_s"]) for row in doc["intervals"]),
        peak_rss_bytes=int(doc["workers"][0]["peak_rss_bytes"]),
    )


def table(runs: list[Run]) -> list[str]:
    head = (
        f"{'round':>5} {'connections':>11} {'status':>6} {'live':>13} {'opened':>7} "
        f"{'ops/s':>9} {'client us/op':>12} {'worker peak RSS':>16}"
    )
    lines = [head, "-" * len(head)]
    for r in runs:
        lines.append(
            f"{r.round:>5} {r.connections:>11,} {r.status:>6} "
            f"{f'{r.live_min:,}/{r.connections:,}':>13} {r.connects:>7,} {r.ops_per_s:>9,.0f} "
            f"{r.us_per_op:>12.2f} {r.peak_rss_bytes / 1e6:>13.1f} MB"
        )
    return lines


def verdict(runs: list[Run], few: int, many: int) -> tuple[list[str], dict[str, Any]]:
    """The paired figures over the rounds, and whether each meets its target."""
    rounds = sorted({r.round for r in runs})
    by = {(r.round, r.connections): r for r in runs}
    cpu = [by[k, many].us_per_op / by[k, few].us_per_op for k in rounds]
    rss = [(by[k, many].peak_rss_bytes - by[k, few].peak_rss_bytes) / (many - few) for k in rounds]
    figures = {
        "cpu_per_op_ratio_median": statistics.median(cpu),
        "cpu_per_op_ratios": cpu,
        "rss_per_connection_median": statistics.median(rss),
        "rss_per_connection": rss,
    }
    cpu_met = figures["cpu_per_op_ratio_median"] <= TARGET_CPU_RATIO
    rss_met = figures["rss_per_connection_median"] <= TARGET_RSS_PER_CONNECTION
    lines = [
        f"client CPU per op, {many:,} / {few:,} connections (paired by round): median "
        f"{statistics.median(cpu):.2f} (range {min(cpu):.2f}-{max(cpu):.2f}); target <= "
        f"{TARGET_CPU_RATIO}: {'met' if cpu_met else 'missed'} (a quiet machine's figure)",
        f"worker RSS per connection over {few:,}: median {statistics.median(rss) / 1024:.1f} KiB "
        f"(range {min(rss) / 1024:.1f}-{max(rss) / 1024:.1f}); target <= "
        f"{TARGET_RSS_PER_CONNECTION // 1024} KiB: {'met' if rss_met else 'missed'}",
    ]
    return lines, figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--few", type=int, default=50, help="the small run's connections")
    parser.add_argument("--many", type=int, default=10_000, help="the large run's connections")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5, help="measured seconds per run")
    parser.add_argument("--server-cpus", default="0", help="taskset CPUs of memcached")
    parser.add_argument("--client-cpus", default="1", help="taskset CPUs of kvbench")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args()
    if not 0 < args.few < args.many < SERVER_CONNECTIONS:
        parser.error(f"--few and --many: 0 < few < many < {SERVER_CONNECTIONS:,}")
    cpus = Cpus(args.server_cpus, args.client_cpus)
    runs: list[Run] = []
    try:
        raise_open_files(args.many + SPARE_FILES)
        for round_ in range(1, args.rounds + 1):
            order = (args.few, args.many) if round_ % 2 else (args.many, args.few)
            for connections in order:
                with server("memcached", 1, cpus, ("-c", str(SERVER_CONNECTIONS))) as live:
                    live.prefill(KEYS)
                    runs.append(run(live, connections, args.seconds, cpus, round_))
                print(table(runs)[-1] if len(runs) > 1 else "\n".join(table(runs)), flush=True)
    except BenchError as exc:
        print(f"bench/connections.py: {exc}", file=sys.stderr)
        return 1
    lines, figures = verdict(runs, args.few, args.many)
    print("\n".join(["", *table(runs), "", *lines]))
    if args.json:
        args.json.write_text(json.dumps({"runs": [asdict(r) for r in runs], **figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
