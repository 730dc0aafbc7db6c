"""Delivery accounting: lost, duplicated, out-of-order and unexpected receipts, crafted."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from kvbench.metrics.delivery import LOST_EXAMPLES, Acknowledged, DeliveryLedger


def ledger_of(planned: list[int], *streams: tuple[int, list[tuple[int, int]]]) -> DeliveryLedger:
    """A ledger fed ``(consumer, [(producer, seq), ...])`` streams, one chunk each."""
    ledger = DeliveryLedger(planned)
    for consumer, pairs in streams:
        ledger.add(consumer, [p for p, _ in pairs], [s for _, s in pairs])
    return ledger


def test_everything_received_once_in_order_is_clean() -> None:
    ledger = ledger_of([3, 2], (0, [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]))
    report = ledger.finish([Acknowledged(3), Acknowledged(2)])
    assert report.totals() == {
        "sent": 5,
        "produced": 5,
        "received": 5,
        "unique": 5,
        "lost": 0,
        "duplicated": 0,
        "out_of_order": 0,
    }
    assert report.unexpected == 0


def test_gaps_are_lost_and_named() -> None:
    ledger = ledger_of([6], (0, [(0, 0), (0, 1), (0, 3), (0, 5)]))
    (row,) = ledger.finish([Acknowledged(6)]).producers
    assert (row.lost, row.duplicated, row.out_of_order) == (2, 0, 0)
    assert row.lost_examples == (2, 4)


def test_a_gap_is_no_reordering() -> None:
    ledger = ledger_of([10], (0, [(0, 0), (0, 9)]))
    (row,) = ledger.finish([Acknowledged(10)]).producers
    assert row.out_of_order == 0 and row.lost == 8


def test_duplicates_within_a_chunk_across_chunks_and_across_consumers() -> None:
    ledger = DeliveryLedger([4])
    ledger.add(0, [0, 0, 0], [0, 1, 1])  # 1 twice in one chunk
    ledger.add(0, [0], [1])  # 1 a third time, in the next chunk
    ledger.add(1, [0, 0], [0, 2])  # 0 again, on another consumer
    ledger.add(1, [0], [3])
    (row,) = ledger.finish([Acknowledged(4)]).producers
    assert (row.received, row.unique, row.duplicated, row.lost) == (7, 4, 3, 0)


def test_reordering_counts_receipts_below_the_streams_maximum() -> None:
    ledger = ledger_of([6], (0, [(0, 0), (0, 2), (0, 1), (0, 3), (0, 5), (0, 4)]))
    report = ledger.finish([Acknowledged(6)])
    assert report.producers[0].out_of_order == 2
    assert report.out_of_order_by_consumer == {0: 2}


def test_reordering_is_seen_across_chunk_boundaries() -> None:
    ledger = DeliveryLedger([5])
    ledger.add(0, [0, 0], [0, 4])
    ledger.add(0, [0, 0, 0], [1, 2, 3])
    (row,) = ledger.finish([Acknowledged(5)]).producers
    assert (row.out_of_order, row.lost, row.duplicated) == (3, 0, 0)


def test_several_consumers_sharing_a_producers_messages_are_each_in_order() -> None:
    ledger = ledger_of([6], (0, [(0, 0), (0, 2), (0, 5)]), (1, [(0, 1), (0, 3), (0, 4)]))
    assert ledger.finish([Acknowledged(6)]).producers[0].out_of_order == 0


def test_order_is_per_producer_interleaving_producers_is_fine() -> None:
    ledger = ledger_of([3, 3], (0, [(1, 0), (0, 0), (1, 1), (0, 1), (0, 2), (1, 2)]))
    assert ledger.finish([Acknowledged(3), Acknowledged(3)]).totals()["out_of_order"] == 0


def test_a_late_duplicate_is_both_duplicated_and_out_of_order() -> None:
    ledger = ledger_of([3], (0, [(0, 0), (0, 1), (0, 2), (0, 0)]))
    (row,) = ledger.finish([Acknowledged(3)]).producers
    assert (row.duplicated, row.out_of_order) == (1, 1)


def test_receipts_naming_what_was_never_sent_are_unexpected() -> None:
    ledger = ledger_of([2], (0, [(0, 0), (5, 0), (0, 7), (0, 1)]))
    report = ledger.finish([Acknowledged(2)])
    assert report.unexpected == 2
    assert report.producers[0].received == 2 and report.producers[0].lost == 0


def test_seqs_beyond_what_a_producer_sent_are_unexpected() -> None:
    ledger = ledger_of([10], (0, [(0, 0), (0, 1), (0, 8)]))
    report = ledger.finish([Acknowledged(2)])  # the producer stopped after 2
    assert report.unexpected == 1
    row = report.producers[0]
    assert (row.sent, row.received, row.unique, row.lost, row.duplicated) == (2, 2, 2, 0, 0)


def test_unacknowledged_puts_are_never_lost() -> None:
    ledger = ledger_of([5], (0, [(0, 0), (0, 1), (0, 3)]))
    (row,) = ledger.finish([Acknowledged(5, unacknowledged=(2, 4))]).producers
    assert (row.produced, row.lost) == (3, 0)


def test_an_unacknowledged_put_that_arrives_anyway_is_no_problem() -> None:
    ledger = ledger_of([3], (0, [(0, 0), (0, 1), (0, 2)]))
    (row,) = ledger.finish([Acknowledged(3, unacknowledged=(1,))]).producers
    assert (row.produced, row.unique, row.lost, row.duplicated) == (2, 3, 0, 0)


def test_finish_leaves_the_ledger_unchanged() -> None:
    ledger = ledger_of([4], (0, [(0, 0), (0, 9)]))
    first = ledger.finish([Acknowledged(2)])
    assert ledger.finish([Acknowledged(2)]) == first


def test_lost_examples_are_bounded() -> None:
    ledger = DeliveryLedger([1000])
    (row,) = ledger.finish([Acknowledged(1000)]).producers
    assert row.lost == 1000 and row.lost_examples == tuple(range(LOST_EXAMPLES))


def test_running_totals_follow_the_chunks() -> None:
    ledger = DeliveryLedger([3])
    ledger.add(0, array("I", [0, 0]), array("Q", [0, 0]))
    assert (ledger.received_total, ledger.unique_total) == (2, 1)


def test_misaligned_chunks_are_refused() -> None:
    with pytest.raises(ValueError):
        DeliveryLedger([3]).add(0, [0, 0], [1])


def test_a_million_messages_in_compact_arrays() -> None:
    n = 1_000_000
    ledger = DeliveryLedger([n // 2, n // 2])
    seqs = np.arange(n // 2, dtype=np.uint64)
    for chunk in range(0, n // 2, 50_000):
        for producer in (0, 1):
            part = seqs[chunk : chunk + 50_000]
            ledger.add(producer, np.full(part.size, producer, dtype=np.uint32), part)
    report = ledger.finish([Acknowledged(n // 2), Acknowledged(n // 2)])
    assert report.totals()["unique"] == n and report.totals()["lost"] == 0
    assert sum(seen.nbytes for seen in ledger._seen) == n  # one byte per message


def test_a_later_phase_extends_the_ledger_and_lost_spans_the_phases() -> None:
    """A preset's write, drain and mixed share one ledger: the mixed phase's producers
    are planned after the write's; what the write stored and the drain never read is
    lost in every later finish."""
    ledger = DeliveryLedger([])
    write = ledger.extend([4, 4])  # the write phase: producers 0 and 1
    assert list(write) == [0, 1]
    ledger.add(0, [0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 3])  # the drain: (0, 3), (1, 2) lost
    assert ledger.unique_of(write) == 6
    mixed = ledger.extend([2])  # the mixed phase: producer 2
    assert list(mixed) == [2] and ledger.unique_of(mixed) == 0
    ledger.add(1, [2, 2], [0, 1])
    assert ledger.unique_of(mixed) == 2 and ledger.unique_total == 8
    rows = ledger.finish([Acknowledged(4), Acknowledged(4), Acknowledged(2)]).producers
    assert [(r.producer, r.lost, r.lost_examples) for r in rows] == [
        (0, 1, (3,)),
        (1, 1, (2,)),
        (2, 0, ()),
    ]
