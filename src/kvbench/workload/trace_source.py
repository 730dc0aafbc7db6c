"""A replay's request sources: the trace's rows fanned out to one lane per connection.

``ReplayFeed`` reads the trace a block at a time (workload/trace.py), keeps the rows of
the slice (``--from``/``--to``/``--limit``) whose client belongs to this worker process,
counts them into the trace profile, maps their ops (workload/trace_ops.py), builds keys
and values, and appends them to the lane of their client: ``crc32(client_id)`` picks the
process (``% n_workers``) and then the connection, so one client's requests go out on
one connection, in trace order. A ``Lane`` is a connection's request source with the
shape of ``RequestSource`` (``ops``, ``keys``, ``values``, ``pos``, ``size``,
``refill``): chunks of plain lists, one TTL for the writes of a chunk (``ttl_s``).

Timed replays (``--speed S``) give every row an offset from the replay's start:
``(t - t0) / S`` seconds, where rows sharing one whole-second timestamp (the Twitter
traces' granularity) are spread evenly over that second (k-th of n at ``t + k/n``);
fractional timestamps are used as written. The feed then reads one second of trace
ahead, no more.

Memory: at most ``MAX_BUFFERED_ROWS`` rows wait in the lanes of a speed-max replay (a
lane whose clients are rare waits for the others rather than making the feed read on),
and a timed replay holds the rows due within the next second of trace time.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np

from kvbench.config.replay import ReplayConfig
from kvbench.errors import ConfigError
from kvbench.protocols.base import Op
from kvbench.workload.trace import TRACE_OPS, TraceReader, TraceRows, client_hashes
from kvbench.workload.trace_ops import (
    MAX_VALUE_BYTES,
    SKIPPED,
    KeyFitter,
    OpMapping,
    ValueSlices,
    gather,
)
from kvbench.workload.trace_profile import TraceProfile

# Rows waiting in the lanes of a speed-max replay before a starved lane stops the feed
# from reading further (about 30 MB of keys, slices and list slots).
MAX_BUFFERED_ROWS = 1 << 18
# A write of a chunk whose TTL differs from the chunk's first write's starts a new chunk;
# reads carry this TTL (they send none).
NO_TTL = -1
_STORES = frozenset(int(op) for op in (Op.SET, Op.ADD, Op.REPLACE, Op.CAS, Op.APPEND, Op.PREPEND))
_IS_STORE = [int(op) in _STORES for op in Op]


@dataclass(slots=True)
class ReplayCounts:
    """What a replay did with the rows it read (one worker's; the run's trace section adds
    the workers' up: results/trace.py).

    Attributes:
        lines_read: lines of the file read (worker 0 only: every worker reads them all).
        rows: rows of the slice that belong to this worker.
        requests: rows queued to be sent.
        skipped: rows not sent, by reason.
        keys_clamped: rows whose key was over 250 bytes (sent at 250).
        ttls_clamped: writes whose TTL was over what the server takes as relative (30
            days on memcached: sent at that).
    """

    lines_read: int = 0
    rows: int = 0
    requests: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    keys_clamped: int = 0
    ttls_clamped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "lines_read": self.lines_read,
            "rows": self.rows,
            "requests": self.requests,
            "skipped": dict(self.skipped),
            "keys_clamped": self.keys_clamped,
            "ttls_clamped": self.ttls_clamped,
        }


@dataclass(slots=True)
class _Chunk:
    """Rows waiting in a lane, index-aligned (offsets: timed replays only)."""

    ops: list[int]
    keys: list[bytes]
    values: list[Any]
    ttls: list[int]
    offsets_ns: list[int] | None

    def part(self, start: int, stop: int) -> _Chunk:
        offsets = self.offsets_ns[start:stop] if self.offsets_ns is not None else None
        return _Chunk(
            self.ops[start:stop],
            self.keys[start:stop],
            self.values[start:stop],
            self.ttls[start:stop],
            offsets,
        )


class Lane:
    """One connection's requests: the ``RequestSource`` shape, fed by a ``ReplayFeed``.

    Attributes:
        ops, keys, values: the current chunk (``pos`` is the next request, ``size`` its
            length); ``values[i]`` is None for requests without a value.
        ttl_s: the TTL of the current chunk's writes (0: none).
        record_ops: what each request is recorded under: its op (``RequestSource``'s
            name for it; a trace sends no ``--command``).
        offsets_ns: timed replays: each request's send time from the replay's start.
        taken: requests of the chunks before the current one.
        holder: the compiled driver's stream (engine/fastpath.py) when it took the current
            chunk to send (``pos`` is then ``size``): what it has not sent is still the
            lane's (``pending``).
    """

    def __init__(self, feed: ReplayFeed, index: int) -> None:
        self.feed = feed
        self.index = index
        self._waiting: deque[_Chunk] = deque()
        self.waiting_rows = 0
        self.ops: list[int] = []
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.offsets_ns: list[int] = []
        self.ttl_s = 0
        self.pos = 0
        self.size = 0
        self.taken = 0  # requests of earlier chunks
        self.starved = False
        self.holder: Any = None

    @property
    def record_ops(self) -> list[int]:
        return self.ops

    def append(self, chunk: _Chunk) -> None:
        """Queue ``chunk``, cut where a write's TTL differs from the one before (a chunk
        carries one TTL): cut once here, in one pass, so a refill only takes the next."""
        n = len(chunk.ops)
        for start, stop in _ttl_runs(chunk.ttls):
            self._waiting.append(chunk if stop - start == n else chunk.part(start, stop))
        self.waiting_rows += n

    def pending(self) -> int:
        """Requests this lane holds and has not sent (its stream's unsent ones counted)."""
        held = self.holder.size - self.holder.pos if self.holder is not None else 0
        return self.size - self.pos + self.waiting_rows + held

    def refill(self) -> bool:
        """Make the next chunk current (reading the trace on if the lane is empty).

        Returns:
            False when the lane has nothing to send now: the trace is over for it, or its
            clients' rows are further on than the feed may read yet (``starved``; the feed
            says so through its ``on_rows`` hook when rows arrive).
        """
        self.taken += self.pos
        self.pos = self.size = 0
        self.ops, self.keys, self.values, self.offsets_ns = [], [], [], []
        if not self._waiting:
            if not self.feed.config.timed:  # timed: the schedule reads (read_until)
                self.starved = False  # rows read now must not wake this lane mid-refill
                self.feed.read_for(self)
            if not self._waiting:
                self.starved = not self.feed.done
                return False
        self.starved = False
        chunk = self._waiting.popleft()
        self.waiting_rows -= len(chunk.ops)
        self.ops, self.keys, self.values = chunk.ops, chunk.keys, chunk.values
        self.offsets_ns = chunk.offsets_ns or []
        ttl = max(chunk.ttls)
        self.ttl_s = ttl if ttl > 0 else 0
        self.size = len(chunk.ops)
        self.feed.buffered -= self.size
        return True

    def offsets_from(self, first: int) -> Iterator[int]:
        """Timed replays: the offsets of this lane's requests from lane index ``first``
        on (at or after the current chunk's start), as far as the lane holds them."""
        skip = first - self.taken
        for offsets in (self.offsets_ns, *(c.offsets_ns or [] for c in self._waiting)):
            if skip >= len(offsets):
                skip -= len(offsets)
                continue
            yield from offsets[skip:]
            skip = 0

    def due_count(self, offset_ns: int) -> int:
        """Timed replays: how many of this lane's requests (counted over the whole
        replay) are due at or before ``offset_ns``, among those it has received."""
        count = self.taken
        for offsets in (self.offsets_ns, *(c.offsets_ns or [] for c in self._waiting)):
            if not offsets:
                continue
            if offsets[-1] <= offset_ns:
                count += len(offsets)
                continue
            return count + bisect_right(offsets, offset_ns)
        return count


def _ttl_runs(ttls: list[int]) -> Iterator[tuple[int, int]]:
    """(start, stop) of each run of rows sharing one write TTL (reads carry ``NO_TTL``
    and join the run they are in)."""
    first = next((ttl for ttl in ttls if ttl != NO_TTL), NO_TTL)
    if first == NO_TTL or ttls.count(first) + ttls.count(NO_TTL) == len(ttls):
        yield 0, len(ttls)  # the usual case: one TTL, counted in C
        return
    start, current = 0, NO_TTL
    for i, ttl in enumerate(ttls):
        if ttl in (NO_TTL, current):
            continue
        if current != NO_TTL:
            yield start, i
            start = i
        current = ttl
    yield start, len(ttls)


class ReplayFeed:
    """Reads the trace and fans its rows out to one ``Lane`` per connection.

    Args:
        config: the replay section.
        protocol: the codec registry name (decides each op's mapping).
        worker_index, n_workers: this process's share of the clients.
        n_lanes: connections of this process.
        seed: seeds the value blob.
        reader: the trace reader (tests inject one with a small block size).

    Attributes:
        lanes: one per connection.
        profile: the trace profile of this worker's rows.
        counts: rows read, queued and skipped.
        done: the trace (or its slice, or ``--limit``) is read to its end.
        buffered: rows in the lanes not yet handed out.
        on_rows: called with the starved lanes that got rows (the engine wakes them).
    """

    def __init__(
        self,
        config: ReplayConfig,
        protocol: str,
        worker_index: int,
        n_workers: int,
        n_lanes: int,
        seed: int,
        reader: TraceReader | None = None,
    ) -> None:
        self.config = config
        self.mapping = OpMapping(protocol)
        self._reader = reader if reader is not None else TraceReader(Path(config.path))
        self._blocks = iter(self._reader)
        self._worker_index = worker_index
        self._n_workers = n_workers
        self.lanes = [Lane(self, i) for i in range(n_lanes)]
        self.profile = TraceProfile()
        self.counts = ReplayCounts()
        self.done = False
        self.buffered = 0
        self.on_rows: Callable[[list[Lane]], None] | None = None
        self._keys = KeyFitter()
        self._values = ValueSlices(np.random.default_rng([seed, worker_index, 7]))
        self._slice_rows = 0  # rows of the slice so far, every worker's (for --limit)
        self._t0: float | None = config.from_s
        self._held: TraceRows | None = None  # timed: the rows of a second not yet complete
        self._ns_per_s = 1e9 / config.speed if config.speed is not None else 0.0
        self.read_ahead_ns = 0  # timed: rows are read up to this offset
        # A bad row (the ConfigError's path and message): the replay ends at it.
        self.error: tuple[str, str] | None = None

    @property
    def max_buffered_bytes(self) -> int:
        """The most bytes of the file the reader held at once."""
        return self._reader.max_buffered_bytes

    # -- reading -------------------------------------------------------------------------

    def read_for(self, lane: Lane) -> None:
        """Speed max: read blocks until ``lane`` has rows, the trace ends, or the lanes
        hold ``MAX_BUFFERED_ROWS`` (then ``lane`` waits for the others to drain)."""
        while not lane.waiting_rows and not self.done and self.buffered < MAX_BUFFERED_ROWS:
            self._read_block()

    def read_until(self, offset_ns: int) -> None:
        """Timed: read until every row due by ``offset_ns`` is in its lane (or the end)."""
        while not self.done and self.read_ahead_ns <= offset_ns:
            self._read_block()

    def remaining(self) -> int:
        """Requests queued in the lanes and not handed out yet."""
        return sum(lane.pending() for lane in self.lanes)

    def exhausted(self) -> bool:
        """The trace is read to its end (or a bad row ended it) and every request was
        handed out."""
        return self.done and not self.remaining()

    def report(self) -> dict[str, Any]:
        """What this worker's feed saw and did, as plain data (results/trace.py merges)."""
        return {
            "profile": self.profile.to_dict(),
            "counts": self.counts.to_dict(),
            "mapping": dict(self.mapping.sent_as),
            "error": list(self.error) if self.error is not None else None,
        }

    def _read_block(self) -> None:
        try:
            rows = next(self._blocks, None)
        except ConfigError as exc:
            # Raised on a connection's hot path: kept, and the feed ends here; the worker
            # reports it and the run becomes a config error (one line, exit 2).
            self.error = (exc.path, exc.message)
            self._blocks = iter(())
            rows = None
        if self._worker_index == 0:
            self.counts.lines_read = self._reader.lines_read
        if rows is None:
            self._finish()
            return
        rows = self._slice(rows)
        if self.config.timed:
            rows = self._hold_partial_second(rows)
        if rows is not None and len(rows):
            self._queue(rows)

    def _finish(self) -> None:
        """The end of the rows: queue a held second, then say so."""
        held, self._held = self._held, None
        self.done = True
        if held is not None and len(held):
            self._queue(held)
        self.read_ahead_ns = 1 << 62
        self._wake()

    def _slice(self, rows: TraceRows) -> TraceRows | None:
        """The rows of ``--from``/``--to``/``--limit``; ends the feed past the slice."""
        times = rows.times_s
        start, stop = 0, len(rows)
        config = self.config
        if config.from_s is not None and times[0] < config.from_s:
            start = int(np.searchsorted(np.asarray(times), config.from_s, side="left"))
        if config.to_s is not None and times[-1] >= config.to_s:
            stop = int(np.searchsorted(np.asarray(times), config.to_s, side="left"))
            self._end_after_block()
        if config.limit is not None and self._slice_rows + (stop - start) >= config.limit:
            stop = start + config.limit - self._slice_rows
            self._end_after_block()
        self._slice_rows += max(0, stop - start)
        if start == 0 and stop == len(rows):
            return rows
        return rows.select(list(range(start, stop))) if stop > start else None

    def _end_after_block(self) -> None:
        """The slice ends in this block: no more reading after it."""
        self._blocks = iter(())

    def _hold_partial_second(self, rows: TraceRows | None) -> TraceRows | None:
        """Timed: keep back the rows of the block's last second (more may follow)."""
        held = self._held
        if held is not None and rows is not None:
            rows = _concat(held, rows)
        elif held is not None:
            rows = held
        self._held = None
        if rows is None or not len(rows):
            return None
        last = int(rows.times_s[-1])
        times = np.floor(np.asarray(rows.times_s))
        cut = int(np.searchsorted(times, last, side="left"))
        if cut == 0:
            self._held = rows
            return None
        self._held = rows.select(list(range(cut, len(rows))))
        return rows.head(cut)

    # -- queueing ------------------------------------------------------------------------

    def _queue(self, rows: TraceRows) -> None:
        """Partition, profile, map and build ``rows``, then hand them to their lanes."""
        if self._t0 is None:
            self._t0 = float(rows.times_s[0])
        hashes = client_hashes(rows.clients)
        if self._n_workers > 1:
            mine = [h % self._n_workers == self._worker_index for h in hashes]
            rows = rows.select(list(compress(range(len(rows)), mine)))
            hashes = list(compress(hashes, mine))
            if not len(rows):
                return
        self.profile.add(rows)
        self.counts.rows += len(rows)
        offsets = self._offsets(rows) if self.config.timed else None
        codes = self.mapping.map(rows.ops)
        keep = self._keep(rows, codes)
        if keep is not None:
            rows = rows.select(keep)
            hashes = gather(hashes, keep)
            codes = gather(codes, keep)
            if offsets is not None:
                offsets = gather(offsets, keep)
        if not len(rows):
            return
        self.counts.requests += len(rows)
        keys = self._keys.fit(rows.keys, rows.key_sizes)
        self.counts.keys_clamped = self._keys.clamped
        values, ttls = self._values_and_ttls(codes, rows)
        self._distribute(hashes, _Chunk(codes, keys, values, ttls, offsets))

    def _keep(self, rows: TraceRows, codes: list[int]) -> list[int] | None:
        """Indexes of the rows to send (None: all); the others are counted skipped."""
        skipped = codes.count(SKIPPED)
        too_big = max(rows.value_sizes) > MAX_VALUE_BYTES
        if not skipped and not too_big:
            return None
        keep = []
        for i, code in enumerate(codes):
            if code == SKIPPED:
                self.counts.skipped[self.mapping.reasons[TRACE_OPS[rows.ops[i]]]] += 1
            elif rows.value_sizes[i] > MAX_VALUE_BYTES and code in _STORES:
                self.counts.skipped[f"value_size over {MAX_VALUE_BYTES} bytes"] += 1
            else:
                keep.append(i)
        return keep

    def _values_and_ttls(self, codes: list[int], rows: TraceRows) -> tuple[list[Any], list[int]]:
        """A value slice for each store (None for the rest); the TTL of each store."""
        values, ttls = self._values_and_row_ttls(codes, rows)
        top = self.mapping.max_ttl_s
        if top is not None and max(ttls) > top:
            self.counts.ttls_clamped += sum(ttl > top for ttl in ttls)
            ttls = [min(ttl, top) for ttl in ttls]
        return values, ttls

    def _values_and_row_ttls(
        self, codes: list[int], rows: TraceRows
    ) -> tuple[list[Any], list[int]]:
        stores = list(map(_IS_STORE.__getitem__, codes))
        n = len(codes)
        if all(stores):
            return list(self._values.slices(rows.value_sizes)), list(rows.ttls_s)
        values: list[Any] = [None] * n
        ttls = [NO_TTL] * n
        at = list(compress(range(n), stores))
        if at:
            sizes = gather(rows.value_sizes, at)
            for i, value, ttl in zip(
                at, self._values.slices(sizes), gather(rows.ttls_s, at), strict=True
            ):
                values[i] = value
                ttls[i] = ttl
        return values, ttls

    def _offsets(self, rows: TraceRows) -> list[int]:
        """Timed: each row's send time from the replay's start, ns (see the module doc)."""
        assert self._t0 is not None
        times = np.asarray(rows.times_s, dtype=np.float64)
        whole = np.floor(times)
        spread = times.copy()
        integral = times == whole
        if integral.any():
            # Rows of one whole second: the k-th of n goes at t + k/n.
            seconds, first, count = np.unique(whole, return_index=True, return_counts=True)
            del seconds
            group = np.repeat(np.arange(len(first)), count)
            rank = np.arange(len(times)) - first[group]
            spread = np.where(integral, whole + rank / count[group], times)
        offsets = np.round((spread - self._t0) * self._ns_per_s).astype(np.int64)
        self.read_ahead_ns = int(offsets[-1])
        return offsets.tolist()  # type: ignore[no-any-return]

    def _distribute(self, hashes: list[int], chunk: _Chunk) -> None:
        """Append each row to its client's lane, in order within each lane."""
        n_lanes = len(self.lanes)
        self.buffered += len(chunk.ops)
        if n_lanes == 1:
            targets: list[tuple[Lane, _Chunk]] = [(self.lanes[0], chunk)]
        else:
            # Sort the block by lane once (stable: each lane keeps the trace's order), then
            # each lane's rows are one slice of each column.
            lane_of = (np.asarray(hashes, dtype=np.int64) // self._n_workers) % n_lanes
            order = np.argsort(lane_of, kind="stable")
            bounds = np.searchsorted(lane_of[order], np.arange(n_lanes + 1), side="left").tolist()
            pick = order.tolist()
            by_lane = _Chunk(
                gather(chunk.ops, pick),
                gather(chunk.keys, pick),
                gather(chunk.values, pick),
                gather(chunk.ttls, pick),
                gather(chunk.offsets_ns, pick) if chunk.offsets_ns is not None else None,
            )
            targets = [
                (self.lanes[index], by_lane.part(bounds[index], bounds[index + 1]))
                for index in range(n_lanes)
                if bounds[index] < bounds[index + 1]
            ]
        for lane, part in targets:
            lane.append(part)
        self._wake()

    def _wake(self) -> None:
        """Tell the engine which starved lanes have rows now (or are at their end)."""
        if self.on_rows is None:
            return
        woken = [lane for lane in self.lanes if lane.starved and (lane.waiting_rows or self.done)]
        if woken:
            for lane in woken:
                lane.starved = False
            self.on_rows(woken)


def _concat(a: TraceRows, b: TraceRows) -> TraceRows:
    return TraceRows(
        a.first_line,
        [*a.times_s, *b.times_s],
        a.keys + b.keys,
        a.key_sizes + b.key_sizes,
        a.value_sizes + b.value_sizes,
        a.clients + b.clients,
        a.ops + b.ops,
        a.ttls_s + b.ttls_s,
    )
