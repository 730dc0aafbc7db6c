"""Coordinated omission, shown against a real memcached stopped with SIGSTOP for 1 s.

Open loop at 1,000 ops/s: requests keep coming due during the stall, so latency measured
from their intended send times shows it (p99 of hundreds of ms), while service time
(from the actual send) does not. A closed loop facing the same stall simply stops
sending: its p99 stays small and only the max shows the stall.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import servers
from tests.support.cli import kvbench_argv, read_json

pytestmark = pytest.mark.integration


def run_with_stall(tmp_path: Path, *flags: str, exit_code: int = 0) -> dict[str, Any]:
    out = tmp_path / "run.json"
    with servers.memcached() as server:
        proc = subprocess.Popen(
            kvbench_argv(
                "run",
                f"memcached://{server.address}",
                "--duration",
                "5s",
                "-c",
                "10",
                "--processes",
                "1",
                "--ratio",
                "0:1",
                "--json",
                str(out),
                "--no-save",
                "-q",
                *flags,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(2.5)  # ~1 s of spawn and connect, then ~1.5 s of load
        os.kill(server.proc.pid, signal.SIGSTOP)
        time.sleep(1.0)
        os.kill(server.proc.pid, signal.SIGCONT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == exit_code, stderr
    return read_json(out)


def test_open_loop_latency_shows_the_stall_and_service_time_does_not(tmp_path: Path) -> None:
    doc = run_with_stall(tmp_path, "--rate", "1000", "--max-lag", "5s")
    get = doc["ops"]["get"]
    assert doc["mode"] == "open"
    assert get["count"] == pytest.approx(5000, rel=0.02)
    assert get["latency_us"]["p99"] > 300_000  # hundreds of ms behind the schedule
    assert get["service_time_us"]["p99"] < 50_000  # the server itself answers fast
    assert get["outcomes"].get("late", 0) > 100  # sends queued behind the stall
    assert get["outcomes"].get("dropped", 0) == 0


def test_closed_loop_hides_the_same_stall(tmp_path: Path) -> None:
    doc = run_with_stall(tmp_path, "-P", "1")
    get = doc["ops"]["get"]
    assert doc["mode"] == "closed"
    assert get["latency_us"]["p99"] < 50_000  # the stall vanishes from the percentiles
    assert get["latency_us"]["max"] > 800_000  # only the 10 requests caught in it show it


def test_requests_behind_max_lag_are_dropped_not_sent(tmp_path: Path) -> None:
    # dropped requests are errors: ~16% of the 5,000 is far above the 1% allowed
    doc = run_with_stall(tmp_path, "--rate", "1000", "--max-lag", "100ms", exit_code=1)
    get = doc["ops"]["get"]
    dropped = get["outcomes"].get("dropped", 0)
    assert 500 < dropped < 1100  # about the stall's worth of slots, less the 100 ms lag
    assert get["latency_us"]["max"] < 1_200_000
    assert doc["status"] == "failed" and doc["totals"]["error_kinds"]["dropped"] == dropped
    assert get["throughput_per_s"] == pytest.approx(get["succeeded"] / doc["window_s"], abs=0.1)
