"""The history store keeps runs exactly: what is loaded summarizes as what was saved."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from kvbench.errors import SchemaVersionError, StoreError
from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.report import document, summarize
from kvbench.results import RunResult, Store

S = 1_000_000_000


def a_run() -> RunResult:
    hist = Histogram()
    for v in (12_345, 67_891, 8_173_447):
        hist.record(v)
    snap = IntervalSnapshot("measure", 0, 0, S, {"get": {"hit": 3}}, {"get": hist})
    return RunResult(
        "r1",
        "2026-01-01T00:00:00+00:00",
        "ok",
        "closed",
        "0.1.0",
        {"seed": 1},
        [{"url": "memcached://h:1", "protocol": "memcache-text"}],
        0,
        S,
        [snap],
        rounds=[{"round": 0, "window_start_ns": 0, "window_end_ns": S, "status": "ok"}],
    )


def test_a_loaded_run_summarizes_exactly_as_saved(tmp_path: Path) -> None:
    run = a_run()
    with Store(str(tmp_path / "h.db")) as store:
        store.save_run(run, document(summarize(run)))
        loaded = store.load_run("last")
    assert document(summarize(loaded)) == document(summarize(run))
    assert loaded.intervals[0].latency["get"].max_ns == 8_173_447  # exact, not bucket-rounded


def test_ids_resolve_by_prefix(tmp_path: Path) -> None:
    with Store(str(tmp_path / "h.db")) as store:
        store.save_run(a_run())
        assert store.resolve("r") == "r1"
        with pytest.raises(StoreError, match="no run 'x'"):
            store.resolve("x")


def test_a_database_from_a_newer_kvbench_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "h.db")
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO migrations VALUES ('9999_future', 'now')")
    with pytest.raises(SchemaVersionError, match="newer kvbench"):
        Store(path)
