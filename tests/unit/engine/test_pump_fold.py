"""A folding tally (engine/_pump.c, ``Tally(fold=True)``): each reply recorded in C into
histograms in ``metrics.histogram``'s layout, held to ``Histogram`` and to the Python
driver.

- The layout: the C side's constants are ``Histogram``'s, and every value lands in the
  bucket ``counts_index_for`` gives it (0, 1, both edges of every bucket, the highest
  trackable value), clamped as ``Histogram`` clamps (below 0, above the highest) with
  the same scalars (count, min, max, sum, out of range).
- The drivers: on a deterministic schedule (the clock frozen at each step, in the Python
  driver and in C alike) the compiled pump with a folding tally and the Python driver's
  ``PyPump`` fed the same replies give the same interval: counts per op and outcome,
  keys and hits, and histograms with equal buckets and scalars (latency by outcome,
  service times and lags of an open loop).
"""

from __future__ import annotations

from array import array
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from kvbench.engine import fastpath, py_pump
from kvbench.engine.pacing import LATE_NS
from kvbench.engine.py_pump import PyPump, PyTally
from kvbench.metrics import histogram as hdr
from kvbench.metrics.histogram import Histogram
from kvbench.metrics.recorder import Recorder
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.protocols.base import CodecOptions, Op
from kvbench.protocols.registry import CODECS
from kvbench.workload.chunk import Cursor
from kvbench.workload.plan import FixedSource
from tests.support import pump_oracle
from tests.support.reply_grammar import GRAMMARS, opaques_taken, pick, seeded

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

HIGHEST = hdr.HIGHEST_TRACKABLE_NS
MAX = CodecOptions().max_reply_bytes


def folded(values: list[int]) -> Histogram:
    """``values`` recorded by the C side (``hdr_fold``: a folding tally's recording)."""
    parts = _pump.hdr_fold(array("q", values))
    assert parts is not None
    return Histogram.from_buckets(*parts)


def recorded(values: list[int]) -> Histogram:
    hist = Histogram()
    for value in values:
        hist.record(value)
    return hist


def assert_same(c: Histogram, py: Histogram) -> None:
    assert np.array_equal(c.counts, py.counts)
    scalars = ("total_count", "min_ns", "max_ns", "sum_ns", "out_of_range")
    assert [getattr(c, s) for s in scalars] == [getattr(py, s) for s in scalars]


# -- the layout ---------------------------------------------------------------------------


def test_the_c_layout_is_the_histograms() -> None:
    assert _pump.HDR_COUNTS_LEN == hdr.COUNTS_LEN
    assert _pump.HDR_HIGHEST_TRACKABLE_NS == hdr.HIGHEST_TRACKABLE_NS
    assert _pump.HDR_SUB_BUCKET_HALF_COUNT_MAGNITUDE == hdr.SUB_BUCKET_HALF_COUNT_MAGNITUDE
    assert hdr.UNIT_MAGNITUDE == 0  # (the C index has no unit shift)
    assert fastpath.folds()


# Values where a bucket index could go wrong: 0, 1, the sub-bucket boundaries, powers of
# two and their neighbours, the highest trackable value and what lies past it.
SPECIAL = sorted(
    {0, 1, 2, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, HIGHEST - 1, HIGHEST}
    | {(1 << k) + d for k in range(1, 36) for d in (-1, 0, 1)}
)


@pytest.mark.parametrize("value", SPECIAL)
def test_a_value_lands_in_the_bucket_counts_index_for_gives_it(value: int) -> None:
    c = folded([value])
    assert np.flatnonzero(c.counts).tolist() == [hdr.counts_index_for(value)]
    assert_same(c, recorded([value]))


def test_both_edges_of_every_bucket_land_in_it() -> None:
    """The lowest and highest value of each bucket up to the highest trackable value's:
    two counts in every bucket, none elsewhere (a value one off its bucket would leave a
    bucket with one or three)."""
    top = hdr.counts_index_for(HIGHEST)
    lowest = [hdr.value_from_index(i) for i in range(top + 1)]
    highest = [min(hdr.highest_equivalent_value(v), HIGHEST) for v in lowest]
    c = folded(lowest + highest)
    expected = np.zeros(hdr.COUNTS_LEN, dtype=np.int64)
    expected[: top + 1] = 2
    assert np.array_equal(c.counts, expected)
    py = Histogram()
    py.record_many(np.array(lowest + highest, dtype=np.int64))
    assert_same(c, py)


def test_values_out_of_range_are_clamped_and_counted_as_histogram_does() -> None:
    values = [-5, -(1 << 62), HIGHEST + 1, 1 << 62, (1 << 63) - 1, 7, HIGHEST]
    c = folded(values)
    assert c.out_of_range == 5 and c.max_ns == (1 << 63) - 1 and c.min_ns == 0
    assert_same(c, recorded(values))


def test_random_values_across_the_range_fold_alike() -> None:
    rng = np.random.default_rng(22)
    values = np.concatenate(
        [
            rng.integers(0, 1 << 40, 20_000),
            (2.0 ** rng.uniform(0, 36, 20_000)).astype(np.int64),
            rng.integers(-1000, 1000, 100),
        ]
    )
    c = folded(values.tolist())
    py = Histogram()
    py.record_many(values)
    assert_same(c, py)


def test_nothing_folded_is_none() -> None:
    assert _pump.hdr_fold(b"") is None
    with pytest.raises(ValueError, match="int64"):
        _pump.hdr_fold(b"123")


# -- the drivers, on a schedule of their own ----------------------------------------------

T0 = 10**12  # the schedule's time 0 (ns)
# How long after the send each read arrives, across the histogram's range and past it.
READ_AFTER_NS = (1, 999, 2048, 123_457, 5_000_000, 10**9 + 7, 59 * 10**9, 61 * 10**9)
# Open loop: how long before the send each request was due.
BEHIND_NS = (0, 1, 4097, 3_000_000, 10**9, 70 * 10**9)
NAMES = [op.name.lower() for op in Op]


class Clock:
    """Both drivers' clock, frozen at ``now`` (the Python driver's ``_now``, C's
    ``_set_clock``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(py_pump, "_now", self.read)
        self.now = T0

    def read(self) -> int:
        return self.now

    def set(self, now: int) -> None:
        self.now = now
        _pump._set_clock(now)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Any:
    yield Clock(monkeypatch)
    _pump._set_clock(None)


# A reply any get takes on a memc gateway, to see whether one before it closed the connection.
_HTTP_MISS = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


def closes(number: int, families: bytes, op: int, answer: bytes) -> bool:
    """``answer`` (to ``op``) announces the connection's close (HTTP): no reply may follow."""
    if number != fastpath.PROTOCOLS["http-memc"][0]:
        return False
    ops = bytes([op, int(Op.GET)])
    return len(_pump.scan_replies(number, families, ops, answer + _HTTP_MISS, MAX)[0]) < 2


def schedule(seed: int, protocol: str) -> tuple[list[int], list[Any], list[bytes]]:
    """Requests (up to 40, every op the pump sends on ``protocol``) and their replies as
    the grammar writes them (each one the C scanner takes), in reads of a few each."""
    draw = seeded(seed)
    ops = [int(pick(draw, pump_oracle.ops_of(protocol))) for _ in range(draw(10, 40))]
    keys = [pump_oracle.key_of(draw, op, protocol) for op in ops]
    number, families = fastpath.PROTOCOLS[protocol]
    counts = bytes(len(k) if op == Op.MGET else 0 for op, k in zip(ops, keys, strict=True))
    answers: list[bytes] = []
    wire, opaque = b"", 0
    for i, (op, key) in enumerate(zip(ops, keys, strict=True)):  # (as replies() does)
        for _ in range(50):  # one the scanner takes whole (the grammar's may break it)
            answer = GRAMMARS[protocol](draw, Op(op), key, opaque)
            codes, used, error = _pump.scan_replies(
                number, families, bytes(ops[: i + 1]), wire + answer, MAX, counts[: i + 1]
            )
            whole = error is None and len(codes) == i + 1 and used == len(wire) + len(answer)
            if whole and not closes(number, families, op, answer):
                break
        answers.append(answer)
        wire += answer
        opaque += opaques_taken(protocol, op, key)
    pieces, start = [], 0
    while start < len(ops):
        n = draw(1, 6)
        pieces.append(b"".join(answers[start : start + n]))
        start += n
    return ops, keys, pieces


def run_python(
    clock: Clock, protocol: str, ops: list[int], keys: list[Any], pieces: list[bytes], seed: int
) -> tuple[IntervalSnapshot, list[int]]:
    recorder = Recorder(NAMES)
    tally = PyTally()
    tally.issuing, tally.budget = True, len(ops)
    codec: Any = CODECS[protocol].factory(CodecOptions())
    values = [b"vvv" if op in pump_oracle.STORES else None for op in ops]
    shard: Any = SimpleNamespace(completed=0)
    written: list[bytes] = []
    pump = PyPump(
        tally,
        recorder,
        codec,
        Cursor(FixedSource(ops, keys, values)),
        shard,
        written.append,
        lambda now: None,
        seed % 2 == 1,
    )
    statuses = drive(clock, pump, len(ops), pieces, seed)
    fastpath.drain(tally, recorder)  # (the bytes by op, as a worker's cut takes them)
    return recorder.cut("measure", 0, 0, 1), statuses


def run_compiled(
    clock: Clock, protocol: str, ops: list[int], keys: list[Any], pieces: list[bytes], seed: int
) -> tuple[IntervalSnapshot, list[int]]:
    recorder = Recorder(NAMES)
    tally = _pump.Tally(fold=True)
    tally.issuing, tally.budget = True, len(ops)
    number, families = fastpath.PROTOCOLS[protocol]
    values = [b"vvv" if op in pump_oracle.STORES else None for op in ops]
    chunk = (ops, keys, values, 0)
    written: list[bytes] = []
    pump = _pump.Pump(
        tally,
        _pump.Stream(lambda: chunk, number, **pump_oracle.stream_frame(protocol)),
        written.append,
        number,
        families,
        CodecOptions().max_reply_bytes,
        open_loop=seed % 2 == 1,
        late_ns=LATE_NS,
    )
    statuses = drive(clock, pump, len(ops), pieces, seed)
    assert tally.take() == (b"", b"", b"")  # (nothing buffered: all of it folded)
    fastpath.drain(tally, recorder)
    return recorder.cut("measure", 0, 0, 1), statuses


def drive(clock: Clock, pump: Any, n: int, pieces: list[bytes], seed: int) -> list[int]:
    """Send the ``n`` requests at T0 (an odd seed: as an open loop, each due some time
    before), then hand the pump each read at its time after T0, up to a read that breaks
    the protocol: each read's status."""
    draw = seeded(seed)
    clock.set(T0)
    if seed % 2:
        assert pump.issue_scheduled([T0 - pick(draw, BEHIND_NS) for _ in range(n)]) == 0
    else:
        assert pump.issue(n) == 0
    statuses = []
    for piece in pieces:
        clock.set(T0 + pick(draw, READ_AFTER_NS))
        statuses.append(pump.received(piece))
        if statuses[-1] == py_pump.ERROR:  # (a reply the grammar allows and neither takes)
            break
    return statuses


def assert_same_interval(c: IntervalSnapshot, py: IntervalSnapshot) -> None:
    assert c.counts == py.counts
    assert c.keys == py.keys and c.keys_hit == py.keys_hit
    # (the replies' bytes by op may differ where pump_oracle.disagreement says: RESP's and
    # a binary multi-get's; not this test's subject)
    assert {k: v for k, v in c.stats.items() if not k.startswith("bytes_in.")} == {
        k: v for k, v in py.stats.items() if not k.startswith("bytes_in.")
    }
    assert {op: set(by) for op, by in c.latency_by_outcome.items()} == {
        op: set(by) for op, by in py.latency_by_outcome.items()
    }
    for op, by in py.latency_by_outcome.items():
        for outcome, hist in by.items():
            assert_same(c.latency_by_outcome[op][outcome], hist)
    for attr in ("latency", "service"):
        ours, theirs = getattr(c, attr), getattr(py, attr)
        assert set(ours) == set(theirs), attr
        for op, hist in theirs.items():
            assert_same(ours[op], hist)
    assert (c.lag is None) == (py.lag is None)
    if c.lag is not None and py.lag is not None:
        assert_same(c.lag, py.lag)


@pytest.mark.parametrize("protocol", pump_oracle.PROTOCOLS)
@pytest.mark.parametrize("seed", range(8))
def test_the_compiled_fold_and_the_python_drivers_agree(
    clock: Clock, protocol: str, seed: int
) -> None:
    ops, keys, pieces = schedule(seed, protocol)
    py, py_statuses = run_python(clock, protocol, ops, keys, pieces, seed)
    c, c_statuses = run_compiled(clock, protocol, ops, keys, pieces, seed)
    assert c_statuses == py_statuses
    replied = sum(n for by in py.counts.values() for kind, n in by.items() if kind != "late")
    assert replied == len(ops)
    assert_same_interval(c, py)
    if seed % 2:  # an open loop: latency from the due time, service from the send
        assert c.lag is not None and c.lag.total_count == len(ops)


# -- the folding tally itself -------------------------------------------------------------


def text_pump(tally: Any, n: int) -> Any:
    number, families = fastpath.PROTOCOLS["memcache-text"]
    chunk = ([int(Op.GET)] * n, [b"k%d" % i for i in range(n)], [None] * n, 0)
    writes: list[bytes] = []
    pump = _pump.Pump(
        tally, _pump.Stream(lambda: chunk, number), writes.append, number, families, MAX
    )
    tally.issuing, tally.budget = True, n
    assert pump.issue(n) == 0
    return pump


def test_a_read_that_breaks_the_protocol_folds_none_of_its_replies() -> None:
    tally = _pump.Tally(fold=True)
    pump = text_pump(tally, 4)
    assert pump.received(b"END\r\n") == 1  # (the budget is spent: nothing more to send)
    assert tally.pending == 1
    assert pump.received(b"END\r\nEND\r\nNOT A REPLY\r\n") == 2
    assert tally.pending == 1 and pump.inflight == 3  # the second read's taken back
    replies, service, lag, _, _, _ = tally.take_folded()
    assert [(op, kind, hits, parts[2]) for op, kind, hits, parts in replies] == [
        (int(Op.GET), 2, 0, 1)  # one miss
    ]
    assert service == [] and lag is None and tally.pending == 0
    assert tally.take() == (b"", b"", b"")


def test_a_tally_is_initialized_once() -> None:
    tally = _pump.Tally(fold=True)
    with pytest.raises(RuntimeError, match="called already"):
        tally.__init__(None, False)
    assert tally.fold
    assert not _pump.Tally().fold
