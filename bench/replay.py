"""What replaying a trace costs the client, and the issue's 10% figure.

    python bench/replay.py [--rows 1000000] [--connections 50]          # the feed alone
    python bench/replay.py --end-to-end [--rounds 3] [--pipeline 8]     # against a run

The feed alone: ns per row to prepare a generated trace (plain and zstd), at --speed max
and timed, without sockets (read, parse, profile, map, fan out and spool: before the
replay's clock starts), and to hand the spooled segments out as the pumps take them
(inside the measured window).

End to end (issue 13, "Done when"): ``kvbench replay`` of a generated 1,000,000-row trace
at ``--speed max`` against a plain ``kvbench run`` of the same mix and sizes and the same
request count (``--ratio 1:9 --value-size 100 --key-size 14 --keys 100000 --requests
1000000``), each on a fresh memcached pinned to one core (clients to the others, as
bench/peers.py does), rounds alternating A B, B A. Printed per side: the median ops/s and
client CPU per op; and the median of the paired round ratios of the compiled replay to
each other side. The figure is replay / run on the compiled driver (at least 0.90 to be
within 10%): a replay runs on the compiled pumps too (each connection's pump its own lane,
each chunk its own TTL: engine/fastpath.py). Both are also measured on the Python driver
(``KVBENCH_PURE_PYTHON=1``), for what the feed costs beside each driver. Take it on a
quiet machine.

The trace has a fixed mix and sizes (90% get, 10% set of 100-byte values, 14-byte keys,
one TTL) and, end to end, 5,000 clients, so the 50 connections' lanes are about even, as
a plain run's connections are.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import zstandard
from peer_tools import BenchError, Cpus, pinned, server

from kvbench.config.replay import ReplayConfig
from kvbench.workload.trace_source import ReplayFeed


def generate(path: Path, rows: int, compress: bool, clients: int = 37) -> Path:
    """A trace of ``rows`` rows over 100 seconds: 90% get, 10% set, 100,000 keys.

    Each row's key is drawn uniformly from the 100,000 and each row is a set with
    probability 0.1 (seeded), as a plain run's ``--ratio 1:9 --key-pattern uniform`` draws
    them: the keys fill as they are set, so the gets hit as often as the plain run's (a
    replay that hit more would carry more value bytes per request, and be slower for it).
    """
    rng = random.Random(7)
    lines = []
    for i in range(rows):
        key = b"key:%010d" % rng.randrange(100_000)
        client = i * 7 % clients
        if rng.random() < 0.1:
            lines.append(b"%d,%s,14,100,%d,set,3600" % (i * 100 // rows, key, client))
        else:
            lines.append(b"%d,%s,14,0,%d,get,0" % (i * 100 // rows, key, client))
    data = b"\n".join(lines) + b"\n"
    if compress:
        data = zstandard.ZstdCompressor(level=3).compress(data)
    path.write_bytes(data)
    return path


def feed_ns_per_row(path: Path, connections: int, speed: float | None) -> tuple[float, float, int]:
    """Prepare the whole trace through a feed with ``connections`` lanes, then hand every
    lane's segments out as the compiled driver takes them (packed): ns per row of each."""
    feed = ReplayFeed(ReplayConfig(str(path), speed=speed), "memcache-text", 0, 1, connections, 1)
    start = time.perf_counter()
    feed.prepare()
    prepared = time.perf_counter()
    rows = 0
    for lane in feed.lanes:
        lane.pack()
        while (chunk := lane.next_chunk()) is not None:
            rows += chunk.size
    handed = time.perf_counter()
    feed.close()
    return (prepared - start) * 1e9 / rows, (handed - prepared) * 1e9 / rows, rows


@dataclass(frozen=True)
class Side:
    """One side of the end-to-end comparison: its name and the kvbench arguments."""

    name: str
    argv: list[str]
    env: dict[str, str]


def sides(trace: Path, rows: int, connections: int, pipeline: int) -> list[Side]:
    """The replay and a plain run of the same mix, sizes and count, each on each driver."""
    common = ["-c", str(connections), "-P", str(pipeline), "--no-save", "-q"]
    run = [
        "run", "--ratio", "1:9", "--value-size", "100", "--key-size", "14", "--keys",
        "100000", "--key-prefix", "key:", "--requests", str(rows), *common,
    ]  # fmt: skip
    replay = ["replay", str(trace), "--speed", "max", *common]
    python = {"KVBENCH_PURE_PYTHON": "1"}
    return [
        Side("replay (compiled driver)", replay, {}),
        Side("run (compiled driver)", run, {}),
        Side("replay (python driver)", replay, python),
        Side("run (python driver)", run, python),
    ]


def measure(side: Side, cpus: Cpus) -> tuple[float, float, float]:
    """One round of ``side`` on a fresh memcached: (ops/s, client CPU us per op, hit %)."""
    with server("memcached", 1, cpus) as srv, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        argv, rest = side.argv[:1], side.argv[1:]
        if side.argv[0] == "replay":
            argv, rest = side.argv[:2], side.argv[2:]
        url = f"memcached://127.0.0.1:{srv.port}"
        command = [sys.executable, "-m", "kvbench", *argv, url, *rest, "--json", str(out)]
        done = subprocess.run(
            pinned(cpus.client, command),
            capture_output=True,
            text=True,
            env={**os.environ, **side.env},
            timeout=900,
            check=False,
        )
        if done.returncode not in (0, 1) or not out.exists():
            raise BenchError(f"{side.name} exited {done.returncode}: {done.stderr.strip()[-300:]}")
        doc = json.loads(out.read_text())
    if doc["totals"]["errors"]:
        raise BenchError(f"{side.name}: {doc['totals']['errors']} errors")
    cpu_s = sum(float(row["cpu_s"]) for row in doc["intervals"])
    get = doc["ops"].get("get", {})
    return (
        float(doc["totals"]["throughput_per_s"]),
        cpu_s * 1e6 / max(1, int(doc["totals"]["ops"])),
        100.0 * float(get.get("hit_ratio") or 0.0),
    )


def end_to_end(rows: int, connections: int, pipeline: int, rounds: int, cpus: Cpus) -> None:
    """The replay against the plain runs, rounds alternating; medians and paired ratios."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = generate(Path(tmp) / "t.csv", rows, compress=False, clients=5000)
        all_sides = sides(trace, rows, connections, pipeline)
        results: dict[str, list[tuple[float, float, float]]] = {s.name: [] for s in all_sides}
        for index in range(rounds):
            order = all_sides if index % 2 == 0 else list(reversed(all_sides))
            for side in order:
                results[side.name].append(measure(side, cpus))
                ops, cpu_us, hit = results[side.name][-1]
                print(f"round {index + 1} {side.name:24} {ops:12,.0f} ops/s  "
                      f"{cpu_us:6.2f} us CPU/op  get hits {hit:5.1f}%", flush=True)  # fmt: skip
    replay = results[all_sides[0].name]
    for side in all_sides:
        got = results[side.name]
        line = (
            f"{side.name:24} median {statistics.median(r[0] for r in got):12,.0f} ops/s  "
            f"{statistics.median(r[1] for r in got):6.2f} us CPU/op"
        )
        if side is not all_sides[0]:
            ratio = statistics.median(a[0] / b[0] for a, b in zip(replay, got, strict=True))
            line += f"  replay / this: {ratio:.3f} (paired median)"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--end-to-end", action="store_true", help="replay vs a plain run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pipeline", type=int, default=8)
    parser.add_argument("--server-cpus", default="0", help="taskset list of the server [0]")
    parser.add_argument("--client-cpus", default="1", help="taskset list of kvbench [1]")
    args = parser.parse_args()
    if args.end_to_end:
        cpus = Cpus(args.server_cpus, args.client_cpus)
        try:
            end_to_end(args.rows, args.connections, args.pipeline, args.rounds, cpus)
        except BenchError as exc:
            raise SystemExit(f"bench/replay.py: {exc}") from None
        return
    with tempfile.TemporaryDirectory() as tmp:
        for compress in (False, True):
            path = generate(Path(tmp) / ("t.zst" if compress else "t.csv"), args.rows, compress)
            for speed in (None, 1.0):
                prepare, hand_out, rows = feed_ns_per_row(path, args.connections, speed)
                kind = "zstd " if compress else "plain"
                mode = "speed max" if speed is None else "timed    "
                print(f"{kind} {mode}: prepare {prepare:6.0f} ns/row (before the clock), "
                      f"hand out {hand_out:5.0f} ns/row, over {rows:,} rows")  # fmt: skip


if __name__ == "__main__":
    main()
