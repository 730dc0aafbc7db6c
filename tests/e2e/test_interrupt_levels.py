"""Ctrl-C in ``kvbench sweep`` and ``kvbench compare``: exit 130, what finished is kept as
complete, the level or round cut short is marked interrupted and left out of the knee and
the ratios, and no process prints a traceback.

Ctrl-C is sent as a terminal sends it: SIGINT to the whole process group (coordinator and
workers), the command running in a session of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kvbench.results.store import Store
from tests.support.cli import read_json, start_in_session
from tests.support.servers import Server

pytestmark = pytest.mark.integration


def read_until(proc: subprocess.Popen[str], *markers: str, timeout_s: float = 90) -> str:
    """Stdout up to the line holding the last of ``markers`` (each found in turn)."""
    assert proc.stdout is not None
    seen, pending = [], list(markers)
    deadline = time.monotonic() + timeout_s
    while pending:
        assert time.monotonic() < deadline, "".join(seen)
        line = proc.stdout.readline()
        assert line, "".join(seen)  # ended before the marker
        seen.append(line)
        if pending[0] in line:
            pending.pop(0)
    return "".join(seen)


def ctrl_c(proc: subprocess.Popen[str]) -> tuple[str, str]:
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    return stdout, stderr


def test_ctrl_c_while_a_level_starts_keeps_the_finished_ones(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    out, db = tmp_path / "sweep.json", str(tmp_path / "h.db")
    proc = start_in_session(
        "sweep", f"memcached://{fresh_memcached.address}", "--pipeline", "1,2,4",
        "--duration", "1s", "--processes", "2", "-c", "2", "--json", str(out), "--db", db, "--no-live",
    )  # fmt: skip
    read_until(proc, "level 2/3")
    time.sleep(0.2)  # its workers are being spawned, or importing
    stdout, stderr = ctrl_c(proc)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    doc = read_json(out)
    assert doc["status"] == "interrupted"
    first, second = doc["levels"]  # level 4 never began
    assert (first["level"], first["status"]) == (1.0, "ok") and first["throughput_per_s"] > 0
    assert (second["level"], second["status"]) == (2.0, "interrupted")
    assert second["throughput_per_s"] is None  # nothing complete to show or to judge
    assert doc["knee"] is None
    assert "sweep status: interrupted" in stdout
    with Store(db) as store:
        statuses = {r["run_id"]: r["status"] for r in store.list_runs()}
    assert statuses[first["run_id"]] == "ok"
    if second["run_id"] is not None:  # its workers had started: its run is kept, marked
        assert statuses[second["run_id"]] == "interrupted"


def test_ctrl_c_during_a_round_keeps_the_complete_rounds(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    out = tmp_path / "compare.json"
    a = f"memcached://{fresh_memcached.address}"
    b = f"memcached+meta://{fresh_memcached.address}"
    proc = start_in_session(
        "compare", a, b, "--rounds", "3", "--duration", "3s", "--processes", "1", "-c", "2",
        "--json", str(out), "--no-save",
    )  # fmt: skip
    read_until(proc, f"round 2/3: {a}", "[")  # A's second round is measuring
    stdout, stderr = ctrl_c(proc)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    doc = read_json(out)
    assert doc["status"] == "interrupted"
    target_a, target_b = doc["targets"]
    assert [r["status"] for r in target_a["rounds"]] == ["ok", "interrupted"]
    assert [r["status"] for r in target_b["rounds"]] == ["ok"]
    assert target_a["status"] == "interrupted" and target_b["status"] == "ok"
    (row,) = doc["comparison"]
    assert row["rounds_paired"] == 1  # A's cut-short round 2 is not paired with anything
    b_rate = target_b["rounds"][0]["throughput_per_s"]
    assert row["throughput_ratio"] == pytest.approx(
        b_rate / target_a["rounds"][0]["throughput_per_s"], rel=1e-3
    )
    assert "95% CI needs 3 rounds" in stdout and "compare status: interrupted" in stdout
