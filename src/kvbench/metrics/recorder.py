"""Recorder: one worker's counters and latency buffers, cut into interval snapshots.

Two ways in, both cheap on the hot path:

- replies, in bulk: per socket read the engine extends ``reply_ops``, ``reply_codes``
  (``kind | keys << 8``) and ``reply_latency_ns`` with C-level calls; no Python work per
  reply. ``fold`` turns them with numpy into the interval's histograms (one per op and
  outcome: a get's hits and misses apart; ``cut`` merges each op's) and counters; the
  engine calls it every few tens of milliseconds, so that no single fold (about 23 ns per
  reply) stalls the event loop for long, and ``cut`` folds the rest.
- replies folded already: the compiled pumps record each reply into histograms in C
  (engine/_pump.c's folding ``Tally``), and the engine hands them over at each cut,
  per op and outcome (``add_replies``), with an open loop's service times and lags
  (``add_service``, ``add_lag``) and the event loop's hiccups (``add_hiccups``).
- engine-observed outcomes (timeout, conn_error), one by one: ``counts[op][outcome]``
  and ``latency_ns[op]`` (a timed-out request enters the histogram at the timeout).

Cutting resets everything *in place*, so references the engine holds stay valid. Not
thread-safe: one per event loop.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from kvbench.metrics.histogram import Histogram
from kvbench.metrics.outcome import N_OUTCOMES, OUTCOME_NAMES, Outcome
from kvbench.metrics.snapshot import IntervalSnapshot

# Reply codes carry the reply kind in the low byte and the number of values it returned
# above it (protocols.base KIND_MASK / KEYS_SHIFT).
KIND_MASK = 0xFF
KEYS_SHIFT = 8
_TIMEOUT = OUTCOME_NAMES[int(Outcome.TIMEOUT)]


def _fold(values: array[int]) -> Histogram | None:
    """A histogram of ``values`` (emptied), or None when there are none."""
    if not values:
        return None
    hist = Histogram()
    hist.record_many(values)
    del values[:]
    return hist


def _merged(a: Histogram | None, b: Histogram | None) -> Histogram | None:
    """``a`` with ``b`` added (either may be None: the other, as it is)."""
    if a is None or b is None:
        return a if b is None else b
    a.merge(b)
    return a


def _merge_into(into: dict[str, Histogram], name: str, hist: Histogram) -> None:
    """``into[name]`` with ``hist`` added; ``hist`` itself where there was none."""
    have = into.get(name)
    if have is None:
        into[name] = hist
    else:
        have.merge(hist)


class Recorder:
    """Per-worker measurements for the current interval.

    Args:
        op_names: names of the ops, indexed by the engine's op numbers.
        keys_per_op: how many keys each op asks for (1 for get, K for a K-key multi-get).
    """

    def __init__(self, op_names: Sequence[str], keys_per_op: Sequence[int] | None = None) -> None:
        self.op_names = tuple(op_names)
        n_ops = len(self.op_names)
        self.keys_per_op = tuple(keys_per_op) if keys_per_op is not None else (1,) * n_ops
        self.reply_ops: array[int] = array("q")
        self.reply_codes: array[int] = array("q")
        self.reply_latency_ns: array[int] = array("q")
        self.reply_service_ns: array[int] = array("q")  # open loop: from the actual send
        self.lag_ns: array[int] = array("q")  # open loop: how far behind its slot each send went
        self.hiccup_ns: array[int] = array("q")  # event-loop stalls seen by the hiccup task
        self.latency_ns: list[array[int]] = [array("q") for _ in range(n_ops)]
        self.service_ns: list[array[int]] = [array("q") for _ in range(n_ops)]
        self.counts: list[list[int]] = [[0] * N_OUTCOMES for _ in range(n_ops)]
        self.stats: dict[str, float] = {}
        self._new_interval()

    def _new_interval(self) -> None:
        """Empty folds for the next interval (the snapshot keeps the previous ones)."""
        # op -> outcome -> latency; each op's histogram is their merge (cut)
        self._by_outcome: dict[str, dict[str, Histogram]] = {}
        self._service: dict[str, Histogram] = {}
        self._keys: dict[str, int] = {}
        self._keys_hit: dict[str, int] = {}
        self._reply_counts = np.zeros((len(self.op_names), N_OUTCOMES), dtype=np.int64)
        self._lag: Histogram | None = None
        self._hiccup: Histogram | None = None

    def add_stat(self, name: str, value: float) -> None:
        """Add to a worker figure of this interval (reconnects, bytes, cpu)."""
        self.stats[name] = self.stats.get(name, 0) + value

    def cut(self, phase: str, index: int, start_ns: int, end_ns: int) -> IntervalSnapshot:
        """Fold the buffers into histograms, return the interval's snapshot, reset in place."""
        self.fold()
        by_outcome, service = self._by_outcome, self._service
        keys, keys_hit = self._keys, self._keys_hit
        counts = self._reply_counts.tolist()
        lag = _merged(_fold(self.lag_ns), self._lag)
        hiccup = _merged(_fold(self.hiccup_ns), self._hiccup)
        self._new_interval()
        for op, name in enumerate(self.op_names):
            row = self.counts[op]
            for i, n in enumerate(row):
                if n:
                    counts[op][i] += n
                    row[i] = 0
            timed_out = self.latency_ns[op]  # the requests the engine timed out
            if timed_out:
                by_outcome.setdefault(name, {}).setdefault(_TIMEOUT, Histogram()).record_many(
                    timed_out
                )
                del timed_out[:]
            if self.service_ns[op]:
                service.setdefault(name, Histogram()).record_many(self.service_ns[op])
                del self.service_ns[op][:]
        latency = {name: Histogram.merged(hists.values()) for name, hists in by_outcome.items()}
        stats, self.stats = self.stats, {}
        named = {
            self.op_names[op]: {OUTCOME_NAMES[i]: int(n) for i, n in enumerate(row) if n}
            for op, row in enumerate(counts)
            if any(row)
        }
        return IntervalSnapshot(
            phase=phase,
            index=index,
            start_ns=start_ns,
            end_ns=end_ns,
            counts=named,
            latency=latency,
            latency_by_outcome=by_outcome,
            service=service,
            keys=keys,
            keys_hit=keys_hit,
            stats=stats,
            lag=lag,
            hiccup=hiccup,
        )

    def add_replies(self, op: int, outcome: int, hits: int, latency: Histogram) -> None:
        """Count ``latency.total_count`` replies of ``op`` with ``outcome``, folded
        elsewhere into ``latency`` (kept, not copied), which returned ``hits`` keys: as
        ``fold`` counts the same replies from the buffers."""
        name = self.op_names[op]
        self._reply_counts[op, outcome] += latency.total_count
        _merge_into(self._by_outcome.setdefault(name, {}), OUTCOME_NAMES[outcome], latency)
        replies = latency.total_count
        self._keys[name] = self._keys.get(name, 0) + replies * self.keys_per_op[op]
        self._keys_hit[name] = self._keys_hit.get(name, 0) + hits

    def add_service(self, op: int, service: Histogram) -> None:
        """Add an open loop's service times of ``op``'s replies, folded elsewhere."""
        _merge_into(self._service, self.op_names[op], service)

    def add_lag(self, lag: Histogram) -> None:
        """Add an open loop's send lags, folded elsewhere (as ``lag_ns`` holds them)."""
        self._lag = _merged(self._lag, lag)

    def add_hiccups(self, hiccups: Histogram) -> None:
        """Add event-loop stalls measured elsewhere (as ``hiccup_ns`` holds them)."""
        self._hiccup = _merged(self._hiccup, hiccups)

    def fold(self) -> None:
        """Fold the bulk reply buffers into this interval's counters and histograms; empty them.

        Cheap to call often (a fixed ~0.1 ms plus the per-reply work), so the engine folds
        while the interval runs instead of stalling once at its end.
        """
        if not self.reply_ops:
            return
        n_ops = len(self.op_names)
        # Copies, not views of the buffers: a view handed to a histogram (or held in any
        # frame a sampling profiler keeps: Dask's samples its tasks every 10 ms) would
        # outlive this fold, and the buffers could not grow or be cleared while it lives
        # (BufferError in the next drain, replies lost with it).
        ops = np.array(self.reply_ops, dtype=np.int64)
        codes = np.array(self.reply_codes, dtype=np.int64)
        values = np.array(self.reply_latency_ns, dtype=np.int64)
        service_values = (
            np.array(self.reply_service_ns, dtype=np.int64) if self.reply_service_ns else None
        )
        kinds = codes & KIND_MASK
        pair_ids = ops * N_OUTCOMES + kinds
        by_pair = np.bincount(pair_ids, minlength=n_ops * N_OUTCOMES)[: n_ops * N_OUTCOMES]
        self._reply_counts += by_pair.reshape(n_ops, N_OUTCOMES)
        hits_by_op = np.bincount(ops, weights=codes >> KEYS_SHIFT, minlength=n_ops).tolist()
        replies_by_op = np.bincount(ops, minlength=n_ops).tolist()
        # Latency by op and outcome: an op with one outcome in this fold (a set's stored)
        # costs what a histogram per op did; a get's hits and misses one mask each.
        by_op: dict[int, list[int]] = {}
        for pair in np.flatnonzero(by_pair).tolist():
            by_op.setdefault(pair // N_OUTCOMES, []).append(pair)
        for op, op_pairs in by_op.items():
            into = self._by_outcome.setdefault(self.op_names[op], {})
            for pair in op_pairs:
                hist = into.setdefault(OUTCOME_NAMES[pair % N_OUTCOMES], Histogram())
                if len(op_pairs) > 1:
                    hist.record_many(values[pair_ids == pair])
                else:  # (all of them: no mask at all)
                    hist.record_many(values if len(by_op) == 1 else values[ops == op])
        for op in np.flatnonzero(replies_by_op).tolist():
            name = self.op_names[op]
            if service_values is not None:
                self._service.setdefault(name, Histogram()).record_many(service_values[ops == op])
            self._keys[name] = self._keys.get(name, 0) + replies_by_op[op] * self.keys_per_op[op]
            self._keys_hit[name] = self._keys_hit.get(name, 0) + int(hits_by_op[op])
        del self.reply_ops[:], self.reply_codes[:], self.reply_latency_ns[:]
        del self.reply_service_ns[:]
