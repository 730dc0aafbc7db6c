"""The op mix: weighted workload ops mapped onto protocol ops, drawn in chunks."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kvbench.protocols.base import Op

# workload op name -> protocol op
WORKLOAD_TO_OP: dict[str, Op] = {
    "get": Op.GET,
    "set": Op.SET,
    "delete": Op.DELETE,
    "incr": Op.INCR,
    "mget": Op.MGET,
}


class OpMix:
    """Draws protocol ops with the configured weights.

    Args:
        ratio: (workload op name, weight) pairs with positive weights.
        rng: the worker's generator.
    """

    def __init__(self, ratio: tuple[tuple[str, int], ...], rng: np.random.Generator) -> None:
        self.ops = tuple(WORKLOAD_TO_OP[name] for name, _ in ratio)
        weights = np.array([w for _, w in ratio], dtype=np.float64)
        self._p = weights / weights.sum()
        self._codes = np.array([int(op) for op in self.ops], dtype=np.int64)
        self._rng = rng

    def draw(self, n: int) -> npt.NDArray[np.int64]:
        """The next ``n`` op codes (``int(Op)``)."""
        if len(self._codes) == 1:
            return np.full(n, self._codes[0], dtype=np.int64)
        return self._codes[self._rng.choice(len(self._codes), n, p=self._p)]
