"""The coordinator's result from what its rounds heard: the ``workers`` records.

Built without processes: two rounds' reports are filled in by hand, as the messages would
have, and the records are compared key by key and in order (the document and the history
store them as they are).
"""

from __future__ import annotations

from typing import Any

from kvbench.config.load import load_config
from kvbench.engine.worker import WorkerSummary
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.runner.coordinator import Coordinator, _Host, _RoundReports


def _coordinator() -> Coordinator:
    config = load_config(None, {"target.urls": (["memcached://127.0.0.1:1"], "TARGET")}, 2)
    launcher: Any = object()  # never asked: no round is run
    return Coordinator(config, launcher=launcher)


def _round(index: int, cpu_s: float, failed: set[int]) -> _RoundReports:
    heard = _RoundReports(2, index)
    for worker in (0, 1):
        snap = IntervalSnapshot("measure", 0, 10, 20, {"get": {"hit": 1}}, {}, round=index)
        heard.intervals.setdefault(0, {})[worker] = snap
        heard.ops_by_worker[worker] = 100 * (worker + 1)
        heard.succeeded_by_worker[worker] = 90 * (worker + 1)
        heard.cpu_by_worker[worker] = cpu_s
        if worker in failed:
            heard.failures[worker] = "Traceback\nOSError: gone"
        else:
            keys = ["k1"] if worker == 0 and index == 1 else []
            heard.summaries[worker] = WorkerSummary(
                "ok", 10, 20, mismatch_keys=keys, driver="compiled"
            )
    heard.cpu_wait_by_worker[0] = 0.0006
    return heard


def test_workers_are_recorded_over_the_rounds_in_the_stored_shape() -> None:
    coordinator = _coordinator()
    coordinator._hosts = {0: _Host("h0", 11), 1: _Host("h1", 12)}  # as their Ready said
    result = coordinator._result(
        [_round(0, 0.0006, set()), _round(1, 0.0006, {1})], "2026-12-02T00:00:00+00:00", []
    )
    assert result.workers == [
        {
            "index": 0,
            "host": "h0",
            "pid": 11,
            "ops": 200,
            "succeeded": 180,
            "cpu_s": 0.002,  # rounded to the ms as each round adds: 0.001, then 0.0016
            "status": "ok",
            "cpu_wait_s": 0.002,
            "driver": "compiled",
            "peak_rss_bytes": None,  # its summaries told none
            "mismatch_keys": ["k1"],
            "share": 0.3333,
        },
        {
            "index": 1,
            "host": "h1",
            "pid": 12,
            "ops": 400,
            "succeeded": 360,
            "cpu_s": 0.002,
            "status": "failed",  # failed in its second round
            "driver": "compiled",  # its first round's: the second sent no summary
            "peak_rss_bytes": None,
            "share": 0.6667,
        },
    ]
    assert [list(w) for w in result.workers] == [
        ["index", "host", "pid", "ops", "succeeded", "cpu_s", "status", "cpu_wait_s", "driver",
         "peak_rss_bytes", "mismatch_keys", "share"],
        ["index", "host", "pid", "ops", "succeeded", "cpu_s", "status", "driver",
         "peak_rss_bytes", "share"],
    ]  # fmt: skip
    assert result.status == "partial"
    assert result.environment["driver"] == "compiled"
    assert [r["round"] for r in result.rounds] == [0, 1]


def test_a_worker_that_never_said_ready_has_no_host() -> None:
    result = _coordinator()._result([_round(0, 0.5, set())], "2026-12-02T00:00:00+00:00", [])
    assert list(result.workers[0]) == [
        "index", "ops", "succeeded", "cpu_s", "status", "cpu_wait_s", "driver",
        "peak_rss_bytes", "share",
    ]  # fmt: skip


def test_an_interval_every_worker_reported_is_held_merged_and_its_parts_let_go() -> None:
    """Held until the run ended, every worker's part of every interval and then their
    merges took a 2-worker run ~500 KB a second (1.8 GB an hour). An interval is now kept
    as the merge handed on; the result is the same as from the parts, an interval a
    worker did not finish (the run cut short) merged from the parts that came."""
    from kvbench.runner import messages as m
    from kvbench.runner.coordinator import _merged_intervals

    coordinator = _coordinator()
    coordinator._server = {"intervals": []}
    coordinator._interval_sample = lambda: None  # type: ignore[method-assign]
    shown: list[IntervalSnapshot] = []
    coordinator._on_interval = shown.append
    heard = _RoundReports(2)
    parts = {
        (i, w): IntervalSnapshot("measure", i, 10 * i, 10 * i + 10, {"get": {"hit": 1 + w + i}}, {})
        for i in (0, 1)
        for w in (0, 1)
    }
    for (i, w), snap in parts.items():
        if (i, w) != (1, 1):  # worker 1 never sent its second
            coordinator._handle(heard, m.Snapshot(w, snap))
    assert list(heard.merged) == [0] and list(heard.intervals) == [1]
    assert shown == [heard.merged[0]]
    merged = _merged_intervals(heard)
    assert [s.index for s in merged] == [0, 1]
    assert [s.counts for s in merged] == [{"get": {"hit": 3}}, {"get": {"hit": 2}}]
    assert [s.workers for s in merged] == [2, 1]
    assert heard.first_start_ns == {0: 0, 1: 0}
