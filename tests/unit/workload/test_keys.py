"""Key tables (templates, sizes) and key pickers (distributions checked statistically)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from scipy import stats

from kvbench.config.model import WorkloadConfig
from kvbench.workload import RequestSource, compile_plan
from kvbench.workload.keys import URL_SAFE, KeyPicker, KeyTable, build_key_table, zipf_cdf

N = 200_000  # draws per distribution test: tolerances below are several sigma wide


def rng(seed: int = 1) -> np.random.Generator:
    return np.random.default_rng(seed)


# -- tables ------------------------------------------------------------------------------


def test_number_keys_are_prefix_and_number() -> None:
    assert build_key_table("k:", 3) == [b"k:0", b"k:1", b"k:2"]


def test_a_key_table_is_its_keys_end_to_end_with_uint32_bounds() -> None:
    """Packed (one blob, a bounds pair per key), across the blocks it is built in, and
    equal to the list of its keys; a slice is a view of the same blob."""
    keys = [b"k:%d" % i for i in range(10_000)]
    table = build_key_table("k:", 10_000)
    assert isinstance(table, KeyTable) and len(table) == 10_000
    assert table == keys and list(table) == keys and table.blob == b"".join(keys)
    assert table.starts.dtype == table.ends.dtype == np.uint32
    assert table[0] == b"k:0" and table[-1] == b"k:9999" and table[4096] == b"k:4096"
    part = table[4095:4098]
    assert part == [b"k:4095", b"k:4096", b"k:4097"] and part.blob is table.blob
    assert KeyTable.of(keys) == table and KeyTable.of(table) is table
    assert table != keys[:-1] and table != [b"x"] * 10_000


def test_key_tables_join_keys_then_counters_in_one_blob() -> None:
    keys, counters = build_key_table("k:", 3), build_key_table("k:counter:", 2)
    both = KeyTable.joined(keys, counters)
    assert both == [b"k:0", b"k:1", b"k:2", b"k:counter:0", b"k:counter:1"]
    assert both[3:] == counters and both.blob == keys.blob + counters.blob


def test_key_size_pads_numbers_with_zeros_to_exactly_n_bytes() -> None:
    table = build_key_table("kv:", 1000, size=16)
    assert table[0] == b"kv:0000000000000" and table[999] == b"kv:0000000000999"
    assert {len(k) for k in table} == {16}


def test_random_keys_are_n_url_safe_bytes_distinct_and_seeded() -> None:
    table = build_key_table("kvbench:", 5000, "random", 96, rng(3))
    assert {len(k) for k in table} == {96}
    assert len(set(table)) == 5000
    assert all(k.startswith(b"kvbench:") and set(k[8:]) <= set(URL_SAFE) for k in table)
    assert table == build_key_table("kvbench:", 5000, "random", 96, rng(3))
    assert table != build_key_table("kvbench:", 5000, "random", 96, rng(4))


def test_random_key_characters_are_uniform_over_the_alphabet() -> None:
    table = build_key_table("", 2000, "random", 96, rng(5))
    counts = np.bincount(np.frombuffer(b"".join(table), dtype=np.uint8), minlength=256)
    observed = counts[np.frombuffer(URL_SAFE, dtype=np.uint8)]
    assert observed.sum() == 2000 * 96
    assert stats.chisquare(observed).pvalue > 1e-4


def test_float_counter_keys_are_a_random_float_then_the_counter() -> None:
    table = build_key_table("", 1000, "float-counter", rng=rng(2))
    for i in (0, 7, 999):
        text = table[i].decode()
        assert text.startswith("0.") and text.endswith(str(i))
        assert 0 <= float(text[: len(text) - len(str(i))]) < 1
    assert len(set(table)) == 1000


def test_prebuilt_random_keys_stay_small_in_memory() -> None:
    """100k 96-byte keys: a few MB per process, far below the 150 MB budget per process."""
    table = build_key_table("kvbench:", 100_000, "random", 96, rng(1))
    size = sys.getsizeof(table) + sum(sys.getsizeof(k) for k in table)
    assert size < 20 * 2**20


def test_every_worker_builds_the_same_key_table() -> None:
    config = WorkloadConfig(keys=100, key_template="random", key_size=40, seed=9)
    assert compile_plan(config, 0, 2).key_table == compile_plan(config, 1, 2).key_table


# -- pickers -----------------------------------------------------------------------------


def test_sequential_walks_from_its_start_and_wraps() -> None:
    picker = KeyPicker("sequential", 10, rng(), start=7)
    assert picker.draw(5).tolist() == [7, 8, 9, 0, 1]
    assert picker.draw(2).tolist() == [2, 3]


def test_uniform_covers_the_keyspace_evenly() -> None:
    drawn = KeyPicker("uniform", 100, rng()).draw(N)
    counts = np.bincount(drawn, minlength=100)
    assert drawn.min() >= 0 and drawn.max() < 100
    assert stats.chisquare(counts).pvalue > 1e-4


@pytest.mark.parametrize("exponent", [0.99, 0.5, 1.5])
def test_zipf_frequencies_follow_one_over_rank_to_the_s(exponent: float) -> None:
    keys = 1000
    drawn = KeyPicker("zipf", keys, rng(), zipf_exponent=exponent).draw(N)
    assert drawn.min() >= 0 and drawn.max() < keys
    counts = np.bincount(drawn, minlength=keys)
    expected = np.diff(np.concatenate(([0.0], zipf_cdf(keys, exponent)))) * N
    # The head, rank by rank, within 5 standard deviations of a binomial count.
    for rank in range(10):
        sigma = np.sqrt(expected[rank] * (1 - expected[rank] / N))
        assert abs(counts[rank] - expected[rank]) < 5 * sigma + 1
    # The whole shape: a goodness-of-fit test over bins with enough expected draws.
    bins = np.searchsorted(np.cumsum(expected), np.linspace(0, N, 21)[1:-1])
    observed = np.add.reduceat(counts, np.concatenate(([0], bins)))
    wanted = np.add.reduceat(expected, np.concatenate(([0], bins)))
    assert stats.chisquare(observed, wanted * observed.sum() / wanted.sum()).pvalue > 1e-4


def test_zipf_key_zero_is_the_hottest_and_the_tail_is_still_reached() -> None:
    drawn = KeyPicker("zipf", 100_000, rng(), zipf_exponent=0.99).draw(N)
    counts = np.bincount(drawn, minlength=100_000)
    assert counts.argmax() == 0
    assert drawn.max() > 90_000  # bounded, but not truncated to a few hot keys


def test_gaussian_defaults_center_the_keyspace() -> None:
    keys = 60_000
    drawn = KeyPicker("gaussian", keys, rng()).draw(N)
    assert drawn.min() >= 0 and drawn.max() < keys
    assert drawn.mean() == pytest.approx(keys / 2, rel=0.01)
    assert drawn.std() == pytest.approx(keys / 6, rel=0.02)


def test_gaussian_is_clipped_to_the_keyspace() -> None:
    drawn = KeyPicker("gaussian", 1000, rng(), mean=0, stddev=100).draw(N)
    assert drawn.min() == 0 and drawn.max() < 1000
    # Half the mass sits below key 0 and is clipped onto it.
    assert (drawn == 0).mean() == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("pattern", ["uniform", "zipf", "gaussian"])
def test_pickers_are_deterministic_in_their_seed(pattern: str) -> None:
    a = KeyPicker(pattern, 1000, rng(11)).draw(500)
    b = KeyPicker(pattern, 1000, rng(11)).draw(500)
    c = KeyPicker(pattern, 1000, rng(12)).draw(500)
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()


def test_request_source_uses_the_configured_pattern() -> None:
    config = WorkloadConfig(keys=1000, key_pattern="zipf", key_prefix="k", seed=1)
    source = RequestSource(compile_plan(config, 0, 1)).next_chunk()
    hot = sum(1 for k in source.keys if k == b"k0")
    assert hot / len(source.keys) == pytest.approx(zipf_cdf(1000, 0.99)[0], abs=0.02)


def test_a_sequential_walk_with_a_span_wraps_inside_its_own_keys() -> None:
    """A worker starting at key 50 of 100 that wrote 7 keys reads back exactly those."""
    picker = KeyPicker("sequential", 100, np.random.default_rng(0), start=50, span=7)
    assert picker.draw(10).tolist() == [50, 51, 52, 53, 54, 55, 56, 50, 51, 52]
    assert picker.draw(5).tolist() == [53, 54, 55, 56, 50]
    wrapping = KeyPicker("sequential", 10, np.random.default_rng(0), start=8, span=4)
    assert wrapping.draw(6).tolist() == [8, 9, 0, 1, 8, 9]
    whole = KeyPicker("sequential", 5, np.random.default_rng(0), start=3)
    assert whole.draw(6).tolist() == [3, 4, 0, 1, 2, 3]


def test_float_counter_keys_without_a_prefix_are_the_originals() -> None:
    """str(random float) + counter, ~25 bytes, as the old Java storm made them."""
    keys = build_key_table("", 1000, "float-counter", rng=np.random.default_rng(1))
    assert keys[7].startswith(b"0.") and keys[7].endswith(b"7")
    assert 18 <= sum(map(len, keys)) / len(keys) <= 25
