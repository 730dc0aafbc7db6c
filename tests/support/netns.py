"""Machines on one box: network namespaces joined by veth pairs to a bridge, for cluster tests.

A "lab" is a switch namespace holding a bridge, and one namespace per host (the
coordinator, the server, each load machine), each with one veth ``eth0`` into the bridge
and an address on 10.77.0.0/24. Nothing is added to the root namespace: every address,
route and qdisc lives in the lab's namespaces, so labs of parallel test runs (pytest-xdist)
cannot collide; only the namespace names are global, and they carry a tag unique to the
run. ``tc netem delay`` goes on every host's link when the kernel has netem (else the
links are undelayed and ``Lab.delay_ms`` is 0: the tests' checks do not depend on it).

Processes run with ``ip netns exec`` in their own sessions; leaving the context kills
them, then any other process still in the lab's namespaces, then deletes the namespaces
(and so their veths), also when the test failed.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.dask_cluster import stop_group

SUBNET = "10.77.0"
# Each host's address: the coordinator (and Dask scheduler), the server, load machines.
COORDINATOR_IP = f"{SUBNET}.1"
SERVER_IP = f"{SUBNET}.2"
WORKER_IP_BASE = 11
SCHEDULER_PORT = 8786
MEMCACHED_PORT = 11211
DELAY_MS = 1
START_TIMEOUT_S = 45.0
IP_TIMEOUT_S = 10.0


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
    )


def unavailable() -> str | None:
    """Why network namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"kvb-probe-{os.getpid()}-{secrets.token_hex(2)}"
    try:
        made = _ip("netns", "add", probe)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`ip` cannot be run: {exc}"
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


def require_netns() -> None:
    """Skip (fail under CI=true, which runs as root on a fresh machine) without netns."""
    reason = unavailable()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass
class Lab:
    """The lab's namespaces and the processes started in them."""

    tag: str
    workdir: Path
    namespaces: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    delay_ms: int = 0
    delay_note: str = ""

    def ns(self, host: str) -> str:
        return f"{self.tag}-{host}"

    def exec_argv(self, host: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), *argv]

    def ip(self, host: str, *args: str) -> None:
        done = _ip("-n", self.ns(host), *args)
        if done.returncode != 0:
            raise RuntimeError(f"ip -n {self.ns(host)} {' '.join(args)}: {done.stderr.strip()}")

    def start(self, host: str, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start ``argv`` in ``host``'s namespace, its output in ``name``.log."""
        with open(self.workdir / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(
                self.exec_argv(host, argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def python(self, host: str, code: str, timeout_s: float) -> str:
        """Run a Python snippet in ``host``'s namespace (cwd: the repository); its stdout."""
        done = subprocess.run(
            self.exec_argv(host, [sys.executable, "-c", code]),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"in {self.ns(host)}: {done.stderr.strip()}\n{self.tails()}")
        return done.stdout

    def tails(self) -> str:
        return "\n".join(
            f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            for log in sorted(self.workdir.glob("*.log"))
        )

    # -- the network ---------------------------------------------------------------------

    def add_switch(self) -> None:
        self._add_namespace("switch")
        self.ip("switch", "link", "add", "br0", "type", "bridge")
        self.ip("switch", "link", "set", "br0", "up")

    def add_host(self, host: str, address: str) -> None:
        """A namespace with ``eth0`` (``address``/24) plugged into the switch's bridge."""
        self._add_namespace(host)
        port = f"p-{host}"[:15]
        self.ip("switch", "link", "add", port, "type", "veth", "peer", "name", "eth0",
                "netns", self.ns(host))  # fmt: skip
        self.ip("switch", "link", "set", port, "master", "br0", "up")
        self.ip(host, "addr", "add", f"{address}/24", "dev", "eth0")
        self.ip(host, "link", "set", "eth0", "up")
        self._delay(host)

    def _add_namespace(self, host: str) -> None:
        made = _ip("netns", "add", self.ns(host))
        if made.returncode != 0:
            raise RuntimeError(f"ip netns add {self.ns(host)}: {made.stderr.strip()}")
        self.namespaces.append(self.ns(host))
        self.ip(host, "link", "set", "lo", "up")

    def _delay(self, host: str) -> None:
        """netem delay on the host's side of its link (both ways: every host has it)."""
        netem = ["tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", f"{DELAY_MS}ms"]
        done = subprocess.run(
            self.exec_argv(host, netem),
            capture_output=True,
            text=True,
            timeout=IP_TIMEOUT_S,
            check=False,
        )
        if done.returncode == 0:
            self.delay_ms = DELAY_MS
        else:
            self.delay_ms = 0
            self.delay_note = f"no netem delay (tc: {done.stderr.strip()})"

    def cut(self, host: str) -> None:
        """Take the host's link down, as when a machine drops off the network."""
        self.ip(host, "link", "set", "eth0", "down")

    # -- teardown ------------------------------------------------------------------------

    def close(self) -> None:
        for proc in reversed(self.procs):
            stop_group(proc, timeout_s=5)
        for name in self.namespaces:
            pids = _ip("netns", "pids", name).stdout.split()
            for pid in pids:  # left in our namespace by a process we started
                with suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        for name in reversed(self.namespaces):
            _ip("netns", "del", name)
        self.namespaces = []


def worker_ip(index: int) -> str:
    return f"{SUBNET}.{WORKER_IP_BASE + index}"


WAIT_FOR_LAB = """
import socket, sys, time
from distributed import Client
deadline = time.monotonic() + {timeout}
for host, port in (({server!r}, {mport}), ({coord!r}, {sport})):
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"nothing listens on {{host}}:{{port}}")
            time.sleep(0.1)
with Client("tcp://{coord}:{sport}", timeout={timeout}, set_as_default=False) as client:
    while len(client.nthreads()) < {workers}:
        if time.monotonic() > deadline:
            sys.exit(f"{{len(client.nthreads())}} of {workers} Dask workers registered")
        time.sleep(0.1)
    print(sorted(client.nthreads()))
"""

MEMCACHED_STATS = """
import json
from kvbench.config.targets import parse_target
from kvbench.runner.probe import fetch_stats
raw = fetch_stats(parse_target("memcached://{server}:{port}"))
print(json.dumps({{k: int(v) for k, v in raw.items() if v.isdigit()}}))
"""


@dataclass
class ClusterLab:
    """A running lab: memcached on the server, a scheduler on the coordinator, N workers."""

    lab: Lab
    workers: list[subprocess.Popen[bytes]]

    scheduler = f"tcp://{COORDINATOR_IP}:{SCHEDULER_PORT}"
    target = f"memcached://{SERVER_IP}:{MEMCACHED_PORT}"

    def memcached_stats(self) -> dict[str, int]:
        code = MEMCACHED_STATS.format(server=SERVER_IP, port=MEMCACHED_PORT)
        parsed: dict[str, int] = json.loads(self.lab.python("coordinator", code, 30))
        return parsed

    def kvbench_argv(self, *args: str) -> list[str]:
        """``kvbench ARGS`` as run on the coordinator machine."""
        return self.lab.exec_argv("coordinator", [sys.executable, "-m", "kvbench", *args])


@contextmanager
def cluster_lab(n_workers: int, workdir: Path, memcached: str) -> Iterator[ClusterLab]:
    """The lab with memcached (binary ``memcached``), a Dask scheduler and ``n_workers``."""
    workdir.mkdir(parents=True, exist_ok=True)
    lab = Lab(f"kvb{os.getpid() % 100000}{secrets.token_hex(2)}", workdir)
    try:
        lab.add_switch()
        lab.add_host("coordinator", COORDINATOR_IP)
        lab.add_host("server", SERVER_IP)
        for i in range(n_workers):
            lab.add_host(f"w{i}", worker_ip(i))
        lab.start("server", "memcached", [memcached, "-l", SERVER_IP, "-p", str(MEMCACHED_PORT),
                                          "-U", "0", "-m", "64", "-t", "2", "-u", "root"])  # fmt: skip
        python = [sys.executable, "-m"]
        lab.start("coordinator", "scheduler", [*python, "distributed.cli.dask_scheduler",
                  "--host", COORDINATOR_IP, "--port", str(SCHEDULER_PORT),
                  "--no-dashboard"])  # fmt: skip
        workers = []
        for i in range(n_workers):
            argv = [*python, "distributed.cli.dask_worker", ClusterLab.scheduler, "--host",
                    worker_ip(i), "--nthreads", "1", "--nworkers", "1", "--no-nanny",
                    "--no-dashboard", "--name", f"w{i}", "--local-directory",
                    str(workdir / f"w{i}")]  # fmt: skip
            workers.append(lab.start(f"w{i}", f"worker{i}", argv))
        wait = WAIT_FOR_LAB.format(
            timeout=START_TIMEOUT_S, server=SERVER_IP, mport=MEMCACHED_PORT,
            coord=COORDINATOR_IP, sport=SCHEDULER_PORT, workers=n_workers,
        )  # fmt: skip
        lab.python("coordinator", wait, START_TIMEOUT_S + 15)
        yield ClusterLab(lab, workers)
    finally:
        lab.close()


def wait_for_line(proc: subprocess.Popen[str], needle: str, timeout_s: float) -> bool:
    """Read ``proc``'s stdout until a line holds ``needle`` (False at EOF or the deadline)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return False
        if needle in line:
            return True
    return False
