"""Does the open loop send on time? Both drivers, from one client core, at 80% of that
core's closed-loop P1 throughput.

Per protocol (memcached text, binary, meta; Redis), each run against a fresh server
prefilled with the keys (the server pinned to its core, the client to its own, as
bench/peers.py does; 50 connections, 100-byte values, set:get 1:1):

1. the compiled closed loop at pipeline 1: the core's throughput T;
2. the open loop at 0.8 T (``--fraction``; uniform arrivals unless ``--arrival poisson``)
   on the compiled driver (its event loop, whose poller runs the schedule in C), with
   ``--transports`` on uvloop's transports too (``KVBENCH_DRIVER=transports``: the
   Python dispatcher over the same compiled pumps), then on the Python one
   (``KVBENCH_PURE_PYTHON=1``; not with ``--no-python``), at most ``--pipeline`` in
   flight per connection (room for a 1 ms tick's worth of due requests; the connections
   are not meant to queue).

For each open-loop run: late % (sends more than 2 ms behind their slot, over the requests
completed in the window), the most late sends in one interval (``worst s``: when it holds
most of the run's, one stall made them), achieved / offered (requests completed in the measured window
over those the schedule put in it), dropped requests, and the client's CPU per wall second.
Targets (issue 12): late < 1% and achieved within 1% of offered.

    python bench/open_loop.py                       # every protocol, 5 s runs
    python bench/open_loop.py --only text,redis --seconds 10 --json open.json

Take its figures on a quiet machine: other load on the client core makes sends late.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

from peer_tools import BenchError, Cpus, KeySpace, kvbench_doc, kvbench_report, server

KEYS = KeySpace("kvbench:", 0, 6)
FRACTION = 0.8
# (name, server kind, scheme)
PROTOCOLS = {
    "text": ("memcached", "memcached"),
    "binary": ("memcached", "memcached+binary"),
    "meta": ("memcached", "memcached+meta"),
    "redis": ("redis", "redis"),
}
TARGET_LATE = 0.01
TARGET_ACHIEVED = 0.01


@dataclass(frozen=True)
class OpenRun:
    """One open-loop run's figures, from its result document."""

    protocol: str
    driver: str
    closed_p1_per_s: float
    offered_per_s: float
    achieved_per_s: float
    offered: int
    completed: int
    late: int
    dropped: int
    client_cores: float
    worst_late: int  # the most late sends in one interval: a stall's, when it holds most

    @property
    def late_fraction(self) -> float:
        return self.late / self.completed if self.completed else 1.0

    @property
    def achieved_ratio(self) -> float:
        return self.completed / self.offered if self.offered else 0.0

    @property
    def on_target(self) -> bool:
        return self.late_fraction < TARGET_LATE and abs(1 - self.achieved_ratio) <= TARGET_ACHIEVED


def open_run(protocol: str, closed_per_s: float, doc: dict[str, Any]) -> OpenRun:
    """The figures of an open-loop result document."""
    measured = doc["intervals"]  # the measured window's
    offered = round(sum(row["offered_per_s"] * row["length_s"] for row in measured))
    outcomes = [row["outcomes"] for row in doc["ops"].values()]
    cpu_s = sum(float(row["cpu_s"]) for row in measured)
    return OpenRun(
        protocol=protocol,
        driver=str(doc["environment"]["driver"]),
        closed_p1_per_s=closed_per_s,
        offered_per_s=offered / float(doc["window_s"]),
        achieved_per_s=float(doc["totals"]["throughput_per_s"]),
        offered=offered,
        completed=int(doc["totals"]["completed"]),
        late=sum(o.get("late", 0) for o in outcomes),
        dropped=sum(o.get("dropped", 0) for o in outcomes),
        client_cores=cpu_s / float(doc["window_s"]),
        worst_late=max((row.get("late") or 0 for row in measured), default=0),
    )


def drivers(transports: bool, python: bool = True) -> list[tuple[str, ...]]:
    """The environments of the open-loop runs: the compiled pumps on the compiled event
    loop (the default), on uvloop's transports (``transports``), the Python driver
    (``python``)."""
    return [
        (),
        *([("KVBENCH_DRIVER=transports",)] if transports else []),
        *([("KVBENCH_PURE_PYTHON=1",)] if python else []),
    ]


def measure(
    protocol: str,
    seconds: int,
    cpus: Cpus,
    pipeline: int,
    arrival: str,
    environments: list[tuple[str, ...]],
    fraction: float = FRACTION,
) -> list[OpenRun]:
    """The closed-loop P1 throughput, then the open loop at ``fraction`` of it in each
    of ``environments`` (``drivers``)."""
    kind, scheme = PROTOCOLS[protocol]
    with server(kind, 1, cpus) as live:
        live.prefill(KEYS)
        closed = kvbench_report(kvbench_doc(live.url(scheme), KEYS, 1, 1, seconds, cpus))
    rate = fraction * closed.ops_per_s
    runs = []
    for env in environments:
        with server(kind, 1, cpus) as live:
            live.prefill(KEYS)
            extra = ("--rate", f"{rate:.0f}", "--arrival", arrival, "--max-lag", "10s")
            doc = kvbench_doc(live.url(scheme), KEYS, 1, pipeline, seconds, cpus, extra, env)
        runs.append(open_run(protocol, closed.ops_per_s, doc))
    return runs


def table(runs: list[OpenRun]) -> list[str]:
    head = (
        f"{'protocol':<8} {'driver':<34} {'closed P1/s':>11} {'offered/s':>10} "
        f"{'achieved/s':>10} {'achieved/offered':>16} {'late %':>7} {'worst s':>7} "
        f"{'dropped':>8} {'cores':>5}  target"
    )
    lines = [head, "-" * len(head)]
    for r in runs:
        lines.append(
            f"{r.protocol:<8} {r.driver[:34]:<34} {r.closed_p1_per_s:>11,.0f} "
            f"{r.offered_per_s:>10,.0f} {r.achieved_per_s:>10,.0f} {r.achieved_ratio:>16.4f} "
            f"{100 * r.late_fraction:>6.2f}% {r.worst_late:>7,} {r.dropped:>8,} "
            f"{r.client_cores:>5.2f}  "
            f"{'met' if r.on_target else 'missed'}"
        )
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5, help="measured seconds per run [5]")
    parser.add_argument(
        "--only", default=",".join(PROTOCOLS), help=f"protocols [{','.join(PROTOCOLS)}]"
    )
    parser.add_argument("--pipeline", type=int, default=8, help="open loop's -P [8]")
    parser.add_argument(
        "--fraction",
        type=float,
        default=FRACTION,
        help=f"the open loop's rate, a fraction of the closed loop's [{FRACTION}]",
    )
    parser.add_argument(
        "--no-python", action="store_true", help="not on the Python driver (it cannot keep up)"
    )
    parser.add_argument("--arrival", choices=("uniform", "poisson"), default="uniform")
    parser.add_argument(
        "--transports",
        action="store_true",
        help="also on uvloop's transports (KVBENCH_DRIVER=transports)",
    )
    parser.add_argument("--json", metavar="FILE", help="write every run's figures here")
    parser.add_argument("--server-cpus", default="0", help="taskset list for servers [0]")
    parser.add_argument("--client-cpus", default="1", help="taskset list for the client [1]")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cpus = Cpus(args.server_cpus, args.client_cpus)
    protocols = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(protocols) - set(PROTOCOLS))
    if unknown:
        print(f"bench/open_loop.py: unknown protocol {unknown[0]!r}", file=sys.stderr)
        return 2
    runs: list[OpenRun] = []
    for protocol in protocols:
        try:
            environments = drivers(args.transports, not args.no_python)
            runs += measure(
                protocol,
                args.seconds,
                cpus,
                args.pipeline,
                args.arrival,
                environments,
                args.fraction,
            )
        except BenchError as exc:
            print(f"{protocol}: {exc}", file=sys.stderr)
    print("\n".join(table(runs)))
    if args.json:
        with open(args.json, "w") as out:
            json.dump([{**asdict(r), "late_fraction": r.late_fraction,
                        "achieved_ratio": r.achieved_ratio} for r in runs], out, indent=2)  # fmt: skip
    return 0 if runs and len(runs) == len(drivers(args.transports)) * len(protocols) else 1


if __name__ == "__main__":
    sys.exit(main())
