"""Limits only a server or the host tells, against real servers: a value larger than the
server stores is refused before any worker starts (memcached's item_size_max, Redis's
proto-max-bulk-len); connections above the soft open-files limit raise it to the hard
one and run."""

from __future__ import annotations

import json
import resource
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import servers
from tests.support.cli import kvbench_argv, run_kvbench

pytestmark = pytest.mark.integration

SHORT = ("--duration", "1s", "--processes", "1", "--no-save", "--no-live")


def test_a_value_larger_than_memcacheds_item_size_max_is_refused_before_the_load() -> None:
    with servers.memcached("-I", "2m") as server:
        url = f"memcached://{server.address}"
        before = servers.counters(url)
        result = run_kvbench("run", url, "--value-size", "3MB", *SHORT)
        after = servers.counters(url)
    assert result.code == 2, result.stderr
    assert result.stderr == (
        "kvbench: error: --value-size: values of up to 3,000,000 bytes are larger than "
        f"{url} stores: its item_size_max (memcached -I) is 2,097,152 bytes (--allow-oversize "
        "sends them anyway, each an error reply)\n"
    )
    assert result.stdout == ""
    # no load: nothing stored or read, and none of the run's 50 connections opened (the
    # limit's question and the counting here are a few; not an exact count, which a
    # busy machine's retried connect could move)
    assert after["cmd_set"] == before["cmd_set"] and after["cmd_get"] == before["cmd_get"]
    assert after["total_connections"] - before["total_connections"] < 10


def test_a_tmpdir_too_long_for_the_workers_socket_is_one_line(tmp_path: Path) -> None:
    """The worker processes are forked from a server listening on a Unix socket under
    TMPDIR; a TMPDIR too long for one (107 bytes) is refused in one line naming it, exit 2,
    with nothing sent (was: multiprocessing's traceback, "AF_UNIX path too long")."""
    long_dir = tmp_path / ("d" * (120 - len(str(tmp_path))))
    long_dir.mkdir()
    with servers.memcached() as server:
        url = f"memcached://{server.address}"
        before = servers.counters(url)
        result = run_kvbench("run", url, *SHORT, env={"TMPDIR": str(long_dir)})
        after = servers.counters(url)
    assert result.code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"kvbench: error: TMPDIR: {long_dir} is too long a path for the workers' Unix socket "
        "(at most 75 bytes here): set TMPDIR to a shorter directory"
    ], result.stderr
    assert after["cmd_set"] == before["cmd_set"] and after["cmd_get"] == before["cmd_get"]


def test_oversize_values_asked_for_are_sent_and_refused_by_the_server() -> None:
    """--allow-oversize: the server's refusals are the experiment (SERVER_ERROR object
    too large for cache, counted error_reply)."""
    with servers.memcached("-I", "1k", "-o", "slab_chunk_max=512") as server:
        result = run_kvbench(
            "run", f"memcached://{server.address}", "--value-size", "2000", "--allow-oversize",
            "-c", "2", "--ratio", "1:1", "--requests", "40", "--processes", "1", "--no-save",
            "--no-live", "--max-error-rate", "100%",  # gets (misses) succeed, sets are refused
        )  # fmt: skip
    assert result.code == 0, result.stderr
    assert "error_reply" in result.stdout


def test_a_value_within_memcacheds_item_size_max_runs() -> None:
    with servers.memcached("-I", "4m") as server:
        result = run_kvbench(
            "run", f"memcached://{server.address}", "--value-size", "3MB", "-c", "2",
            "--ratio", "1:0", "--requests", "20", "--processes", "1", "--no-save", "--no-live",
        )  # fmt: skip
    assert result.code == 0, result.stderr


def test_a_value_larger_than_redis_proto_max_bulk_len_is_refused() -> None:
    with servers.redis("--proto-max-bulk-len", "2mb") as server:
        url = f"redis://{server.address}"
        result = run_kvbench("run", url, "--value-size", "3MB", *SHORT)
    assert result.code == 2, result.stderr
    assert result.stderr == (
        "kvbench: error: --value-size: values of up to 3,000,000 bytes are larger than "
        f"{url} stores: its proto-max-bulk-len is 2,097,152 bytes (--allow-oversize sends "
        "them anyway, each an error reply)\n"
    )


def lowered_open_files(soft: int, hard: int) -> Callable[[], None]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return lower


def test_connections_above_the_soft_open_files_limit_raise_it_and_all_open(
    tmp_path: Path,
) -> None:
    """Started with a soft limit of 128 open files (hard 4,096), 300 connections in one
    worker: the limit is raised, every connection opens, the run is ok."""
    out = tmp_path / "run.json"
    with servers.memcached() as server:
        proc = subprocess.run(
            kvbench_argv(
                "run", f"memcached://{server.address}", "-c", "300", *SHORT, "--json", str(out),
            ),
            capture_output=True, text=True, timeout=120, preexec_fn=lowered_open_files(128, 4096),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["status"] == "ok"
    assert doc["connections"]["live_min"] == doc["connections"]["asked"] == 300


# Worker RSS per connection (issue 22): 2,000 connections from one worker against a
# 50-connection run of the same worker, both as kvbench records them (peak_rss_bytes).
MANY = 2_000
RSS_PER_CONNECTION_MAX = 64 * 1024


@pytest.mark.skipif(
    resource.getrlimit(resource.RLIMIT_NOFILE)[1] not in (resource.RLIM_INFINITY,)
    and resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2 * MANY + 200,
    reason="the hard open-files limit is too low for 2,000 connections and their server",
)
def test_thousands_of_connections_from_one_worker_are_all_live_and_cost_little_memory(
    tmp_path: Path,
) -> None:
    """2,000 connections from one process, more than memcached's listen backlog (1,024):
    every one opens (the worker opens a few hundred at a time) and stays live, the drain
    ends in time, and each costs the worker no more than 64 KB over a 50-connection run."""
    peaks = {}
    with servers.memcached("-c", str(2 * MANY)) as server:
        for conns in (50, MANY):
            out = tmp_path / f"run-{conns}.json"
            result = run_kvbench(
                "run", f"memcached://{server.address}", "-c", str(conns), *SHORT,
                "--json", str(out),
            )  # fmt: skip
            assert result.code == 0, result.stderr
            doc = json.loads(out.read_text())
            assert doc["status"] == "ok"
            connections = doc["connections"]
            assert connections["live_min"] == connections["asked"] == conns
            assert connections["connects"] == conns  # each opened once: none reopened
            assert connections["reconnects"] == connections["connect_failures"] == 0
            assert connections["connect_resets"] + connections["connect_resets_before"] == 0
            # Many asked: the summary says they were all live even though nothing happened.
            said = f"connections: {conns:,} asked, {conns:,} live at the fewest; opened {conns:,}"
            assert (said in result.stdout) == (conns >= 1000), result.stdout
            [worker] = doc["workers"]
            peaks[conns] = worker["peak_rss_bytes"]
            assert doc["environment"]["peak_rss_bytes"] > 0  # the coordinator's
    growth = (peaks[MANY] - peaks[50]) / (MANY - 50)
    assert 0 < peaks[50] <= peaks[MANY]
    assert growth <= RSS_PER_CONNECTION_MAX, f"{growth:,.0f} bytes per connection"
