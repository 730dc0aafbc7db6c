"""Checking output files before a run: honest, and harmless to what is there."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kvbench.cli import main
from kvbench.cli.outputs import Outputs, check_writable
from kvbench.errors import ConfigError
from kvbench.results import Store
from tests.unit.results.test_store import a_run


def test_an_existing_file_is_checked_without_truncating_it(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    path.write_text("an earlier result")
    check_writable("--json", str(path))
    assert path.read_text() == "an earlier result"


def test_a_new_file_is_checked_without_leaving_it_behind(tmp_path: Path) -> None:
    check_writable("--csv", str(tmp_path / "series.csv"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "reason"),
    [("missing/out.json", "No such file or directory"), ("", "Is a directory")],
)
def test_a_file_that_cannot_be_written_names_the_flag(
    tmp_path: Path, name: str, reason: str
) -> None:
    path = tmp_path / name if name else tmp_path
    with pytest.raises(ConfigError) as caught:
        Outputs(report_path=str(path)).check()
    assert str(caught.value) == f"--report: cannot write {path}: {reason}"


def test_the_report_command_on_a_full_disk_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.db")
    with Store(db) as store:
        store.save_run(a_run())
    with pytest.raises(SystemExit) as exited:
        main(["report", "last", "--db", db, "-o", "/dev/full"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "kvbench: error: --output: cannot write /dev/full: No space left on device\n"
    )


@pytest.mark.parametrize(
    "command",
    [
        ["run", "memcached://127.0.0.1:{port}"],
        ["sweep", "memcached://127.0.0.1:{port}", "--connections", "1,2"],
        ["compare", "memcached://127.0.0.1:{port}", "memcached+meta://127.0.0.1:{port}"],
        ["queue", "redis-queue://127.0.0.1:{port}/jobs"],
        ["run", "--preset", "single-key-readers", "redis://127.0.0.1:{port}"],
    ],
)
def test_every_command_checks_its_files_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    path = tmp_path / "missing" / "out.json"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        argv = [part.format(port=port) for part in command]
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--db", str(tmp_path / "h.db"), "--json", str(path)])
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        f"kvbench: error: --json: cannot write {path}: No such file or directory\n"
    )
