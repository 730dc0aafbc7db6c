"""The key table and key pickers.

Keys are prebuilt once per worker, packed (``KeyTable``: the keys end to end in one bytes
object, with each one's bounds), and every worker builds the same table (it depends on the
run's seed only). Packed, 100,000 keys take ~3 MB instead of ~7 MB as 100,000 bytes objects,
and the compiled pumps' packed chunks take the blob and the bounds as they are; a key is
made a bytes object only where a list needs it (the Python driver's chunks, the preload). Templates: ``number`` (prefix +
number, zero-padded to ``key_size``), ``random`` (prefix + random URL-safe characters up
to ``key_size``) and ``float-counter`` (prefix + str(random float) + number, as the old
Java benchmarks did); a ``number`` key may have a size of its own (``--key-size fb-etc``).
Pickers draw indexes in chunks with numpy, seeded, so a run is reproducible:
``sequential``, ``uniform``, ``zipf`` (bounded, inverse CDF), ``gaussian`` (clipped to the
keyspace) and ``latest`` (``LatestPicker``: sets insert, reads favour the newest keys).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from kvbench.config.model import WorkloadConfig
from kvbench.errors import ConfigError

# RFC 4648 §5 "base64url": safe in memcached keys, Redis keys and URLs alike.
URL_SAFE = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


# Keys made per block while a table is packed: a bytes object each only for a moment.
_PACK_BLOCK = 4096


# Bounds are uint32 (4 bytes a key each) where the blob allows, as packed chunks take them.
_U32_MAX = (1 << 32) - 1


def _bounds(offsets: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """``offsets`` as uint32 when every one fits (else int64 as they are)."""
    if len(offsets) and int(offsets.max()) > _U32_MAX:
        return offsets
    return offsets.astype(np.uint32)


class KeyTable(Sequence[bytes]):
    """Keys end to end in one bytes object, key i being ``blob[starts[i]:ends[i]]``.

    A slice is a view (the same blob, its bounds sliced); equal to any sequence of the
    same keys (a list of them included). The bounds are uint32 arrays unless the blob is
    over 4 GiB (int64 then).
    """

    __slots__ = ("blob", "ends", "starts")

    def __init__(self, blob: bytes, starts: npt.NDArray[Any], ends: npt.NDArray[Any]):
        self.blob = blob
        self.starts = starts
        self.ends = ends

    @classmethod
    def packed(cls, blocks: Iterable[Sequence[bytes]]) -> KeyTable:
        """The keys of ``blocks`` (runs of them, in order) packed: each block's keys are
        joined and dropped before the next is made."""
        parts: list[bytes] = []
        lengths: list[npt.NDArray[np.int64]] = [np.zeros(0, dtype=np.int64)]
        for block in blocks:
            parts.append(b"".join(block))
            lengths.append(np.fromiter(map(len, block), dtype=np.int64, count=len(block)))
        every = np.concatenate(lengths)
        ends = np.cumsum(every)
        return cls(b"".join(parts), _bounds(ends - every), _bounds(ends))

    @classmethod
    def of(cls, keys: Sequence[bytes]) -> KeyTable:
        """``keys`` as a table (itself when it is one)."""
        if isinstance(keys, KeyTable):
            return keys
        return cls.packed(keys[low : low + _PACK_BLOCK] for low in range(0, len(keys), _PACK_BLOCK))

    @classmethod
    def joined(cls, first: KeyTable, second: KeyTable) -> KeyTable:
        """``first``'s keys then ``second``'s, in one blob."""
        shift = len(first.blob)

        def both(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[Any]:
            return _bounds(np.concatenate((a.astype(np.int64), b.astype(np.int64) + shift)))

        return cls(
            first.blob + second.blob,
            both(first.starts, second.starts),
            both(first.ends, second.ends),
        )

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> KeyTable: ...

    def __getitem__(self, index: int | slice) -> bytes | KeyTable:
        if isinstance(index, slice):
            return KeyTable(self.blob, self.starts[index], self.ends[index])
        return self.blob[int(self.starts[index]) : int(self.ends[index])]

    def __iter__(self) -> Iterator[bytes]:
        blob = self.blob
        for start, end in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            yield blob[start:end]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (bytes, str)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which do not hash

    def __repr__(self) -> str:
        return f"KeyTable({len(self)} keys, {len(self.blob)} bytes)"

    def objects(self) -> npt.NDArray[np.object_]:
        """The keys as a numpy object array of bytes (the Python driver's chunks gather
        from it): a bytes object per key, made when a list of them is wanted."""
        return np.fromiter(iter(self), dtype=object, count=len(self))


def build_key_table(
    prefix: str,
    count: int,
    template: str = "number",
    size: int | None = None,
    rng: np.random.Generator | None = None,
    sizes: npt.NDArray[np.int64] | None = None,
) -> KeyTable:
    """The keyspace, packed, index i being key i.

    The config has checked that the keys fit the target's protocol (length, characters):
    that depends on the protocol, which the key table does not know.

    Args:
        prefix: starts every key.
        count: how many keys.
        template: ``number``, ``random`` or ``float-counter``.
        size: key length in bytes (``number``: zero-padded; ``random``: required).
        rng: draws the random parts (``random``, ``float-counter``); same seed, same keys.
        sizes: ``number``: key i is zero-padded to ``sizes[i]`` bytes (a size per key:
            ``--key-size fb-etc``); each must hold the prefix and the number.

    Raises:
        ConfigError: random keys without a size.
    """
    head = prefix.encode()
    if template == "random":
        if size is None:
            raise ConfigError("workload.key_size", "random keys need a length")
        keys = _random_keys(head, count, size - len(head), rng or np.random.default_rng(0))
        return KeyTable.of(keys)
    if template == "float-counter":
        floats = (rng or np.random.default_rng(0)).random(count).tolist()
        return KeyTable.of([b"%s%r%d" % (head, f, i) for i, f in enumerate(floats)])
    return KeyTable.packed(_number_keys(head, count, size, sizes))


def _number_keys(
    head: bytes, count: int, size: int | None, sizes: npt.NDArray[np.int64] | None
) -> Iterator[list[bytes]]:
    """``number`` keys in blocks: ``head`` + i, zero-padded to ``size`` or ``sizes[i]``."""
    widths = None if sizes is None else (sizes - len(head)).tolist()
    for low in range(0, count, _PACK_BLOCK):
        span = range(low, min(count, low + _PACK_BLOCK))
        if widths is not None:
            yield [b"%s%0*d" % (head, widths[i], i) for i in span]
        elif size is not None:
            width = size - len(head)
            yield [b"%s%0*d" % (head, width, i) for i in span]
        else:
            yield [head + str(i).encode() for i in span]


def _random_keys(head: bytes, count: int, length: int, rng: np.random.Generator) -> list[bytes]:
    """``count`` distinct keys: ``head`` + ``length`` random URL-safe characters."""
    alphabet = np.frombuffer(URL_SAFE, dtype=np.uint8)
    blob = alphabet[rng.integers(0, len(URL_SAFE), count * length)].tobytes()
    keys = [head + blob[i * length : (i + 1) * length] for i in range(count)]
    seen: set[bytes] = set()
    for i, key in enumerate(keys):  # collisions are all but impossible; redraw if one occurs
        while key in seen:
            key = head + alphabet[rng.integers(0, len(URL_SAFE), length)].tobytes()
        seen.add(key)
        keys[i] = key
    return keys


def zipf_cdf(count: int, exponent: float) -> npt.NDArray[np.float64]:
    """Cumulative probabilities of ranks 1..count with P(r) proportional to 1 / r**exponent."""
    weights = np.arange(1, count + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return cdf


class KeyPicker:
    """Draws key indexes in chunks.

    Args:
        pattern: ``uniform`` (independent uniform draws), ``sequential`` (walk the
            keyspace from ``start``, wrapping), ``zipf`` (rank r, i.e. key r - 1, with
            probability proportional to 1 / r**zipf_exponent; key 0 is the hottest) or
            ``gaussian`` (normal around ``mean`` with ``stddev``, rounded, clipped to the
            keyspace).
        count: keyspace size.
        rng: the worker's generator.
        start: where a sequential walk begins (workers start at different places).
        zipf_exponent: the Zipf exponent s (> 0).
        mean, stddev: the gaussian's parameters in keys; None: count / 2 and count / 6.
        span: ``sequential``: walk only this many keys from ``start``, wrapping (None: all).
    """

    def __init__(
        self,
        pattern: str,
        count: int,
        rng: np.random.Generator,
        start: int = 0,
        *,
        zipf_exponent: float = 0.99,
        mean: float | None = None,
        stddev: float | None = None,
        span: int | None = None,
    ) -> None:
        self._pattern = pattern
        self._count = count
        self._rng = rng
        self._start = start % count
        self._span = count if span is None else max(1, min(span, count))
        self._next = 0  # sequential: the walk's position from ``start``
        # 8 bytes per key: the CDF a Zipf draw is searched in (numpy's zipf is unbounded).
        self._cdf = zipf_cdf(count, zipf_exponent) if pattern == "zipf" else None
        self._mean = count / 2 if mean is None else mean
        self._stddev = count / 6 if stddev is None else stddev

    @classmethod
    def for_config(cls, config: WorkloadConfig, rng: np.random.Generator, start: int) -> KeyPicker:
        """The picker ``config`` asks for."""
        return cls(
            config.key_pattern,
            config.keys,
            rng,
            start,
            zipf_exponent=config.zipf_exponent,
            mean=config.gaussian_mean,
            stddev=config.gaussian_stddev,
            span=config.key_span,
        )

    def draw(self, n: int) -> npt.NDArray[np.int64]:
        """The next ``n`` key indexes, each in [0, count)."""
        if self._pattern == "sequential":
            steps = (np.arange(n, dtype=np.int64) + self._next) % self._span
            self._next = int((self._next + n) % self._span)
            return (steps + self._start) % self._count
        if self._cdf is not None:
            found = np.searchsorted(self._cdf, self._rng.random(n), side="right")
            return np.minimum(found, self._count - 1).astype(np.int64)
        if self._pattern == "gaussian":
            drawn = np.rint(self._rng.normal(self._mean, self._stddev, n))
            return np.clip(drawn, 0, self._count - 1).astype(np.int64)
        return self._rng.integers(0, self._count, n, dtype=np.int64)


class LatestPicker:
    """YCSB's ``latest`` distribution (SkewedLatestGenerator): every set inserts the next
    new key, every other op reads a key ``r`` places back from the newest, ``r`` Zipf
    distributed (rank r + 1 with probability proportional to 1 / (r + 1)**s).

    The records (keys ``0 .. records - 1``) are preloaded. Workers share nothing, so each
    inserts keys of its own: worker w of n takes ``records + w``, ``records + w + n`` ...,
    and reads by recency over what it knows exists: its own inserts, newest first, then
    the records from the last down. YCSB's threads read only acknowledged inserts
    (AcknowledgedCounterGenerator); the request source does not see replies, so a read
    here counts only the inserts drawn more than ``lag`` requests before it (the worker's
    connections x pipeline: the most requests it has in flight), which have most likely
    been answered; one still in flight on a slow connection is read as a miss, counted.
    A worker whose share of the insert keys is full wraps to its first insert key,
    overwriting its oldest insert, and reads on by recency.

    Args:
        records: keys preloaded before the run.
        insert_keys: keys past the records for inserts, shared out among the workers.
        worker_index, n_workers: which share is this worker's.
        rng: the worker's generator.
        exponent: the Zipf exponent s over recency.
        lag: requests between an insert and the first read that may pick its key.
    """

    def __init__(
        self,
        records: int,
        insert_keys: int,
        worker_index: int,
        n_workers: int,
        rng: np.random.Generator,
        exponent: float = 0.99,
        lag: int = 0,
    ) -> None:
        self._records = records
        self._worker = worker_index
        self._workers = n_workers
        # keys records + w + k * n for k < stripe are this worker's
        self._stripe = max(1, len(range(records + worker_index, records + insert_keys, n_workers)))
        self._inserted = 0  # inserts so far (the next one is number self._inserted)
        # inserts before each of the last `lag` positions drawn: what the next reads see
        self._pending: npt.NDArray[np.int64] = np.zeros(lag, dtype=np.int64)
        self._visible = 0  # inserts the next read may see
        self._rng = rng
        self._cdf = zipf_cdf(records + self._stripe, exponent)

    @property
    def inserted(self) -> int:
        """How many keys this worker has inserted so far."""
        return self._inserted

    def draw(self, n: int) -> npt.NDArray[np.int64]:
        """``n`` reads by recency over what the next position may see (a multi-get's
        further keys, a command's)."""
        return self._reads(np.full(n, self._visible, dtype=np.int64))

    def draw_for(self, inserts: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """The key index of each position: an insert's new key where ``inserts`` is true,
        else a read by recency over the keys inserted more than ``lag`` positions
        before."""
        n = len(inserts)
        before = self._inserted + np.cumsum(inserts) - inserts  # inserts ahead of each position
        self._inserted += int(inserts.sum())
        lagged = np.concatenate((self._pending, before))  # [j]: inserts before j - lag
        self._pending = lagged[n:]
        visible = lagged[:n]
        # what the next position sees
        self._visible = int(self._pending[0]) if len(self._pending) else self._inserted
        read = self._reads(visible)
        write = self._records + self._worker + (before % self._stripe) * self._workers
        return np.where(inserts, write, read).astype(np.int64)

    def _reads(self, visible: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """A read by recency at each position, over the records and ``visible`` inserts."""
        own = np.minimum(visible, self._stripe)  # own inserts readable, newest first
        known = self._records + own  # keys that exist
        # The Zipf over the known keys: the CDF's first `known` ranks, renormalised.
        u = self._rng.random(len(visible)) * self._cdf[known - 1]
        rank = np.minimum(np.searchsorted(self._cdf, u, side="right"), known - 1)
        slot = np.where(rank < own, (visible - 1 - rank) % self._stripe, 0)
        read: npt.NDArray[np.int64] = np.where(
            rank < own,
            self._records + self._worker + slot * self._workers,
            self._records - 1 - (rank - own),
        )
        return read
