"""Values: memoryview slices of one random blob, sizes drawn from the configured range.

No value bytes are built per request: a table of slices is made once and the hot path
picks entries from it.
"""

from __future__ import annotations

import numpy as np

# How many distinct value slices a worker prepares: enough that sizes follow the
# distribution closely, small enough to build in a few milliseconds.
VALUE_TABLE_SIZE = 1024


def build_value_table(min_bytes: int, max_bytes: int, rng: np.random.Generator) -> list[memoryview]:
    """Slices of a random blob with sizes uniform in [min_bytes, max_bytes]."""
    blob = rng.integers(0, 256, max_bytes * 2 + VALUE_TABLE_SIZE, dtype=np.uint8).tobytes()
    view = memoryview(blob)
    if min_bytes == max_bytes:
        sizes = np.full(VALUE_TABLE_SIZE, min_bytes, dtype=np.int64)
    else:
        sizes = rng.integers(min_bytes, max_bytes + 1, VALUE_TABLE_SIZE, dtype=np.int64)
    offsets = rng.integers(0, max_bytes + VALUE_TABLE_SIZE, VALUE_TABLE_SIZE, dtype=np.int64)
    return [view[o : o + s] for o, s in zip(offsets.tolist(), sizes.tolist(), strict=True)]
