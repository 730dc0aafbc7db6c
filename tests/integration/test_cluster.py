"""``kvbench run --cluster`` on a real Dask scheduler and workers on loopback.

The load runs in the Dask worker processes (their pids are in the result), the counts
add up per worker, to the total and to the server's counters; a missing scheduler, an
empty cluster and a worker killed mid-run each end as the docs say.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvbench.config import load_config
from kvbench.config.targets import parse_target
from kvbench.engine.worker import WorkerSpec
from kvbench.errors import WorkerFailed
from kvbench.runner import Coordinator, worker_specs
from kvbench.runner import messages as m
from kvbench.runner.local import LocalLauncher
from kvbench.runner.probe import fetch_stats
from kvbench.runner.process import run_worker
from tests.support.cli import all_phase_counts, kvbench_argv, read_json, run_kvbench
from tests.support.dask_cluster import DaskCluster, dask_cluster
from tests.support.servers import Server, free_port

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    with dask_cluster(2, tmp_path_factory.mktemp("dask")) as running:
        yield running


def stats(server: Server) -> dict[str, int]:
    raw = fetch_stats(parse_target(f"memcached://{server.address}"))
    return {k: int(v) for k, v in raw.items() if v.isdigit()}


def test_cluster_run_counts_add_up_per_worker_and_match_the_server(
    cluster: DaskCluster, fresh_memcached: Server, tmp_path: Path
) -> None:
    before = stats(fresh_memcached)
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run",
        f"memcached://{fresh_memcached.address}",
        "--cluster",
        cluster.address,
        "--duration",
        "2s",
        "-c",
        "4",
        "-P",
        "4",
        "--ratio",
        "1:3",
        "--keys",
        "500",
        "--json",
        str(out),
        "--db",
        str(tmp_path / "h.db"),
        timeout_s=RUN_TIMEOUT_S,
    )
    assert result.code == 0, result.stderr
    after = stats(fresh_memcached)
    doc = read_json(out)
    assert doc["status"] == "ok"
    assert 1.9 < doc["window_s"] < 2.5
    workers = doc["workers"]
    assert len(workers) == 2
    assert {w["pid"] for w in workers} == {p.pid for p in cluster.workers}
    assert all(w["host"] and w["status"] == "ok" and w["ops"] > 0 for w in workers)
    assert sum(w["ops"] for w in workers) == doc["totals"]["ops"] > 1000
    assert sum(w["share"] for w in workers) == pytest.approx(1.0, abs=1e-3)
    assert doc["totals"]["errors"] == 0, (
        doc["errors"],
        doc["connections"],
        {op: s["outcomes"] for op, s in doc["ops"].items()},
    )
    evidence = (  # what to look at if the counts ever disagree
        {op: s["outcomes"] for op, s in doc["ops"].items()},
        doc["phases"],
        [(w["index"], w["ops"], w.get("driver")) for w in workers],
        [(r["t_s"], {op: v["count"] for op, v in r["ops"].items()}) for r in doc["intervals"]],
        {k: after[k] - before[k] for k in ("cmd_get", "cmd_set", "get_hits", "total_connections")},
    )
    assert all_phase_counts(doc, "set") == after["cmd_set"] - before["cmd_set"], evidence
    assert all_phase_counts(doc, "get") == after["cmd_get"] - before["cmd_get"]
    assert all_phase_counts(doc, "get", "hit") == after["get_hits"] - before["get_hits"]
    assert doc["config"]["load"]["processes"] == 2
    assert "on the Dask cluster at" in result.stdout and "workers: " in result.stdout


def test_missing_scheduler_is_one_line_and_exit_3(memcached_server: Server) -> None:
    result = run_kvbench(
        "run",
        f"memcached://{memcached_server.address}",
        "--cluster",
        f"tcp://127.0.0.1:{free_port()}",
        "--duration",
        "1s",
        "--no-save",
        timeout_s=RUN_TIMEOUT_S,
    )
    assert result.code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], result.stderr


def test_malformed_scheduler_address_is_a_usage_error(memcached_server: Server) -> None:
    result = run_kvbench(
        "run", f"memcached://{memcached_server.address}", "--cluster", "http://x:1", "--no-save"
    )
    assert result.code == 2
    assert result.stderr.strip().splitlines() == [
        "kvbench: error: --cluster: 'http://x:1': only tcp://HOST:PORT scheduler addresses "
        "are supported"
    ]


def test_a_cluster_without_workers_is_one_line(memcached_server: Server, tmp_path: Path) -> None:
    with dask_cluster(0, tmp_path / "dask") as empty:
        result = run_kvbench(
            "run",
            f"memcached://{memcached_server.address}",
            "--cluster",
            empty.address,
            "--duration",
            "1s",
            "--no-save",
            timeout_s=RUN_TIMEOUT_S,
        )
    assert result.code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no workers" in lines[0], result.stderr


def test_a_worker_lost_mid_run_is_a_counted_failure_and_the_rest_is_kept(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    with dask_cluster(2, tmp_path / "dask") as doomed:
        proc = subprocess.Popen(
            kvbench_argv(
                "run",
                f"memcached://{fresh_memcached.address}",
                "--cluster",
                doomed.address,
                "--duration",
                "4s",
                "-c",
                "4",
                "--json",
                str(out),
                "--no-save",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"},
        )
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while time.monotonic() < deadline:  # the first live line: the window is running
                line = proc.stdout.readline()
                if "ops/s" in line or not line:
                    break
            victim = doomed.workers[1]
            os.kill(victim.pid, signal.SIGKILL)
            _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 4, stderr
    assert "Traceback" not in stderr
    doc = read_json(out)
    assert doc["status"] == "partial"
    by_pid = {w["pid"]: w for w in doc["workers"]}
    assert by_pid[victim.pid]["status"] == "failed"
    survivor = by_pid[doomed.workers[0].pid]
    assert survivor["status"] == "ok" and survivor["ops"] > 0
    assert sum(w["ops"] for w in doc["workers"]) == doc["totals"]["ops"]
    assert any("worker" in e for e in doc["errors"])


def test_a_worker_on_another_clock_starts_and_reports_on_the_coordinators(
    memcached_server: Server,
) -> None:
    """A host whose monotonic clock is OFFSET behind: Start is converted, times come back."""
    offset_ns = 10**15  # about 11.6 days
    config = load_config(
        None,
        {
            "target.urls": ([f"memcached://{memcached_server.address}"], "T"),
            "load.connections": ("1", "-c"),
            "load.duration": ("600ms", "--duration"),
            "load.interval": ("200ms", "--interval"),
        },
        1,
    )
    spec = worker_specs(config)[0]
    coordinator_end, worker_end = multiprocessing.Pipe(duplex=True)
    thread = threading.Thread(target=run_worker, args=(spec, worker_end, offset_ns), daemon=True)
    thread.start()
    assert coordinator_end.poll(30)
    assert isinstance(coordinator_end.recv(), m.Ready)
    sent_at = time.monotonic_ns()
    start_ns = sent_at + offset_ns + 300_000_000  # 300 ms ahead, on the "coordinator's" clock
    coordinator_end.send(m.Start(start_ns))
    snapshots: list[m.Snapshot] = []
    while True:
        assert coordinator_end.poll(30)
        message = coordinator_end.recv()
        if isinstance(message, m.Done):
            break
        assert isinstance(message, m.Snapshot)
        snapshots.append(message)
    thread.join(timeout=10)
    elapsed_ns = time.monotonic_ns() - sent_at
    measured = [s.snapshot for s in snapshots if s.snapshot.phase == "measure"]
    assert measured[0].start_ns == start_ns
    assert measured[-1].end_ns == start_ns + 600_000_000
    assert message.summary.measure_start_ns == start_ns
    assert message.summary.measure_end_ns == start_ns + 600_000_000
    assert elapsed_ns >= 900_000_000  # it waited for the start, on its own clock


class SecondRoundFails(LocalLauncher):
    """Local processes for round 1; round 2 cannot start (its scheduler went away, say)."""

    def __init__(self) -> None:
        super().__init__()
        self.rounds = 0

    def start(self, specs: list[WorkerSpec]) -> list[multiprocessing.connection.Connection]:
        self.rounds += 1
        if self.rounds == 2:
            raise WorkerFailed("preflight", "worker 0: the Dask task was cancelled")
        return super().start(specs)


def test_a_round_that_cannot_start_keeps_the_earlier_rounds(memcached_server: Server) -> None:
    config = load_config(
        None,
        {
            "target.urls": ([f"memcached://{memcached_server.address}"], "T"),
            "load.connections": ("2", "-c"),
            "load.processes": ("1", "--processes"),
            "load.duration": ("500ms", "--duration"),
            "load.rounds": ("3", "--rounds"),
        },
        1,
    )
    result = Coordinator(config, launcher=SecondRoundFails()).run()
    assert result.status == "partial"
    assert len(result.rounds) == 1 and result.rounds[0]["status"] == "ok"
    assert sum(s.ops() for s in result.intervals) > 0
    assert result.errors[-1].startswith("round 2 could not start: preflight: worker 0")
