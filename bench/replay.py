"""What replaying a trace costs the client, and the issue's 10% figure.

    python bench/replay.py [--rows 1000000] [--connections 50]          # the feed alone
    python bench/replay.py --end-to-end [--rounds 3] [--pipeline 8]     # against a run
    python bench/replay.py --end-to-end --transports                    # + uvloop's
    python bench/replay.py --timed 5,10 [--rounds 3]                    # at the trace's times

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
each chunk its own TTL: engine/fastpath.py), on the compiled event loop as the plain run
does. Both are also measured on the Python driver (``KVBENCH_PURE_PYTHON=1``), for what
the feed costs beside each driver, and with ``--transports`` the replay on uvloop's
transports too (``KVBENCH_DRIVER=transports``, the path the loop replaced). Every line
says the driver the run recorded (``environment.driver``). Take it on a quiet machine.

Timed (``--timed SPEEDS``): ``kvbench replay --speed S`` of a generated 600,000-row trace
(100 s of trace time, 6,000 rows/s, 5,000 clients over 50 connections), 10 s of it at each
speed (S x 6,000 requests/s), on a fresh memcached pinned as above, pipeline 64 (the
replay's default at the trace's times): per round and speed the rate achieved, the share
of requests sent more than 2 ms behind their trace time (``late``), latency p50 and p99
from the trace's times; then the medians. A replay at the trace's times is an open loop
with a schedule per connection (engine/open_loop.py).

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
from typing import Any

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


def sides(
    trace: Path, rows: int, connections: int, pipeline: int, transports: bool = False
) -> list[Side]:
    """The replay and a plain run of the same mix, sizes and count, each on each driver
    (the compiled replay first: the others are compared with it); ``transports``: the
    replay on uvloop's transports too."""
    common = ["-c", str(connections), "-P", str(pipeline), "--no-save", "-q"]
    run = [
        "run", "--ratio", "1:9", "--value-size", "100", "--key-size", "14", "--keys",
        "100000", "--key-prefix", "key:", "--requests", str(rows), *common,
    ]  # fmt: skip
    replay = ["replay", str(trace), "--speed", "max", *common]
    python = {"KVBENCH_PURE_PYTHON": "1"}
    on_transports = [Side("replay (transports)", replay, {"KVBENCH_DRIVER": "transports"})]
    return [
        Side("replay (compiled driver)", replay, {}),
        Side("run (compiled driver)", run, {}),
        *(on_transports if transports else []),
        Side("replay (python driver)", replay, python),
        Side("run (python driver)", run, python),
    ]


@dataclass(frozen=True)
class Round:
    """One round of one side: its figures and the driver the run recorded."""

    ops_per_s: float
    cpu_us_per_op: float
    hit_percent: float
    driver: str


def round_of(doc: dict[str, Any]) -> Round:
    """A round's figures from its result document (client CPU from the intervals)."""
    cpu_s = sum(float(row["cpu_s"]) for row in doc["intervals"])
    get = doc["ops"].get("get", {})
    return Round(
        float(doc["totals"]["throughput_per_s"]),
        cpu_s * 1e6 / max(1, int(doc["totals"]["ops"])),
        100.0 * float(get.get("hit_ratio") or 0.0),
        str(doc["environment"]["driver"]),
    )


def measure(side: Side, cpus: Cpus) -> Round:
    """One round of ``side`` on a fresh memcached."""
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
    return round_of(doc)


def end_to_end(
    rows: int, connections: int, pipeline: int, rounds: int, cpus: Cpus, transports: bool
) -> None:
    """The replay against the plain runs, rounds alternating; medians and paired ratios."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = generate(Path(tmp) / "t.csv", rows, compress=False, clients=5000)
        all_sides = sides(trace, rows, connections, pipeline, transports)
        results: dict[str, list[Round]] = {s.name: [] for s in all_sides}
        for index in range(rounds):
            order = all_sides if index % 2 == 0 else list(reversed(all_sides))
            for side in order:
                got = measure(side, cpus)
                results[side.name].append(got)
                print(f"round {index + 1} {side.name:24} {got.ops_per_s:12,.0f} ops/s  "
                      f"{got.cpu_us_per_op:6.2f} us CPU/op  get hits {got.hit_percent:5.1f}%  "
                      f"[{got.driver}]", flush=True)  # fmt: skip
    replay = results[all_sides[0].name]
    for side in all_sides:
        got_all = results[side.name]
        drivers = sorted({r.driver for r in got_all})
        line = (
            f"{side.name:24} median {statistics.median(r.ops_per_s for r in got_all):12,.0f} "
            f"ops/s  {statistics.median(r.cpu_us_per_op for r in got_all):6.2f} us CPU/op"
        )
        if side is not all_sides[0]:
            ratio = statistics.median(
                a.ops_per_s / b.ops_per_s for a, b in zip(replay, got_all, strict=True)
            )
            line += f"  replay / this: {ratio:.3f} (paired median)"
        print(f"{line}  [{', '.join(drivers)}]")


TIMED_ROWS = 600_000
TIMED_SECONDS = 10


@dataclass(frozen=True)
class Timed:
    """One timed replay's figures."""

    ops_per_s: float
    late_percent: float
    p50_us: float
    p99_us: float
    driver: str
    cpu_us_per_op: float  # the worker's CPU in the window over the ops


def timed_round(trace: Path, speed: float, cpus: Cpus) -> Timed:
    """``kvbench replay --speed speed`` of TIMED_SECONDS of ``trace`` on a fresh memcached."""
    limit = round(TIMED_ROWS * speed * TIMED_SECONDS / 100)
    with server("memcached", 1, cpus) as srv, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        command = [
            sys.executable, "-m", "kvbench", "replay", str(trace),
            f"memcached://127.0.0.1:{srv.port}", "--speed", str(speed), "--limit", str(limit),
            "-c", "50", "--processes", "1", "--no-save", "-q", "--json", str(out),
        ]  # fmt: skip
        done = subprocess.run(
            pinned(cpus.client, command), capture_output=True, text=True, timeout=900, check=False
        )
        if done.returncode not in (0, 1) or not out.exists():
            raise BenchError(f"replay at {speed}x exited {done.returncode}: {done.stderr[-300:]}")
        doc = json.loads(out.read_text())
    return timed_of(doc)


def timed_of(doc: dict[str, Any]) -> Timed:
    """A timed replay's figures from its result document: late is the share of its
    requests (every op's ``late`` outcome, over the ops); the client's CPU per op is the
    measured intervals' CPU over the ops."""
    late = sum(int(op["outcomes"].get("late", 0)) for op in doc["ops"].values())
    ops = int(doc["totals"]["ops"])
    latency = doc["totals"]["latency_us"]
    cpu_s = sum(float(row["cpu_s"]) for row in doc["intervals"])
    return Timed(
        float(doc["totals"]["throughput_per_s"]),
        100.0 * late / max(1, ops),
        float(latency["p50"]),
        float(latency["p99"]),
        str(doc["environment"]["driver"]),
        1e6 * cpu_s / max(1, ops),
    )


def timed(speeds: list[float], rounds: int, cpus: Cpus) -> None:
    """Timed replays at each speed, rounds in turn; then each speed's medians."""
    results: dict[float, list[Timed]] = {speed: [] for speed in speeds}
    with tempfile.TemporaryDirectory() as tmp:
        trace = generate(Path(tmp) / "t.csv", TIMED_ROWS, compress=False, clients=5000)
        for index in range(rounds):
            for speed in speeds:
                got = timed_round(trace, speed, cpus)
                results[speed].append(got)
                print(f"round {index + 1} speed {speed:g}x: {got.ops_per_s:9,.0f} ops/s  "
                      f"late {got.late_percent:6.2f}%  p50 {got.p50_us:8.1f} us  "
                      f"p99 {got.p99_us:8.1f} us  CPU {got.cpu_us_per_op:5.2f} us/op  "
                      f"[{got.driver}]", flush=True)  # fmt: skip
    for speed, got_all in results.items():
        print(f"speed {speed:g}x ({speed * TIMED_ROWS / 100:,.0f}/s offered): median "
              f"{statistics.median(r.ops_per_s for r in got_all):9,.0f} ops/s  late "
              f"{statistics.median(r.late_percent for r in got_all):6.2f}%  p50 "
              f"{statistics.median(r.p50_us for r in got_all):8.1f} us  p99 "
              f"{statistics.median(r.p99_us for r in got_all):8.1f} us  CPU "
              f"{statistics.median(r.cpu_us_per_op for r in got_all):5.2f} us/op")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--end-to-end", action="store_true", help="replay vs a plain run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pipeline", type=int, default=8)
    parser.add_argument("--server-cpus", default="0", help="taskset list of the server [0]")
    parser.add_argument("--client-cpus", default="1", help="taskset list of kvbench [1]")
    parser.add_argument(
        "--transports",
        action="store_true",
        help="end to end: the replay on uvloop's transports too (KVBENCH_DRIVER=transports)",
    )
    parser.add_argument(
        "--timed", metavar="SPEEDS", help="timed replays at these speeds (e.g. 5,10)"
    )
    args = parser.parse_args()
    if args.timed:
        try:
            timed(
                [float(s) for s in args.timed.split(",")],
                args.rounds,
                Cpus(args.server_cpus, args.client_cpus),
            )
        except (BenchError, ValueError) as exc:
            raise SystemExit(f"bench/replay.py: {exc}") from None
        return
    if args.end_to_end:
        cpus = Cpus(args.server_cpus, args.client_cpus)
        try:
            end_to_end(
                args.rows, args.connections, args.pipeline, args.rounds, cpus, args.transports
            )
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
