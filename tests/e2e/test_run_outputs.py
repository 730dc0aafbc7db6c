"""Output files: checked before the run; a write that still fails loses nothing.

``/dev/full`` opens like any file and fails every write with ENOSPC: a disk that fills
while the run goes, after the check before it passed.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest

from kvbench.cli import main
from kvbench.results import Store
from tests.support import servers
from tests.support.cli import kvbench_argv, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration

SHORT = ("--duration", "1s", "-c", "2", "--processes", "1", "--no-live")


@pytest.mark.parametrize("flag", ["--json", "--csv", "--hdr-log", "--report", "--db"])
def test_an_output_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, flag: str
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    path = not_a_dir / "out"
    with socket.socket() as listener:  # the target: never connected to
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        url = f"memcached://127.0.0.1:{listener.getsockname()[1]}"
        db = [] if flag == "--db" else ["--db", str(tmp_path / "h.db")]
        result = run_kvbench("run", url, *SHORT, *db, flag, str(path))
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    if flag == "--db":  # the history's own error
        assert result.code == 5
        assert result.stderr == (
            f"kvbench: error: cannot create history database {path}: File exists ({not_a_dir})\n"
        )
    else:
        assert result.code == 2
        assert result.stderr == f"kvbench: error: {flag}: cannot write {path}: Not a directory\n"


@pytest.mark.parametrize(
    ("flag", "again"),
    [
        ("--json", "kvbench show {} --json > FILE"),
        ("--csv", "kvbench export {} --csv FILE"),
        ("--hdr-log", "kvbench export {} --hdr-log FILE"),
        ("--report", "kvbench report {} -o FILE"),
    ],
)
def test_a_full_disk_after_the_run_keeps_the_run_in_the_history(
    memcached_server: Server, tmp_path: Path, flag: str, again: str
) -> None:
    db = str(tmp_path / "h.db")
    result = run_kvbench(
        "run", f"memcached://{memcached_server.address}", *SHORT, "--db", db, flag, "/dev/full"
    )
    assert result.code == 2
    listed = run_kvbench("show", "last", "--json", "--db", db)
    assert listed.code == 0, listed.stderr
    run_id = json.loads(listed.stdout)["run_id"]
    assert f"saved as run {run_id}" in result.stdout
    assert result.stderr == (
        f"kvbench: error: {flag}: cannot write /dev/full: No space left on device "
        f"(run {run_id} is saved: {again.format(run_id)})\n"
    )


def test_a_full_disk_after_a_queue_run_keeps_it_in_the_history(tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    with servers.redis() as server:
        result = run_kvbench(
            "queue", f"redis-queue://{server.address}/jobs", "--messages", "200",
            "--db", db, "--json", "/dev/full", "--no-live",
        )  # fmt: skip
    assert result.code == 2
    shown = run_kvbench("show", "last", "--json", "--db", db)
    document = json.loads(shown.stdout)
    assert document["queue"]["received"] == 200
    assert result.stderr == (
        "kvbench: error: --json: cannot write /dev/full: No space left on device "
        f"(run {document['run_id']} is saved: kvbench show {document['run_id']} --json > FILE)\n"
    )


def history_disk_full_after_check(monkeypatch: pytest.MonkeyPatch, db: str) -> None:
    """The history at ``db`` is created, then holds no page more: the check before the run
    passes, and saving the run fails in SQLite itself with SQLITE_FULL ("database or disk
    is full"), as when the disk fills during the run."""
    Store(db).close()
    with sqlite3.connect(db) as made:
        pages = made.execute("PRAGMA page_count").fetchone()[0]
    connect = sqlite3.connect

    def connect_full(*args: object, **kwargs: object) -> sqlite3.Connection:
        handle = connect(*args, **kwargs)  # type: ignore[arg-type]
        handle.execute(f"PRAGMA max_page_count = {pages}")
        return handle

    monkeypatch.setattr(sqlite3, "connect", connect_full)


def test_a_full_history_disk_keeps_the_run_in_the_files_asked_for(
    memcached_server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, json_path, html_path = (str(tmp_path / name) for name in ("h.db", "x.json", "x.html"))
    history_disk_full_after_check(monkeypatch, db)
    url = f"memcached://{memcached_server.address}"
    with pytest.raises(SystemExit) as exited:
        main(["run", url, *SHORT, "--db", db, "--json", json_path, "--report", html_path])
    out, err = capsys.readouterr()
    document = json.loads(Path(json_path).read_text())
    assert exited.value.code == 0, err  # the run's status (ok): the files hold it
    assert document["status"] == "ok" and document["run_id"] in Path(html_path).read_text()
    warning = [line for line in out.splitlines() if line.startswith("warning: run")]
    assert warning == [
        f"warning: run {document['run_id']} is not stored in the history (cannot save run to "
        f"{db}: database or disk is full); it is in {json_path}, {html_path}"
    ]
    assert "saved as run" not in out and err == ""


def test_a_full_history_disk_with_no_file_asked_for_says_the_run_is_lost(
    memcached_server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = str(tmp_path / "h.db")
    history_disk_full_after_check(monkeypatch, db)
    with pytest.raises(SystemExit) as exited:
        main(["run", f"memcached://{memcached_server.address}", *SHORT, "--db", db])
    err = capsys.readouterr().err
    assert exited.value.code == 5
    assert err.startswith(
        f"kvbench: error: cannot save run to {db}: database or disk is full; run "
    )
    assert err.endswith(" is not stored (no --json or --report file)\n") and err.count("\n") == 1


def test_stdout_closed_mid_run_keeps_the_run(memcached_server: Server, tmp_path: Path) -> None:
    """``kvbench run ... | head -1``: the reader goes after the first line. The run goes on
    without printing, and ends as measured: written, stored, its exit code the status's,
    one line on stderr saying the output was cut. Was: exit 1, nothing on stderr, nothing
    written or stored (rich's console exits on a broken pipe)."""
    out, db = tmp_path / "run.json", tmp_path / "h.db"
    proc = subprocess.Popen(
        kvbench_argv(
            "run", f"memcached://{memcached_server.address}", "-n", "20000", "-c", "2",
            "--processes", "1", "--json", str(out), "--db", str(db),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"kvbench: memcached://")
    proc.stdout.close()  # as head does
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, stderr
    assert stderr.splitlines() == [
        "kvbench: the output was closed (broken pipe): the run goes on without printing it"
    ]
    doc = json.loads(out.read_text())
    assert doc["status"] == "ok" and doc["totals"]["ops"] == 20000
    with Store(str(db)) as store:
        assert [r["run_id"] for r in store.list_runs()] == [doc["run_id"]]
