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
# The ops of the rows that are not counters'.
_OPS = ("get", "gets", "set", "add", "replace", "cas", "append", "prepend", "delete")


def every_op_rows(
    n: int, *, seconds: int = 3, clients: int = 9, seed: int = 3, owned: bool = False
) -> list[Row]:
    """``n`` rows of all eleven trace ops over ``seconds`` whole seconds. Counters (the
    keys incr and decr touch) are only ever stored with 4-byte values, digits: memcached
    and Redis count an incr of a number, and refuse one of anything else.

    Args:
        owned: each key is one client's (its name carries the client's), so each reply's
            outcome does not depend on how clients interleave; else clients share keys,
            and some keys' declared sizes pad or cut them.
    """
    rng = random.Random(seed)
    rows: list[Row] = []
    for i in range(n):
        client = rng.randrange(clients)
        if rng.random() < 0.2:
            key = f"c{client}:n:{rng.randrange(4)}" if owned else f"n:c:{rng.randrange(20):03d}"
            op = rng.choice(("incr", "decr", "set", "get", "delete"))
            size = 4
        else:
            key = (
                f"c{client}:u:{rng.randrange(30):03d}"
                if owned
                else f"nz:u:{rng.randrange(300):05d}:{'x' * rng.randrange(12)}"
            )
            op = rng.choice(_OPS)
            size = rng.choice((10, 100, 1000))
        writes = op in WRITES
        rows.append(
            (
                i * seconds // n,
                key,
                len(key) if owned else len(key) + rng.choice((-2, 0, 0, 5)),
                size if writes else 0,
                f"c{client}",
                op,
                rng.choice((0, 60, 3600)) if writes else 0,
            )
        )
    return rows


def owned_rows(n: int, *, seconds: int = 2, clients: int = 12, seed: int = 5) -> list[Row]:
    """``every_op_rows`` with each key one client's."""
    return every_op_rows(n, seconds=seconds, clients=clients, seed=seed, owned=True)
