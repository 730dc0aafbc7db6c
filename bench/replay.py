"""What replaying a trace costs the client: ns per row to read, parse, profile, map and fan
out a generated 1,000,000-row trace (plain and zstd), at --speed max and timed.

    python bench/replay.py [--rows 1000000] [--connections 50]

The trace has a fixed mix and sizes (90% get, 10% set of 100-byte values, 14-byte keys,
one TTL, 37 clients), the shape a plain ``kvbench run --ratio 1:9 --value-size 100
--key-size 14`` sends, so this figure is what a replay adds per request to a run of the
same mix. The end-to-end comparison (``kvbench replay --speed max`` against that run)
comes with the command; run both on a quiet machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import zstandard

from kvbench.config.replay import ReplayConfig
from kvbench.workload.trace_source import ReplayFeed


def generate(path: Path, rows: int, compress: bool) -> Path:
    """A trace of ``rows`` rows over 100 seconds: 90% get, 10% set."""
    lines = []
    for i in range(rows):
        key = b"key:%010d" % (i * 7919 % 100_000)
        if i % 10 == 9:
            lines.append(b"%d,%s,14,100,%d,set,3600" % (i * 100 // rows, key, i % 37))
        else:
            lines.append(b"%d,%s,14,0,%d,get,0" % (i * 100 // rows, key, i % 37))
    data = b"\n".join(lines) + b"\n"
    if compress:
        data = zstandard.ZstdCompressor(level=3).compress(data)
    path.write_bytes(data)
    return path


def feed_ns_per_row(path: Path, connections: int, speed: float | None) -> tuple[float, int]:
    """Read the whole trace through a feed with ``connections`` lanes, as connections take it."""
    feed = ReplayFeed(ReplayConfig(str(path), speed=speed), "memcache-text", 0, 1, connections, 1)
    start = time.perf_counter()
    rows = 0
    if speed is not None:
        feed.read_until(1 << 62)
    while True:
        progressed = False
        for lane in feed.lanes:
            if lane.refill():
                rows += lane.size
                lane.pos = lane.size
                progressed = True
        if not progressed and feed.done and feed.remaining() == 0:
            break
    return (time.perf_counter() - start) * 1e9 / rows, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for compress in (False, True):
            path = generate(Path(tmp) / ("t.zst" if compress else "t.csv"), args.rows, compress)
            for speed in (None, 1.0):
                ns, rows = feed_ns_per_row(path, args.connections, speed)
                kind = "zstd " if compress else "plain"
                mode = "speed max" if speed is None else "timed    "
                print(f"{kind} {mode}: {ns:7.0f} ns/row over {rows:,} rows")


if __name__ == "__main__":
    main()
