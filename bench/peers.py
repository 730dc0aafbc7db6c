"""kvbench side by side with the peer tools, same server, same settings, as ratios.

The server is pinned to one core and every client to the other (taskset), runs alternate
A B A B, and the median of the rounds is compared (and the median of each round pair's
ratio, which a drifting machine speed does not skew). Peers: redis-benchmark (redis-tools),
memaslap (libmemcached-tools installs it as memcaslap), memtier_benchmark when a binary
is on PATH. kvbench runs one worker process, so the figure is throughput from one core,
with latency recorded for every request.

    python bench/peers.py                 # every case, 3 rounds of 5 s
    python bench/peers.py --rounds 5 --seconds 10 --only redis
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CONNECTIONS = 50
VALUE_BYTES = 100
KEYS = 100_000
SERVER_CORE = "0"
CLIENT_CORE = "1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(core: str, argv: list[str]) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", core, *argv]
    return argv


@contextmanager
def server(kind: str) -> Iterator[int]:
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="kvbench-bench-")
    if kind == "redis":
        argv = [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
        ]
    else:
        argv = [
            "memcached",
            "-l",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "0",
            "-t",
            "1",
            "-m",
            "1024",
            "-u",
            "root",
        ]
    proc = subprocess.Popen(
        pinned(SERVER_CORE, argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.01)
        yield port
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def kvbench(url: str, pipeline: int, seconds: int) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [
            sys.executable,
            "-m",
            "kvbench",
            "run",
            url,
            "-c",
            str(CONNECTIONS),
            "--processes",
            "1",
            "-P",
            str(pipeline),
            "--ratio",
            "1:1",
            "--value-size",
            str(VALUE_BYTES),
            "--keys",
            str(KEYS),
            "--duration",
            f"{seconds}s",
            "--warmup",
            "1s",
            "--json",
            out.name,
            "--no-save",
            "-q",
        ]
        subprocess.run(pinned(CLIENT_CORE, argv), check=True, stdout=subprocess.DEVNULL)
        doc = json.loads(Path(out.name).read_text())
    if doc["totals"]["errors"]:
        raise RuntimeError(f"kvbench saw {doc['totals']['errors']} errors")
    return float(doc["totals"]["throughput_per_s"])


def redis_benchmark(port: int, pipeline: int, seconds: int) -> float:
    """SET and GET runs; their combined rate (total requests / total time)."""
    requests = 60_000 * seconds * (8 if pipeline > 1 else 1)
    argv = [
        "redis-benchmark",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-c",
        str(CONNECTIONS),
        "-n",
        str(requests),
        "-d",
        str(VALUE_BYTES),
        "-r",
        str(KEYS),
        "-P",
        str(pipeline),
        "-t",
        "set,get",
        "--csv",
    ]
    text = subprocess.run(
        pinned(CLIENT_CORE, argv), check=True, capture_output=True, text=True
    ).stdout
    rates = [float(row["rps"]) for row in csv.DictReader(io.StringIO(text))]
    return len(rates) / sum(1 / r for r in rates)


def memaslap(port: int, pipeline: int, seconds: int) -> float:
    binary = shutil.which("memaslap") or shutil.which("memcaslap")
    assert binary is not None
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as cfg:
        # key sizes, value sizes, then command proportions (0 = set, 1 = get)
        # memaslap refuses keys shorter than 16 bytes; kvbench's are 13-14 ("kvbench:12345")
        cfg.write(f"key\n16 16 1\nvalue\n{VALUE_BYTES} {VALUE_BYTES} 1\ncmd\n0 0.5\n1 0.5\n")
    argv = [
        binary,
        "-s",
        f"127.0.0.1:{port}",
        "-T",
        "1",
        "-c",
        str(CONNECTIONS),
        "-t",
        f"{seconds}s",
        "-F",
        cfg.name,
    ]
    text = subprocess.run(
        pinned(CLIENT_CORE, argv), check=True, capture_output=True, text=True
    ).stdout
    os.unlink(cfg.name)
    match = re.search(r"TPS:\s*(\d+)", text)
    if not match:
        raise RuntimeError(f"no TPS in memaslap output:\n{text}")
    return float(match.group(1))


def memtier(kind: str, port: int, pipeline: int, seconds: int) -> float:
    protocol = "redis" if kind == "redis" else "memcache_text"
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [
            "memtier_benchmark",
            "-s",
            "127.0.0.1",
            "-p",
            str(port),
            "-P",
            protocol,
            "-t",
            "1",
            "-c",
            str(CONNECTIONS),
            "--pipeline",
            str(pipeline),
            "--ratio",
            "1:1",
            "-d",
            str(VALUE_BYTES),
            "--key-maximum",
            str(KEYS),
            "--test-time",
            str(seconds),
            "--json-out-file",
            out.name,
            "--hide-histogram",
        ]
        subprocess.run(pinned(CLIENT_CORE, argv), check=True, capture_output=True)
        doc = json.loads(Path(out.name).read_text())
    return float(doc["ALL STATS"]["Totals"]["Ops/sec"])


@dataclass
class Case:
    server: str
    pipeline: int
    peer: str
    run_peer: Callable[[int, int, int], float]


def cases() -> list[Case]:
    found = []
    for pipeline in (1, 16):
        if shutil.which("redis-benchmark"):
            found.append(Case("redis", pipeline, "redis-benchmark", redis_benchmark))
        if shutil.which("memtier_benchmark"):
            found.append(
                Case(
                    "redis",
                    pipeline,
                    "memtier_benchmark",
                    lambda p, d, s: memtier("redis", p, d, s),
                )
            )
            found.append(
                Case(
                    "memcached",
                    pipeline,
                    "memtier_benchmark",
                    lambda p, d, s: memtier("memcached", p, d, s),
                )
            )
    if shutil.which("memaslap") or shutil.which("memcaslap"):
        found.append(Case("memcached", 1, "memaslap", memaslap))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--only", help="run only cases whose server or peer contains this")
    args = parser.parse_args()
    rows = []
    for case in cases():
        if args.only and args.only not in case.server and args.only not in case.peer:
            continue
        ours, theirs = [], []
        with server(case.server) as port:
            url = f"{'redis' if case.server == 'redis' else 'memcached'}://127.0.0.1:{port}"
            for _ in range(args.rounds):  # A B A B
                ours.append(kvbench(url, case.pipeline, args.seconds))
                theirs.append(case.run_peer(port, case.pipeline, args.seconds))
        a, b = statistics.median(ours), statistics.median(theirs)
        # A virtual machine's speed drifts between rounds; the ratio of each A B pair
        # cancels the drift that the ratio of the two medians keeps.
        paired = statistics.median(x / y for x, y in zip(ours, theirs, strict=True))
        rows.append((case, a, b, paired))
        print(
            f"{case.server:9} P={case.pipeline:<2} kvbench {a:>10,.0f}  {case.peer:17} {b:>10,.0f}"
            f"  ratio {a / b:.2f} (paired {paired:.2f})   rounds kvbench"
            f" {[round(x) for x in ours]} peer {[round(x) for x in theirs]}",
            flush=True,
        )
    print(
        "\n| server | pipeline | kvbench ops/s | peer | peer ops/s | kvbench/peer"
        " | median of paired ratios |"
    )
    print("|---|---|---|---|---|---|---|")
    for case, a, b, paired in rows:
        print(
            f"| {case.server} | {case.pipeline} | {a:,.0f} | {case.peer} | {b:,.0f}"
            f" | {a / b:.2f} | {paired:.2f} |"
        )


if __name__ == "__main__":
    main()
