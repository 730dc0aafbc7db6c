"""Ordered, named schema migrations for the history database.

Each migration runs once and is recorded by name in ``migrations``, in the same
transaction: the ones a database lacks are applied together, or not at all. A database
that records a migration this kvbench does not know was written by a newer kvbench: it is
refused (SchemaVersionError), never guessed at.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from kvbench.errors import SchemaVersionError, StoreError

# An interval row's figures, after its run and before its lag: 0001 creates the table with
# them, 0003 again with a round (it replaces the table: SQLite adds no column mid-key).
_INTERVAL_COLUMNS = """
            phase TEXT NOT NULL,
            idx INTEGER NOT NULL,
            start_ns INTEGER NOT NULL,
            end_ns INTEGER NOT NULL,
            workers INTEGER NOT NULL,
            counts TEXT NOT NULL,
            keys TEXT NOT NULL,
            keys_hit TEXT NOT NULL,
            stats TEXT NOT NULL,
            latency TEXT NOT NULL,
            service TEXT NOT NULL,
"""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_runs_and_intervals",
        """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            started_at TEXT NOT NULL,
            status TEXT NOT NULL,
            mode TEXT NOT NULL,
            target TEXT NOT NULL,
            kvbench_version TEXT NOT NULL,
            window_start_ns INTEGER NOT NULL,
            window_end_ns INTEGER NOT NULL,
            throughput_per_s REAL,
            config TEXT NOT NULL,
            targets TEXT NOT NULL,
            environment TEXT NOT NULL,
            workers TEXT NOT NULL,
            errors TEXT NOT NULL,
            server TEXT NOT NULL,
            document TEXT
        );
        CREATE INDEX runs_started_at ON runs (started_at);
        CREATE INDEX runs_target ON runs (target);
        CREATE TABLE intervals (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        """
        + _INTERVAL_COLUMNS
        + """
            PRIMARY KEY (run_id, phase, idx)
        );
        """,
    ),
    (
        "0002_interval_lag_histogram",
        """
        ALTER TABLE intervals ADD COLUMN lag TEXT NOT NULL DEFAULT ''
        """,
    ),
    (
        "0003_rounds",
        """
        ALTER TABLE runs ADD COLUMN rounds TEXT NOT NULL DEFAULT '[]';
        CREATE TABLE intervals_by_round (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            round INTEGER NOT NULL,
        """
        + _INTERVAL_COLUMNS
        + """
            lag TEXT NOT NULL,
            PRIMARY KEY (run_id, round, phase, idx)
        );
        INSERT INTO intervals_by_round
            SELECT run_id, 0, phase, idx, start_ns, end_ns, workers, counts, keys, keys_hit,
                   stats, latency, service, lag
            FROM intervals;
        DROP TABLE intervals;
        ALTER TABLE intervals_by_round RENAME TO intervals
        """,
    ),
    (
        "0004_hiccups_and_server_samples",
        """
        ALTER TABLE intervals ADD COLUMN hiccup TEXT NOT NULL DEFAULT ''
        """,
    ),
    # runs.status becomes the run's judged status (results/status.py: ok, failed, partial,
    # interrupted); what happened to its processes moves here. NULL in runs stored before:
    # their status column was the process status.
    (
        "0005_process_status",
        """
        ALTER TABLE runs ADD COLUMN process_status TEXT
        """,
    ),
    # What tells a run from its siblings: a sweep's level, a preset's step ('' for none).
    (
        "0006_run_label",
        """
        ALTER TABLE runs ADD COLUMN label TEXT NOT NULL DEFAULT ''
        """,
    ),
    # A queue run's section (results/queue.py) as JSON; NULL for load runs, and for queue
    # runs stored before it (their section is rebuilt from their document).
    (
        "0007_queue_section",
        """
        ALTER TABLE runs ADD COLUMN queue TEXT
        """,
    ),
    # A replay's section (results/trace.py) as JSON; NULL for every other run.
    (
        "0008_trace_section",
        """
        ALTER TABLE runs ADD COLUMN trace TEXT
        """,
    ),
    # A capacity search (kvbench search): its result document; its steps' runs are rows
    # of runs, named in the document.
    (
        "0009_searches",
        """
        CREATE TABLE searches (
            search_id TEXT PRIMARY KEY,
            started_at TEXT NOT NULL,
            status TEXT NOT NULL,
            target TEXT NOT NULL,
            document TEXT NOT NULL
        )
        """,
    ),
)


def applied(db: sqlite3.Connection) -> list[str] | None:
    """Names of the migrations this database has had; None when it has no record of any
    (a new, empty database, or a file that is not kvbench's)."""
    found = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
    ).fetchone()
    if found is None:
        return None
    return [row[0] for row in db.execute("SELECT name FROM migrations ORDER BY name")]


def _missing(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """The migrations ``db`` lacks, in order.

    Raises:
        SchemaVersionError: it has migrations this kvbench does not know.
        StoreError: it has tables but no record of migrations: another program's file,
            or one an older kvbench left half-made (it created tables one by one).
    """
    done = applied(db)
    if done is None:
        tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()
        if tables[0]:
            raise StoreError("has tables but no record of kvbench's migrations")
        done = []
    known = {name for name, _ in MIGRATIONS}
    unknown = [name for name in done if name not in known]
    if unknown:
        raise SchemaVersionError(
            f"the history database was written by a newer kvbench (migration {unknown[-1]}); "
            "upgrade kvbench or use --db with another file"
        )
    return [(name, script) for name, script in MIGRATIONS if name not in done]


def migrate(db: sqlite3.Connection) -> None:
    """Apply every migration the database lacks, all in one transaction.

    SQLite's DDL is transactional, but Python's sqlite3 does not open a transaction before
    CREATE or ALTER: the transaction is begun here, explicitly, so a failure (a full disk)
    leaves the database as it was, never with half of a migration. A database that needs
    nothing is only read (no write lock), so read-only files still open.

    Raises:
        SchemaVersionError: the database has migrations this kvbench does not know.
        StoreError: the database has tables but no record of migrations.
        sqlite3.DatabaseError: the file is not a database, or a migration failed (nothing
            of it was kept).
    """
    if not _missing(db):
        return
    db.execute("BEGIN IMMEDIATE")  # the write lock first: another kvbench may be migrating
    try:
        db.execute(
            "CREATE TABLE IF NOT EXISTS migrations "
            "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        for name, script in _missing(db):  # again, under the lock
            for statement in script.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(
                "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat(timespec="seconds")),
            )
        db.commit()
    except BaseException:
        db.rollback()
        raise
