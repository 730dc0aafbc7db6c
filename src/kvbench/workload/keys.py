"""The key table and key pickers.

Keys are prebuilt once per worker (``prefix + number``) so the hot path only indexes a
list. Pickers draw indexes in chunks with numpy, seeded, so a run is reproducible.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kvbench.errors import ConfigError

# memcached's text protocol: keys are at most 250 bytes, no spaces or control characters
# (protocol.txt, "Keys").
MAX_MEMCACHED_KEY_BYTES = 250


def build_key_table(prefix: str, count: int) -> list[bytes]:
    """``[prefix + "0", prefix + "1", ...]`` as bytes."""
    head = prefix.encode()
    if len(head) + len(str(max(count - 1, 0))) > MAX_MEMCACHED_KEY_BYTES:
        raise ConfigError(
            "workload.key_prefix", f"keys would exceed {MAX_MEMCACHED_KEY_BYTES} bytes"
        )
    if any(byte <= 32 or byte == 127 for byte in head):
        raise ConfigError(
            "workload.key_prefix", "keys may not contain spaces or control characters"
        )
    return [head + str(i).encode() for i in range(count)]


class KeyPicker:
    """Draws key indexes in chunks.

    Args:
        pattern: ``uniform`` (independent uniform draws) or ``sequential`` (walk the
            keyspace from ``start``, wrapping).
        count: keyspace size.
        rng: the worker's generator.
        start: where a sequential walk begins (workers start at different places).
    """

    def __init__(self, pattern: str, count: int, rng: np.random.Generator, start: int = 0) -> None:
        self._pattern = pattern
        self._count = count
        self._rng = rng
        self._next = start % count

    def draw(self, n: int) -> npt.NDArray[np.int64]:
        """The next ``n`` key indexes."""
        if self._pattern == "sequential":
            indexes = (np.arange(n, dtype=np.int64) + self._next) % self._count
            self._next = int((self._next + n) % self._count)
            return indexes
        return self._rng.integers(0, self._count, n, dtype=np.int64)
