"""WorkloadPlan: everything one worker needs to generate requests, compiled up front.

``compile_plan(config, worker_index, n_workers)`` builds the key table, value slices and
seeded pickers; ``RequestSource`` then hands the engine ``Chunk``s of (op, key, value) as
plain lists (workload/chunk.py) so the hot path does list indexing only. Work that cannot
be prebuilt (timestamp values, verified values) is done per chunk in ``next_chunk``,
never per request on the hot path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from kvbench.config.model import RMW, WorkloadConfig
from kvbench.config.workload_fields import COUNTER_INFIX, FB_ETC, MAX_COUNTERS
from kvbench.protocols.base import OP_NAMES, Op
from kvbench.protocols.commands import RequestTemplate
from kvbench.workload.chunk import Chunk, Held
from kvbench.workload.commands import COMMAND_BASE, CommandSet
from kvbench.workload.keys import KeyPicker, KeyTable, LatestPicker, build_key_table
from kvbench.workload.mix import OpMix
from kvbench.workload.models import model_key_sizes
from kvbench.workload.values import slice_bounds, timestamp_value, value_table_for
from kvbench.workload.verify import derive_value, first_version

# Requests drawn per refill: large enough that its fixed cost vanishes, small enough
# that a refill does not stall the loop. In a loaded worker that fixed cost is most of
# it (its code and tables cold after the kernel's work between two refills): a packed
# refill of 1,024 took 230-250 us of CPU there (41 us drawn back to back), one of 4,096
# 310 us, so at 99,000 requests/s the refills' share of the core fell from 2.3% to 0.8%,
# and the longest refill from 1.2-2.3 ms to 0.7-0.8 ms (docs/benchmarks.md).
CHUNK = 4096
# Chunks of timestamp values stay this small: a chunk's timestamp is read when it is
# drawn, and grows as old as the time its requests take to send (docs/measurement.md).
TIMESTAMP_CHUNK = 1024
# The most bytes a packed chunk's table may hold: its bounds are uint32 (engine/_pump.c).
MAX_PACKED_BYTES = (1 << 32) - 1
# A chunk's keys and values as the plan draws them: a key each (a multi-get's tuple of
# them), and a value each (a view into the value table, or bytes of its own).
KeyList: TypeAlias = list[bytes | tuple[bytes, ...]]
ValueList: TypeAlias = list[bytes | memoryview]
# incr/decr need numeric values, so they work on keys of their own ("<prefix>counter:N"),
# never on the keys that sets fill with random bytes; MAX_COUNTERS at most. Config knows
# their length: it refuses a prefix that would make them too long for the protocol.


@dataclass(frozen=True, slots=True)
class WorkloadPlan:
    """One worker's compiled workload (immutable once built).

    ``commands`` names the mix's commands; the results of the j-th name are recorded
    under op number ``COMMAND_BASE + j``.
    """

    config: WorkloadConfig
    worker_index: int
    n_workers: int
    seed: int
    key_table: Sequence[bytes]  # a KeyTable (packed), or a list (a shard's share)
    value_table: list[memoryview]
    counter_table: Sequence[bytes]
    ops: tuple[Op, ...]
    commands: CommandSet

    @property
    def rmw(self) -> bool:
        """The mix has read-modify-writes, recorded as op number ``RMW_CODE`` (``rmw``)."""
        return self.config.rmw

    def op_names(self) -> tuple[str, ...]:
        """The recorder's op names, indexed by recorded op number: ``Op``'s, then the
        commands' (or ``rmw``: the two are not mixed)."""
        return OP_NAMES + self.commands.names + ((RMW,) if self.rmw else ())

    def keys_per_op(self) -> tuple[int, ...]:
        """Keys one request asks for, by recorded op number (a multi-get's width, a
        command's ``__key__`` words, a read-modify-write's one key)."""
        fixed = tuple(self.config.multiget_keys if op == Op.MGET else 1 for op in Op)
        return fixed + self.commands.keys + ((1,) if self.rmw else ())

    def preload_range(self) -> range:
        """The key indexes this worker stores during preload (its share of the keyspace:
        the records, not the keys ``latest``'s sets insert after them)."""
        count = min(len(self.key_table), self.config.keys)
        low = count * self.worker_index // self.n_workers
        high = count * (self.worker_index + 1) // self.n_workers
        return range(low, high)


def own_key_plans(plan: WorkloadPlan, connections: int) -> list[WorkloadPlan]:
    """Set-then-get: the worker's share of the keyspace (``preload_range``) cut into one
    plan per connection, so no two connections of the run ever send the same key and a
    get on a connection reads what that connection's set before it wrote.

    Raises:
        ValueError: fewer keys than connections (config refuses that first).
    """
    share = plan.preload_range()
    if len(share) < connections:
        raise ValueError(f"{len(share)} keys cannot be shared by {connections} connections")
    plans = []
    for index in range(connections):
        low = share.start + len(share) * index // connections
        high = share.start + len(share) * (index + 1) // connections
        table = plan.key_table[low:high]
        plans.append(replace(plan, config=replace(plan.config, keys=len(table)), key_table=table))
    return plans


def compile_plan(config: WorkloadConfig, worker_index: int, n_workers: int) -> WorkloadPlan:
    """Build a worker's plan; deterministic in (config.seed, worker_index)."""
    rng = np.random.default_rng([config.seed, worker_index, 0])
    # Every worker builds the same key table: it depends on the run's seed only.
    key_rng = np.random.default_rng([config.seed, 2])
    count = config.keys + config.insert_keys
    sizes = (
        model_key_sizes(config.key_prefix, count, config.seed)[0]
        if config.key_size_model == FB_ETC
        else None
    )
    mix = OpMix(config.ratio, rng)
    # The keys, then the counters, in one blob: a packed chunk's key column as it is.
    keys = KeyTable.joined(
        build_key_table(
            config.key_prefix, count, config.key_template, config.key_size, key_rng, sizes
        ),
        build_key_table(config.key_prefix + COUNTER_INFIX, min(config.keys, MAX_COUNTERS)),
    )
    return WorkloadPlan(
        config=config,
        worker_index=worker_index,
        n_workers=n_workers,
        seed=config.seed,
        key_table=keys[:count],
        value_table=value_table_for(config, rng),
        counter_table=keys[count:],
        # a read-modify-write sends a get and a set
        ops=tuple(mix.ops) + ((Op.GET, Op.SET) if mix.rmw else ()),
        commands=CommandSet.of(config.commands),
    )


class RequestSource:
    """Chunks of requests for one worker (``next_chunk``), each handed out once; the
    connections of a server read them through one cursor (workload/chunk.py).

    Args:
        plan: the worker's compiled plan.
        wall_clock_ns: the wall clock timestamp values are taken from (injected for tests).
        templates: the plan's commands compiled for the target's protocol
            (``workload.commands.compile_commands``), one per ``workload.commands`` entry.

    A plan without keys (a Redis Cluster master that serves none of the keyspace's slots)
    makes an empty source: ``empty`` is true and it draws nothing until ``rekey`` gives it
    keys.

    Its chunks carry no TTL (each connection's codec sends its own) and hold ``CHUNK``
    requests (``TIMESTAMP_CHUNK`` of timestamp values): lists, or after ``pack()`` packed
    columns (bounds into the key and value tables laid end to end, no Python object per
    request). Commands' requests are recorded per command name (``Chunk.record_ops``).
    """

    def __init__(
        self,
        plan: WorkloadPlan,
        wall_clock_ns: Callable[[], int] = time.time_ns,
        templates: Sequence[RequestTemplate] = (),
    ) -> None:
        config = plan.config
        rng = np.random.default_rng([plan.seed, plan.worker_index, 1])
        self._plan = plan
        self._wall_clock_ns = wall_clock_ns
        self._timestamps = config.value_kind == "timestamp"
        # Verified values are derived from their key; timestamps are checked as times.
        self._verify = config.verify and not self._timestamps
        # Verified values carry a version: this worker's sets count up from worker << 24.
        self._version = first_version(plan.worker_index)
        # Verified values are derived by whoever takes the chunks (``pack``): packed
        # chunks carry the sizes drawn, not the values.
        self._taker_derives = False
        # Commands are rendered by whoever takes the chunks (``pack``): a packed chunk's
        # command is its entry's code, the key and value its template takes.
        self._taker_renders = False
        self._rng = rng
        self._keys = self._picker(plan)
        self._key_objects: npt.NDArray[np.object_] | None = None  # _key_array()
        self._value_array = _objects(plan.value_table)
        self._mix = OpMix(config.ratio, rng, config.commands, config.op_order)
        if len(templates) != len(config.commands):
            raise ValueError("one template per command is needed")
        self._templates = tuple(templates)
        # code -> the op the codec sends / the op number results are recorded under.
        entries = plan.commands.name_of
        self._codec_ops = np.array([*range(COMMAND_BASE), *[int(Op.COMMAND)] * len(entries)])
        self._record_ops = np.array([*range(COMMAND_BASE), *(COMMAND_BASE + j for j in entries)])
        self._mget_width = config.multiget_keys
        self._special = {int(Op.MGET), int(Op.INCR)} & {int(op) for op in self._mix.ops}
        # set-then-get: the chunk is (set K, get K) pairs, K drawn once per pair.
        self._pairs = config.set_then_get
        self._tables: _PackedTables | None = None
        self._packs = False  # a taker asked for packed chunks (``pack``)

    def can_pack(self) -> bool:
        """Every request of this source can go as a packed chunk: no multi-gets (a tuple
        of keys), no ``--command`` unless the taker renders them (``pack``), no values made
        per chunk (timestamps; verified ones unless the taker derives them), no
        set-then-get pairs, and keys to draw."""
        return not (
            (self._templates and not self._taker_renders)
            or (self._verify and not self._taker_derives)
            or self._timestamps
            or self._pairs
            or int(Op.MGET) in self._special
            or self._keys is None
        )

    def pack(self, derives: bool = False, renders: bool = False) -> bool:
        """Draw packed chunks from the next one on (a compiled pump's stream takes
        them), where ``can_pack`` and the tables' bounds fit 32 bits (a key or value table
        over 4 GiB stays lists).

        Args:
            derives: the taker derives ``--verify``'s values itself, each set's from its
                key and the size drawn (a compiled ``Stream`` made with ``derive_from``),
                so verified sets can go packed too. Lists still carry derived values.
            renders: the taker renders ``--command``'s requests itself from
                ``command_table`` (a compiled ``Stream`` made with its ``commands``): a
                command goes as its entry's code (``COMMAND_BASE + i``), with its drawn
                key and value. Only where ``command_table`` is not None.

        Returns:
            Whether it packs.
        """
        self._taker_derives = derives
        self._taker_renders = renders and self.command_table() is not None
        self._packs = True
        self._tables = _PackedTables.of(self._plan) if self.can_pack() else None
        return self._tables is not None

    def command_table(self) -> tuple[tuple[int, tuple[Any, ...]], ...] | None:
        """The commands as a compiled ``Stream`` renders them (its ``commands``): per
        entry, the code its requests are recorded under (its name's) and its template's
        pieces; None where the taker cannot render them: no commands, or one with more
        than one key (the others are drawn per request, ``_render_commands``)."""
        rendered = [t for t in self._templates if t.keys <= 1]
        if not rendered or len(rendered) != len(self._templates):
            return None
        names = self._plan.commands.name_of
        return tuple((COMMAND_BASE + names[i], t.pieces()) for i, t in enumerate(rendered))

    def _key_array(self) -> npt.NDArray[np.object_]:
        """The keys as an object array, to gather chunks of lists from in C: made on the
        first chunk of lists (a source that packs never makes a bytes object per key)."""
        if self._key_objects is None:
            table = self._plan.key_table
            self._key_objects = table.objects() if isinstance(table, KeyTable) else _objects(table)
        return self._key_objects

    def _picker(self, plan: WorkloadPlan) -> KeyPicker | LatestPicker | None:
        """A key picker over ``plan``'s keys (workers start sequential walks apart)."""
        if not plan.key_table:
            return None
        config = plan.config
        if config.key_pattern == "latest":
            return LatestPicker(
                config.keys,
                config.insert_keys,
                plan.worker_index,
                plan.n_workers,
                self._rng,
                config.zipf_exponent,
                config.insert_lag,
            )
        start = len(plan.key_table) * plan.worker_index // plan.n_workers
        return KeyPicker.for_config(config, self._rng, start)

    def _indexes(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The key index of each of a chunk's requests (``latest``: a set inserts)."""
        picker = self._keys
        assert picker is not None, "an empty source draws nothing"
        if isinstance(picker, LatestPicker):
            return picker.draw_for(codes == int(Op.SET))
        return picker.draw(len(codes))

    @property
    def empty(self) -> bool:
        """No keys to draw from: ``next_chunk`` must not be called."""
        return self._keys is None

    def hold(self, holder: Held) -> None:
        """Nothing to count: a workload never runs dry."""

    def rekey(self, plan: WorkloadPlan) -> None:
        """Draw ``plan``'s keys from the next chunk on (the reader of this source drops
        the rest of its chunk: engine/shards.py ``Shard.rekey``).

        A Redis Cluster slot moved to or from this source's master (engine/redirect.py).
        The seeded generators and the verified values' versions go on where they were.
        """
        self._plan = plan
        self._keys = self._picker(plan)
        self._key_objects = None
        self._value_array = _objects(plan.value_table)
        if self._packs:  # packed from ``plan``'s tables (lists where it has no keys)
            self._tables = _PackedTables.of(plan) if self.can_pack() else None

    def _place_special(
        self, codes: npt.NDArray[np.int64], indexes: npt.NDArray[np.int64], keys: KeyList
    ) -> None:
        """Give mget positions their key tuples and incr positions a counter key.

        The mgets' keys are drawn in one call, in position order (one draw per mget cost
        3 ms per chunk, most of a multi-get run's client CPU).
        """
        picker = self._keys
        assert picker is not None, "an empty source draws nothing"
        at = np.flatnonzero(codes == int(Op.MGET))
        if at.size:
            width = self._mget_width
            drawn = self._key_array().take(picker.draw(at.size * width)).reshape(-1, width)
            for i, row in zip(at.tolist(), drawn.tolist(), strict=True):
                keys[i] = tuple(row)
        at = np.flatnonzero(codes == int(Op.INCR))
        if at.size:
            counters = self._plan.counter_table
            for i, j in zip(at.tolist(), (indexes[at] % len(counters)).tolist(), strict=True):
                keys[i] = counters[j]

    def next_chunk(self) -> Chunk:
        """Draw the next chunk (a workload never runs dry; a replay's lane may:
        ``Lane.next_chunk``)."""
        assert self._keys is not None, "an empty source draws nothing"
        if self._tables is not None:
            return self._refill_packed(self._tables)
        size = TIMESTAMP_CHUNK if self._timestamps else CHUNK
        if self._pairs:  # (set K, get K) pairs: no --command templates (config refuses them)
            codes = np.array([int(Op.SET), int(Op.GET)] * (size // 2), dtype=np.int64)
            indexes = np.repeat(self._keys.draw(size // 2), 2)
        else:
            codes = self._mix.draw(size)
            indexes = self._indexes(codes)
        if self._templates:
            ops = self._codec_ops[codes].tolist()
            record_ops = self._record_ops[codes].tolist()
        else:
            ops = record_ops = codes.tolist()
        # Gathered from object arrays of the tables in C: 2.5x cheaper than itemgetter over
        # the index list (and its tolist).
        keys: KeyList = self._key_array().take(indexes).tolist()
        if self._special:
            self._place_special(codes, indexes, keys)
        values: ValueList
        if self._timestamps:
            # One wall-clock reading per chunk: every value of the chunk carries it.
            values = [timestamp_value(self._wall_clock_ns())] * size
        else:
            picks = self._rng.integers(0, len(self._value_array), size)
            values = self._value_array.take(picks).tolist()
        if self._verify:
            self._derive_values(ops, keys, values)
        if self._templates:
            self._render_commands(codes, keys, values)
        return Chunk(ops, record_ops, keys, values)

    def _refill_packed(self, tables: _PackedTables) -> Chunk:
        """``next_chunk`` as bounds into the tables: the same draws in the same order as
        the lists' (the same requests for the same seed), gathered in numpy."""
        assert self._keys is not None
        codes = self._mix.draw(CHUNK)
        indexes = self._indexes(codes)
        if self._special:  # incr: a counter key (they follow the keys in the table)
            at = codes == int(Op.INCR)
            indexes = np.where(at, tables.counters_at + indexes % tables.counters, indexes)
        picks = self._rng.integers(0, len(self._value_array), CHUNK)
        ops = record = memoryview(codes.astype(np.uint8).tobytes())
        if self._templates:  # (a command's code is its entry's, recorded as its name's)
            record = memoryview(self._record_ops[codes].astype(np.uint8).tobytes())
        packed = (
            ops,
            tables.keys,
            tables.key_starts.take(indexes),
            tables.key_ends.take(indexes),
            tables.values,
            tables.value_starts.take(picks),
            tables.value_ends.take(picks),
        )
        # (ops indexed as the lists are: what a dropped request is counted under)
        return Chunk(ops, record, [], [], packed)

    def _render_commands(
        self, codes: np.ndarray[Any, Any], keys: KeyList, values: ValueList
    ) -> None:
        """Replace each command position's key by its whole request: the drawn key fills
        the first ``__key__``, more keys are drawn for the others, ``__data__`` is the
        position's value."""
        positions = np.flatnonzero(codes >= COMMAND_BASE)
        entries = (codes[positions] - COMMAND_BASE).tolist()
        table = self._plan.key_table
        templates = self._templates
        picker = self._keys
        assert picker is not None, "an empty source draws nothing"
        for i, entry in zip(positions.tolist(), entries, strict=True):
            template = templates[entry]
            wanted = template.keys
            if wanted == 0:
                chosen: tuple[bytes, ...] = ()
            elif wanted == 1:
                chosen = (keys[i],)  # type: ignore[assignment]
            else:
                more = [table[j] for j in picker.draw(wanted - 1).tolist()]
                chosen = (keys[i], *more)  # type: ignore[arg-type]
            keys[i] = template.render(chosen, values[i])

    def _derive_values(self, ops: list[int], keys: KeyList, values: ValueList) -> None:
        """Verify mode: replace each set's value by one derived from its key and a version."""
        set_op = int(Op.SET)
        for i, op in enumerate(ops):
            if op == set_op:
                self._version += 1
                values[i] = derive_value(keys[i], self._version, len(values[i]))  # type: ignore[arg-type]

    def preload(self, indexes: range) -> FixedSource:
        """The preload's requests: a set of each key ``indexes`` names, with its value."""
        keys = _keys_at(self._plan.key_table, indexes)
        return FixedSource([int(Op.SET)] * len(keys), keys, self.preload_values(indexes), CHUNK)

    def preload_values(self, indexes: range) -> ValueList:
        """Values to store under the keys ``indexes`` during preload."""
        table = self._plan.key_table
        if self._verify:  # (not with timestamps: see __init__)
            sizes = self._plan.value_table
            return [derive_value(table[i], 0, len(sizes[i % len(sizes)])) for i in indexes]
        if self._timestamps:
            return [timestamp_value(self._wall_clock_ns())] * len(indexes)
        values = self._plan.value_table
        return [values[i % len(values)] for i in indexes]


class FixedSource:
    """A fixed run of requests, sent once: the preload's sets (engine/worker.py), a
    source of their own, so the run's sources are not touched.

    Args:
        ops, keys, values: the requests' columns (sequences: a key table's slice is a
            view, its keys made bytes objects a chunk at a time).
        chunk: requests per chunk (None: one chunk of them all). The preload's come in
            ``CHUNK``s, so its keys and lists live a chunk at a time, not all at once.
    """

    def __init__(
        self,
        ops: Sequence[int],
        keys: Sequence[bytes | tuple[bytes, ...]],
        values: Sequence[bytes | memoryview],
        chunk: int | None = None,
    ) -> None:
        self._ops, self._keys, self._values = ops, keys, values
        self._count = len(ops)
        self._chunk = chunk or max(1, self._count)
        self._next: int | None = 0  # the next chunk's first request (None: all handed out)

    @property
    def empty(self) -> bool:
        """Nothing to send (a Redis Cluster master that serves none of the keys)."""
        return self._count == 0

    def next_chunk(self) -> Chunk | None:
        """The next chunk of the requests (the first even when there are none), then
        None (they are sent once)."""
        low = self._next
        if low is None:
            return None
        high = min(self._count, low + self._chunk)
        self._next = high if high < self._count else None
        ops = list(self._ops[low:high])
        return Chunk(ops, ops, list(self._keys[low:high]), list(self._values[low:high]))

    def pack(self) -> bool:
        """Lists stay lists (``RequestSource.pack``)."""
        return False

    def hold(self, holder: Held) -> None:
        """Nothing to count (the preload's budget counts its requests)."""


@dataclass(frozen=True, slots=True)
class _PackedTables:
    """A plan's keys (its key table, then its counters) end to end, and the value blob
    its value table slices, with each entry's bounds (uint32)."""

    keys: bytes
    key_starts: npt.NDArray[np.uint32]
    key_ends: npt.NDArray[np.uint32]
    counters_at: int  # the first counter's index
    counters: int
    values: Any  # the value table's blob (bytes-like)
    value_starts: npt.NDArray[np.uint32]
    value_ends: npt.NDArray[np.uint32]

    @classmethod
    def of(cls, plan: WorkloadPlan) -> _PackedTables | None:
        """``plan``'s tables, or None where a bound would not fit 32 bits."""
        keys, counters = plan.key_table, plan.counter_table
        table = _whole(keys, counters) or KeyTable.joined(KeyTable.of(keys), KeyTable.of(counters))
        blob, starts = slice_bounds(plan.value_table)
        sizes = np.fromiter(map(len, plan.value_table), dtype=np.int64, count=len(starts))
        if max(len(blob), len(table.blob)) > MAX_PACKED_BYTES:
            return None
        return cls(
            table.blob,
            table.starts.astype(np.uint32, copy=False),
            table.ends.astype(np.uint32, copy=False),
            len(plan.key_table),
            max(1, len(plan.counter_table)),
            blob,
            starts.astype(np.uint32),
            (starts + sizes).astype(np.uint32),
        )


def _whole(keys: Sequence[bytes], counters: Sequence[bytes]) -> KeyTable | None:
    """compile_plan's table, keys then counters, when ``keys`` and ``counters`` are its
    two halves (views of it, one after the other): its bounds as they are, no copy."""
    if not (isinstance(keys, KeyTable) and isinstance(counters, KeyTable)):
        return None
    if keys.blob is not counters.blob:
        return None
    starts = _consecutive(keys.starts, counters.starts)
    ends = _consecutive(keys.ends, counters.ends)
    if starts is None or ends is None:
        return None
    return KeyTable(keys.blob, starts, ends)


def _consecutive(first: npt.NDArray[Any], second: npt.NDArray[Any]) -> npt.NDArray[Any] | None:
    """The array ``first`` and ``second`` are the two halves of (views: ``first`` from
    its start, ``second`` right after), or None."""
    whole = first.base
    if not isinstance(whole, np.ndarray) or second.base is not whole or whole.ndim != 1:
        return None
    if len(first) + len(second) != len(whole) or first.strides != whole.strides:
        return None
    if second.strides != whole.strides:
        return None

    def address(array: npt.NDArray[Any]) -> int:
        return int(array.__array_interface__["data"][0])

    at = address(whole)
    if address(first) != at or address(second) != at + len(first) * whole.itemsize:
        return None
    return whole


def _keys_at(table: Sequence[bytes], indexes: range) -> Sequence[bytes]:
    """The keys of ``table`` at ``indexes`` (a table's slice: a view of it)."""
    if isinstance(table, KeyTable):
        return table[indexes.start : indexes.stop : indexes.step]
    return [table[i] for i in indexes]


def _objects(table: Sequence[Any]) -> npt.NDArray[np.object_]:
    """``table`` as a numpy object array (the same objects), to gather from in C."""
    return np.fromiter(table, dtype=object, count=len(table))
