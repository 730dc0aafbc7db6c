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
