"""Histogram: layout, percentiles and wire format checked against the ``hdrh`` package."""

from __future__ import annotations

import array
import base64
import math
import pickle
import struct
import zlib
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hdrh.histogram import HdrHistogram

from kvbench.metrics.histogram import (
    BUCKET_COUNT,
    COUNTS_LEN,
    HIGHEST_TRACKABLE_NS,
    SUB_BUCKET_COUNT,
    Histogram,
    counts_index_for,
    counts_indexes,
    highest_equivalent_value,
    lowest_equivalent_value,
    median_equivalent_value,
    value_from_index,
)

PERCENTILES = [0.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0]
MAX_INDEX = counts_index_for(HIGHEST_TRACKABLE_NS)


def reference() -> HdrHistogram:
    return HdrHistogram(1, HIGHEST_TRACKABLE_NS, 3)


def reference_counts(hdr: HdrHistogram) -> npt.NDArray[np.int64]:
    return np.ctypeslib.as_array(hdr.counts).astype(np.int64)


def latencies(n: int, seed: int = 7) -> npt.NDArray[np.int64]:
    """Lognormal latencies around 100 us with a long tail, like a real run."""
    rng = np.random.default_rng(seed)
    values = rng.lognormal(mean=11.5, sigma=1.8, size=n).astype(np.int64)
    return np.clip(values, 1, HIGHEST_TRACKABLE_NS)


def both(values: npt.NDArray[np.int64]) -> tuple[Histogram, HdrHistogram]:
    ours, hdr = Histogram(), reference()
    ours.record_many(values)
    for value in values.tolist():
        hdr.record_value(value)
    return ours, hdr


def probe_values() -> list[int]:
    powers = [1 << k for k in range(36)]
    around = [p + d for p in powers for d in (-1, 0, 1)]
    rng = np.random.default_rng(3)
    randoms = rng.integers(0, HIGHEST_TRACKABLE_NS + 1, 500).tolist()
    small = rng.integers(0, 10_000, 500).tolist()
    edges = [0, 1, 2047, 2048, 2049, 4095, 4096, 1_000_000, HIGHEST_TRACKABLE_NS]
    return sorted({v for v in edges + around + randoms + small if 0 <= v <= HIGHEST_TRACKABLE_NS})


# -- layout and index arithmetic ---------------------------------------------------------


def test_layout_equals_hdrhistogram_for_1ns_to_60s_at_3_figures() -> None:
    hdr = reference()
    assert (BUCKET_COUNT, COUNTS_LEN, SUB_BUCKET_COUNT) == (26, 27 * 1024, 2048)
    assert hdr.bucket_count == BUCKET_COUNT
    assert hdr.counts_len == COUNTS_LEN
    assert hdr.sub_bucket_count == SUB_BUCKET_COUNT
    assert hdr.unit_magnitude == 0
    assert Histogram().counts.shape == (COUNTS_LEN,)


def test_counts_index_and_equivalent_values_equal_hdrh() -> None:
    hdr = reference()
    for value in probe_values():
        assert counts_index_for(value) == hdr.get_counts_array_index(value), value
        assert lowest_equivalent_value(value) == hdr.get_lowest_equivalent_value(value), value
        assert highest_equivalent_value(value) == hdr.get_highest_equivalent_value(value), value
        assert median_equivalent_value(value) == hdr._hdr_median_equiv_value(value), value


def test_value_from_index_equals_hdrh_for_every_index() -> None:
    hdr = reference()
    assert [value_from_index(i) for i in range(COUNTS_LEN)] == [
        hdr.get_value_from_index(i) for i in range(COUNTS_LEN)
    ]


def test_vectorized_indexes_equal_scalar_indexes() -> None:
    values = probe_values()
    expected = [counts_index_for(v) for v in values]
    assert counts_indexes(np.array(values, dtype=np.int64)).tolist() == expected


def test_index_of_highest_trackable_value_fits_the_counts_array() -> None:
    assert counts_index_for(2047) == 2047
    assert counts_index_for(2048) == 2048
    assert counts_index_for(2049) == 2048  # 2048 and 2049 share a 2-ns bucket
    assert MAX_INDEX == 25 * 1024 + (HIGHEST_TRACKABLE_NS >> 25) < COUNTS_LEN


def test_counts_index_for_rejects_negative_values() -> None:
    with pytest.raises(ValueError, match="negative"):
        counts_index_for(-1)


# -- recording ---------------------------------------------------------------------------


def test_record_many_equals_repeated_record_for_every_input_kind() -> None:
    values = [*latencies(2_000).tolist(), 0, 1, 2047, 2048, HIGHEST_TRACKABLE_NS]
    one_by_one = Histogram()
    for value in values:
        one_by_one.record(value)
    inputs = [
        array.array("q", values),
        np.array(values, dtype=np.int64),
        values,
        np.array(values, dtype=np.uint64),
        array.array("l", values),
    ]
    for batch in inputs:
        bulk = Histogram()
        bulk.record_many(batch)
        assert bulk == one_by_one
        assert (bulk.min_ns, bulk.max_ns, bulk.sum_ns) == (0, HIGHEST_TRACKABLE_NS, sum(values))
        assert bulk.total_count == len(values)


def test_record_many_across_blocks_keeps_exact_totals() -> None:
    values = latencies(100_003, seed=11)
    hist = Histogram()
    hist.record_many(values)
    assert hist.total_count == 100_003 == int(hist.counts.sum())
    assert hist.sum_ns == int(values.sum())
    assert (hist.min_ns, hist.max_ns) == (int(values.min()), int(values.max()))
    assert hist.exact_mean_ns() == pytest.approx(float(values.mean()), rel=1e-12)


def test_record_many_does_not_pin_the_array_buffer() -> None:
    buffer = array.array("q", [100, 200, 300])
    Histogram().record_many(buffer)
    del buffer[:]  # raises BufferError if a numpy view outlived record_many
    buffer.append(5)
    assert buffer.tolist() == [5]


def test_record_many_rejects_non_integer_values() -> None:
    hist = Histogram()
    with pytest.raises(TypeError, match="integers"):
        hist.record_many(np.array([1.5, 2.0]))
    with pytest.raises(TypeError, match="integers"):
        hist.record_many(array.array("d", [1.0]))
    assert hist.total_count == 0


def test_record_count_argument_records_that_many() -> None:
    weighted, repeated = Histogram(), Histogram()
    weighted.record(1_500, count=5)
    weighted.record(9, count=0)
    for _ in range(5):
        repeated.record(1_500)
    assert weighted == repeated
    assert (weighted.total_count, weighted.sum_ns, weighted.min_ns) == (5, 7_500, 1_500)
    with pytest.raises(ValueError, match="count"):
        weighted.record(1, count=-1)


def test_out_of_range_values_are_clamped_recorded_and_counted() -> None:
    hist = Histogram()
    hist.record(-5)
    hist.record(HIGHEST_TRACKABLE_NS + 1)
    hist.record_many(np.array([-1, 70_000_000_000, 5, HIGHEST_TRACKABLE_NS], dtype=np.int64))
    hist.record_many(np.array([2**64 - 1], dtype=np.uint64))
    assert hist.out_of_range == 5
    assert hist.total_count == 7
    # max is the largest value given (70 s), clipped or not: never below a percentile
    assert (hist.min_ns, hist.max_ns) == (0, 70_000_000_000)
    assert hist.counts[0] == 2
    assert hist.counts[5] == 1
    assert hist.counts[MAX_INDEX] == 4
    assert hist.sum_ns == 4 * HIGHEST_TRACKABLE_NS + 5
    assert hist.value_at_percentile(100) == highest_equivalent_value(HIGHEST_TRACKABLE_NS)


def test_empty_histogram_reports_zeros() -> None:
    hist = Histogram()
    hist.record_many(array.array("q"))
    hist.record_many([])
    hist.record_many(np.empty(0, dtype=np.int64))
    assert hist.total_count == hist.min_ns == hist.max_ns == hist.sum_ns == 0
    assert hist.percentiles(PERCENTILES) == dict.fromkeys(PERCENTILES, 0)
    assert hist.mean_ns() == hist.stddev_ns() == hist.exact_mean_ns() == 0.0
    assert hist.to_sparse() == ([], [])
    assert Histogram.decode(hist.encode()) == hist
    assert HdrHistogram.decode(hist.encode_base64()).get_total_count() == 0


# -- statistics --------------------------------------------------------------------------


def test_percentiles_equal_hdrh_value_at_percentile() -> None:
    # 20_000 samples: p/100 * n is a whole number for every p below, where HdrHistogram's
    # round-half-up (hdrh) and ceil (Java, ours) ranks agree.
    ours, hdr = both(latencies(20_000))
    expected = {p: hdr.get_value_at_percentile(p) for p in PERCENTILES}
    assert ours.percentiles(PERCENTILES) == expected
    assert {p: ours.value_at_percentile(p) for p in PERCENTILES} == expected
    assert expected[100.0] == highest_equivalent_value(ours.max_ns)
    assert expected[0.0] == lowest_equivalent_value(ours.min_ns)


def test_percentile_rank_is_ceil_of_the_decimal_percentile() -> None:
    # 10 samples at p94: ceil(9.4) = 10th sample (Java HdrHistogram, numpy inverted_cdf);
    # hdrh rounds 9.4 down to the 9th. 1000 samples at p99.9: exactly the 999th sample,
    # though 99.9 / 100 * 1000 evaluates to 999.0000000000001 in floating point.
    ten = Histogram()
    ten.record_many(np.arange(1, 11) * 10_000)
    assert ten.value_at_percentile(94) == highest_equivalent_value(100_000)
    assert np.percentile(np.arange(1, 11) * 10_000, 94, method="inverted_cdf") == 100_000
    thousand = Histogram()
    thousand.record_many(np.arange(1, 1001) * 1_000)
    assert thousand.value_at_percentile(99.9) == highest_equivalent_value(999_000)
    assert thousand.value_at_percentile(99.95) == highest_equivalent_value(1_000_000)


@pytest.mark.parametrize("bad", [-0.1, 100.5, math.nan, math.inf])
def test_percentile_outside_0_to_100_is_rejected(bad: float) -> None:
    hist = Histogram()
    hist.record(10)
    with pytest.raises(ValueError, match="percentile"):
        hist.value_at_percentile(bad)


def test_mean_and_stddev_equal_hdrh() -> None:
    ours, hdr = both(latencies(5_000, seed=5))
    assert ours.mean_ns() == pytest.approx(hdr.get_mean_value(), rel=1e-12)
    assert ours.stddev_ns() == pytest.approx(hdr.get_stddev(), rel=1e-9)
    exact = float(latencies(5_000, seed=5).mean())
    assert ours.exact_mean_ns() == pytest.approx(exact, rel=1e-12)
    assert ours.mean_ns() == pytest.approx(exact, rel=1e-3)


# -- combining ---------------------------------------------------------------------------


def test_merge_adds_counts_and_combines_scalars() -> None:
    first, second = Histogram(), Histogram()
    first.record_many([10, 20, -3])
    second.record_many([5, 70_000_000_000])
    first.merge(second)
    first.merge(Histogram())
    assert first.total_count == 5
    assert (first.min_ns, first.max_ns) == (0, 70_000_000_000)
    assert first.out_of_range == 2
    assert first.sum_ns == 35 + HIGHEST_TRACKABLE_NS
    everything = Histogram()
    everything.record_many([10, 20, -3, 5, 70_000_000_000])
    assert first == everything


def test_merging_into_an_empty_histogram_takes_the_other_min() -> None:
    empty, other = Histogram(), Histogram()
    other.record(5_000)
    empty.merge(other)
    assert (empty.min_ns, empty.max_ns) == (5_000, 5_000)


def test_merged_and_copy_are_independent_of_their_sources() -> None:
    parts = [Histogram() for _ in range(3)]
    for i, part in enumerate(parts):
        part.record_many(latencies(100, seed=i))
    total = Histogram.merged(parts)
    assert total.total_count == 300
    assert Histogram.merged([]) == Histogram()
    clone = total.copy()
    clone.record(1)
    assert clone.total_count == 301
    assert total.total_count == 300


def test_subtract_leaves_the_delta_since_a_copy() -> None:
    earlier_values, later_values = latencies(500, seed=1), latencies(300, seed=2)
    cumulative = Histogram()
    cumulative.record_many(earlier_values)
    snapshot = cumulative.copy()
    cumulative.record_many(later_values)
    cumulative.subtract(snapshot)
    later = Histogram()
    later.record_many(later_values)
    assert cumulative == later
    assert cumulative.sum_ns == later.sum_ns
    # min/max of a delta are bounds at bucket resolution around the true extremes
    assert lowest_equivalent_value(later.min_ns) <= cumulative.min_ns <= later.min_ns
    assert later.max_ns <= cumulative.max_ns <= highest_equivalent_value(later.max_ns)


def test_subtract_rejects_a_histogram_that_is_not_contained() -> None:
    small, large = Histogram(), Histogram()
    small.record(10)
    large.record_many([10, 20])
    with pytest.raises(ValueError, match="contained"):
        small.subtract(large)
    large.subtract(large.copy())
    assert large == Histogram()
    assert (large.min_ns, large.max_ns, large.sum_ns) == (0, 0, 0)


def test_equality_compares_the_distribution() -> None:
    first, second = Histogram(), Histogram()
    first.record(100)
    assert first != second
    second.record(100)
    assert first == second
    assert first != "histogram"


# -- compact form and pickling -----------------------------------------------------------


def test_to_sparse_lists_non_empty_buckets() -> None:
    hist = Histogram()
    hist.record_many([3, 3, 2048, 2049, 5_000_000])
    indexes, counts = hist.to_sparse()
    assert indexes == [3, 2048, counts_index_for(5_000_000)]
    assert counts == [2, 2, 1]
    rebuilt = Histogram.from_sparse(indexes, counts)
    assert rebuilt == hist
    assert rebuilt.min_ns == 3
    assert rebuilt.max_ns == highest_equivalent_value(5_000_000)


def test_from_sparse_rejects_invalid_input() -> None:
    with pytest.raises(ValueError, match="same length"):
        Histogram.from_sparse([1, 2], [1])
    with pytest.raises(ValueError, match="indexes"):
        Histogram.from_sparse([MAX_INDEX + 1], [1])  # above 60 s: recording cannot get there
    with pytest.raises(ValueError, match="indexes"):
        Histogram.from_sparse([-1], [1])
    with pytest.raises(ValueError, match="counts"):
        Histogram.from_sparse([1], [-1])
    with pytest.raises(ValueError, match="64 bits"):
        Histogram.from_sparse([1, 2], [2**62, 2**62])


def test_pickle_round_trip_is_small_and_exact() -> None:
    hist = Histogram()
    hist.record_many(latencies(1_000))
    hist.record(-1)
    data = pickle.dumps(hist)
    assert len(data) < 20_000
    restored = pickle.loads(data)
    assert restored == hist
    assert (restored.min_ns, restored.max_ns, restored.sum_ns, restored.out_of_range) == (
        hist.min_ns,
        hist.max_ns,
        hist.sum_ns,
        hist.out_of_range,
    )
    assert len(pickle.dumps(Histogram())) < 200


def test_an_unpickled_histogram_stays_sparse_until_its_counts_are_read() -> None:
    """The coordinator holds its workers' snapshots all run: each histogram as the few
    buckets it arrived as, merged into another bucket by bucket, the same sums."""
    a, b = Histogram(), Histogram()
    a.record_many(latencies(2_000))
    b.record_many(latencies(3_000) * 7)
    b.record(70_000_000_000)  # clipped: out of range
    restored_a, restored_b = pickle.loads(pickle.dumps(a)), pickle.loads(pickle.dumps(b))
    assert restored_a._counts is None and restored_b._counts is None
    merged = Histogram.merged([restored_a, restored_b])
    assert restored_a._counts is None and restored_b._counts is None  # read, not made dense
    expected = Histogram.merged([a, b])
    assert merged == expected
    assert (merged.min_ns, merged.max_ns, merged.sum_ns, merged.out_of_range) == (
        expected.min_ns,
        expected.max_ns,
        expected.sum_ns,
        expected.out_of_range,
    )
    assert merged.value_at_percentile(99.9) == expected.value_at_percentile(99.9)
    assert np.array_equal(restored_b.counts, b.counts) and restored_b._counts is not None
    for doubled in (restored_a.copy(), pickle.loads(pickle.dumps(a))):  # dense, sparse
        doubled.merge(doubled)  # itself
        assert doubled.total_count == 2 * a.total_count
        assert np.array_equal(doubled.counts, 2 * a.counts)


def test_sparse_histograms_merge_bucket_by_bucket_as_dense_ones_do() -> None:
    """Merged over the span of buckets they use: overlapping and apart, with an empty one,
    and one alone (a copy: the sum's arrays are not its part's)."""
    parts = [Histogram() for _ in range(4)]
    parts[0].record_many([5, 5, 1_000, 70_000])
    parts[1].record_many([1_000, 1_000, 2_000_000, 59_000_000_000])
    parts[2].record_many([7] * 3 + [123_456_789])
    sparse = [pickle.loads(pickle.dumps(h)) for h in parts]  # parts[3] empty
    assert all(h._counts is None for h in sparse)
    merged = Histogram.merged(sparse)
    assert merged._counts is None and merged == Histogram.merged(parts)
    assert merged.total_count == 12 and int(merged.counts[merged.counts.nonzero()].sum()) == 12
    alone = Histogram.merged([sparse[1]])
    assert alone._sparse is not None and sparse[1]._sparse is not None
    assert alone._sparse[1] is not sparse[1]._sparse[1]
    assert alone == parts[1]  # (reading its counts makes it dense)
    assert Histogram.merged([sparse[3]]) == Histogram()


def test_pickle_keeps_counts_beyond_32_bits_and_a_total_beyond_int64_sums() -> None:
    hist = Histogram()
    hist.record_many(latencies(100))
    hist.counts[100] += 1 << 40
    hist.total_count += 1 << 40
    restored = pickle.loads(pickle.dumps(hist))
    assert restored == hist
    assert restored.total_count == hist.total_count
    for top in (255, 256, 65_536, 1 << 32, (1 << 62) - 1):  # each width's edge
        edge = Histogram()
        edge.counts[7] = top
        edge.total_count = top
        assert pickle.loads(pickle.dumps(edge)).counts[7] == top


@pytest.mark.parametrize(
    ("indexes", "counts", "message"),
    [
        (np.array([1, 2], np.uint16), b"\x01\x00\x00\x01\x00\x00", "same length"),
        (np.array([1, 2], np.uint16), b"\x01\x00\x00", "same length"),
        (b"\x01\x00\x02", b"\x01\x01", "same length"),
        (np.array([2, 1], np.uint16), np.array([1, 1], np.uint8), "ascending"),
        (np.array([1, 1], np.uint16), np.array([1, 1], np.uint8), "ascending"),
        (np.array([60_000], np.uint16), np.array([1], np.uint8), "ascending"),
        (np.array([1], np.uint16), np.array([-1], np.int64), ">= 0"),
    ],
)
def test_unpickling_refuses_a_damaged_state(indexes: Any, counts: Any, message: str) -> None:
    state = (2, bytes(indexes), bytes(counts), 0, 0, 0, 0)
    with pytest.raises(ValueError, match=message):
        Histogram().__setstate__(state)


# -- V2 wire format ----------------------------------------------------------------------


def test_our_encoding_decodes_in_hdrh_to_the_same_histogram() -> None:
    ours = Histogram()
    ours.record_many(latencies(3_000))
    decoded = HdrHistogram.decode(ours.encode_base64())
    assert (reference_counts(decoded) == ours.counts).all()
    assert decoded.get_total_count() == ours.total_count
    assert {p: decoded.get_value_at_percentile(p) for p in PERCENTILES} == ours.percentiles(
        PERCENTILES
    )
    assert base64.b64decode(ours.encode_base64()) == ours.encode()


def test_hdrh_encoding_decodes_to_the_same_histogram() -> None:
    ours, hdr = both(latencies(3_000, seed=9))
    encoded = hdr.encode()
    for data in (encoded, encoded.decode("ascii"), base64.b64decode(encoded)):
        decoded = Histogram.decode(data)
        assert (decoded.counts == reference_counts(hdr)).all()
        assert decoded == ours
        assert decoded.percentiles(PERCENTILES) == ours.percentiles(PERCENTILES)
        assert decoded.min_ns == lowest_equivalent_value(ours.min_ns)
        assert decoded.out_of_range == 0


def test_encoding_carries_the_standard_v2_header() -> None:
    hist = Histogram()
    hist.record_many([1, 1, 5, 3_000_000])
    encoded = hist.encode()
    cookie, length = struct.unpack_from(">Ii", encoded)
    assert cookie == 0x1C849314  # V2 compressed base 0x1c849304, word-size nibble 1
    assert length == len(encoded) - 8
    payload = zlib.decompress(encoded[8:])
    header = struct.unpack_from(">Iiiiqqd", payload)
    assert header == (0x1C849313, len(payload) - 40, 0, 3, 1, HIGHEST_TRACKABLE_NS, 1.0)
    # counts: 0 (one zero), 2, -3 (three zeros), 1, run of zeros, 1; ZigZag: 2n or -2n-1
    assert payload[40:44] == bytes([0, 4, 5, 2])
    assert Histogram.decode(payload) == hist  # the uncompressed form is accepted too


def test_counts_needing_nine_byte_varints_round_trip() -> None:
    hist = Histogram()
    hist.record(7, count=1 << 62)  # ZigZag word 2**63: the 9th byte carries the top bit
    hist.record(9, count=(1 << 55) + 3)
    decoded = Histogram.decode(hist.encode())
    assert decoded == hist
    assert int(decoded.counts[7]) == 1 << 62


def test_decode_clamps_counts_above_60s_into_the_top_bucket() -> None:
    wide = HdrHistogram(1, 3_600_000_000_000, 3)
    wide.record_value(100)
    wide.record_value(100_000_000_000, 3)
    decoded = Histogram.decode(wide.encode())
    assert decoded.total_count == 4
    assert decoded.out_of_range == 3
    assert decoded.counts[MAX_INDEX] == 3
    assert decoded.max_ns == HIGHEST_TRACKABLE_NS


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "shorter"),
        (b"not base64 !!", "base64"),
        (base64.b64encode(b"\x00\x00\x00\x00junk"), "cookie"),
        (struct.pack(">Ii", 0x1C849314, 99) + b"xx", "length"),
        (struct.pack(">Ii", 0x1C849314, 2) + b"xx", "inflate"),
        (struct.pack(">Ii", 0x1C849313, 0), "header"),
    ],
)
def test_decode_rejects_malformed_input(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Histogram.decode(data)


def _payload(counts_bytes: bytes, *, figures: int = 3, declared: int | None = None) -> bytes:
    length = len(counts_bytes) if declared is None else declared
    header = struct.pack(">Iiiiqqd", 0x1C849313, length, 0, figures, 1, HIGHEST_TRACKABLE_NS, 1.0)
    compressed = zlib.compress(header + counts_bytes)
    return struct.pack(">Ii", 0x1C849314, len(compressed)) + compressed


def test_decode_rejects_streams_that_do_not_fit_the_layout() -> None:
    with pytest.raises(ValueError, match="incompatible"):
        Histogram.decode(HdrHistogram(1, HIGHEST_TRACKABLE_NS, 2).encode())
    with pytest.raises(ValueError, match="incompatible"):
        Histogram.decode(_payload(b"", figures=4))
    with pytest.raises(ValueError, match="zero run"):
        Histogram.decode(_payload(bytes([0xFF, 0xFF, 0x7F])))  # -1_048_576 zeros
    with pytest.raises(ValueError, match="longer than"):
        Histogram.decode(_payload(bytes([0x02]) * (COUNTS_LEN + 1)))
    with pytest.raises(ValueError, match="inside a varint"):
        Histogram.decode(_payload(bytes([0x02, 0x80])))
    with pytest.raises(ValueError, match="payload length"):
        Histogram.decode(_payload(b"\x02", declared=5))


def test_clipped_values_keep_their_size_in_max_above_every_percentile() -> None:
    # A drain whose messages were 94-105 s old: every value beyond the 60 s range.
    ages = np.arange(94_000_000_000, 105_000_000_001, 1_000_000_000, dtype=np.int64)
    bulk, single = Histogram(), Histogram()
    bulk.record_many(ages)
    for age in ages.tolist():
        single.record(age)
    for hist in (bulk, single):
        assert hist.out_of_range == hist.total_count == len(ages)
        assert hist.max_ns == 105_000_000_000
        assert hist.max_ns >= max(hist.percentiles(PERCENTILES).values())
    later = bulk.copy()
    later.record(1_000)
    later.subtract(bulk)  # a delta whose top bucket held clipped values keeps the max bound
    assert later.max_ns == 1_000 and later.out_of_range == 0
    both = bulk.copy()
    both.record(2_000)
    both.subtract(Histogram())
    assert both.max_ns == 105_000_000_000


def test_from_buckets_takes_non_empty_buckets_and_refuses_what_does_not_fit() -> None:
    """The compiled pumps hand over only the non-empty buckets (int64 bytes)."""
    from array import array

    from kvbench.metrics.histogram import COUNTS_LEN

    dense = Histogram()
    for value in (5, 5, 1_000, 2_000_000):
        dense.record(value)
    indexes = [i for i, n in enumerate(dense.counts) if n]
    counts = [int(dense.counts[i]) for i in indexes]
    made = Histogram.from_buckets(
        array("q", indexes).tobytes(), array("q", counts).tobytes(), 4, 5, 2_000_000, 2_001_010
    )
    assert list(made.counts) == list(dense.counts)
    assert made.value_at_percentile(50) == dense.value_at_percentile(50) and made.total_count == 4
    with pytest.raises(ValueError, match="same length"):
        Histogram.from_buckets(array("q", [1]).tobytes(), b"", 1, 1, 1, 1)
    with pytest.raises(ValueError, match="outside"):
        Histogram.from_buckets(
            array("q", [COUNTS_LEN]).tobytes(), array("q", [1]).tobytes(), 1, 1, 1, 1
        )


def test_a_merge_of_unpickled_histograms_is_held_as_compactly_as_they_are() -> None:
    """The coordinator holds an interval's merge until the run ends: 2-byte indexes and
    the narrowest counts, as an unpickled histogram's, not 16 bytes a bucket (~300 KB a
    second of a 2-worker run). The figures are the same as a dense merge's."""
    rng = np.random.default_rng(7)
    parts = []
    for _ in range(2):
        h = Histogram()
        h.record_many(rng.integers(20_000, 2_000_000, 50_000))
        parts.append(pickle.loads(pickle.dumps(h)))
    merged = Histogram.merged(parts)
    assert merged._sparse is not None
    indexes, counts = merged._sparse
    assert indexes.dtype == np.uint16 and counts.dtype.itemsize < 8
    dense = Histogram()
    for part in parts:
        dense.merge(part)
    assert merged == dense and merged.total_count == 100_000
    assert merged.percentiles([50, 99, 99.9]) == dense.percentiles([50, 99, 99.9])
    assert merged.mean_ns() == dense.mean_ns() and merged.stddev_ns() == dense.stddev_ns()
