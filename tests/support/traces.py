"""Small generated cache traces (Twitter format or kvbench's CSV), plain or zstd."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from pathlib import Path

import zstandard

from kvbench.workload.trace import KVBENCH_HEADER

Row = tuple[float | int, str, int, int, int | str, str, int]


def write_trace(
    path: Path, rows: Iterable[Row], *, compress: bool = False, header: bool = False
) -> Path:
    """Write ``rows`` as CSV lines (with kvbench's header when ``header``)."""
    lines = [KVBENCH_HEADER.decode()] if header else []
    lines += [",".join(str(field) for field in row) for row in rows]
    data = ("\n".join(lines) + "\n").encode()
    if compress:
        data = zstandard.ZstdCompressor(level=3).compress(data)
    path.write_bytes(data)
    return path


def mixed_rows(
    n: int,
    *,
    seconds: int = 5,
    clients: int = 7,
    keys: int = 200,
    ops: Sequence[str] = ("get", "get", "get", "set", "delete"),
    value_size: int = 100,
    ttl: int = 3600,
    seed: int = 1,
) -> list[Row]:
    """``n`` rows spread over ``seconds`` whole seconds, in time order."""
    rng = random.Random(seed)
    rows: list[Row] = []
    for i in range(n):
        op = ops[rng.randrange(len(ops))]
        key = f"ns:u:{rng.randrange(keys):06d}"
        writes = op in ("set", "add", "replace", "cas", "append", "prepend")
        rows.append(
            (
                i * seconds // n,
                key,
                len(key),
                value_size if writes else 0,
                rng.randrange(clients),
                op,
                ttl if writes else 0,
            )
        )
    return rows


# The trace ops that carry a value.
WRITES = ("set", "add", "replace", "cas", "append", "prepend")


def owned_rows(n: int, *, seconds: int = 2, clients: int = 12, seed: int = 5) -> list[Row]:
    """``n`` rows of every trace op over ``seconds`` whole seconds, each key used by one
    client only (its name carries the client's). Counters (incr, decr) are only stored
    with 4-byte values, digits: the servers count an incr of a number."""
    rng = random.Random(seed)
    ops = ("get", "gets", "set", "add", "replace", "cas", "append", "prepend", "delete")
    rows: list[Row] = []
    for i in range(n):
        client = rng.randrange(clients)
        if rng.random() < 0.2:
            key = f"c{client}:n:{rng.randrange(4)}"
            op = rng.choice(("incr", "decr", "set", "get", "delete"))
            size = 4
        else:
            key = f"c{client}:u:{rng.randrange(30):03d}"
            op = rng.choice(ops)
            size = rng.choice((10, 100, 1000))
        writes = op in WRITES
        rows.append(
            (
                i * seconds // n,
                key,
                len(key),
                size if writes else 0,
                f"c{client}",
                op,
                rng.choice((0, 60, 3600)) if writes else 0,
            )
        )
    return rows
