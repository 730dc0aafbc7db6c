"""The history store keeps runs exactly: what is loaded summarizes as what was saved."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from kvbench.errors import SchemaVersionError, StoreError, UnknownRun
from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.report import document, summarize
from kvbench.results import RunResult, Store, migrations

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
        with pytest.raises(UnknownRun, match="no run 'x'"):
            store.resolve("x")


def a_search(search_id: str, started_at: str) -> dict[str, object]:
    return {"search_id": search_id, "started_at": started_at, "status": "ok", "target": "t"}


def test_searches_resolve_as_runs_do(tmp_path: Path) -> None:
    with Store(str(tmp_path / "h.db")) as store:
        with pytest.raises(UnknownRun, match="no searches in"):
            store.load_search("search-last")
        store.save_search(a_search("search-a1", "2026-01-01T00:00:00+00:00"))
        store.save_search(a_search("search-a2", "2026-01-02T00:00:00+00:00"))
        assert store.load_search("search-last")["search_id"] == "search-a2"
        assert store.load_search("search-a1")["search_id"] == "search-a1"
        with pytest.raises(UnknownRun, match="'search-a' matches 2 searches"):
            store.load_search("search-a")
        with pytest.raises(UnknownRun, match="no search 'search-b'"):
            store.load_search("search-b")
        with pytest.raises(UnknownRun, match="no runs in"):
            store.resolve("last")


def test_a_database_from_a_newer_kvbench_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "h.db")
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO migrations VALUES ('9999_future', 'now')")
    with pytest.raises(SchemaVersionError, match="newer kvbench"):
        Store(path)


# -- creating, and files that are not (or no longer) a usable history ---------------------


def small_disk(monkeypatch: pytest.MonkeyPatch, pages: int) -> None:
    """Every database opened from here on holds at most ``pages`` pages: writing more
    fails with SQLITE_FULL, "database or disk is full", as on a full disk."""
    connect = sqlite3.connect

    def connect_small(*args: object, **kwargs: object) -> sqlite3.Connection:
        db = connect(*args, **kwargs)  # type: ignore[arg-type]
        db.execute(f"PRAGMA max_page_count = {pages}")
        return db

    monkeypatch.setattr(sqlite3, "connect", connect_small)


@pytest.mark.parametrize("pages", range(2, 11))  # 11 pages hold the schema
def test_a_full_disk_during_creation_leaves_no_half_made_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pages: int
) -> None:
    path = tmp_path / "h.db"
    with monkeypatch.context() as patch:
        small_disk(patch, pages)
        with pytest.raises(StoreError) as caught:
            Store(str(path))
    assert str(caught.value) == (f"cannot create history database {path}: database or disk is full")
    assert list(tmp_path.iterdir()) == []  # nothing left: no file, no journal
    with Store(str(path)) as store:  # the next command starts afresh
        store.save_run(a_run())
        assert store.resolve("last") == "r1"


def test_a_failed_migration_keeps_nothing_of_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "h.db"
    with Store(str(path)) as store:
        store.save_run(a_run())
    broken = (
        "9000_half",
        "CREATE TABLE half_made (x INTEGER); INSERT INTO no_such_table VALUES (1)",
    )
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, broken))
    with pytest.raises(StoreError, match=r"no such table: no_such_table"):
        Store(str(path))
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        names = [row[0] for row in db.execute("SELECT name FROM migrations")]
    assert "half_made" not in tables and "9000_half" not in names  # rolled back whole
    monkeypatch.undo()
    with Store(str(path)) as store:  # the existing history is intact
        assert store.resolve("last") == "r1"


def test_a_file_that_is_not_a_database_is_one_line_with_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    path.write_bytes(b"this is not SQLite\n" * 100)
    with pytest.raises(StoreError) as caught:
        Store(str(path))
    assert str(caught.value) == (
        f"history database {path} is damaged or not kvbench's (file is not a database): "
        f"move it aside (mv {path} {path}.bad) and kvbench creates a new one, "
        "or use --db with another file"
    )
    assert path.read_bytes() == b"this is not SQLite\n" * 100  # left as it was


def test_tables_without_a_migrations_record_are_refused_untouched(tmp_path: Path) -> None:
    """What a full disk left before creation was atomic: ``runs`` but no record."""
    path = tmp_path / "h.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY)")
    before = path.read_bytes()
    with pytest.raises(StoreError) as caught:
        Store(str(path))
    message = str(caught.value)
    assert message.startswith(f"history database {path} is damaged or not kvbench's (has ")
    assert "move it aside" in message and "\n" not in message
    assert path.read_bytes() == before  # no migrations table added to someone's file


def test_a_half_migrated_file_is_one_line_with_the_way_out(tmp_path: Path) -> None:
    """An older kvbench applied DDL outside a transaction: 0003 added ``rounds`` and died
    before recording itself."""
    path = tmp_path / "h.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for name, script in migrations.MIGRATIONS[:2]:
            for statement in script.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT INTO migrations VALUES (?, 'then')", (name,))
        db.execute("ALTER TABLE runs ADD COLUMN rounds TEXT NOT NULL DEFAULT '[]'")
    with pytest.raises(StoreError, match=r"duplicate column name: rounds\): move it aside"):
        Store(str(path))


def test_a_file_damaged_past_its_first_page_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    with Store(str(path)) as store:
        for i in range(20):
            store.save_run(replace(a_run(), run_id=f"r{i}"))
    with sqlite3.connect(path) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size  # the runs table's root page: garbage
    data[start : start + page_size] = b"\xff" * page_size
    path.write_bytes(bytes(data))
    with Store(str(path)) as store, pytest.raises(StoreError, match="move it aside"):
        store.list_runs()


def test_a_queue_run_is_stored_with_its_section_and_loads_exactly(tmp_path: Path) -> None:
    """A queue run is a run: its delivery, per-interval end-to-end histograms and backlog
    are kept (migration 0007), so its summary loads as it was printed."""
    from tests.unit.report.test_queue_report import result

    run = result(lost_seq=5)
    with Store(str(tmp_path / "h.db")) as store:
        store.save_run(run, document(summarize(run)))
        loaded = store.load_run("last")
        (listed,) = store.list_runs()
    assert loaded.mode == "queue" and loaded.queue is not None
    assert document(summarize(loaded)) == document(summarize(run))
    assert listed["status"] == "failed"  # one status function, the delivery judged
    assert listed["throughput_per_s"] == 1000.0 + 499.8  # puts/s + gets/s (1,999 received)


def test_a_queue_run_stored_before_sections_reads_from_its_document(tmp_path: Path) -> None:
    """Runs saved before migration 0007 kept their figures in their result document only:
    the section is rebuilt from it, and the figures come out as they were."""
    from tests.unit.report.test_queue_report import result

    run = result(lost_seq=5)
    doc = document(summarize(run))
    path = str(tmp_path / "h.db")
    with Store(path) as store:
        store.save_run(run, doc)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET queue = NULL")
    with Store(path) as store:
        loaded = store.load_run("last")
    again = document(summarize(loaded))
    for key in ("puts_per_s", "gets_per_s", "lost", "duplicated", "backlog", "producers"):
        assert again["queue"][key] == doc["queue"][key], key
    # The percentiles are the histogram's; max and mean were kept exact only since 0007,
    # and a percentile is never printed above the max: to the bucket's width, then.
    for name in ("p50", "p90", "p99", "p99_9", "p99_99"):
        expected = doc["queue"]["e2e_latency_us"][name]
        got = again["queue"]["e2e_latency_us"][name]
        assert got == (None if expected is None else pytest.approx(expected, rel=1e-3))
    assert again["status"] == "failed"


def test_a_runs_label_is_kept_and_listed(tmp_path: Path) -> None:
    with Store(str(tmp_path / "h.db")) as store:
        store.save_run(replace(a_run(), run_id="r1", label="connections 64"))
        store.save_run(replace(a_run(), run_id="r2", label="connections 128"))
        assert store.load_run("r1").label == "connections 64"
        assert [r["label"] for r in store.list_runs()] == ["connections 128", "connections 64"]


def test_the_new_columns_are_named_migrations() -> None:
    names = [name for name, _ in migrations.MIGRATIONS]
    assert names[-4:] == [
        "0006_run_label",
        "0007_queue_section",
        "0008_trace_section",
        "0009_searches",
    ]
