"""The op mix: weighted workload ops and commands, drawn in chunks."""

from __future__ import annotations

from math import gcd

import numpy as np
import numpy.typing as npt

from kvbench.config.model import RMW
from kvbench.protocols.base import Op
from kvbench.workload.commands import COMMAND_BASE

# The code a read-modify-write is drawn, sent and recorded as: the first after the fixed
# ops (config refuses commands beside it, whose codes start there too). Only the
# connection's read-modify-write codec (engine/rmw.py) takes it.
RMW_CODE = COMMAND_BASE

# workload op name -> protocol op
WORKLOAD_TO_OP: dict[str, Op] = {
    "get": Op.GET,
    "set": Op.SET,
    "delete": Op.DELETE,
    "incr": Op.INCR,
    "mget": Op.MGET,
}


class OpMix:
    """Draws ops with the configured weights.

    Args:
        ratio: (workload op name, weight) pairs with positive weights; ``rmw`` is drawn
            as ``RMW_CODE``.
        rng: the worker's generator.
        commands: (command, weight) pairs (``workload.commands``); the i-th is drawn as
            code ``COMMAND_BASE + i``.
        order: ``random`` (each op drawn with its weight) or ``cycle`` (the ops in turn,
            each its weight times in a row, weights divided by their greatest common
            divisor: ``1:10`` is a set then ten gets, as memtier_benchmark sends them).
    """

    def __init__(
        self,
        ratio: tuple[tuple[str, int], ...],
        rng: np.random.Generator,
        commands: tuple[tuple[str, int], ...] = (),
        order: str = "random",
    ) -> None:
        self.ops = tuple(WORKLOAD_TO_OP[name] for name, _ in ratio if name != RMW)
        self.rmw = any(name == RMW for name, _ in ratio)
        codes = [RMW_CODE if name == RMW else int(WORKLOAD_TO_OP[name]) for name, _ in ratio]
        codes += [COMMAND_BASE + i for i in range(len(commands))]
        weights = np.array([w for _, w in ratio] + [w for _, w in commands], dtype=np.float64)
        # Generator.choice's own inverse-CDF draw (cumsum, normalise, searchsorted right),
        # kept here: choice rebuilt and rechecked it at every call (40 us of a 1,024-op
        # chunk's 220); the draws are the same numbers.
        cdf = (weights / weights.sum()).cumsum() if weights.size else weights
        self._cdf = cdf / cdf[-1] if cdf.size else cdf
        self._codes = np.array(codes, dtype=np.int64)
        self._rng = rng
        self._cycle: npt.NDArray[np.int64] | None = None
        self._at = 0  # cycle: the next code's place in it
        if order == "cycle" and len(codes) > 1:
            runs = [w for _, w in ratio] + [w for _, w in commands]
            common = gcd(*runs)
            self._cycle = np.repeat(self._codes, [w // common for w in runs])

    def draw(self, n: int) -> npt.NDArray[np.int64]:
        """The next ``n`` codes (``int(Op)``, or ``COMMAND_BASE + i`` for command i)."""
        if len(self._codes) == 1:
            return np.full(n, self._codes[0], dtype=np.int64)
        if self._cycle is not None:
            cycle = self._cycle
            places = (self._at + np.arange(n)) % len(cycle)
            self._at = (self._at + n) % len(cycle)
            return cycle[places]
        drawn: npt.NDArray[np.int64] = self._codes[
            self._cdf.searchsorted(self._rng.random(n), side="right")
        ]
        return drawn
