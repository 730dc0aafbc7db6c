"""A server killed for good mid-run, against real memcached: every run ends, failed.

A replay ends when its trace is sent, so with its server gone it reconnected for ever
(before: a replay of a killed memcached never ended). Now a server none of whose
connections has been live for twice ``--timeout``, every reconnect refused, is gone: the
replay ends there, failed (exit 1), one status line naming the server, what it measured
kept and stored; a ``kvbench run`` goes on to the end of its window and is failed the
same way. The replay's second connection has no rows (one client in the trace): idle when
the server died, its close is a lost connection, not one "refused right after accepting"
(which read as the server's connection cap: "its limit: maxconns 1024").
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kvbench.results.store import Store
from tests.support import servers
from tests.support.cli import all_phase_counts, kvbench_argv, read_json, read_until
from tests.support.traces import write_trace

pytestmark = pytest.mark.integration

ROWS = 400_000  # far more than a second sends at --speed max, pipeline 1
END_TIMEOUT_S = 60  # the run ends by itself well before; this only bounds a hang


def run_and_kill(argv: list[str]) -> tuple[int, str, str, str]:
    """Start ``kvbench ARGV`` against a fresh memcached, kill the server (SIGKILL) once the
    first interval is printed, and wait for kvbench to end. Returns its exit code, stdout,
    stderr and the server's address."""
    with servers.memcached() as server:
        proc = subprocess.Popen(
            kvbench_argv(*[a.format(address=server.address) for a in argv]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"},
        )
        try:
            lines = read_until(proc, "[   1.0s]")
            assert any("[   1.0s]" in line for line in lines), "".join(lines)
            server.proc.kill()
            server.proc.wait()
            stdout, stderr = proc.communicate(timeout=END_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return proc.returncode, "".join(lines) + stdout, stderr, server.address


def check_gone(doc: dict[str, Any], stdout: str, stderr: str, address: str) -> None:
    """Failed, the one reason naming the server, the refused reconnects said as such."""
    url = f"memcached://{address}"
    assert "Traceback" not in stderr
    assert doc["status"] == "failed"
    gone = [r for r in doc["status_reasons"] if r.startswith(f"{url} went away: ")]
    assert len(gone) == 1, doc["status_reasons"]
    assert "status: failed - " in stdout and f"{url} went away" in stdout
    [line] = [e for e in doc["errors"] if "target_lost 1" in e]
    assert f"{url}: no connection to it for " in line
    assert "(connection refused: nothing listens there)" in line
    # nothing the server refused after accepting it: it was not over any limit
    connections = doc["connections"]
    assert connections["connect_resets"] == connections["connect_resets_before"] == 0
    assert "maxconns" not in stdout and "right after accepting" not in stdout
    assert connections["connect_failures"] > 0  # the refused reconnects, counted


def test_a_replay_of_a_killed_server_ends_failed_naming_it(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path / "t.csv", [(i // 100, f"k:{i % 50}", 4, 20, "c0", "set", 60) for i in range(ROWS)]
    )
    out, db = tmp_path / "run.json", tmp_path / "h.db"
    code, stdout, stderr, address = run_and_kill(
        ["replay", str(trace), "memcached://{address}", "-c", "2", "-P", "1", "--speed", "max",
         "--timeout", "500ms", "--json", str(out), "--db", str(db)]
    )  # fmt: skip
    assert code == 1, stdout + stderr
    doc = read_json(out)
    check_gone(doc, stdout, stderr, address)
    assert "gave up on it, the run ends here" in " ".join(doc["errors"])
    # what it measured is kept: the rows sent until then, each counted once by its
    # outcome; only those in flight when the server died (at most -c x -P) are unknown
    sent = doc["trace"]["sent"]["total"]
    assert 0 < sent < ROWS
    assert all_phase_counts(doc, "set") == sent
    outcomes = doc["ops"]["set"]["outcomes"]
    assert set(outcomes) <= {"stored", "conn_error"} and outcomes["stored"] > 0
    assert outcomes.get("conn_error", 0) <= 2
    with Store(str(db)) as store:
        [row] = store.list_runs()
    assert row["run_id"] == doc["run_id"] and row["status"] == "failed"


def test_a_run_of_a_killed_server_ends_at_its_window_failed_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    code, stdout, stderr, address = run_and_kill(
        ["run", "memcached://{address}", "-c", "2", "--processes", "1", "--duration", "5s",
         "--timeout", "200ms", "--json", str(out), "--no-save"]
    )  # fmt: skip
    assert code == 1, stdout + stderr
    doc = read_json(out)
    check_gone(doc, stdout, stderr, address)
    assert len(doc["intervals"]) == 5  # it ran its whole window, reconnecting
    assert "the run ends here" not in " ".join(doc["errors"])


def test_a_short_run_whose_server_dies_and_stays_down_ends_failed(tmp_path: Path) -> None:
    """A 5 s window, the server killed once its first second is printed, the gone rule's
    10 s far off: the window ends with the server down, failed, naming it and how long it
    was down (was: ``ok``, most of the window sent nowhere). 5 s, not 3: a loaded machine
    may print the first second late, and the kill must come before the window's end."""
    out = tmp_path / "run.json"
    code, stdout, stderr, address = run_and_kill(
        ["run", "memcached://{address}", "-c", "2", "--processes", "1", "--duration", "5s",
         "--json", str(out), "--no-save"]
    )  # fmt: skip
    assert code == 1, stdout + stderr
    assert "Traceback" not in stderr
    doc = read_json(out)
    url = f"memcached://{address}"
    assert doc["status"] == "failed" and len(doc["intervals"]) == 5
    [reason] = doc["status_reasons"]
    prefix = f"{url} was down when the window ended: none of its connections live for the last "
    assert reason.startswith(prefix), reason
    down_s = float(reason.removeprefix(prefix).split("s,")[0])
    assert 0 < down_s <= 4.0  # killed once the first second was printed
    assert f"status: failed - {prefix}" in stdout
    assert doc["connections"]["connect_failures"] > 0
