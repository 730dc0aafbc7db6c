"""Ordered, named schema migrations for the history database.

Each migration runs once, in a transaction, and is recorded by name in ``migrations``.
A database that records a migration this kvbench does not know was written by a newer
kvbench: it is refused (SchemaVersionError), never guessed at.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from kvbench.errors import SchemaVersionError

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
)


def applied(db: sqlite3.Connection) -> list[str]:
    """Names of the migrations this database has had."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    return [row[0] for row in db.execute("SELECT name FROM migrations ORDER BY name")]


def migrate(db: sqlite3.Connection) -> None:
    """Apply every migration the database lacks, each in its own transaction.

    Raises:
        SchemaVersionError: the database has migrations this kvbench does not know.
    """
    done = applied(db)
    known = {name for name, _ in MIGRATIONS}
    unknown = [name for name in done if name not in known]
    if unknown:
        raise SchemaVersionError(
            f"the history database was written by a newer kvbench (migration {unknown[-1]}); "
            "upgrade kvbench or use --db with another file"
        )
    for name, script in MIGRATIONS:
        if name in done:
            continue
        with db:
            for statement in script.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(
                "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat(timespec="seconds")),
            )
