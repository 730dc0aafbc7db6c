"""The run history: SQLite, one row per run and one per interval (histograms encoded).

Histograms are stored in the HdrHistogram V2 encoding (base64, results/encoding.py), so a
stored run merges exactly as a live one and other HdrHistogram tools can read them. A
queue run's section is one JSON column of its row (``runs.queue``), a replay's too
(``runs.trace``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypedDict, TypeVar

from kvbench.errors import SchemaVersionError, StoreError, UnknownRun
from kvbench.metrics.histogram import Histogram
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.encoding import histograms_from_text, histograms_to_text
from kvbench.results.migrations import migrate
from kvbench.results.model import RoundRecord, RunResult
from kvbench.results.queue import QueueSection, section_from_document
from kvbench.results.status import run_status
from kvbench.results.trace import TraceSection

P = ParamSpec("P")
# What names a stored search rather than a run (``kvbench show search-last``).
SEARCH_PREFIX = "search-"
R = TypeVar("R")
# The tables ``_by_ref`` finds a row of: what one row is, its id column, and the
# references that name the newest.
_REFERABLE = {
    "runs": ("run", "run_id", ("last", "latest")),
    "searches": ("search", "search_id", (SEARCH_PREFIX + "last", SEARCH_PREFIX + "latest")),
}


class HistoryRow(TypedDict):
    """A stored run as ``list_runs`` lists it (``kvbench history``)."""

    run_id: str
    started_at: str
    status: str
    mode: str
    target: str
    window_s: float
    throughput_per_s: float | None
    label: str | None


def _window_s(start_ns: int, end_ns: int, rounds: list[RoundRecord]) -> float:
    """The measured window in seconds: the rounds' windows summed (not the span across them)."""
    if rounds:
        return (
            sum(max(0, int(r["window_end_ns"]) - int(r["window_start_ns"])) for r in rounds) / 1e9
        )
    return max(0, end_ns - start_ns) / 1e9


def _histogram_or_none(text: str) -> Histogram | None:
    return Histogram.decode(text.encode()) if text else None


# How a stored run is read back: (RunResult or IntervalSnapshot field, column, decoder).
Fields = tuple[tuple[str, str, Callable[[Any], Any] | None], ...]


def _as(decoder: Callable[[Any], Any] | None, names: str) -> Fields:
    """Fields stored in columns of their own names, read with ``decoder`` (None: as is)."""
    return tuple((name, name, decoder) for name in names.split())


_RUN_FIELDS: Fields = (
    *_as(None, "run_id started_at"),
    # what happened to its processes (the status column is the judged status)
    ("status", "COALESCE(process_status, status)", None),
    *_as(None, "mode kvbench_version window_start_ns window_end_ns"),
    *_as(json.loads, "config targets environment workers errors server rounds"),
    *_as(None, "label"),
)
_INTERVAL_FIELDS: Fields = (
    *_as(None, "phase"),
    ("index", "idx", None),
    *_as(None, "start_ns end_ns workers"),
    *_as(json.loads, "counts keys keys_hit stats"),
    *_as(histograms_from_text, "latency service"),
    *_as(_histogram_or_none, "lag"),
    *_as(None, "round"),
    *_as(_histogram_or_none, "hiccup"),
)


def _columns(fields: Fields) -> str:
    return ", ".join(column for _, column, _ in fields)


def _read(fields: Fields, row: Sequence[Any]) -> dict[str, Any]:
    return {name: read(v) if read else v for (name, _, read), v in zip(fields, row, strict=False)}


def _queue_section(
    stored: str | None, legacy_document: str | None, start_ns: int
) -> QueueSection | None:
    """A queue run's section: its column, or (stored before the column) its document's."""
    if stored is not None:
        return QueueSection.from_json(json.loads(stored))
    if legacy_document is not None:
        document = json.loads(legacy_document)
        if "queue" in document:
            return section_from_document(document, start_ns)
    return None


def _busy(exc: BaseException) -> bool:
    """Another connection holds the lock (another kvbench saving, or migrating)."""
    return getattr(exc, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED")


def unusable(path: str, exc: BaseException) -> str:
    """One line for a history database that cannot be used, and what to do about it."""
    name = getattr(exc, "sqlite_errorname", "")
    if _busy(exc):
        return f"history database {path} is locked by another process: try again when it ends"
    if name in ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_FULL", "SQLITE_IOERR"):
        return f"cannot use history database {path}: {exc}"
    return (
        f"history database {path} is damaged or not kvbench's ({exc}): move it aside "
        f"(mv {path} {path}.bad) and kvbench creates a new one, or use --db with another file"
    )


def _remove_database(path: str) -> None:
    """Remove a database file this process created, with its journal files."""
    for name in (path, path + "-journal", path + "-wal", path + "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)


def _readable(method: Callable[P, R]) -> Callable[P, R]:
    """A query on a file that is damaged past its first page is one line, not a traceback."""

    @functools.wraps(method)
    def query(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            store = args[0]
            assert isinstance(store, Store)
            raise StoreError(unusable(store.path, exc)) from None

    return query


class Store:
    """The history database at ``path`` (created, with its directory, on first use).

    Creating it is atomic: the schema is made in one transaction, and a file this call
    created is removed again when that fails (a full disk), so the next command starts
    afresh instead of finding half a schema.

    Raises:
        StoreError: the file cannot be created or opened, or is damaged or not a kvbench
            database (one line naming it and how to recover).
        SchemaVersionError: the database was written by a newer kvbench.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        creating = path != ":memory:" and not os.path.exists(path)
        try:
            if path != ":memory:":
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._db = sqlite3.connect(path)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open history database {path}: {exc}") from None
        except OSError as exc:  # its directory: the name is taken by a file, or read-only
            where = f" ({exc.filename})" if exc.filename and exc.filename != path else ""
            raise StoreError(
                f"cannot create history database {path}: {exc.strerror}{where}"
            ) from None
        try:
            self._db.execute("PRAGMA foreign_keys = ON")
            migrate(self._db)
        except SchemaVersionError:
            self._db.close()
            raise
        except (sqlite3.DatabaseError, StoreError) as exc:
            self._db.close()
            if creating and not _busy(exc):  # leave nothing half-made behind
                _remove_database(path)
                raise StoreError(f"cannot create history database {path}: {exc}") from None
            raise StoreError(unusable(path, exc)) from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def save_run(self, run: RunResult, document: dict[str, Any] | None = None) -> None:
        """Store a run, its intervals and phases, its queue section, and (optionally) its
        result document.

        The ``status`` column is ``results.status.run_status`` (a queue run's delivery is
        judged there too); ``process_status`` keeps ``run.status``, what happened to its
        processes.
        """
        throughput = document["totals"]["throughput_per_s"] if document else None
        status = run_status(run).name
        queue = json.dumps(run.queue.to_json()) if run.queue is not None else None
        trace = json.dumps(run.trace.to_json()) if run.trace is not None else None
        try:
            with self._db:
                self._db.execute(
                    "INSERT INTO runs (run_id, started_at, status, mode, target, kvbench_version, "
                    "window_start_ns, window_end_ns, throughput_per_s, config, targets, "
                    "environment, workers, errors, server, document, rounds, process_status, "
                    "label, queue, trace) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        run.run_id,
                        run.started_at,
                        status,
                        run.mode,
                        " ".join(t["url"] for t in run.targets),
                        run.kvbench_version,
                        run.window_start_ns,
                        run.window_end_ns,
                        throughput,
                        json.dumps(run.config),
                        json.dumps(run.targets),
                        json.dumps(run.environment),
                        json.dumps(run.workers),
                        json.dumps(run.errors),
                        json.dumps(run.server),
                        json.dumps(document) if document else None,
                        json.dumps(run.rounds),
                        run.status,
                        run.label,
                        queue,
                        trace,
                    ),
                )
                snapshots = list(run.intervals) + list(run.phases.values())
                self._db.executemany(
                    "INSERT INTO intervals (run_id, round, phase, idx, start_ns, end_ns, workers, "
                    "counts, keys, keys_hit, stats, latency, service, lag, hiccup) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    [
                        (
                            run.run_id,
                            s.round,
                            s.phase,
                            s.index,
                            s.start_ns,
                            s.end_ns,
                            s.workers,
                            json.dumps(s.counts),
                            json.dumps(s.keys),
                            json.dumps(s.keys_hit),
                            json.dumps(s.stats),
                            histograms_to_text(s.latency),
                            histograms_to_text(s.service),
                            s.lag.encode_base64() if s.lag is not None else "",
                            s.hiccup.encode_base64() if s.hiccup is not None else "",
                        )
                        for s in snapshots
                    ],
                )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot save run to {self.path}: {exc}") from None

    def save_search(self, document: dict[str, Any]) -> None:
        """Store a capacity search's result document (report/search.py); its steps' runs
        are saved with ``save_run``."""
        try:
            with self._db:
                self._db.execute(
                    "INSERT INTO searches (search_id, started_at, status, target, document) "
                    "VALUES (?,?,?,?,?)",
                    (
                        document["search_id"],
                        document["started_at"],
                        document["status"],
                        document["target"],
                        json.dumps(document),
                    ),
                )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot save search to {self.path}: {exc}") from None

    @_readable
    def load_search(self, search_ref: str) -> dict[str, Any]:
        """A stored search's document, by id (``search-...``), a unique prefix of one, or
        ``search-last``.

        Raises:
            UnknownRun: no search, or more than one, matches (a usage error).
        """
        document: dict[str, Any] = json.loads(self._by_ref("searches", "document", search_ref))
        return document

    @_readable
    def list_searches(self, target: str | None = None, last: int = 20) -> list[dict[str, Any]]:
        """The newest searches first, their documents."""
        query, params = "SELECT document FROM searches", []
        if target:
            query += " WHERE target LIKE ?"
            params.append(f"%{target}%")
        query += " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        rows = self._db.execute(query, [*params, last]).fetchall()
        return [json.loads(row[0]) for row in rows]

    @_readable
    def resolve(self, run_ref: str) -> str:
        """A full run id from an id, a unique prefix of one, or ``last``.

        Raises:
            UnknownRun: no run, or more than one, matches (a usage error).
        """
        return str(self._by_ref("runs", "run_id", run_ref))

    def _by_ref(self, table: str, column: str, ref: str) -> Any:
        """``column`` of the one row of ``table`` (runs or searches) that ``ref`` names:
        the newest for ``last`` or ``latest`` (``search-last``, ``search-latest``), else the
        row whose id starts with ``ref``.

        Raises:
            UnknownRun: no row, or more than one, matches (a usage error).
        """
        kind, id_column, newest = _REFERABLE[table]
        if ref in newest:
            row = self._db.execute(
                f"SELECT {column} FROM {table} ORDER BY started_at DESC, rowid DESC LIMIT 1"
            ).fetchone()
            if row is None:
                raise UnknownRun(f"no {table} in {self.path}")
            return row[0]
        rows = self._db.execute(
            f"SELECT {column} FROM {table} WHERE {id_column} LIKE ? ORDER BY {id_column}",
            (ref + "%",),
        ).fetchall()
        if not rows:
            raise UnknownRun(f"no {kind} {ref!r} in {self.path} (kvbench history lists them)")
        if len(rows) > 1:
            raise UnknownRun(f"{ref!r} matches {len(rows)} {table}; give more of the id")
        return rows[0][0]

    @_readable
    def load_run(self, run_ref: str) -> RunResult:
        """Load a stored run (by id, prefix or ``last``)."""
        run_id = self.resolve(run_ref)
        row = self._db.execute(
            f"SELECT {_columns(_RUN_FIELDS)}, trace, queue, "
            "CASE WHEN queue IS NULL AND mode = 'queue' THEN document END "
            "FROM runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        intervals: list[IntervalSnapshot] = []
        phases: dict[str, IntervalSnapshot] = {}
        for r in self._db.execute(
            f"SELECT {_columns(_INTERVAL_FIELDS)} FROM intervals WHERE run_id = ? "
            "ORDER BY round, phase, idx",
            (run_id,),
        ):
            snap = IntervalSnapshot(**_read(_INTERVAL_FIELDS, r))
            if snap.phase == "measure":
                intervals.append(snap)
            else:
                phases[snap.phase] = snap
        fields = _read(_RUN_FIELDS, row)
        queue = _queue_section(row[-2], row[-1], fields["window_start_ns"])
        trace = TraceSection.from_json(json.loads(row[-3])) if row[-3] is not None else None
        return RunResult(**fields, intervals=intervals, phases=phases, queue=queue, trace=trace)

    @_readable
    def list_runs(self, target: str | None = None, last: int = 20) -> list[HistoryRow]:
        """The newest runs first: id, start, status, label, target, window and throughput."""
        query = (
            "SELECT run_id, started_at, status, mode, target, window_start_ns, window_end_ns, "
            "throughput_per_s, rounds, label FROM runs"
        )
        params: list[Any] = []
        if target:
            query += " WHERE target LIKE ?"
            params.append(f"%{target}%")
        query += " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        params.append(last)
        return [
            {
                "run_id": r[0],
                "started_at": r[1],
                "status": r[2],
                "mode": r[3],
                "target": r[4],
                "window_s": _window_s(r[5], r[6], json.loads(r[8])),
                "throughput_per_s": r[7],
                "label": r[9],
            }
            for r in self._db.execute(query, params)
        ]
