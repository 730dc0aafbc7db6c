"""Values: memoryview slices of one blob, sizes drawn from the configured distribution.

No value bytes are built per request: a table of slices is made once and the hot path
picks entries from it. Kinds: ``random`` (a random blob: incompressible),
``compressible`` (a repeated 16-byte pattern with 15% of the bytes replaced at random:
about 3:1 with zlib at its default level for values of 1 KB and more, about 1.5:1 at 100
bytes, where zlib's fixed overhead dominates) and ``timestamp`` (8-byte big-endian
milliseconds since the epoch; see ``timestamp_value``). Verified values are not here:
they depend on the key (``workload.verify``).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import numpy.typing as npt

from kvbench.config.model import WorkloadConfig
from kvbench.config.workload_fields import FB_ETC
from kvbench.workload.models import model_value_sizes

# How many distinct value slices a worker prepares: enough that sizes follow the
# distribution closely, small enough to build in a few milliseconds.
VALUE_TABLE_SIZE = 1024
# compressible: the period of the repeated pattern and the share of bytes replaced.
PATTERN_BYTES = 16
NOISE_SHARE = 0.15
# Printable characters, so compressible values read well in a server dump.
_ALPHABET = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", dtype=np.uint8
)
_MILLIS = struct.Struct(">Q")


def value_sizes(
    min_bytes: int,
    max_bytes: int,
    weights: tuple[tuple[int, int], ...],
    n: int,
    rng: np.random.Generator,
) -> npt.NDArray[np.int64]:
    """``n`` value sizes: fixed, uniform in [min, max], or following (size, weight) pairs.

    Weighted sizes are allotted exactly (largest remainder) and shuffled, so a table of
    1024 entries holds 70% 100-byte values for ``100:70,1000:30``, not 70% +- noise.
    """
    if weights:
        sizes = np.array([s for s, _ in weights], dtype=np.int64)
        shares = np.array([w for _, w in weights], dtype=np.float64)
        exact = shares / shares.sum() * n
        counts = np.floor(exact).astype(np.int64)
        short = n - int(counts.sum())
        counts[np.argsort(counts - exact)[:short]] += 1
        return rng.permutation(np.repeat(sizes, counts))
    if min_bytes == max_bytes:
        return np.full(n, min_bytes, dtype=np.int64)
    return rng.integers(min_bytes, max_bytes + 1, n, dtype=np.int64)


def compressible_blob(n: int, rng: np.random.Generator) -> bytes:
    """``n`` low-entropy bytes: a random 16-byte pattern repeated, 15% of bytes redrawn."""
    pattern = _ALPHABET[rng.integers(0, len(_ALPHABET), PATTERN_BYTES)]
    blob = np.resize(pattern, n)
    noisy = rng.random(n) < NOISE_SHARE
    blob[noisy] = _ALPHABET[rng.integers(0, len(_ALPHABET), int(noisy.sum()))]
    return blob.tobytes()


def build_value_table(
    min_bytes: int,
    max_bytes: int,
    rng: np.random.Generator,
    *,
    weights: tuple[tuple[int, int], ...] = (),
    kind: str = "random",
    sizes: npt.NDArray[np.int64] | None = None,
) -> list[memoryview]:
    """Slices of one blob (random or compressible) with sizes from the distribution, or
    exactly ``sizes`` (one slice each; min and max are then theirs)."""
    if sizes is not None:
        max_bytes = int(sizes.max()) if len(sizes) else 0
    else:
        sizes = value_sizes(min_bytes, max_bytes, weights, VALUE_TABLE_SIZE, rng)
    count = len(sizes)
    length = max_bytes * 2 + count
    if kind == "compressible":
        blob = compressible_blob(length, rng)
    else:
        blob = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
    view = memoryview(blob)
    offsets = rng.integers(0, max_bytes + count, count, dtype=np.int64)
    return [view[o : o + s] for o, s in zip(offsets.tolist(), sizes.tolist(), strict=True)]


def value_table_for(config: WorkloadConfig, rng: np.random.Generator) -> list[memoryview]:
    """The value table ``config`` asks for (timestamp values get a placeholder table;
    ``fb-etc`` sizes come from the model, the same for every worker)."""
    kind = "compressible" if config.value_kind == "compressible" else "random"
    if config.value_size_model == FB_ETC:
        return build_value_table(0, 0, rng, kind=kind, sizes=model_value_sizes(config.seed)[0])
    return build_value_table(
        config.value_size_min_bytes,
        config.value_size_max_bytes,
        rng,
        weights=config.value_size_weights,
        kind=kind,
    )


def timestamp_value(wall_ns: int) -> bytes:
    """8-byte big-endian milliseconds since the epoch, as the old Java benchmarks stored."""
    return _MILLIS.pack(wall_ns // 1_000_000)


def slice_bounds(table: list[memoryview]) -> tuple[Any, npt.NDArray[np.int64]]:
    """The blob a value table slices and where each slice starts in it.

    Raises:
        ValueError: the slices are not all of one blob (``build_value_table`` makes them
            so).
    """
    if not table:
        return b"", np.zeros(0, dtype=np.int64)
    blob = table[0].obj
    if any(view.obj is not blob for view in table):
        raise ValueError("the value slices are not all of one blob")
    base = _address(memoryview(blob))
    starts = np.fromiter(
        (_address(view) - base if len(view) else 0 for view in table), np.int64, len(table)
    )
    return blob, starts


def _address(view: memoryview) -> int:
    """Where ``view``'s first byte is in memory."""
    return int(np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0])
