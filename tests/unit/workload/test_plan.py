from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from kvbench.config.model import WorkloadConfig
from kvbench.protocols.base import Op
from kvbench.workload import CHUNK, RequestSource, compile_plan
from kvbench.workload.keys import KeyTable
from kvbench.workload.plan import TIMESTAMP_CHUNK


def test_plan_is_deterministic_in_seed_and_worker() -> None:
    config = WorkloadConfig(seed=42)
    a = RequestSource(compile_plan(config, 0, 2)).next_chunk()
    b = RequestSource(compile_plan(config, 0, 2)).next_chunk()
    c = RequestSource(compile_plan(config, 1, 2)).next_chunk()
    assert a.keys == b.keys and a.ops == b.ops
    assert a.keys != c.keys


def test_op_mix_follows_the_ratio() -> None:
    source = RequestSource(
        compile_plan(WorkloadConfig(ratio=(("set", 1), ("get", 3)), seed=1), 0, 1)
    ).next_chunk()
    counts = Counter(source.ops)
    assert counts[int(Op.GET)] / CHUNK == pytest.approx(0.75, abs=0.03)
    assert set(counts) == {int(Op.GET), int(Op.SET)}


def test_sequential_pattern_walks_and_wraps() -> None:
    config = WorkloadConfig(keys=10, key_pattern="sequential", key_prefix="k", seed=1)
    source = RequestSource(compile_plan(config, 0, 1)).next_chunk()
    assert source.keys[:12] == [b"k%d" % (i % 10) for i in range(12)]


def test_uniform_keys_stay_in_the_keyspace() -> None:
    source = RequestSource(
        compile_plan(WorkloadConfig(keys=50, key_prefix="k", seed=3), 0, 1)
    ).next_chunk()
    assert {int(k[1:]) for k in source.keys} <= set(range(50))  # type: ignore[index,arg-type]
    assert len(set(source.keys)) == 50


def test_value_sizes_respect_the_range() -> None:
    config = WorkloadConfig(value_size_min_bytes=10, value_size_max_bytes=20, seed=5)
    sizes = {len(v) for v in compile_plan(config, 0, 1).value_table}
    assert min(sizes) == 10 and max(sizes) == 20


def test_mget_positions_carry_key_tuples() -> None:
    config = WorkloadConfig(ratio=(("mget", 1),), multiget_keys=4, seed=1)
    source = RequestSource(compile_plan(config, 0, 1)).next_chunk()
    assert all(isinstance(k, tuple) and len(k) == 4 for k in source.keys)


def test_preload_ranges_cover_the_keyspace_once() -> None:
    config = WorkloadConfig(keys=1001)
    ranges = [compile_plan(config, i, 3).preload_range() for i in range(3)]
    covered = [k for r in ranges for k in r]
    assert sorted(covered) == list(range(1001))


def test_incr_works_on_counter_keys_not_on_value_keys() -> None:
    config = WorkloadConfig(ratio=(("incr", 1), ("set", 1)), keys=50, key_prefix="k:", seed=2)
    source = RequestSource(compile_plan(config, 0, 1)).next_chunk()
    incr_keys = {k for op, k in zip(source.ops, source.keys, strict=True) if op == int(Op.INCR)}
    set_keys = {k for op, k in zip(source.ops, source.keys, strict=True) if op == int(Op.SET)}
    assert incr_keys and all(k.startswith(b"k:counter:") for k in incr_keys)  # type: ignore[union-attr]
    assert not incr_keys & set_keys


def test_set_then_get_pairs_a_set_with_a_get_of_its_key() -> None:
    config = WorkloadConfig(ratio=(("set", 1), ("get", 1)), set_then_get=True, seed=3)
    source = RequestSource(compile_plan(config, 0, 1))
    for _ in range(2):  # across chunks too
        chunk = source.next_chunk()
        assert chunk.ops == [int(Op.SET), int(Op.GET)] * (CHUNK // 2)
        assert chunk.keys[0::2] == chunk.keys[1::2]
        assert len(set(chunk.keys)) > CHUNK // 4  # keys are drawn, not one repeated


def test_own_key_plans_give_every_connection_of_the_run_keys_of_its_own() -> None:
    from kvbench.workload.plan import own_key_plans

    config = WorkloadConfig(keys=1000, set_then_get=True, seed=5)
    tables = [
        set(plan.key_table)
        for worker in range(3)
        for plan in own_key_plans(compile_plan(config, worker, 3), 7)
    ]
    assert sum(len(t) for t in tables) == 1000  # the whole keyspace, each key once
    assert len(set().union(*tables)) == 1000
    with pytest.raises(ValueError, match="cannot be shared"):
        own_key_plans(compile_plan(WorkloadConfig(keys=10), 0, 1), 11)


def test_a_source_without_keys_is_empty_until_rekeyed() -> None:
    from dataclasses import replace

    plan = compile_plan(WorkloadConfig(keys=50, key_prefix="k", seed=3), 0, 1)
    source = RequestSource(replace(plan, key_table=[], config=replace(plan.config, keys=0)))
    assert source.empty
    few = [b"k1", b"k2"]
    source.rekey(replace(plan, key_table=few, config=replace(plan.config, keys=2)))
    assert not source.empty
    assert set(source.next_chunk().keys) == set(few)


def test_rekey_drops_the_chunk_and_goes_on_with_the_same_generators() -> None:
    from dataclasses import replace

    plan = compile_plan(WorkloadConfig(keys=50, key_prefix="k", seed=3), 0, 1)
    a, b = RequestSource(plan), RequestSource(plan)
    a.rekey(plan)  # the same keys: the op sequence goes on as if not rekeyed
    first, second = a.next_chunk(), b.next_chunk()
    assert first.ops == second.ops and first.keys == second.keys
    half = replace(plan, key_table=plan.key_table[:25], config=replace(plan.config, keys=25))
    a.rekey(half)
    assert set(a.next_chunk().keys) <= set(half.key_table)


@pytest.mark.parametrize(
    "config",
    [
        WorkloadConfig(seed=7),
        WorkloadConfig(
            ratio=(("set", 1), ("get", 2), ("incr", 1), ("delete", 1)),
            keys=300,
            key_prefix="k:",
            value_size_min_bytes=0,
            value_size_max_bytes=3000,
            seed=3,
        ),
        WorkloadConfig(key_template="random", key_size=40, key_pattern="zipf", seed=5),
    ],
    ids=["default", "every-op", "random-keys"],
)
def test_packed_chunks_are_the_lists_requests(config: WorkloadConfig) -> None:
    """A compiled pump's stream draws packed chunks (bounds into the tables): the same
    ops, keys and values, in the same order, as the lists of a source with the same seed."""
    lists = RequestSource(compile_plan(config, 1, 2))
    packed = RequestSource(compile_plan(config, 1, 2))
    assert packed.can_pack() and packed.pack()
    for _ in range(3):
        as_lists, as_packed = lists.next_chunk(), packed.next_chunk()
        assert as_packed.packed is not None and not as_packed.keys
        ops, keys, key_starts, key_ends, values, value_starts, value_ends = as_packed.packed
        assert list(ops) == as_lists.ops and len(key_starts) == CHUNK
        assert list(as_packed.record_ops) == as_lists.ops  # what a dropped one counts as
        got_keys = [keys[a:b] for a, b in zip(key_starts, key_ends, strict=True)]
        assert got_keys == as_lists.keys
        got_values = [bytes(values[a:b]) for a, b in zip(value_starts, value_ends, strict=True)]
        assert got_values == [bytes(v) for v in as_lists.values]


def test_a_packing_source_rekeyed_packs_its_new_keys() -> None:
    """A Redis Cluster slot moved: the next packed chunk bounds the new plan's keys (the
    old tables' bounds would name other keys, which the master does not serve); one left
    without keys stops packing, and packs again once it has some."""
    from dataclasses import replace

    plan = compile_plan(WorkloadConfig(keys=50, key_prefix="k", seed=3), 0, 1)
    source = RequestSource(plan)
    assert source.pack()
    moved = replace(plan, key_table=plan.key_table[30:], config=replace(plan.config, keys=20))
    source.rekey(moved)
    _, keys, key_starts, key_ends, *_ = source.next_chunk().packed or ()
    drawn = {keys[a:b] for a, b in zip(key_starts, key_ends, strict=True)}
    assert drawn <= set(moved.key_table) and len(drawn) > 1
    source.rekey(replace(plan, key_table=[], config=replace(plan.config, keys=0)))
    assert source.empty and not source.can_pack()
    source.rekey(moved)
    assert source.next_chunk().packed is not None


@pytest.mark.parametrize(
    "config",
    [
        WorkloadConfig(ratio=(("mget", 1),), seed=1),
        WorkloadConfig(verify=True, seed=1),
        WorkloadConfig(value_kind="timestamp", seed=1),
        WorkloadConfig(set_then_get=True, seed=1),
    ],
    ids=["mget", "verify", "timestamp", "set-then-get"],
)
def test_what_cannot_be_packed_stays_lists(config: WorkloadConfig) -> None:
    source = RequestSource(compile_plan(config, 0, 1))
    assert not source.can_pack() and not source.pack()
    chunk = source.next_chunk()
    size = TIMESTAMP_CHUNK if config.value_kind == "timestamp" else CHUNK
    assert chunk.packed is None and len(chunk.keys) == size


def test_packed_tables_are_the_plans_key_table_not_a_copy() -> None:
    """compile_plan packs the keys and the counters into one table, and the packed chunks'
    key column is that blob and its bounds, shared (a copy per worker was ~2.5 MB at 100k
    keys), bounding every key then every counter."""
    from kvbench.workload.plan import _PackedTables

    plan = compile_plan(WorkloadConfig(ratio=(("get", 1), ("incr", 1)), seed=1), 0, 1)
    tables = _PackedTables.of(plan)
    assert tables is not None
    keys = plan.key_table
    assert isinstance(keys, KeyTable) and tables.keys is keys.blob
    assert np.shares_memory(tables.key_starts, keys.starts)
    bounded = [tables.keys[a:b] for a, b in zip(tables.key_starts, tables.key_ends, strict=True)]
    assert bounded == [*plan.key_table, *plan.counter_table]
    assert tables.counters_at == len(plan.key_table) and tables.counters == len(plan.counter_table)


def test_the_preload_comes_a_chunk_at_a_time() -> None:
    """Its keys made bytes objects a chunk at a time, not all at once: the same sets."""
    first, stop = 1000, 1000 + 2 * CHUNK + 452
    plan = compile_plan(WorkloadConfig(keys=stop, seed=1), 0, 1)
    source = RequestSource(plan).preload(range(first, stop))
    chunks = []
    while (chunk := source.next_chunk()) is not None:
        chunks.append(chunk)
    assert [c.size for c in chunks] == [CHUNK, CHUNK, 452]
    assert [k for c in chunks for k in c.keys] == [b"kvbench:%d" % i for i in range(first, stop)]
    assert all(op == int(Op.SET) for c in chunks for op in c.ops)


def test_tables_past_32_bit_bounds_stay_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key or value table over 4 GiB cannot be bounded by uint32: lists, not an error."""
    from kvbench.workload import plan

    monkeypatch.setattr(plan, "MAX_PACKED_BYTES", 1000)  # the value table's blob is larger
    source = RequestSource(compile_plan(WorkloadConfig(seed=1), 0, 1))
    assert source.can_pack() and not source.pack()
    chunk = source.next_chunk()
    assert chunk.packed is None and len(chunk.keys) == CHUNK
