"""HdrHistogram-compatible log-linear histogram of integer nanosecond values.

Bucket layout, percentile semantics and the compressed V2 wire encoding are HdrHistogram's
(1 ns .. 60 s, 3 significant figures), so counts interoperate with the HdrHistogram tools.
Imports only the standard library, numpy and ``kvbench.errors``; no I/O, no clock.
"""

from __future__ import annotations

import array
import base64
import binascii
import math
import operator
import struct
import zlib
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "COUNTS_LEN",
    "HIGHEST_TRACKABLE_NS",
    "LOWEST_DISCERNIBLE_NS",
    "SIGNIFICANT_FIGURES",
    "Histogram",
    "counts_index_for",
    "counts_indexes",
    "highest_equivalent_value",
    "lowest_equivalent_value",
    "median_equivalent_value",
    "value_from_index",
]

Int64Array = npt.NDArray[np.int64]


def _layout(lowest: int, highest: int, significant_figures: int) -> tuple[int, int, int, int]:
    """HdrHistogram's layout: (unit_magnitude, sub_bucket_half_count_magnitude, buckets, len)."""
    if lowest < 1 or highest < 2 * lowest or not 1 <= significant_figures <= 5:
        raise ValueError(
            f"invalid histogram parameters: lowest={lowest} highest={highest} "
            f"significant_figures={significant_figures}"
        )
    unit_magnitude = lowest.bit_length() - 1  # floor(log2(lowest))
    largest_single_unit = 2 * 10**significant_figures
    sub_bucket_count_magnitude = (largest_single_unit - 1).bit_length()  # ceil(log2(...))
    half_magnitude = max(sub_bucket_count_magnitude - 1, 0)
    sub_bucket_count = 1 << (half_magnitude + 1)
    smallest_untrackable = sub_bucket_count << unit_magnitude
    buckets = 1
    while smallest_untrackable <= highest:
        if smallest_untrackable > (1 << 62):  # Java's "Long.MAX_VALUE / 2" guard
            buckets += 1
            break
        smallest_untrackable <<= 1
        buckets += 1
    return unit_magnitude, half_magnitude, buckets, (buckets + 1) << half_magnitude


# DESIGN.md section 3: 1 us .. 60 s at >= 3 significant digits; we track from 1 ns.
LOWEST_DISCERNIBLE_NS: Final = 1
HIGHEST_TRACKABLE_NS: Final = 60_000_000_000
SIGNIFICANT_FIGURES: Final = 3
UNIT_MAGNITUDE, SUB_BUCKET_HALF_COUNT_MAGNITUDE, BUCKET_COUNT, COUNTS_LEN = _layout(
    LOWEST_DISCERNIBLE_NS, HIGHEST_TRACKABLE_NS, SIGNIFICANT_FIGURES
)  # (0, 10, 26, 27648)
SUB_BUCKET_HALF_COUNT: Final = 1 << SUB_BUCKET_HALF_COUNT_MAGNITUDE
SUB_BUCKET_COUNT: Final = 2 * SUB_BUCKET_HALF_COUNT
SUB_BUCKET_MASK: Final = (SUB_BUCKET_COUNT - 1) << UNIT_MAGNITUDE
# index = ((bucket + 1) << half_mag) + sub_bucket - half_count, with bucket = shift - unit_mag
# and sub_bucket = value >> shift, simplifies to (shift << half_mag) + (value >> shift) + bias.
_INDEX_BIAS: Final = -UNIT_MAGNITUDE * SUB_BUCKET_HALF_COUNT
_SHIFT_BASE: Final = SUB_BUCKET_HALF_COUNT_MAGNITUDE + 1

# Wire format constants: HdrHistogram Java AbstractHistogram / HdrHistogram_c hdr_histogram_log.c.
# The 0x10 in the word-size nibble marks V2's ZigZag-LEB128 counts ("TLZE" encoding).
_V2_ENCODING_COOKIE_BASE: Final = 0x1C849303
_V2_COMPRESSED_COOKIE_BASE: Final = 0x1C849304
_V2_ENCODING_COOKIE: Final = _V2_ENCODING_COOKIE_BASE | 0x10
_V2_COMPRESSED_COOKIE: Final = _V2_COMPRESSED_COOKIE_BASE | 0x10
_V2_HEADER: Final = struct.Struct(">Iiiiqqd")  # 40 bytes
_COMPRESSED_HEADER: Final = struct.Struct(">Ii")
# Bound on an inflated payload: header plus 9 bytes per counter of the largest layout
# (unit magnitude 0, 3 figures, highest 2**63 - 1 gives 56_320 counters), rounded up.
_MAX_PAYLOAD_BYTES: Final = 1 << 20
_VARINT_THRESHOLDS: Final = np.array([1 << (7 * k) for k in range(1, 9)], dtype=np.uint64)
# record_many works in cache-sized blocks: temporaries the size of a 100k batch cost
# ~10x more (page faults on fresh allocations: indexing 100k values took 1.4 ms whole,
# 0.14 ms in 16k blocks, numpy 2.4 on this 2-core VM).
_BLOCK_VALUES: Final = 1 << 14
_STATE_VERSION: Final = 2


def counts_index_for(value_ns: int) -> int:
    """Return HdrHistogram's counts-array index for a value (``countsArrayIndex``).

    Raises:
        ValueError: if the value is negative.
    """
    if value_ns < 0:
        raise ValueError(f"histogram values cannot be negative: {value_ns}")
    shift = (value_ns | SUB_BUCKET_MASK).bit_length() - _SHIFT_BASE
    return (shift << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + (value_ns >> shift) + _INDEX_BIAS


def counts_indexes(values_ns: Int64Array) -> Int64Array:
    """Vectorized :func:`counts_index_for` for values in ``[0, 2**53)``.

    The bit length comes from ``np.frexp``'s exponent, exact for integers below 2**53.
    """
    _, exponent = np.frexp((values_ns | SUB_BUCKET_MASK).astype(np.float64))
    shift = exponent.astype(np.int64) - _SHIFT_BASE
    indexes: Int64Array = (shift << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + (values_ns >> shift)
    if _INDEX_BIAS:
        indexes += _INDEX_BIAS
    return indexes


def value_from_index(index: int) -> int:
    """Return the lowest value that maps to counts-array ``index`` (``valueFromIndex``)."""
    bucket = (index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) - 1
    sub_bucket = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT
    if bucket < 0:
        sub_bucket -= SUB_BUCKET_HALF_COUNT
        bucket = 0
    return sub_bucket << (bucket + UNIT_MAGNITUDE)


def _equivalent_range(value_ns: int) -> tuple[int, int]:
    """(lowest equivalent value, size of the equivalent range) of a non-negative value."""
    shift = (value_ns | SUB_BUCKET_MASK).bit_length() - _SHIFT_BASE
    return (value_ns >> shift) << shift, 1 << shift


def lowest_equivalent_value(value_ns: int) -> int:
    """Return the smallest value sharing ``value_ns``'s bucket."""
    return _equivalent_range(value_ns)[0]


def highest_equivalent_value(value_ns: int) -> int:
    """Return the largest value sharing ``value_ns``'s bucket."""
    lowest, size = _equivalent_range(value_ns)
    return lowest + size - 1


def median_equivalent_value(value_ns: int) -> int:
    """Return the middle of ``value_ns``'s bucket, as HdrHistogram's mean uses it."""
    lowest, size = _equivalent_range(value_ns)
    return lowest + (size >> 1)


def _index_tables() -> tuple[Int64Array, Int64Array]:
    index = np.arange(COUNTS_LEN, dtype=np.int64)
    bucket = (index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) - 1
    sub_bucket = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT
    sub_bucket = np.where(bucket < 0, sub_bucket - SUB_BUCKET_HALF_COUNT, sub_bucket)
    shift = np.maximum(bucket, 0) + UNIT_MAGNITUDE
    return sub_bucket << shift, np.left_shift(1, shift)


# Per index: lowest, highest and median equivalent values (the Java iterators' values).
_LOWEST, _SIZE = _index_tables()
_HIGHEST: Final = _LOWEST + _SIZE - 1
_MEDIAN: Final = _LOWEST + (_SIZE >> 1)
_MEDIAN_F: Final = _MEDIAN.astype(np.float64)
_MAX_INDEX: Final = counts_index_for(HIGHEST_TRACKABLE_NS)


def _target_count(percentile: float, total_count: int) -> int:
    """Rank of a percentile: ``max(1, ceil(p / 100 * total))``, exactly.

    The percentile is read as the decimal it prints as (``99.9`` is 999/10, not the double
    just above it), which is what Java's HdrHistogram approximates by stepping one ulp down
    before ``Math.ceil``.
    """
    if not 0.0 <= percentile <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], got {percentile!r}")
    return max(1, math.ceil(Fraction(repr(float(percentile))) * total_count / 100))


class Histogram:
    """HdrHistogram-layout histogram of integer nanoseconds, 1 ns .. 60 s, 3 figures.

    Values below 0 are recorded as 0 and values above ``HIGHEST_TRACKABLE_NS`` as
    ``HIGHEST_TRACKABLE_NS`` (clipped); both are also counted in ``out_of_range``, never
    dropped. ``min_ns`` and ``sum_ns`` are exact over the values as recorded (after
    clamping); ``max_ns`` is the largest value given, beyond the range too (a clipped
    value's size is kept nowhere else, and a max below the percentiles of the clipped
    bucket would contradict them: a 105 s age read "max 60.00s", p50 60.03s). All are 0
    while ``total_count`` is 0. Not thread-safe; one per recorder.

    ``counts`` is the dense array of counters (221 KB). An unpickled histogram keeps the
    sparse buckets it arrived as until something reads ``counts`` (``merge`` adds them to
    another without): the coordinator holds every worker's interval snapshots until the
    run ends, and dense they grew it by ~1.3 MB per second of a 2-worker run.
    """

    __slots__ = ("_counts", "_sparse", "max_ns", "min_ns", "out_of_range", "sum_ns", "total_count")

    _counts: Int64Array | None  # None: the buckets are ``_sparse``'s
    _sparse: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None  # (indexes ascending, counts)
    total_count: int
    min_ns: int
    max_ns: int
    out_of_range: int
    sum_ns: int

    def __init__(self) -> None:
        self._counts = np.zeros(COUNTS_LEN, dtype=np.int64)
        self._sparse = None
        self.total_count = 0
        self.min_ns = 0
        self.max_ns = 0
        self.out_of_range = 0
        self.sum_ns = 0

    @property
    def counts(self) -> Int64Array:
        """The counts array (``COUNTS_LEN`` int64 counters), made from the sparse buckets
        an unpickled histogram holds on first use."""
        counts = self._counts
        if counts is None:
            assert self._sparse is not None
            indexes, sparse = self._sparse
            counts = np.zeros(COUNTS_LEN, dtype=np.int64)
            counts[indexes] = sparse
            self._counts, self._sparse = counts, None
        return counts

    @counts.setter
    def counts(self, value: Int64Array) -> None:
        self._counts, self._sparse = value, None

    # -- recording -----------------------------------------------------------------

    def record(self, value_ns: int, count: int = 1) -> None:
        """Record ``count`` occurrences of one value (the scalar path).

        Raises:
            ValueError: if ``count`` is negative.
        """
        if count <= 0:
            if count < 0:
                raise ValueError(f"count must be >= 0, got {count}")
            return
        value = given = operator.index(value_ns)
        if value < 0 or value > HIGHEST_TRACKABLE_NS:
            self.out_of_range += count
            value = 0 if value < 0 else HIGHEST_TRACKABLE_NS
        self.counts[counts_index_for(value)] += count
        self._add_scalars(count, value, max(value, given), value * count)

    def record_many(self, values: Any) -> None:
        """Record every value of a batch.

        Args:
            values: an ``array.array`` (copied: ``_as_int64`` says why), a numpy
                integer array, or anything ``np.asarray`` turns into integers. No
                reference to it or view of it is kept, so an ``array.array`` may be
                cleared or grown afterwards.

        Raises:
            TypeError: if the values are not integers.
        """
        batch = _as_int64(values)
        if batch.size == 0:
            return
        low, high = int(batch.min()), int(batch.max())
        clamp = low < 0 or high > HIGHEST_TRACKABLE_NS
        if clamp:
            self.out_of_range += int(np.count_nonzero(batch < 0))
            self.out_of_range += int(np.count_nonzero(batch > HIGHEST_TRACKABLE_NS))
            low = min(max(low, 0), HIGHEST_TRACKABLE_NS)
            high = max(high, 0)  # the largest value given, clipped or not
        total_ns = 0
        for start in range(0, batch.size, _BLOCK_VALUES):
            block = batch[start : start + _BLOCK_VALUES]
            if clamp:
                block = np.clip(block, 0, HIGHEST_TRACKABLE_NS)
            total_ns += int(block.sum())
            self.counts += np.bincount(counts_indexes(block), minlength=COUNTS_LEN)
        self._add_scalars(int(batch.size), low, high, total_ns)

    def _add_scalars(self, count: int, low: int, high: int, total_ns: int) -> None:
        if self.total_count == 0:
            self.min_ns, self.max_ns = low, high
        else:
            self.min_ns = min(self.min_ns, low)
            self.max_ns = max(self.max_ns, high)
        self.total_count += count
        self.sum_ns += total_ns

    # -- combining -----------------------------------------------------------------

    def merge(self, other: Histogram) -> None:
        """Add ``other`` into this histogram, exactly (HdrHistogram ``add``)."""
        if other.total_count == 0 and other.out_of_range == 0:
            return
        if other._sparse is not None and other is not self:
            indexes, sparse = other._sparse  # ascending, each once: one add per bucket
            self.counts[indexes] += sparse
        else:
            self.counts += other.counts
        self.out_of_range += other.out_of_range
        if other.total_count:
            self._add_scalars(other.total_count, other.min_ns, other.max_ns, other.sum_ns)

    @classmethod
    def from_buckets(
        cls,
        indexes: bytes,
        counts: bytes,
        total_count: int,
        min_ns: int,
        max_ns: int,
        sum_ns: int,
        out_of_range: int = 0,
    ) -> Histogram:
        """A histogram over buckets recorded elsewhere in this layout, with their exact
        scalars: the compiled pumps fold each reply's latency in C (engine/_pump.c) and
        hand over the interval's non-empty buckets, with no per-value work here.

        Args:
            indexes, counts: native int64s, one per non-empty bucket, indexes ascending
                and below ``COUNTS_LEN``.

        Raises:
            ValueError: if they differ in length or an index is out of the layout.
        """
        index_array = np.frombuffer(indexes, dtype=np.int64)
        count_array = np.frombuffer(counts, dtype=np.int64)
        if index_array.size != count_array.size:
            raise ValueError("indexes and counts must have the same length")
        if index_array.size and not 0 <= index_array[0] <= index_array[-1] < COUNTS_LEN:
            raise ValueError(f"a bucket index is outside 0..{COUNTS_LEN - 1}")
        result = cls.__new__(cls)
        result._counts, result._sparse = None, (index_array, count_array)
        result.total_count, result.out_of_range = int(total_count), int(out_of_range)
        result.min_ns, result.max_ns, result.sum_ns = int(min_ns), int(max_ns), int(sum_ns)
        return result

    @classmethod
    def merged(cls, histograms: Iterable[Histogram]) -> Histogram:
        """Return a new histogram holding the sum of ``histograms`` (empty if none).

        When every one holds sparse buckets (unpickled: a worker's), so does the sum: the
        coordinator merges each interval's from every worker and keeps them all until the
        run ends, and dense they took 221 KB each (14 MB of a 5 s, 2-worker run's peak).
        """
        parts = list(histograms)
        if not parts or any(h._sparse is None for h in parts):
            result = cls()
            for histogram in parts:
                result.merge(histogram)
            return result
        # Added up over the span of buckets they use (a bucket appears once in each): a
        # worker merges an interval's histograms at every cut, where np.unique and
        # np.add.at took 0.6 ms of the event loop.
        sparse = [h._sparse for h in parts if h._sparse is not None and h._sparse[0].size]
        if not sparse:
            indexes = sums = np.zeros(0, dtype=np.int64)
        elif len(sparse) == 1:
            indexes, sums = sparse[0][0].copy(), sparse[0][1].copy()
        else:
            low = min(int(at[0]) for at, _ in sparse)
            span = np.zeros(max(int(at[-1]) for at, _ in sparse) - low + 1, dtype=np.int64)
            for at, counts in sparse:
                span[at - low] += counts
            used = np.flatnonzero(span)
            indexes, sums = used + low, span[used]
        result = cls.__new__(cls)
        # Held as an unpickled one is (2-byte indexes, the narrowest counts): as int64s the
        # coordinator's merged intervals took 16 bytes a bucket, ~300 KB per second of a
        # 2-worker run's result (1 GB an hour); so, 3-6 bytes.
        result._counts = None
        result._sparse = (indexes.astype(np.uint16), sums.astype(_narrowest(sums)))
        result.total_count = result.min_ns = result.max_ns = result.sum_ns = 0
        result.out_of_range = sum(h.out_of_range for h in parts)
        for histogram in parts:
            if histogram.total_count:
                result._add_scalars(
                    histogram.total_count, histogram.min_ns, histogram.max_ns, histogram.sum_ns
                )
        return result

    def _buckets(self) -> tuple[Int64Array, Int64Array]:
        """(indexes ascending, counts) of the buckets, the non-empty ones at least: the
        sparse ones as held, else read off the dense array."""
        if self._sparse is not None:
            return self._sparse
        assert self._counts is not None
        nonzero = np.flatnonzero(self._counts)
        return nonzero, self._counts[nonzero]

    def copy(self) -> Histogram:
        """Return an independent copy."""
        result = Histogram()
        result.merge(self)
        return result

    def subtract(self, other: Histogram) -> None:
        """Remove an earlier state of this histogram, leaving the delta since then.

        ``min_ns`` and ``max_ns`` of the delta are bounds at bucket resolution (the exact
        extremes of the later values are not known); counts, totals and sums are exact.

        Raises:
            ValueError: if ``other`` holds counts this histogram does not.
        """
        counts = self.counts - other.counts
        if other.total_count > self.total_count or bool((counts < 0).any()):
            raise ValueError("cannot subtract a histogram that is not contained in this one")
        self.counts = counts
        self.total_count -= other.total_count
        self.out_of_range -= other.out_of_range
        self.sum_ns -= other.sum_ns
        if self.total_count == 0:
            self.min_ns = self.max_ns = self.sum_ns = 0
            return
        nonzero = np.flatnonzero(counts)
        self.min_ns = max(self.min_ns, int(_LOWEST[nonzero[0]]))
        if nonzero[-1] < _MAX_INDEX:  # the top bucket may hold clipped values: keep max
            self.max_ns = min(self.max_ns, int(_HIGHEST[nonzero[-1]]))

    def __eq__(self, other: object) -> bool:
        """Equal when the recorded distributions are (counts and total count).

        ``min_ns``, ``max_ns``, ``sum_ns`` and ``out_of_range`` are not compared: the V2
        encoding does not carry them, and a decoded copy should equal its original.
        """
        if not isinstance(other, Histogram):
            return NotImplemented
        return self.total_count == other.total_count and bool(
            np.array_equal(self.counts, other.counts)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"Histogram(total_count={self.total_count}, min_ns={self.min_ns}, "
            f"max_ns={self.max_ns}, out_of_range={self.out_of_range})"
        )

    # -- statistics ----------------------------------------------------------------

    def value_at_percentile(self, percentile: float) -> int:
        """Return HdrHistogram's ``getValueAtPercentile`` (0 when empty).

        The value is the highest equivalent value of the first bucket at which the
        cumulative count reaches ``ceil(percentile / 100 * total_count)``; for percentile
        0 it is the lowest equivalent value of the first non-empty bucket.

        Raises:
            ValueError: if ``percentile`` is outside ``[0, 100]`` or NaN.
        """
        return self.percentiles([percentile])[percentile]

    def percentiles(self, percentiles: Sequence[float]) -> dict[float, int]:
        """Return ``{percentile: value_at_percentile(percentile)}`` in one pass over counts.

        Raises:
            ValueError: if a percentile is outside ``[0, 100]`` or NaN.
        """
        targets = [_target_count(p, self.total_count) for p in percentiles]
        if self.total_count == 0:
            return dict.fromkeys(percentiles, 0)
        indexes, counts = self._buckets()
        cumulative = np.cumsum(counts, dtype=np.int64)
        found = indexes[np.searchsorted(cumulative, np.array(targets, dtype=np.int64), side="left")]
        return {
            p: int(_LOWEST[i] if p == 0 else _HIGHEST[i])
            for p, i in zip(percentiles, found.tolist(), strict=True)
        }

    def mean_ns(self) -> float:
        """HdrHistogram's mean: bucket medians weighted by counts (0.0 when empty)."""
        if self.total_count == 0:
            return 0.0
        indexes, counts = self._buckets()
        return float(counts.astype(np.float64) @ _MEDIAN_F[indexes]) / self.total_count

    def stddev_ns(self) -> float:
        """HdrHistogram's population standard deviation over bucket medians."""
        if self.total_count == 0:
            return 0.0
        indexes, counts = self._buckets()
        deviation = _MEDIAN_F[indexes] - self.mean_ns()
        variance = float(counts.astype(np.float64) @ (deviation * deviation))
        return math.sqrt(variance / self.total_count)

    def exact_mean_ns(self) -> float:
        """Mean of the values as recorded, from ``sum_ns`` (0.0 when empty)."""
        return self.sum_ns / self.total_count if self.total_count else 0.0

    # -- compact and wire forms ----------------------------------------------------

    def to_sparse(self) -> tuple[list[int], list[int]]:
        """Return (indexes, counts) of the non-empty buckets, indexes ascending."""
        indexes, counts = self._buckets()
        kept = counts != 0
        return indexes[kept].tolist(), counts[kept].tolist()

    @classmethod
    def from_sparse(
        cls,
        indexes: Sequence[int],
        counts: Sequence[int],
        *,
        min_ns: int | None = None,
        max_ns: int | None = None,
        sum_ns: int | None = None,
        out_of_range: int = 0,
    ) -> Histogram:
        """Build a histogram from :meth:`to_sparse` output plus its scalars.

        Scalars left as None are derived from the buckets: ``min_ns``/``max_ns`` as the
        lowest/highest equivalent values of the extreme buckets (capped at the trackable
        range) and ``sum_ns`` from bucket medians, so they are then bucket-resolution
        estimates, not exact. Repeated indexes add up.

        Raises:
            ValueError: on an index beyond ``HIGHEST_TRACKABLE_NS``'s bucket, a negative
                count, sequences of different lengths, or a total of 2**63 or more.
        """
        index_array, count_array = _sparse_arrays(indexes, counts)
        result = cls()
        result.total_count = sum(count_array.tolist())
        if result.total_count >= 1 << 63:  # checked first: no counter can overflow then
            raise ValueError("total count does not fit in 64 bits")
        np.add.at(result.counts, index_array, count_array)
        result.out_of_range = int(out_of_range)
        if result.total_count:
            nonzero = np.flatnonzero(result.counts)
            lowest = int(_LOWEST[nonzero[0]])
            highest = min(int(_HIGHEST[nonzero[-1]]), HIGHEST_TRACKABLE_NS)
            medians = _MEDIAN[nonzero].tolist()
            estimate = sum(map(operator.mul, medians, result.counts[nonzero].tolist()))
            result.min_ns = lowest if min_ns is None else int(min_ns)
            result.max_ns = highest if max_ns is None else int(max_ns)
            result.sum_ns = estimate if sum_ns is None else int(sum_ns)
        return result

    def __getstate__(self) -> tuple[int, bytes, bytes, int, int, int, int]:
        # The non-empty buckets as packed arrays: a worker pickles several histograms per
        # interval and the coordinator unpickles them all; as lists of Python ints, 8,000
        # buckets took 1.5 ms to load (about 10 ms of the coordinator's core per interval
        # at 100k requests/s, taken from the worker's core when they share one). Sparse
        # buckets go as held: made dense to be pickled, the 8 histograms of an interval cut
        # cost a worker ~1 ms (an allocation and a scan of 27,648 counters each).
        indexes, counts = self._buckets()
        if indexes.size and not counts.all():  # (a dense array's zeros are not kept)
            indexes, counts = indexes[counts != 0], counts[counts != 0]
        return (
            _STATE_VERSION,
            indexes.astype(np.uint16).tobytes(),
            counts.astype(_narrowest(counts)).tobytes(),
            self.min_ns,
            self.max_ns,
            self.sum_ns,
            self.out_of_range,
        )

    def __setstate__(self, state: tuple[int, bytes, bytes, int, int, int, int]) -> None:
        version, indexes, counts, min_ns, max_ns, sum_ns, out_of_range = state
        if version != _STATE_VERSION:
            raise ValueError(f"unknown Histogram pickle version {version}")
        if len(indexes) % 2:
            raise ValueError("indexes and counts must have the same length")
        index_array = np.frombuffer(indexes, dtype=np.uint16)
        # counts of 1, 2, 4 or 8 bytes: whichever the bytes per index say
        width = len(counts) // index_array.size if index_array.size else 8
        if width not in _COUNT_TYPES or len(counts) != width * index_array.size:
            raise ValueError("indexes and counts must have the same length")
        count_array = np.frombuffer(counts, dtype=_COUNT_TYPES[width])
        if index_array.size and not (
            int(index_array[-1]) <= _MAX_INDEX
            and bool(np.all(np.diff(index_array.astype(np.int32)) > 0))
        ):
            raise ValueError("bucket indexes must be ascending, within the tracked range")
        if count_array.size and int(count_array.min()) < 0:
            raise ValueError("bucket counts must be >= 0")
        # Kept sparse (read-only views of the pickle's bytes) until ``counts`` is read.
        self._counts, self._sparse = None, (index_array, count_array)
        self.total_count = _exact_sum(count_array.astype(np.int64))
        if self.total_count >= 1 << 63:
            raise ValueError("total count does not fit in 64 bits")
        self.min_ns, self.max_ns, self.sum_ns = int(min_ns), int(max_ns), int(sum_ns)
        self.out_of_range = int(out_of_range)

    def encode(self) -> bytes:
        """Return the compressed HdrHistogram V2 encoding (not base64-wrapped).

        The encoding carries the counts only; ``min_ns``, ``max_ns``, ``sum_ns`` and
        ``out_of_range`` travel separately if they are needed.
        """
        varints = _encode_counts(self.counts)
        header = _V2_HEADER.pack(
            _V2_ENCODING_COOKIE,
            len(varints),
            0,  # normalizing index offset
            SIGNIFICANT_FIGURES,
            LOWEST_DISCERNIBLE_NS,
            HIGHEST_TRACKABLE_NS,
            1.0,  # integer to double value conversion ratio
        )
        compressed = zlib.compress(header + varints)
        return _COMPRESSED_HEADER.pack(_V2_COMPRESSED_COOKIE, len(compressed)) + compressed

    def encode_base64(self) -> str:
        """Return :meth:`encode` as base64 text, as HdrHistogram log files hold it."""
        return base64.b64encode(self.encode()).decode("ascii")

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> Histogram:
        """Decode a V2 encoding (compressed or not, raw or base64) from any HdrHistogram.

        The encoding must use this layout's precision (lowest discernible value 1,
        3 significant figures); its highest trackable value may differ, and counts above
        ``HIGHEST_TRACKABLE_NS`` are clamped into the top bucket and counted in
        ``out_of_range``. ``min_ns``, ``max_ns`` and ``sum_ns`` become bucket-resolution
        estimates (see :meth:`from_sparse`).

        Raises:
            ValueError: if the data is not a valid, compatible V2 encoding.
        """
        payload = _payload(_unwrap(data))
        if len(payload) < _V2_HEADER.size:
            raise ValueError("V2 payload shorter than its 40-byte header")
        cookie, length, offset, figures, lowest, highest, _ = _V2_HEADER.unpack_from(payload)
        if cookie & ~0xF0 != _V2_ENCODING_COOKIE_BASE:
            raise ValueError(f"not a V2 histogram payload (cookie {cookie:#x})")
        layout = _layout(lowest, highest, figures)
        if layout[:2] != (UNIT_MAGNITUDE, SUB_BUCKET_HALF_COUNT_MAGNITUDE) or offset != 0:
            raise ValueError(
                f"incompatible histogram: lowest={lowest} significant_figures={figures} "
                f"normalizing_index_offset={offset} (need 1, {SIGNIFICANT_FIGURES}, 0)"
            )
        if not 0 <= length <= len(payload) - _V2_HEADER.size:
            raise ValueError(f"V2 payload length {length} exceeds the data")
        tokens = _decode_varints(payload[_V2_HEADER.size : _V2_HEADER.size + length])
        indexes, counts = _expand_tokens(tokens, layout[3])
        over = indexes > _MAX_INDEX
        out_of_range = sum(counts[over].tolist())
        indexes[over] = _MAX_INDEX
        return cls.from_sparse(indexes.tolist(), counts.tolist(), out_of_range=out_of_range)


# -- helpers: input conversion and the V2 codec ------------------------------------------


def _as_int64(values: Any) -> Int64Array:
    # An array.array is copied, not viewed: a view outlives this call in any frame of it a
    # sampling profiler holds (a Dask worker samples its tasks' frames every 10 ms, and a
    # frame held past its return keeps its locals), and while it lives the array cannot
    # be resized: the recorder's next append or clear raised BufferError, and a worker's
    # counts were lost with the interval it was cutting.
    raw = np.array(values) if isinstance(values, array.array) else np.asarray(values)
    if raw.size == 0:
        return np.empty(0, dtype=np.int64)
    if raw.dtype.kind not in "iu":
        raise TypeError(f"histogram values must be integers, got dtype {raw.dtype}")
    if raw.dtype == np.uint64:  # would wrap negative in int64; anything above is out of range
        raw = np.minimum(raw, HIGHEST_TRACKABLE_NS + 1)
    return raw.astype(np.int64, copy=False).reshape(-1)


# A pickled histogram's counts, by their width in bytes (the narrowest that holds them).
_COUNT_TYPES: Final[dict[int, type[np.integer[Any]]]] = {
    1: np.uint8,
    2: np.uint16,
    4: np.uint32,
    8: np.int64,
}


def _narrowest(counts: Int64Array) -> type[np.integer[Any]]:
    """The narrowest of ``_COUNT_TYPES`` holding every one of ``counts`` (all >= 0)."""
    top = int(counts.max()) if counts.size else 0
    for width, kind in _COUNT_TYPES.items():
        if top < 1 << (8 * width - (width == 8)):
            return kind
    raise AssertionError("a count beyond int64")


def _exact_sum(counts: Int64Array) -> int:
    """The sum of non-negative int64 counts, exactly (numpy's would wrap past 2**63)."""
    if not counts.size or int(counts.max()) < 1 << 47:  # at most 2**16 of them: no wrap
        return int(counts.sum())
    return sum(counts.tolist())


def _sparse_arrays(indexes: Sequence[int], counts: Sequence[int]) -> tuple[Int64Array, Int64Array]:
    index_array = np.asarray(indexes, dtype=np.int64).reshape(-1)
    count_array = np.asarray(counts, dtype=np.int64).reshape(-1)
    if index_array.shape != count_array.shape:
        raise ValueError("indexes and counts must have the same length")
    if index_array.size and not 0 <= int(index_array.min()) <= int(index_array.max()) <= _MAX_INDEX:
        raise ValueError(f"bucket indexes must be within [0, {_MAX_INDEX}] (0 .. 60 s)")
    if count_array.size and int(count_array.min()) < 0:
        raise ValueError("bucket counts must be >= 0")
    return index_array, count_array


def _encode_counts(counts: Int64Array) -> bytes:
    """V2 counts: ZigZag LEB128 varints; a run of n >= 2 zeros is written as -n."""
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        return b""
    gaps = np.diff(nonzero, prepend=-1) - 1  # zeros before each non-zero count
    has_gap = gaps > 0
    count_positions = np.cumsum(has_gap.astype(np.int64) + 1) - 1
    tokens = np.empty(int(count_positions[-1]) + 1, dtype=np.int64)
    tokens[count_positions] = counts[nonzero]
    gap_lengths = gaps[has_gap]
    tokens[count_positions[has_gap] - 1] = np.where(gap_lengths == 1, 0, -gap_lengths)
    zigzag = ((tokens << 1) ^ (tokens >> 63)).view(np.uint64)
    return _varint_bytes(zigzag)


def _varint_bytes(words: npt.NDArray[np.uint64]) -> bytes:
    """LEB128 with HdrHistogram's 9-byte cap: the 9th byte carries 8 bits, no flag."""
    sizes = np.searchsorted(_VARINT_THRESHOLDS, words, side="right") + 1
    starts = np.cumsum(sizes) - sizes
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    for k in range(9):
        selected = sizes > k
        if not selected.any():
            break
        chunk = words[selected] >> np.uint64(7 * k)
        if k < 8:
            more = np.where(sizes[selected] > k + 1, 0x80, 0).astype(np.uint64)
            chunk = (chunk & np.uint64(0x7F)) | more
        out[starts[selected] + k] = chunk.astype(np.uint8)
    return out.tobytes()


def _decode_varints(data: bytes) -> Int64Array:
    """ZigZag-decoded tokens of a V2 counts stream."""
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw < 0x80)
    sizes = np.diff(ends, prepend=-1)
    if raw.size and (ends.size == 0 or ends[-1] != raw.size - 1 or int(sizes.max()) > 9):
        words = _decode_varints_slowly(data)  # a 9-byte word with its top bit set, or junk
    else:
        starts = ends - sizes + 1
        position = np.arange(raw.size) - np.repeat(starts, sizes)
        bits = (raw & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
        words = np.bitwise_or.reduceat(bits, starts) if raw.size else bits
    signs = -(words & np.uint64(1)).astype(np.int64)
    decoded: Int64Array = (words >> np.uint64(1)).astype(np.int64) ^ signs
    return decoded


def _decode_varints_slowly(data: bytes) -> npt.NDArray[np.uint64]:
    words: list[int] = []
    position = 0
    while position < len(data):
        word = 0
        for k in range(9):
            if position >= len(data):
                raise ValueError("V2 counts stream ends inside a varint")
            byte = data[position]
            position += 1
            if k == 8:
                word |= byte << 56
                break
            word |= (byte & 0x7F) << (7 * k)
            if byte < 0x80:
                break
        words.append(word)
    return np.array(words, dtype=np.uint64)


def _expand_tokens(tokens: Int64Array, counts_len: int) -> tuple[Int64Array, Int64Array]:
    """(indexes, counts) of the non-zero counts a token stream describes."""
    if tokens.size and int(tokens.min()) < -counts_len:
        raise ValueError("V2 zero run longer than the counts array")
    spans = np.where(tokens < 0, -tokens, 1)
    if int(spans.sum()) > counts_len:
        raise ValueError(f"V2 counts stream longer than the {counts_len} counters declared")
    indexes = np.cumsum(spans) - spans
    positive = tokens > 0
    return indexes[positive], tokens[positive]


def _unwrap(data: bytes | bytearray | memoryview | str) -> bytes:
    """Raw encoding bytes from raw or base64 input."""
    if isinstance(data, str):
        data = data.encode("ascii", errors="replace")
    raw = bytes(data)
    if len(raw) >= 4:
        base = int.from_bytes(raw[:4], "big") & ~0xF0
        if base in (_V2_COMPRESSED_COOKIE_BASE, _V2_ENCODING_COOKIE_BASE):
            return raw
    try:
        return base64.b64decode(raw.strip(), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not a V2 histogram encoding, nor base64 of one: {exc}") from exc


def _payload(raw: bytes) -> bytes:
    """The uncompressed V2 payload of a (possibly compressed) encoding."""
    if len(raw) < 4:
        raise ValueError("histogram encoding shorter than its cookie")
    if int.from_bytes(raw[:4], "big") & ~0xF0 == _V2_ENCODING_COOKIE_BASE:
        return raw
    if len(raw) < _COMPRESSED_HEADER.size:
        raise ValueError("compressed histogram encoding shorter than its header")
    cookie, length = _COMPRESSED_HEADER.unpack_from(raw)
    if cookie & ~0xF0 != _V2_COMPRESSED_COOKIE_BASE:
        raise ValueError(f"not a V2 histogram encoding (cookie {cookie:#x})")
    if length != len(raw) - _COMPRESSED_HEADER.size:
        raise ValueError(f"compressed length {length} != {len(raw) - _COMPRESSED_HEADER.size}")
    inflater = zlib.decompressobj()
    try:
        payload = inflater.decompress(raw[_COMPRESSED_HEADER.size :], _MAX_PAYLOAD_BYTES)
    except zlib.error as exc:
        raise ValueError(f"histogram payload does not inflate: {exc}") from exc
    if inflater.unconsumed_tail or not inflater.eof:
        raise ValueError("histogram payload is truncated or larger than any valid one")
    return payload
