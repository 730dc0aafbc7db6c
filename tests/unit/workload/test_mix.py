"""The op mix draws what numpy's weighted choice would, from its cached CDF."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.workload.commands import COMMAND_BASE
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


def test_cycle_sends_each_op_its_weight_times_in_a_row_across_draws() -> None:
    rng = np.random.default_rng(5)
    before = rng.bit_generator.state
    mix = OpMix((("set", 2), ("get", 20)), rng, order="cycle")  # 2:20 is 1:10
    set_, get = (int(op) for op in mix.ops)
    drawn = np.concatenate([mix.draw(n) for n in (3, 1, 16, 13)]).tolist()
    assert drawn == ([set_] + [get] * 10) * 3
    assert rng.bit_generator.state == before  # nothing random is drawn


def test_cycle_takes_commands_in_their_turn() -> None:
    mix = OpMix((("set", 1), ("get", 1)), np.random.default_rng(5), (("ping", 2),), "cycle")
    set_, get = (int(op) for op in mix.ops)
    assert mix.draw(8).tolist() == [set_, get, COMMAND_BASE, COMMAND_BASE] * 2
