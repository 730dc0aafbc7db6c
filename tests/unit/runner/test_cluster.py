"""Cluster pieces that need no cluster: settings, clock offsets, the launcher choice."""

from __future__ import annotations

import multiprocessing
import socket
import subprocess
import sys
from multiprocessing.connection import Connection

import pytest

from kvbench.config import RunConfig, Settings, load_config
from kvbench.config import cluster as cluster_config
from kvbench.engine.worker import WorkerSummary
from kvbench.errors import ConfigError
from kvbench.runner import messages as m
from kvbench.runner.cluster import (
    ClockReference,
    DaskLauncher,
    clock_offset_ns,
    read_clock,
    workers_line,
)
from kvbench.runner.coordinator import (
    _Host,
    _host_entry,
    _RoundReports,
    _start_skews,
    _WorkerTotals,
)
from kvbench.runner.launcher import launcher_for
from kvbench.runner.local import LocalLauncher
from kvbench.runner.process import _link_address

URL = (["memcached://127.0.0.1:11211"], "TARGET")


def config_with(**settings: str) -> RunConfig:
    overrides: Settings = {"target.urls": URL}
    overrides.update({f"load.{k}": (v, f"--{k.replace('_', '-')}") for k, v in settings.items()})
    return load_config(None, overrides, default_processes=2)


@pytest.mark.parametrize(
    ("given", "normalized"),
    [
        ("tcp://10.0.0.1:8786", "tcp://10.0.0.1:8786"),
        ("tcp://sched", "tcp://sched:8786"),
        ("sched:9000", "tcp://sched:9000"),
        ("tcp://[::1]:8786", "tcp://[::1]:8786"),
    ],
)
def test_scheduler_addresses_are_normalized(given: str, normalized: str) -> None:
    assert cluster_config.parse_scheduler_url(given, "--cluster") == normalized


@pytest.mark.parametrize(
    "bad", ["http://sched:8786", "tcp://:8786", "tcp://sched:99999", "", "tcp://s/x"]
)
def test_malformed_scheduler_addresses_are_config_errors(bad: str) -> None:
    with pytest.raises(ConfigError, match="--cluster"):
        cluster_config.parse_scheduler_url(bad, "--cluster")


def test_without_dask_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_config, "dask_installed", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install 'kvbench\[cluster\]'"):
        config_with(cluster="tcp://sched:8786")


@pytest.mark.parametrize(
    ("given", "host", "port"),
    [("10.0.0.5:9000", "10.0.0.5", 9000), (":9000", "", 9000), ("0.0.0.0", "0.0.0.0", 0)],
)
def test_listen_addresses(given: str, host: str, port: int) -> None:
    text = cluster_config.parse_listen_address(given, "--cluster-listen")
    assert cluster_config.split_listen_address(text) == (host, port)


def test_a_bad_listen_port_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--cluster-listen"):
        cluster_config.parse_listen_address("host:http", "--cluster-listen")


def test_listen_address_needs_a_cluster() -> None:
    with pytest.raises(ConfigError, match="--cluster-listen"):
        config_with(cluster_listen=":9000")


def test_on_a_cluster_processes_default_to_every_worker_the_connections_allow() -> None:
    config = config_with(cluster="tcp://sched:8786", connections="8")
    assert config.load.processes == 8
    capped = config_with(cluster="tcp://sched:8786", connections="8", processes="3")
    assert capped.load.processes == 3


def test_launcher_follows_the_config() -> None:
    assert isinstance(launcher_for(config_with()), LocalLauncher)
    cluster = launcher_for(config_with(cluster="tcp://sched:8786"))
    assert isinstance(cluster, DaskLauncher)
    assert cluster.scheduler == "tcp://sched:8786"


def test_clock_offset_is_exactly_zero_on_one_host() -> None:
    here = read_clock()
    other_reading = ClockReference(here.domain, here.wall_minus_monotonic_ns + 12_345)
    assert clock_offset_ns(other_reading, here) == 0


def test_clock_offset_across_hosts_comes_from_the_wall_clocks() -> None:
    # Both hosts show wall 1_000_000 now; the coordinator's monotonic reads 400, ours 900.
    coordinator = ClockReference("boot:a", 1_000_000 - 400)
    local = ClockReference("boot:b", 1_000_000 - 900)
    offset = clock_offset_ns(coordinator, local)
    assert 900 + offset == 400  # our now, on the coordinator's clock


def test_importing_kvbench_does_not_import_distributed() -> None:
    code = (
        "import sys; sys.modules['distributed'] = None\n"
        "import kvbench.cli, kvbench.runner.coordinator, kvbench.runner.cluster\n"
        "from kvbench.config.cluster import dask_installed; assert not dask_installed()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_tcp_pipe_names_this_ends_address_and_a_local_pipe_none() -> None:
    """The coordinator names a load machine by its address on the link (runner/process.py)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = Connection(socket.create_connection(listener.getsockname()).detach())
        server, _ = listener.accept()
    try:
        assert _link_address(client) == "127.0.0.1"
    finally:
        client.close()
        server.close()
    here, there = multiprocessing.Pipe()
    assert _link_address(here) == ""
    here.close()
    there.close()


def test_a_cluster_worker_is_listed_with_its_address_and_clock_offset() -> None:
    remote = _WorkerTotals(0, _host_entry(m.Ready(0, "load1", 10, "10.0.0.7", 1_500_000)))
    assert remote.record(1) == {
        "index": 0, "host": "load1", "pid": 10, "address": "10.0.0.7", "clock_offset_ms": 1.5,
        "ops": 0, "succeeded": 0, "cpu_s": 0.0, "status": "ok", "share": 0.0,
    }  # fmt: skip
    assert _host_entry(m.Ready(1, "here", 11)) == _Host("here", 11)
    assert "address" not in _WorkerTotals(1, _Host("here", 11)).record(1)


def test_start_skews_are_from_the_earliest_worker_and_a_lost_one_is_placed_too() -> None:
    """Workers 0 and 1 began 2 ms apart; worker 2 was lost: its first interval places it."""
    tally = _RoundReports(3)
    tally.summaries[0] = WorkerSummary("ok", 1_000, 2_000, began_ns=1_000_000)
    tally.summaries[1] = WorkerSummary("ok", 1_000, 2_000, began_ns=3_000_000)
    tally.first_start_ns[2] = 1_500_000  # (its first measure part's start, as received)
    workers = {i: _WorkerTotals(i, None) for i in range(3)}
    _start_skews(workers, [tally])
    assert [w.start_skew_ms for w in workers.values()] == [0.0, 2.0, 0.5]
    assert workers[1].record(1)["began_ns"] == 3_000_000


def test_the_workers_line_says_where_how_much_and_when_each_began() -> None:
    line = workers_line(
        [
            {"host": "vm", "address": "10.77.0.11", "pid": 7, "ops": 12_345, "share": 0.25,
             "start_skew_ms": 0.0, "status": "ok"},
            {"host": "vm", "pid": 8, "ops": 0, "share": 0.0, "status": "failed"},
        ]
    )  # fmt: skip
    assert line == (
        "workers: vm 10.77.0.11 pid 7 12,345 ops 25.0% start +0.0ms (ok)  "
        "vm pid 8 0 ops 0.0% (failed)"
    )
