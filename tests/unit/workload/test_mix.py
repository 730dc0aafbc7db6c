"""The op mix draws what numpy's weighted choice would, from its cached CDF."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.workload.mix import OpMix


@pytest.mark.parametrize(
    "ratio",
    [
        (("set", 1), ("get", 1)),
        (("set", 1), ("get", 9)),
        (("get", 3), ("set", 2), ("delete", 1), ("incr", 7)),
    ],
)
def test_draws_are_generator_choice_with_the_weights(ratio: tuple[tuple[str, int], ...]) -> None:
    mix = OpMix(ratio, np.random.default_rng(5))
    weights = np.array([w for _, w in ratio], dtype=np.float64)
    reference = np.random.default_rng(5)
    for n in (1, 7, 1024, 1024):
        expected = mix._codes[reference.choice(len(ratio), n, p=weights / weights.sum())]
        assert mix.draw(n).tolist() == expected.tolist()


def test_one_op_needs_no_draw() -> None:
    rng = np.random.default_rng(5)
    mix = OpMix((("get", 1),), rng)
    before = rng.bit_generator.state
    assert set(mix.draw(100).tolist()) == {int(mix.ops[0])}
    assert rng.bit_generator.state == before
