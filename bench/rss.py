"""Peak resident memory of a kvbench run: the coordinator and all its workers together.

    python bench/rss.py [TARGET] [--keys 100000] [--processes 2] [--seconds 5]

With no TARGET a throwaway memcached is started. The run is the one bench/peers.py
measures (50 connections, set:get 1:1, 100-byte values), with --preload so every key is
stored. Samples the RSS of the kvbench process tree (coordinator, workers and any helper
process multiprocessing starts) every 50 ms and prints the peak of the sum; shared pages
count once per process, so the figure is an upper bound. The issue's target: < 300 MB at
100,000 keys and 2 processes. bench/peers.py runs this last.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time

import psutil
from peer_tools import BenchError, Cpus, server

TARGET_BYTES = 300_000_000


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def peak_rss_bytes(target: str | None, keys: int, processes: int, seconds: int) -> int:
    """The peak summed RSS of a kvbench run's process tree.

    Raises:
        RuntimeError: the kvbench run failed (its last line of output says why).
    """
    if target is None:
        with server("memcached", 1, Cpus("0", "1")) as throwaway:
            return peak_rss_bytes(throwaway.url(), keys, processes, seconds)
    argv = [
        sys.executable, "-m", "kvbench", "run", target, "-c", "50", "--ratio", "1:1",
        "--value-size", "100", "--keys", str(keys), "--preload", "--processes", str(processes),
        "--duration", f"{seconds}s", "--no-save", "-q",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        with contextlib.suppress(psutil.NoSuchProcess):
            peak = max(peak, tree_rss(root))
        time.sleep(0.05)
    error = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        lines = error.strip().splitlines() or ["no output"]
        raise RuntimeError(f"kvbench exited {proc.returncode}: {lines[-1]}")
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("target", nargs="?")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    try:
        peak = peak_rss_bytes(args.target, args.keys, args.processes, args.seconds)
    except (RuntimeError, BenchError) as exc:
        raise SystemExit(f"rss: {exc}") from None
    verdict = "under" if peak < TARGET_BYTES else "OVER"
    print(
        f"peak RSS of kvbench (coordinator + {args.processes} workers, {args.keys:,} keys):"
        f" {peak / 1e6:.0f} MB ({peak / 2**20:.0f} MiB), {verdict} the 300 MB target"
    )


if __name__ == "__main__":
    main()
