"""Peak resident memory of a kvbench run: the coordinator and all its workers together.

    python bench/rss.py [TARGET] [--keys 100000] [--processes 2] [--seconds 5]

With no TARGET a throwaway memcached is started. Samples the RSS of the kvbench process
tree every 50 ms and prints the peak of the sum (issue #2 asks for < 300 MB at 100k keys
and 2 processes).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import subprocess
import sys
import time

import psutil


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("target", nargs="?")
    parser.add_argument("--keys", default="100000")
    parser.add_argument("--processes", default="2")
    parser.add_argument("--seconds", default="5")
    args = parser.parse_args()
    server = None
    target = args.target
    if target is None:
        port = free_port()
        binary = shutil.which("memcached")
        assert binary, "memcached is not installed"
        server = subprocess.Popen(
            [binary, "-l", "127.0.0.1", "-p", str(port), "-u", "root", "-m", "512"]
        )
        time.sleep(0.3)
        target = f"memcached://127.0.0.1:{port}"
    argv = [
        sys.executable,
        "-m",
        "kvbench",
        "run",
        target,
        "--keys",
        args.keys,
        "--preload",
        "--processes",
        args.processes,
        "--duration",
        f"{args.seconds}s",
        "--no-save",
        "-q",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(root))
        time.sleep(0.05)
    if server is not None:
        server.terminate()
    print(
        f"peak RSS of kvbench (coordinator + {args.processes} workers, {args.keys} keys): "
        f"{peak / 2**20:.0f} MiB"
    )


if __name__ == "__main__":
    main()
