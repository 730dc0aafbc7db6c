"""Limits checked before the first byte (issue 19, C): a run that cannot be carried out
as asked is refused with one line and exit 2 before any connection is offered.

Each case points the command at a listening socket that counts the connections it was
offered (tests/unit/cli/test_refusals.py): a refusal must leave it untouched.
"""

from __future__ import annotations

import resource
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kvbench.cli import main
from kvbench.config import RunConfig, load_config
from kvbench.errors import ConfigError
from kvbench.runner import limits
from kvbench.workload import values
from kvbench.workload.trace import KVBENCH_HEADER
from tests.support.cli import kvbench_argv, offered_connections


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"", "nothing"),
        (KVBENCH_HEADER + b"\n", "kvbench's header line and no row"),
        (KVBENCH_HEADER, "kvbench's header line and no row"),
    ],
)
def test_a_trace_with_no_row_is_refused_before_any_connection(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: bytes,
    what: str,
) -> None:
    trace = tmp_path / "empty.csv"
    trace.write_bytes(content)
    port = listener.getsockname()[1]
    code, out, err = cli(
        capsys, "replay", str(trace), f"memcached://127.0.0.1:{port}", "--db",
        str(tmp_path / "h.db"),
    )  # fmt: skip
    assert code == 2
    assert err == f"kvbench: error: {trace}: no rows to replay: the trace holds {what}\n"
    assert out == ""  # no header line, no live line
    assert offered_connections(listener) == 0


def run_refused(
    capsys: pytest.CaptureFixture[str], listener: socket.socket, tmp_path: Path, *flags: str
) -> str:
    """``kvbench run`` at the listener with ``flags``: refused (exit 2, one line, nothing
    printed on stdout, no connection offered, no history made); its line."""
    port = listener.getsockname()[1]
    db = str(tmp_path / "h.db")
    code, out, err = cli(capsys, "run", f"memcached://127.0.0.1:{port}", "--db", db, *flags)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and out == ""
    assert offered_connections(listener) == 0
    return err


def test_a_rate_the_dispatcher_cannot_send_is_refused(
    listener: socket.socket, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    err = run_refused(capsys, listener, tmp_path, "--rate", "1e12")
    assert err == (
        "kvbench: error: --rate: 1,000,000,000,000/s is more than the client can send with 50 "
        "connection(s) x pipeline 1 (at most 500,000/s: each connection takes up to --pipeline "
        "requests per 100 us tick); raise --connections or --pipeline, or lower --rate\n"
    )
    # the bound grows with the slots: 4 x 8 x 10k/s
    err = run_refused(capsys, listener, tmp_path, "--rate", "320001", "-c", "4", "-P", "8")
    assert "at most 320,000/s" in err


def test_a_sweep_refuses_a_level_the_dispatcher_cannot_send_before_the_first(
    listener: socket.socket, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    port = listener.getsockname()[1]
    code, out, err = cli(
        capsys, "sweep", f"memcached://127.0.0.1:{port}", "--rate", "1000,1e9", "--db",
        str(tmp_path / "h.db"),
    )  # fmt: skip
    assert code == 2 and err.startswith("kvbench: error: --rate: 1,000,000,000/s is more than")
    assert offered_connections(listener) == 0 and "level 1" not in out


@pytest.mark.parametrize(
    ("scheme", "size", "protocol", "limit"),
    [
        ("memcached", "3GB", "memcache-text", "2,147,483,645"),
        ("memcached+meta", "3GB", "memcache-meta", "2,147,483,645"),
        ("memcached+binary", "5GB", "memcache-binary", "4,294,967,037"),
    ],
)
def test_a_value_its_protocol_cannot_frame_is_refused(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    scheme: str,
    size: str,
    protocol: str,
    limit: str,
) -> None:
    port = listener.getsockname()[1]
    code, out, err = cli(
        capsys, "run", f"{scheme}://127.0.0.1:{port}", "--value-size", size, "--db",
        str(tmp_path / "h.db"),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert err == (
        f"kvbench: error: --value-size: values of up to {int(size[0]) * 10**9:,} bytes do not "
        f"fit {protocol}, whose length field takes at most {limit} bytes\n"
    )
    assert offered_connections(listener) == 0


def test_values_the_workers_have_no_memory_for_are_refused(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each worker builds a value blob twice the largest value (and a copy while it is
    built): 2 workers at 1 GB values need 8 GiB; a host with 4 GiB available refuses."""
    monkeypatch.setattr(limits.psutil, "virtual_memory", lambda: FakeMemory(4 << 30))
    err = run_refused(capsys, listener, tmp_path, "--value-size", "1GB", "--processes", "2")
    assert err == (
        "kvbench: error: --value-size: values of up to 953.7 MiB need a 1.9 GiB value blob in "
        "each of 2 worker process(es) (7.5 GiB in all while built, with each worker's own "
        "20.2 MiB); 4.0 GiB of memory is available\n"
    )


def test_a_key_table_the_workers_have_no_memory_for_is_refused(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits.psutil, "virtual_memory", lambda: FakeMemory(1 << 30))
    err = run_refused(capsys, listener, tmp_path, "--keys", "100M", "--processes", "1")
    assert err.startswith("kvbench: error: --keys: 100,000,000 keys take ")
    assert err.endswith("1.0 GiB of memory is available\n")


def test_workers_whose_own_memory_does_not_fit_are_refused_naming_processes(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each worker takes about 20 MiB of its own beside its tables (bench/rss.py): 8 of
    them do not fit in 100 MiB, however small the keyspace (was: the check counted the
    tables alone, and such a run was killed by the kernel once the workers started)."""
    monkeypatch.setattr(limits.psutil, "virtual_memory", lambda: FakeMemory(100 << 20))
    err = run_refused(capsys, listener, tmp_path, "--keys", "1000", "--processes", "8")
    assert err == (
        "kvbench: error: --processes: 8 worker process(es) need 161.0 MiB in all (each about "
        "20.0 MiB of its own, 9.0 KiB per connection, and its tables); 100.0 MiB of memory "
        "is available\n"
    )


def test_the_key_table_estimate_is_what_building_it_takes() -> None:
    """runner/limits.py cannot import the workload: its figure for the key table at its
    build's peak (two copies of the keys, the lengths and bounds) is held to a build."""
    import tracemalloc

    from kvbench.workload.keys import build_key_table

    count = 200_000
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "workload.keys": (str(count), "--keys"),
            "workload.key_size": ("16", "--key-size"),
        },
        1,
    )
    _, estimate = limits.worker_memory_bytes(config)
    tracemalloc.start()
    try:
        build_key_table("kvbench:", count, size=16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0.9 * estimate <= peak <= estimate, (peak, estimate)


class FakeMemory:
    def __init__(self, available: int) -> None:
        self.available = available


def test_the_value_blob_estimate_is_what_a_worker_builds() -> None:
    """runner/limits.py cannot import the workload: its figure is checked against it."""
    assert limits.VALUE_TABLE_SIZE == values.VALUE_TABLE_SIZE
    table = values.build_value_table(1000, 5000, np.random.default_rng(0))
    assert len(table[0].obj) == (limits.worker_memory_bytes(config_with(5000))[0] // 2)


def config_with(value_size: int) -> RunConfig:
    return load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "workload.value_size": (f"1000-{value_size}", "--value-size"),
        },
        1,
    )


def lowered_open_files(soft: int, hard: int) -> Callable[[], None]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return lower


def test_connections_above_the_hard_open_files_limit_are_refused_with_how_to_raise_it(
    listener: socket.socket, tmp_path: Path
) -> None:
    """Started under a hard limit of 1,000 open files, 3,000 connections in one worker
    cannot fit: one line naming the limit and ``ulimit -n``, exit 2, no connection."""
    port = listener.getsockname()[1]
    proc = subprocess.run(
        kvbench_argv(
            "run", f"memcached://127.0.0.1:{port}", "-c", "3000", "--processes", "1",
            "--db", str(tmp_path / "h.db"),
        ),
        capture_output=True, text=True, timeout=120, preexec_fn=lowered_open_files(1000, 1000),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "kvbench: error: --connections: each of the 1 worker process(es) would hold 3,000 "
        "connections (3,064 open files with its own), above this shell's limit of 1,000 open "
        "files (ulimit -Hn): raise it (ulimit -n 3064, as root or in "
        "/etc/security/limits.conf or systemd's LimitNOFILE=), or give more --processes or "
        "fewer --connections\n"
    )
    assert offered_connections(listener) == 0


def test_more_connections_than_local_ports_are_refused() -> None:
    config = load_config(
        None,
        {"target.urls": (["memcached://127.0.0.1:1"], "T"), "load.connections": ("5000", "-c")},
        1,
    )
    limits.check_local_ports(config, (10000, 20000))  # 10,001 ports: room enough
    with pytest.raises(ConfigError) as caught:
        limits.check_local_ports(config, (60000, 64000))
    assert str(caught.value).startswith(
        "--connections: 5,000 connections to one server need as many local ports; this host "
        "gives 4,001 (net.ipv4.ip_local_port_range 60000 64000)"
    )


def test_a_sharded_runs_connections_need_local_ports_per_server() -> None:
    """Shared among two servers, 5,000 connections are 2,500 to each: each server's
    connections have the port range to themselves, and a worker holds its share once."""
    urls = ["memcached://127.0.0.1:1", "memcached://127.0.0.2:1"]
    config = load_config(
        None,
        {
            "target.urls": (urls, "T"),
            "load.connections": ("5001", "-c"),
            "load.processes": ("2", "--processes"),
        },
        1,
    )
    limits.check_local_ports(config, (60000, 64000))  # 2,501 each: room enough
    with pytest.raises(ConfigError, match="2,501 connections to one server"):
        limits.check_local_ports(config, (60000, 62000))
    assert limits.open_files_needed(config) == 2_501 + limits.WORKER_SPARE_FILES


def test_a_key_table_over_the_address_space_limit_is_refused_before_any_worker(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under ``ulimit -v`` a worker that cannot map its key table raised MemoryError: a
    traceback per worker and "preflight: worker 1: MemoryError". Each worker must fit
    alone, however many there are."""
    monkeypatch.setattr(limits, "address_space_room", lambda: 512 << 20)
    err = run_refused(capsys, listener, tmp_path, "--keys", "20M", "--processes", "2")
    assert err.startswith("kvbench: error: --keys: 20,000,000 keys take ")
    assert err.endswith(
        "to build the key table in each worker process; 512.0 MiB is left to one process "
        "under the address-space limit (ulimit -v)\n"
    )


def test_a_key_table_over_the_cgroups_memory_limit_is_refused(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a container the host's available memory is not what the OOM killer holds the
    run to: its cgroup's limit is."""
    monkeypatch.setattr(limits.psutil, "virtual_memory", lambda: FakeMemory(16 << 30))
    monkeypatch.setattr(limits, "cgroup_memory_left", lambda: 1 << 30)
    err = run_refused(capsys, listener, tmp_path, "--keys", "20M", "--processes", "2")
    assert err.startswith("kvbench: error: --keys: 20,000,000 keys take ")
    assert " in each of 2 worker process(es) (" in err
    assert err.endswith("; 1.0 GiB is left under the cgroup's memory limit\n")


@pytest.mark.parametrize("version", [1, 2])
def test_the_cgroups_memory_left_is_read_from_either_version(tmp_path: Path, version: int) -> None:
    if version == 2:
        proc_cgroup, group = "0::/user.slice/run-1.scope\n", tmp_path / "user.slice/run-1.scope"
        names = ("memory.max", "memory.current")
    else:
        proc_cgroup = "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n"
        group, names = (
            tmp_path / "memory/docker/abc",
            ("memory.limit_in_bytes", "memory.usage_in_bytes"),
        )
    group.mkdir(parents=True)
    cgroup = tmp_path / "cgroup"
    cgroup.write_text(proc_cgroup)
    (group / names[0]).write_text(f"{4 << 30}\n")
    (group / names[1]).write_text(f"{1 << 30}\n")
    assert limits.cgroup_memory_left(cgroup, tmp_path) == 3 << 30
    (group / names[0]).write_text("max\n" if version == 2 else "9223372036854771712\n")
    assert limits.cgroup_memory_left(cgroup, tmp_path) is None  # no limit
    assert limits.cgroup_memory_left(tmp_path / "absent", tmp_path) is None


def test_a_cgroup_namespace_shows_the_limit_at_the_root(tmp_path: Path) -> None:
    """Inside a cgroup namespace /proc/self/cgroup names a path the mount does not have:
    the group's own files are at the mount's root."""
    cgroup = tmp_path / "cgroup"
    cgroup.write_text("0::/seen/from/outside\n")
    (tmp_path / "memory.max").write_text(f"{2 << 30}\n")
    (tmp_path / "memory.current").write_text(f"{1 << 30}\n")
    assert limits.cgroup_memory_left(cgroup, tmp_path) == 1 << 30


def test_the_cgroups_room_leaves_out_its_page_cache_and_heeds_a_tighter_parent(
    tmp_path: Path,
) -> None:
    """Counted whole, a container's reclaimable page cache refused runs that fit; and a
    parent's limit (a systemd slice's) holds the group inside it too."""
    cgroup = tmp_path / "cgroup"
    cgroup.write_text("garbage\n0::/slice/run.scope\n")  # (a line not a cgroup's: passed over)
    group = tmp_path / "slice/run.scope"
    group.mkdir(parents=True)
    (group / "memory.max").write_text(f"{8 << 30}\n")
    (group / "memory.current").write_text(f"{6 << 30}\n")
    (group / "memory.stat").write_text(f"anon {1 << 30}\ninactive_file {4 << 30}\n")
    assert limits.cgroup_memory_left(cgroup, tmp_path) == 6 << 30  # 8 - (6 - 4)
    (tmp_path / "slice/memory.max").write_text(f"{5 << 30}\n")
    (tmp_path / "slice/memory.current").write_text(f"{4 << 30}\n")
    assert limits.cgroup_memory_left(cgroup, tmp_path) == 1 << 30  # the slice's is tighter


def test_the_memory_and_open_files_checks_count_a_workers_connections_alike() -> None:
    """``--connections`` is the total over every server, shared out over the workers: both
    checks take a worker's share from ``worker_connections``."""
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1", "memcached://127.0.0.1:2"], "T"),
            "load.connections": ("51", "-c"),
        },
        2,
    )
    assert limits.worker_connections(config) == 26  # 51 over 2 workers, rounded up
    assert limits.open_files_needed(config) == 26 + limits.WORKER_SPARE_FILES
    blob, keys = limits.worker_memory_bytes(config)
    needed = 2 * (blob + keys + limits.WORKER_BASE_BYTES + 26 * limits.CONNECTION_BYTES)
    limits.check_memory(config, needed)  # fits exactly
    with pytest.raises(ConfigError):
        limits.check_memory(config, needed - 1)
