"""Value sizes (fixed, range, weighted), kinds (random, compressible, timestamp)."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from scipy import stats

from kvbench.config.model import WorkloadConfig
from kvbench.protocols.base import Op
from kvbench.workload import CHUNK, RequestSource, compile_plan
from kvbench.workload.plan import TIMESTAMP_CHUNK
from kvbench.workload.values import (
    VALUE_TABLE_SIZE,
    build_value_table,
    compressible_blob,
    timestamp_value,
    value_sizes,
)


def rng(seed: int = 1) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_fixed_size() -> None:
    assert set(value_sizes(100, 100, (), 1000, rng()).tolist()) == {100}


def test_range_sizes_are_uniform_within_bounds() -> None:
    sizes = value_sizes(100, 199, (), 100_000, rng())
    assert sizes.min() == 100 and sizes.max() == 199
    assert stats.chisquare(np.bincount(sizes - 100)).pvalue > 1e-4


def test_weighted_sizes_are_allotted_exactly() -> None:
    sizes = value_sizes(100, 1000, ((100, 70), (1000, 30)), VALUE_TABLE_SIZE, rng())
    share = (sizes == 100).mean()
    assert set(sizes.tolist()) == {100, 1000}
    assert abs(share - 0.7) <= 1 / VALUE_TABLE_SIZE


def test_weighted_sizes_are_shuffled_not_in_blocks() -> None:
    sizes = value_sizes(1, 2, ((1, 1), (2, 1)), VALUE_TABLE_SIZE, rng())
    runs = 1 + int(np.count_nonzero(np.diff(sizes)))
    assert runs > VALUE_TABLE_SIZE / 4  # a sorted table would have 2 runs


def test_request_values_follow_the_weights() -> None:
    config = WorkloadConfig(
        value_size_min_bytes=100,
        value_size_max_bytes=1000,
        value_size_weights=((100, 70), (1000, 30)),
        ratio=(("set", 1),),
        seed=3,
    )
    source = RequestSource(compile_plan(config, 0, 1)).next_chunk()
    share = sum(1 for v in source.values if len(v) == 100) / CHUNK
    assert share == pytest.approx(0.7, abs=0.03)


def test_value_tables_are_deterministic_in_their_seed() -> None:
    a = [bytes(v) for v in build_value_table(10, 50, rng(7))]
    b = [bytes(v) for v in build_value_table(10, 50, rng(7))]
    assert a == b


def _ratio(data: bytes) -> float:
    return len(data) / len(zlib.compress(data))


def test_random_values_do_not_compress() -> None:
    table = build_value_table(1000, 1000, rng())
    assert np.mean([_ratio(bytes(v)) for v in table[:100]]) < 1.05


def test_compressible_values_compress_about_three_to_one() -> None:
    table = build_value_table(1000, 1000, rng(), kind="compressible")
    ratio = float(np.mean([_ratio(bytes(v)) for v in table[:200]]))
    assert 2.4 < ratio < 3.6


def test_compressible_blob_is_printable_and_seeded() -> None:
    blob = compressible_blob(4096, rng(2))
    assert blob.isascii() and blob == compressible_blob(4096, rng(2))


def test_timestamp_value_is_big_endian_milliseconds() -> None:
    value = timestamp_value(1_700_000_000_123_456_789)
    assert len(value) == 8 and struct.unpack(">Q", value)[0] == 1_700_000_000_123


def test_timestamp_values_are_taken_once_per_chunk() -> None:
    clock = iter(range(10**15, 10**16, 10**9))  # one second later at every reading
    config = WorkloadConfig(value_kind="timestamp", ratio=(("set", 1),), seed=1)
    source = RequestSource(compile_plan(config, 0, 1), wall_clock_ns=lambda: next(clock))
    chunk = source.next_chunk()
    assert chunk.size == TIMESTAMP_CHUNK < CHUNK  # (a reading grows as old as its chunk)
    first = {bytes(v) for v in chunk.values}
    second = {bytes(v) for v in source.next_chunk().values}
    assert len(first) == len(second) == 1
    (a,), (b,) = first, second
    assert struct.unpack(">Q", b)[0] - struct.unpack(">Q", a)[0] == 1000


def test_timestamp_preload_values_are_eight_bytes() -> None:
    config = WorkloadConfig(value_kind="timestamp", keys=10, seed=1)
    source = RequestSource(compile_plan(config, 0, 1), wall_clock_ns=lambda: 5_000_000)
    assert source.preload_values(range(10)) == [struct.pack(">Q", 5)] * 10


def test_sets_carry_values_and_gets_ignore_them() -> None:
    config = WorkloadConfig(ratio=(("set", 1), ("get", 1)), seed=1)
    source = RequestSource(compile_plan(config, 0, 1)).next_chunk()
    assert all(
        len(v) == 100 for op, v in zip(source.ops, source.values, strict=True) if op == Op.SET
    )
