"""A history database that cannot be used is one line naming it and the way out, exit 5."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from kvbench.cli import main


@pytest.mark.parametrize(
    "command", [["history"], ["show", "last"], ["export", "last", "--json", "x"]]
)
def test_a_damaged_history_is_one_line_and_exit_5(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    path = tmp_path / "h.db"
    with sqlite3.connect(path) as db:  # what a full disk left while an older kvbench created it
        db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY)")
    with pytest.raises(SystemExit) as exited:
        main([*command, "--db", str(path)])
    err = capsys.readouterr().err
    assert exited.value.code == 5
    assert err.startswith(f"kvbench: error: history database {path} is damaged or not kvbench's")
    assert f"move it aside (mv {path} {path}.bad)" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "command",
    [
        ["show", "nosuchrun"],
        ["show", "last"],
        ["export", "nosuchrun", "--json", "x"],
        ["diff", "nosuchrun", "last"],
        ["report", "nosuchrun"],
    ],
)
def test_a_run_that_is_not_stored_is_a_usage_error_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """Was exit 5, the database-error code: the database is fine, the argument is not."""
    with pytest.raises(SystemExit) as exited:
        main([*command, "--db", str(tmp_path / "h.db")])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith("kvbench: error: RUN: no run") and err.count("\n") == 1
