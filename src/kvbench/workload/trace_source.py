"""A replay's request sources: the trace's rows fanned out to one lane per connection.

``ReplayFeed.prepare`` reads the slice of the trace (``--from``/``--to``/``--limit``)
once, before the replay's clock starts, a block at a time (workload/trace.py): it keeps
the rows whose client belongs to this worker process, counts them into the trace profile,
maps their ops (workload/trace_ops.py), fits their keys, gives each store its value's
bounds in one value blob, and writes each lane's rows to the spool (workload/
trace_spool.py): ``crc32(client_id) % n_workers`` picks the process, and a client's first
row picks its connection: the one with the fewest rows so far, so the connections carry
about as many rows each and one client's requests go out on one connection, in trace
order. A bad row
stops the replay there, before anything is sent. While the replay runs, a ``Lane`` (a
connection's request source: ``next_chunk``, as ``RequestSource``'s) reads its segments
back one at a time, each a ``Chunk`` (workload/chunk.py): as lists for the Python driver,
as packed columns for the compiled pump. A segment carries one TTL for its writes
(``Chunk.ttl_s``).

Timed replays (``--speed S``) give every row an offset from the replay's start:
``(t - t0) / S`` seconds, where rows sharing one whole-second timestamp (the Twitter
traces' granularity) are spread evenly over that second (k-th of n at ``t + k/n``);
fractional timestamps are used as written.

Memory: a block of the file and its rows at a time while preparing; then one segment per
lane (and, timed, the next one's offsets).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kvbench.config.replay import ReplayConfig
from kvbench.protocols.base import Op
from kvbench.workload.chunk import Chunk, Held
from kvbench.workload.trace import TRACE_OPS, TraceReader, TraceRows, client_hashes
from kvbench.workload.trace_ops import (
    MAX_VALUE_BYTES,
    SKIPPED,
    KeyFitter,
    OpMapping,
    ValueBlob,
    gather,
)
from kvbench.workload.trace_profile import TraceProfile
from kvbench.workload.trace_spool import Columns, Segment, Spool, SpoolUnreadable

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
class _Rows:
    """Rows of a block on their way to the spool, index-aligned (offsets: timed only)."""

    ops: list[int]
    keys: list[bytes]
    value_starts: list[int]
    value_sizes: list[int]  # 0 where the op sends no value
    ttls: list[int]
    offsets_ns: list[int] | None

    def part(self, start: int, stop: int) -> _Rows:
        offsets = self.offsets_ns[start:stop] if self.offsets_ns is not None else None
        return _Rows(
            self.ops[start:stop],
            self.keys[start:stop],
            self.value_starts[start:stop],
            self.value_sizes[start:stop],
            self.ttls[start:stop],
            offsets,
        )

    def pick(self, indexes: list[int]) -> _Rows:
        offsets = gather(self.offsets_ns, indexes) if self.offsets_ns is not None else None
        return _Rows(
            gather(self.ops, indexes),
            gather(self.keys, indexes),
            gather(self.value_starts, indexes),
            gather(self.value_sizes, indexes),
            gather(self.ttls, indexes),
            offsets,
        )


class Lane:
    """One connection's requests, read from the spool: a segment per ``next_chunk``.

    Its chunks are lists (the Python driver's; ``values[i]`` is None for requests without
    a value) until ``pack()``: then packed columns (a compiled pump's stream takes them).
    Each carries its segment's TTL (0: none) and, timed, its offsets.

    Attributes:
        taken: requests of the segments handed out before the current one (the last
            handed out).
        holders: what holds the chunks handed out (the connection's cursor, its
            compiled stream): what they have not sent is still the lane's (``pending``).
    """

    def __init__(self, feed: ReplayFeed, index: int) -> None:
        self.feed = feed
        self.index = index
        self._waiting: deque[Segment] = deque()
        self._next: tuple[Segment, Columns] | None = None  # a waiting segment, read
        self.waiting_rows = 0
        self._offsets_ns: npt.NDArray[np.int64] = _NO_OFFSETS  # the current segment's
        # The same as ints, made when a schedule first asks (a timed replay's dispatcher
        # asks for one or a few at a time: a list's slice and bisect cost a fraction of
        # numpy's for so few).
        self._offsets_list: list[int] | None = None
        self._current_rows = 0  # requests of the current segment
        self.taken = 0  # requests of earlier segments
        self.holders: list[Held] = []
        self._packed = False

    @property
    def empty(self) -> bool:
        """Never: a lane ends instead (``next_chunk``)."""
        return False

    def append(self, segment: Segment) -> None:
        """Queue ``segment`` (the feed, while preparing)."""
        self._waiting.append(segment)
        self.waiting_rows += segment.rows

    def hold(self, holder: Held) -> None:
        """``holder`` takes this lane's chunks (its unsent requests are pending)."""
        self.holders.append(holder)

    def pack(self) -> bool:
        """Hand out packed chunks from the next one on (a compiled pump's stream)."""
        self._packed = True
        return True

    def pending(self) -> int:
        """Requests this lane holds and has not sent (its holders' unsent ones counted)."""
        return self.waiting_rows + sum(holder.size - holder.pos for holder in self.holders)

    def next_chunk(self) -> Chunk | None:
        """The next segment; None when the lane has handed out its last request."""
        self.taken += self._current_rows
        self._current_rows = 0
        self._offsets_ns = _NO_OFFSETS
        self._offsets_list = None
        if not self._waiting:
            return None
        segment = self._waiting.popleft()
        try:
            columns = self._columns(segment)
        except SpoolUnreadable as exc:  # (called from a pump's send: no raising through it)
            self._waiting.clear()  # this lane sends nothing more
            self.waiting_rows = 0
            self.feed.unreadable(exc)
            return None
        self._next = None
        self.waiting_rows -= segment.rows
        values = self.feed.values
        offsets = columns.offsets_ns
        if offsets is not None:
            self._offsets_ns = offsets
            self._offsets_list = None
        self._current_rows = segment.rows
        if self._packed:
            packed = (
                columns.ops,
                columns.keys,
                columns.key_starts,
                columns.key_ends,
                values,
                columns.value_starts,
                columns.value_ends,
            )
            # (ops: what a dropped request is counted under)
            return Chunk(columns.ops, columns.ops, [], [], packed, segment.ttl_s, offsets)
        ops = list(columns.ops)
        view = memoryview(values)
        chunk_values = [
            view[start:end] if _IS_STORE[op] else None
            for op, start, end in zip(
                ops,
                columns.value_starts.tolist(),
                columns.value_ends.tolist(),
                strict=True,
            )
        ]
        return Chunk(ops, ops, columns.key_list(), chunk_values, None, segment.ttl_s, offsets)

    def _columns(self, segment: Segment) -> Columns:
        """``segment`` read (once: a timed replay reads the next segment's offsets early)."""
        if self._next is not None and self._next[0] is segment:
            return self._next[1]
        return self.feed.spool.read(segment)

    def _current_offsets(self) -> list[int]:
        if self._offsets_list is None:
            self._offsets_list = self._offsets_ns.tolist()
        return self._offsets_list

    def offsets(self, first: int, stop: int) -> list[int]:
        """Timed replays: the offsets of this lane's requests ``first .. stop - 1`` (lane
        indexes, at or after the current segment's start; fewer at the lane's end). The
        dispatcher asks for the next one or few, each tick, of each connection."""
        skip, want = first - self.taken, stop - first
        if skip >= 0 and skip + want <= len(self._offsets_ns):
            return self._current_offsets()[skip : skip + want]
        parts = []
        for offsets in chain([self._offsets_ns], map(self._waiting_offsets, self._waiting)):
            if skip >= len(offsets):
                skip -= len(offsets)
                continue
            part = offsets[skip : skip + want]
            parts.append(part)
            want -= len(part)
            skip = 0
            if want == 0:
                break
        out: list[int] = np.concatenate(parts).tolist() if parts else []
        return out

    def due_count(self, offset_ns: int) -> int:
        """Timed replays: how many of this lane's requests (counted over the whole
        replay) are due at or before ``offset_ns``."""
        current = self._offsets_ns
        count = self.taken
        if len(current):
            if current[-1] > offset_ns:
                return count + bisect_right(self._current_offsets(), offset_ns)
            count += len(current)
        for segment in self._waiting:
            if segment.last_ns <= offset_ns:
                count += segment.rows
                continue
            if segment.first_ns > offset_ns:
                return count
            offsets = self._waiting_offsets(segment)
            return count + int(np.searchsorted(offsets, offset_ns, side="right"))
        return count

    def _waiting_offsets(self, segment: Segment) -> npt.NDArray[np.int64]:
        """The offsets of a waiting segment (the first one's are kept for its refill)."""
        if self._next is not None and self._next[0] is segment:
            columns = self._next[1]
        else:
            columns = self.feed.spool.read(segment)
            if segment is self._waiting[0]:
                self._next = (segment, columns)
        assert columns.offsets_ns is not None
        return columns.offsets_ns


_NO_OFFSETS = np.zeros(0, dtype=np.int64)


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
    """Reads the trace into the spool (``prepare``) and hands it out by ``Lane``.

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
        done: the trace (or its slice, or ``--limit``) is read to its end: ``prepare``
            ran.
        spool: the lanes' segments.
        values: the value blob the segments' value bounds index.
        on_unreadable: told (once per lane) when the spool cannot be read back while
            the replay runs; the lane then ends. None: the error is raised.
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
        self._client_lanes: dict[bytes, int] = {}  # each client's lane, once it came
        self._lane_rows = [0] * n_lanes  # rows given to each lane so far
        self.profile = TraceProfile()
        self.counts = ReplayCounts()
        self.done = False
        self.spool = Spool()
        self.on_unreadable: Callable[[SpoolUnreadable], None] | None = None
        self._keys = KeyFitter()
        self._values = ValueBlob(np.random.default_rng([seed, worker_index, 7]))
        self.values = b""
        self._slice_rows = 0  # rows of the slice so far, every worker's (for --limit)
        self._t0: float | None = config.from_s
        self._held: TraceRows | None = None  # timed: the rows of a second not yet complete
        self._ns_per_s = 1e9 / config.speed if config.speed is not None else 0.0

    def prepare(self) -> None:
        """Read this worker's rows of the slice into the lanes' segments.

        Raises:
            ConfigError: a bad row (its file and line): nothing of the replay is sent.
        """
        try:
            while (rows := next(self._blocks, None)) is not None:  # a slice's end stops it
                if self._worker_index == 0:
                    self.counts.lines_read = self._reader.lines_read
                sliced = self._slice(rows)
                if self.config.timed:
                    sliced = self._hold_partial_second(sliced)
                if sliced is not None and len(sliced):
                    self._queue(sliced)
        except BaseException:
            self.spool.close()
            raise
        if self._worker_index == 0:
            self.counts.lines_read = self._reader.lines_read
        held, self._held = self._held, None
        if held is not None and len(held):
            self._queue(held)
        self.values = self._values.blob()
        self.done = True

    def unreadable(self, exc: SpoolUnreadable) -> None:
        """A lane could not read its next segment back: ``on_unreadable`` hears of it."""
        if self.on_unreadable is None:
            raise exc
        self.on_unreadable(exc)

    def close(self) -> None:
        """Remove the spool."""
        self.spool.close()

    def remaining(self) -> int:
        """Requests in the lanes not sent yet."""
        return sum(lane.pending() for lane in self.lanes)

    def exhausted(self) -> bool:
        """Every request of the replay was handed out."""
        return self.done and not self.remaining()

    def report(self) -> dict[str, Any]:
        """What this worker's feed saw and did, as plain data (results/trace.py merges)."""
        return {
            "profile": self.profile.to_dict(),
            "counts": self.counts.to_dict(),
            "mapping": dict(self.mapping.sent_as),
        }

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
        """Partition, profile, map and build ``rows``, then write them to their lanes."""
        if self._t0 is None:
            self._t0 = float(rows.times_s[0])
        if self._n_workers > 1:
            mine = [h % self._n_workers == self._worker_index for h in client_hashes(rows.clients)]
            rows = rows.select(list(compress(range(len(rows)), mine)))
            if not len(rows):
                return
        self.profile.add(rows)
        self.counts.rows += len(rows)
        offsets = self._offsets(rows) if self.config.timed else None
        codes = self.mapping.map(rows.ops)
        keep = self._keep(rows, codes)
        if keep is not None:
            rows = rows.select(keep)
            codes = gather(codes, keep)
            if offsets is not None:
                offsets = gather(offsets, keep)
        if not len(rows):
            return
        self.counts.requests += len(rows)
        keys = self._keys.fit(rows.keys, rows.key_sizes)
        self.counts.keys_clamped = self._keys.clamped
        starts, sizes, ttls = self._values_and_ttls(codes, rows)
        self._distribute(rows.clients, _Rows(codes, keys, starts, sizes, ttls, offsets))

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

    def _values_and_ttls(
        self, codes: list[int], rows: TraceRows
    ) -> tuple[list[int], list[int], list[int]]:
        """Each store's value (start in the blob, size; 0 and 0 for the rest) and TTL
        (``NO_TTL`` for the rest), clamped where the server reads a long one as a date."""
        starts, sizes, ttls = self._values_and_row_ttls(codes, rows)
        top = self.mapping.max_ttl_s
        if top is not None and max(ttls) > top:
            self.counts.ttls_clamped += sum(ttl > top for ttl in ttls)
            ttls = [min(ttl, top) for ttl in ttls]
        return starts, sizes, ttls

    def _values_and_row_ttls(
        self, codes: list[int], rows: TraceRows
    ) -> tuple[list[int], list[int], list[int]]:
        stores = list(map(_IS_STORE.__getitem__, codes))
        n = len(codes)
        if all(stores):
            sizes = list(rows.value_sizes)
            return self._values.starts(sizes), sizes, list(rows.ttls_s)
        starts = [0] * n
        sizes = [0] * n
        ttls = [NO_TTL] * n
        at = list(compress(range(n), stores))
        if at:
            store_sizes = gather(rows.value_sizes, at)
            for i, start, size, ttl in zip(
                at,
                self._values.starts(store_sizes),
                store_sizes,
                gather(rows.ttls_s, at),
                strict=True,
            ):
                starts[i] = start
                sizes[i] = size
                ttls[i] = ttl
        return starts, sizes, ttls

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

    def _lanes_of(self, clients: list[bytes]) -> npt.NDArray[np.int64]:
        """Each row's lane: its client's, given when the client first came (a new client
        goes to the lane with the fewest rows so far, counting the block's rows of the
        clients placed before it), so the connections carry about as many rows each."""
        known = self._client_lanes
        lanes = list(map(known.get, clients, repeat(-1)))
        if -1 in lanes:
            counts = Counter(clients)
            loads = np.array(self._lane_rows, dtype=np.int64)
            np.add.at(loads, [lane for lane in lanes if lane >= 0], 1)
            heap = [(int(load), index) for index, load in enumerate(loads.tolist())]
            heapq.heapify(heap)
            for client, lane in zip(clients, lanes, strict=True):
                if lane < 0 and client not in known:
                    load, index = heapq.heappop(heap)
                    known[client] = index
                    heapq.heappush(heap, (load + counts[client], index))
            lanes = list(map(known.__getitem__, clients))
        return np.array(lanes, dtype=np.int64)

    def _distribute(self, clients: list[bytes], chunk: _Rows) -> None:
        """Write each lane's rows of ``chunk`` to the spool, in order within each lane, a
        segment per run of one write TTL."""
        n_lanes = len(self.lanes)
        if n_lanes == 1:
            targets: list[tuple[Lane, _Rows]] = [(self.lanes[0], chunk)]
        else:
            # Sort the block by lane once (stable: each lane keeps the trace's order), then
            # each lane's rows are one slice of each column.
            lane_of = self._lanes_of(clients)
            order = np.argsort(lane_of, kind="stable")
            bounds = np.searchsorted(lane_of[order], np.arange(n_lanes + 1), side="left").tolist()
            by_lane = chunk.pick(order.tolist())
            targets = [
                (self.lanes[index], by_lane.part(bounds[index], bounds[index + 1]))
                for index in range(n_lanes)
                if bounds[index] < bounds[index + 1]
            ]
        for lane, part in targets:
            self._lane_rows[lane.index] += len(part.ops)
            for start, stop in _ttl_runs(part.ttls):
                run = part if stop - start == len(part.ops) else part.part(start, stop)
                ttl = max(run.ttls)
                segment = self.spool.write(
                    run.ops,
                    run.keys,
                    run.value_starts,
                    run.value_sizes,
                    ttl if ttl > 0 else 0,
                    run.offsets_ns,
                )
                lane.append(segment)


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
