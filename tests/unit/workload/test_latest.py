"""YCSB's ``latest`` key distribution: sets insert new keys, reads favour the newest."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.config.model import WorkloadConfig
from kvbench.protocols.base import Op
from kvbench.workload.keys import LatestPicker, zipf_cdf
from kvbench.workload.plan import RequestSource, compile_plan


def test_inserts_take_new_keys_striped_by_worker() -> None:
    picker = LatestPicker(100, 40, worker_index=1, n_workers=4, rng=np.random.default_rng(0))
    drawn = picker.draw_for(np.array([True, False, True, True]))
    assert [drawn[0], drawn[2], drawn[3]] == [101, 105, 109]
    assert picker.inserted == 3


def test_reads_reach_only_keys_that_exist_and_the_newest_most() -> None:
    records = 1000
    picker = LatestPicker(records, 1000, 0, 1, np.random.default_rng(1))
    picker.draw_for(np.ones(10, dtype=np.bool_))  # keys 1000..1009 inserted
    reads = picker.draw(200_000)
    assert reads.max() <= 1009 and reads.min() >= 0
    # rank 0 is key 1009, rank 10 is the last record (999): Zipf over 1010 known keys
    cdf = zipf_cdf(records + 1000, 0.99)
    p0 = cdf[0] / cdf[records + 10 - 1]
    p10 = (cdf[10] - cdf[9]) / cdf[records + 10 - 1]
    sd = np.sqrt(p0 * (1 - p0) / 200_000)
    assert (reads == 1009).mean() == pytest.approx(p0, abs=5 * sd)
    assert (reads == 999).mean() == pytest.approx(p10, abs=0.003)


def test_a_full_share_wraps_to_the_oldest_insert() -> None:
    picker = LatestPicker(10, 3, 0, 1, np.random.default_rng(2))
    drawn = picker.draw_for(np.ones(5, dtype=np.bool_))
    assert drawn.tolist() == [10, 11, 12, 10, 11]
    assert picker.draw(1000).max() <= 12


def test_a_chunk_reads_what_its_own_earlier_inserts_made() -> None:
    """In one chunk, a read after k inserts may pick any of them, none after."""
    config = WorkloadConfig(
        keys=50, insert_keys=5000, key_pattern="latest", ratio=(("set", 1), ("get", 1)), seed=4
    )
    plan = compile_plan(config, 0, 1)
    assert len(plan.key_table) == 5050 and plan.preload_range() == range(0, 50)
    source = RequestSource(plan).next_chunk()
    ops = np.array(source.ops)
    indexes = [plan.key_table.index(k) for k in source.keys]  # type: ignore[arg-type]
    sets = np.flatnonzero(ops == int(Op.SET))
    assert [indexes[i] for i in sets] == list(range(50, 50 + len(sets)))
    for i in np.flatnonzero(ops == int(Op.GET)):
        assert indexes[i] < 50 + int((sets < i).sum())


def test_reads_skip_the_inserts_still_in_flight() -> None:
    """With a lag of L requests, a read sees only the inserts drawn more than L requests
    before it (YCSB reads acknowledged inserts only)."""
    picker = LatestPicker(100, 1000, 0, 1, np.random.default_rng(3), lag=4)
    inserts = np.array([True, True, False, False, False, False, False] + [False] * 5000)
    drawn = picker.draw_for(inserts)
    assert drawn[:2].tolist() == [100, 101]
    assert drawn[2:5].max() <= 99  # 4 requests or fewer after both inserts: records only
    assert drawn[5] <= 100  # 5 after the first insert
    assert drawn[6:].max() == 101  # both readable from here on
