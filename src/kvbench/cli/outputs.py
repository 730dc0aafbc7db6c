"""The files a command writes, checked before a measurement and written after it.

``Outputs`` names them (--json, --csv, --hdr-log, --report); ``Outputs.check`` and
``check_history`` run before a measurement, so a file that cannot be written is refused
before the run rather than lost after it; ``write_exports`` writes one run's files,
``write_many`` a sweep's or a comparison's runs into one file of each kind. Every command
that writes files uses these (cli/session.py, cli/preset_runs.py, ``kvbench export`` and
``kvbench report``); none of them is a command.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from rich.console import Console

from kvbench.config.model import ReportConfig
from kvbench.errors import ConfigError, StoreError
from kvbench.report import dumps
from kvbench.report.exports import hdr_log, interval_csv, runs_csv, runs_hdr_log
from kvbench.report.summary import ReportModel
from kvbench.results.model import RunResult
from kvbench.results.store import Store

# The path that names stdout (``--json -``), as in curl, jq and memtier.
STDOUT = "-"


def write_text(flag: str, path: str, text: str) -> None:
    """Write a file asked for by ``flag`` (``-``: stdout); one line naming the flag if it
    cannot be."""
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except OSError as exc:
        raise ConfigError(flag, f"cannot write {path}: {exc.strerror}") from None


def check_writable(flag: str, path: str) -> None:
    """Refuse, before a run, a file the run could not write after it.

    An existing file is opened for appending, which neither writes nor truncates it. A
    new one is created and removed again: the only honest test of its directory (that it
    exists, is a directory, may be written, and is not on a read-only filesystem). A full
    disk shows only when writing, after the run: ``write_text`` says so then. ``-`` is
    stdout, always writable.

    Raises:
        ConfigError: naming the flag and the reason.
    """
    if path == STDOUT:
        return
    try:
        if os.path.exists(path):
            with open(path, "ab"):
                pass
        else:
            with open(path, "xb"):
                pass
            os.remove(path)
    except OSError as exc:
        raise ConfigError(flag, f"cannot write {path}: {exc.strerror}") from None


def check_history(report: ReportConfig) -> None:
    """Before a run: the history database it will be saved in opens and can be written.

    Raises:
        StoreError: the database cannot be created, or is damaged (``Store``).
        ConfigError: the file cannot be written (``--db``).
    """
    if not report.save:
        return
    with Store(report.db_path):  # creates it, or checks and migrates it
        pass
    check_writable("--db", report.db_path)


def write_exports(
    console: Console,
    run: RunResult,
    model: ReportModel,
    *,
    json_path: str | None = None,
    csv_path: str | None = None,
    hdr_log_path: str | None = None,
) -> None:
    """Write the files asked for, and say so on ``console``.

    Raises:
        ConfigError: a file cannot be written (names the flag).
    """
    if json_path:
        write_text("--json", json_path, dumps(model))
        console.print(f"result document written to {where(json_path)}")
    if csv_path:
        write_text("--csv", csv_path, interval_csv(run, model))
        console.print(f"per-interval CSV written to {where(csv_path)}")
    if hdr_log_path:
        write_text("--hdr-log", hdr_log_path, hdr_log(run))
        console.print(f"HdrHistogram interval log written to {where(hdr_log_path)}")


# How to write each file again from the history.
_REWRITE = {
    "--json": "kvbench show {run_id} --json > FILE",
    "--csv": "kvbench export {run_id} --csv FILE",
    "--hdr-log": "kvbench export {run_id} --hdr-log FILE",
    "--report": "kvbench report {run_id} -o FILE",
}


@contextlib.contextmanager
def saved_run_hint(run_id: str | None) -> Iterator[None]:
    """A file that cannot be written after the run was saved: the same one line, plus
    how to write it again from the history."""
    try:
        yield
    except ConfigError as exc:
        again = _REWRITE.get(exc.path)
        if run_id is None or again is None:
            raise
        hint = again.format(run_id=run_id)
        raise ConfigError(exc.path, f"{exc.message} (run {run_id} is saved: {hint})") from None


def unsaved_warning(console: Console, what: str, error: StoreError, outputs: Outputs) -> None:
    """The history could not store ``what`` (``run ID``, ``the sweep's 5 runs``) because
    of ``error`` (e.g. a full disk), and its files are written: one warning line saying
    so and which files hold it.

    Raises:
        StoreError: no file was asked for, so nothing holds the run: ``error``, saying so.
    """
    files = outputs.paths()
    if not files:
        raise StoreError(f"{error}; {what} not stored (no --json or --report file)")
    console.print(
        f"warning: {what} not stored in the history ({error}); it is in {', '.join(files)}",
        markup=False,
        highlight=False,
    )


# The flag that names each of Outputs' files.
OUTPUT_FLAGS = {
    "json_path": "--json",
    "csv_path": "--csv",
    "hdr_log_path": "--hdr-log",
    "report_path": "--report",
}


@dataclass(frozen=True)
class Outputs:
    """The files a run, sweep or comparison writes (--json, --csv, --hdr-log, --report)."""

    json_path: str | None = None
    csv_path: str | None = None
    hdr_log_path: str | None = None
    report_path: str | None = None

    @classmethod
    def pop_from(cls, options: dict[str, Any]) -> Outputs:
        return cls(*(options.pop(name, None) for name in (f.name for f in fields(cls))))

    def paths(self) -> list[str]:
        """The files asked for, in flag order."""
        return [path for name in OUTPUT_FLAGS if (path := getattr(self, name))]

    def to_stdout(self) -> bool:
        """A file goes to stdout (``-``): the summary then goes to stderr."""
        return STDOUT in self.paths()

    def check(self) -> None:
        """Refuse, before a run, a file that could not be written (``check_writable``),
        and more than one file to stdout (``-``), which would mix them."""
        dashes = [flag for name, flag in OUTPUT_FLAGS.items() if getattr(self, name) == STDOUT]
        if len(dashes) > 1:
            raise ConfigError(
                dashes[1], f"only one file can go to stdout (-): {' and '.join(dashes)} both ask"
            )
        for name, flag in OUTPUT_FLAGS.items():
            path = getattr(self, name)
            if path:
                check_writable(flag, path)


def write_many(
    console: Console,
    labelled: list[tuple[str, RunResult]],
    label_column: str,
    *,
    csv_path: str | None = None,
    hdr_log_path: str | None = None,
) -> None:
    """Several runs, each labelled (by level or target), into one CSV and one log.

    Raises:
        ConfigError: a file cannot be written (names the flag).
    """
    if not labelled:  # every run failed: say so rather than leave the files unwritten
        for flag, path in (("--csv", csv_path), ("--hdr-log", hdr_log_path)):
            if path:
                console.print(f"{flag}: no run completed, nothing written to {path}")
        return
    if csv_path:
        write_text("--csv", csv_path, runs_csv(labelled, label_column))
        console.print(f"per-interval CSV of {len(labelled)} runs written to {where(csv_path)}")
    if hdr_log_path:
        write_text("--hdr-log", hdr_log_path, runs_hdr_log(labelled))
        console.print(
            f"HdrHistogram interval log of {len(labelled)} runs written to {hdr_log_path}"
        )


def save_report(console: Console, path: str, html: str, flag: str = "--report") -> None:
    """Write the HTML page and say where, with its size.

    Raises:
        ConfigError: the file cannot be written (one line naming ``flag``, exit 2).
    """
    write_text(flag, path, html)
    console.print(f"HTML report written to {where(path)} ({len(html.encode()) / 1024:,.0f} KiB)")


def write_json_document(path: str | None, doc: Mapping[str, object], console: Console) -> None:
    """Write --json (a file that cannot be written is one line naming the flag)."""
    if path:
        write_text("--json", path, json.dumps(doc, indent=2) + "\n")
        console.print(f"result document written to {where(path)}")


def where(path: str) -> str:
    """A written file's name in the line that says so (``-``: stdout)."""
    return "stdout" if path == STDOUT else path
