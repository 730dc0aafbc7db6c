"""Histogram laws under hypothesis: merging, percentile precision, lossless round trips."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.metrics.histogram import HIGHEST_TRACKABLE_NS, Histogram, counts_index_for

SETTINGS = settings(max_examples=100, deadline=None)

# Small values exercise the 1-ns buckets, wide ones the log buckets, and the outer ones
# the clamping of negative and too-large values.
any_values = st.lists(
    st.one_of(
        st.integers(0, 4_096),
        st.integers(0, HIGHEST_TRACKABLE_NS),
        st.integers(-1_000, 2 * HIGHEST_TRACKABLE_NS),
    ),
    max_size=200,
)
positive_values = st.lists(
    st.one_of(st.integers(1, 100_000), st.integers(1, HIGHEST_TRACKABLE_NS)),
    min_size=1,
    max_size=300,
)
# Percentiles 100 * m / 1024 are exact in binary, and so is p / 100: numpy's float rank
# then equals the exact ceil(p / 100 * n) that Histogram uses, so the two pick the same
# sample and only bucket precision separates them.
dyadic_percentiles = st.integers(0, 1024).map(lambda m: 100 * m / 1024)


def histogram_of(values: list[int]) -> Histogram:
    hist = Histogram()
    hist.record_many(np.array(values, dtype=np.int64))
    return hist


def state(hist: Histogram) -> tuple[list[int], list[int], int, int, int, int, int]:
    indexes, counts = hist.to_sparse()
    return (
        indexes,
        counts,
        hist.total_count,
        hist.min_ns,
        hist.max_ns,
        hist.sum_ns,
        hist.out_of_range,
    )


@SETTINGS
@given(any_values, any_values)
def test_merge_is_commutative(a: list[int], b: list[int]) -> None:
    ab, ba = histogram_of(a), histogram_of(b)
    ab.merge(histogram_of(b))
    ba.merge(histogram_of(a))
    assert state(ab) == state(ba)


@SETTINGS
@given(any_values, any_values, any_values)
def test_merge_is_associative(a: list[int], b: list[int], c: list[int]) -> None:
    left = Histogram.merged([Histogram.merged([histogram_of(a), histogram_of(b)]), histogram_of(c)])
    right = Histogram.merged(
        [histogram_of(a), Histogram.merged([histogram_of(b), histogram_of(c)])]
    )
    assert state(left) == state(right)


@SETTINGS
@given(st.lists(any_values, max_size=5))
def test_merge_equals_recording_the_concatenation(parts: list[list[int]]) -> None:
    merged = Histogram.merged(histogram_of(part) for part in parts)
    concatenated = histogram_of([value for part in parts for value in part])
    assert state(merged) == state(concatenated)
    one_by_one = Histogram()
    for value in (value for part in parts for value in part):
        one_by_one.record(value)
    assert state(one_by_one) == state(concatenated)


@SETTINGS
@given(positive_values, st.lists(dyadic_percentiles, min_size=1, max_size=5))
def test_percentile_error_is_within_three_significant_digits(
    values: list[int], percentiles: list[float]
) -> None:
    hist = histogram_of(values)
    found = hist.percentiles(percentiles)
    for p in percentiles:
        truth = int(np.percentile(np.array(values), p, method="inverted_cdf"))
        assert abs(found[p] - truth) <= truth * 0.001 + 1, (p, truth, found[p])
        assert found[p] == hist.value_at_percentile(p)
    assert hist.value_at_percentile(100) >= max(values)
    assert hist.value_at_percentile(0) <= min(values)


@SETTINGS
@given(any_values)
def test_sparse_form_and_pickle_round_trip_exactly(values: list[int]) -> None:
    hist = histogram_of(values)
    indexes, counts = hist.to_sparse()
    rebuilt = Histogram.from_sparse(
        indexes,
        counts,
        min_ns=hist.min_ns,
        max_ns=hist.max_ns,
        sum_ns=hist.sum_ns,
        out_of_range=hist.out_of_range,
    )
    assert state(rebuilt) == state(hist)
    assert state(pickle.loads(pickle.dumps(hist))) == state(hist)


@SETTINGS
@given(any_values)
def test_encode_decode_round_trips_the_counts(values: list[int]) -> None:
    hist = histogram_of(values)
    for decoded in (Histogram.decode(hist.encode()), Histogram.decode(hist.encode_base64())):
        assert decoded == hist
        assert decoded.to_sparse() == hist.to_sparse()
        assert decoded.percentiles([0, 50, 99.9, 100]) == hist.percentiles([0, 50, 99.9, 100])


@SETTINGS
@given(
    st.dictionaries(
        st.integers(0, counts_index_for(HIGHEST_TRACKABLE_NS)),
        st.one_of(st.integers(1, 3), st.integers(1, 2**56)),
        max_size=60,
    )
)
def test_encode_decode_round_trips_arbitrary_counts(buckets: dict[int, int]) -> None:
    hist = Histogram.from_sparse(sorted(buckets), [buckets[i] for i in sorted(buckets)])
    decoded = Histogram.decode(hist.encode())
    assert decoded.to_sparse() == hist.to_sparse()


@SETTINGS
@given(st.lists(any_values, max_size=5), st.lists(dyadic_percentiles, min_size=1, max_size=5))
def test_merging_unpickled_histograms_stays_sparse_and_exact(
    parts: list[list[int]], percentiles: list[float]
) -> None:
    """The coordinator's merge of its workers' (unpickled, sparse) histograms keeps sparse
    buckets, and every figure read from them is the dense merge's: buckets, count, min,
    max, sum, out-of-range, percentiles, mean and standard deviation."""
    dense = Histogram.merged(histogram_of(values) for values in parts)
    sparse = Histogram.merged(pickle.loads(pickle.dumps(histogram_of(v))) for v in parts)
    assert sparse._counts is None or not parts  # (no part: an empty dense histogram)
    assert state(sparse) == state(dense)
    assert sparse.percentiles(percentiles) == dense.percentiles(percentiles)
    # (sums of floats over the non-empty buckets, not all: equal but for rounding)
    assert sparse.mean_ns() == pytest.approx(dense.mean_ns(), rel=1e-12)
    assert sparse.stddev_ns() == pytest.approx(dense.stddev_ns(), rel=1e-9, abs=1e-6)
    assert sparse == dense
