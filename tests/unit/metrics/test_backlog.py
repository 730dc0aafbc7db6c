"""The backlog over time from cumulative counts reported at different instants."""

from __future__ import annotations

from kvbench.metrics.backlog import backlog_at, backlog_peak


def test_counts_are_interpolated_between_reports() -> None:
    producer = [(0, 0), (100, 1000)]
    consumer = [(0, 0), (100, 500)]
    assert backlog_at([producer], [consumer], [0, 50, 100]) == [0, 250, 500]


def test_a_stale_report_of_one_side_does_not_inflate_the_backlog() -> None:
    # Both sides run at 10 per ns; the consumer reported less often.
    producer = [(t, 10 * t) for t in range(0, 101, 10)]
    consumer = [(0, 0), (100, 900)]  # always 100 behind
    assert backlog_peak([producer], [consumer])[0] == 100


def test_before_the_first_report_a_count_is_zero_and_after_the_last_it_holds() -> None:
    producer = [(10, 0), (20, 100)]
    consumer = [(30, 0), (40, 60)]
    assert backlog_at([producer], [consumer], [0, 25, 35, 50]) == [0, 100, 70, 40]


def test_several_producers_and_consumers_add_up() -> None:
    producers = [[(0, 0), (10, 100)], [(0, 0), (10, 50)]]
    consumers = [[(0, 0), (10, 20)], [(5, 0), (10, 30)]]
    assert backlog_at(producers, consumers, [10]) == [100]


def test_consumers_starting_late_peak_at_their_start() -> None:
    producer = [(0, 0), (100, 5000), (200, 10000)]
    consumer = [(100, 0), (200, 10000)]  # its first report: 0 at the instant it started
    assert backlog_peak([producer], [consumer]) == (5000, 100)


def test_no_reports_no_peak() -> None:
    assert backlog_peak([], []) == (0, None)
    assert backlog_at([[]], [[]], [1, 2]) == [0, 0]
