"""The servers and load tools bench/peers.py puts side by side: start, prefill, run, count.

Every figure has one of two sources: the tool's own report (ops/s, the ops it completed)
and the server's own counters read just before and just after the tool ran (CPU seconds,
gets + sets, get hits and misses), so each tool's server CPU per op and hit rate are
measured the same way whichever tool it is. A tool's client CPU is its process's (and its
children's) rusage; kvbench's is its workers' CPU over the measured window, from its
result document.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import hiredis
import psutil

from kvbench.config.targets import parse_target
from kvbench.errors import KvbenchError
from kvbench.runner.probe import fetch_stats
from kvbench.workload.slots import key_slot

CONNECTIONS = 50
VALUE_BYTES = 100
KEYS = 100_000
VALUE = b"x" * VALUE_BYTES
# A tool that has not finished this long after its run should have is stuck: stop it.
OVERRUN_S = 120


class BenchError(Exception):
    """A server or tool failed; the message is one line saying which and why."""


@dataclass(frozen=True)
class Cpus:
    """taskset CPU lists: where the server runs, where every client runs."""

    server: str
    client: str


def pinned(cpus: str, argv: list[str]) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", cpus, *argv]
    return argv


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class KeySpace:
    """``count`` keys: ``prefix`` + each number from ``first``, zero-padded to ``width``.

    Both tools of a comparison get key spaces of the same size and key length (memtier
    cannot pad and numbers its keys from 1, so its numbers start where they all have
    ``width`` digits).
    """

    prefix: str
    first: int
    width: int
    count: int = KEYS

    def __post_init__(self) -> None:
        if self.first + self.count > 10**self.width:
            raise ValueError(f"keys up to {self.first + self.count - 1} need > {self.width} digits")

    @property
    def key_bytes(self) -> int:
        return len(self.prefix) + self.width

    def names(self) -> list[bytes]:
        head = self.prefix.encode()
        return [
            b"%s%0*d" % (head, self.width, n) for n in range(self.first, self.first + self.count)
        ]


@dataclass(frozen=True)
class Counters:
    """A server's cumulative counters at one moment (differences of two: one tool's run)."""

    cpu_s: float  # user + system, all threads
    ops: int  # gets + sets
    hits: int
    misses: int
    items: int

    def __sub__(self, other: Counters) -> Counters:
        return Counters(
            self.cpu_s - other.cpu_s,
            self.ops - other.ops,
            self.hits - other.hits,
            self.misses - other.misses,
            self.items - other.items,
        )


def _calls(stats: dict[str, str], command: str) -> int:
    """Redis INFO commandstats: ``cmdstat_get:calls=12,usec=...`` -> 12."""
    found = re.search(r"calls=(\d+)", stats.get(f"cmdstat_{command}", ""))
    return int(found.group(1)) if found else 0


def counters_from(kind: str, stats: dict[str, str]) -> Counters:
    """Counters from memcached ``stats`` or Redis ``INFO all``."""
    if kind == "memcached":
        return Counters(
            cpu_s=float(stats["rusage_user"]) + float(stats["rusage_system"]),
            ops=int(stats["cmd_get"]) + int(stats["cmd_set"]),
            hits=int(stats["get_hits"]),
            misses=int(stats["get_misses"]),
            items=int(stats["curr_items"]),
        )
    keys = re.search(r"keys=(\d+)", stats.get("db0", ""))
    return Counters(
        cpu_s=float(stats["used_cpu_user"]) + float(stats["used_cpu_sys"]),
        ops=_calls(stats, "get") + _calls(stats, "set"),
        hits=int(stats["keyspace_hits"]),
        misses=int(stats["keyspace_misses"]),
        items=int(keys.group(1)) if keys else 0,
    )


@dataclass
class Server:
    """A fresh memcached or Redis on loopback, pinned to the server CPUs."""

    kind: str  # "memcached" or "redis"
    port: int
    proc: subprocess.Popen[bytes]

    def url(self, scheme: str | None = None) -> str:
        return f"{scheme or self.kind}://127.0.0.1:{self.port}"

    def counters(self) -> Counters:
        try:
            return counters_from(self.kind, fetch_stats(parse_target(self.url())))
        except KvbenchError as exc:
            raise BenchError(f"{self.kind} on port {self.port}: {exc}") from None

    def prefill(self, keys: KeySpace) -> None:
        """Store every key of ``keys`` once (100-byte values), then check the server has
        exactly that many items: the tool that runs next finds every key it reads."""
        self.store(keys.names())
        stored = self.counters().items
        if stored != keys.count:
            raise BenchError(f"prefill left {stored:,} items in {self.kind}, not {keys.count:,}")

    def store(self, names: Iterable[bytes]) -> None:
        """Store each key of ``names`` with a 100-byte value, and wait until it has."""
        if self.kind == "memcached":
            head = b""
            body = b"".join(
                b"set %b 0 0 %d noreply\r\n%b\r\n" % (k, VALUE_BYTES, VALUE) for k in names
            )
            tail, answer = b"version\r\n", b"VERSION"
        else:  # replies off while storing: nothing to read back but the last +OK
            head = _resp(b"CLIENT", b"REPLY", b"OFF")
            body = b"".join(_resp(b"SET", k, VALUE) for k in names)
            tail, answer = _resp(b"CLIENT", b"REPLY", b"ON"), b"+OK\r\n"
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            sock.sendall(head + body + tail)
            received = b""
            while answer not in received:
                chunk = sock.recv(65536)
                if not chunk:
                    raise BenchError(f"{self.kind} closed the connection during the prefill")
                received += chunk

    def call(self, *words: bytes) -> Any:
        """One Redis command's reply (hiredis's reading of it)."""
        reader = hiredis.Reader()
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(_resp(*words))
            while (reply := reader.gets()) is False:
                chunk = sock.recv(65536)
                if not chunk:
                    raise BenchError(f"redis on port {self.port} closed the connection")
                reader.feed(chunk)
        if isinstance(reply, hiredis.ReplyError):
            raise BenchError(f"redis on port {self.port}: {b' '.join(words)!r}: {reply}")
        return reply


# The cluster cells' Redis Cluster: this many masters, all on the server CPUs.
CLUSTER_MASTERS = 3
SLOTS = 16384


@dataclass
class Cluster:
    """A fresh Redis Cluster on loopback: master i serves the i-th of equal slot ranges.
    Its counters are its masters' added up; the tools are given master 0 as their seed."""

    nodes: list[Server]
    kind: str = "redis-cluster"

    @property
    def port(self) -> int:
        return self.nodes[0].port

    def url(self, scheme: str | None = None) -> str:
        return f"redis+cluster://127.0.0.1:{self.port}"

    def counters(self) -> Counters:
        total = Counters(0.0, 0, 0, 0, 0)
        for node in self.nodes:
            own = node.counters()
            total = Counters(*(a + b for a, b in zip(_fields(total), _fields(own), strict=True)))
        return total

    def prefill(self, keys: KeySpace) -> None:
        """Each key of ``keys`` stored once, on the master of its slot; then the masters
        hold exactly that many items."""
        bounds = slot_bounds(len(self.nodes))
        groups: list[list[bytes]] = [[] for _ in self.nodes]
        for name in keys.names():
            groups[bisect.bisect_right(bounds, key_slot(name)) - 1].append(name)
        for node, names in zip(self.nodes, groups, strict=True):
            node.store(names)
        stored = self.counters().items
        if stored != keys.count:
            raise BenchError(f"prefill left {stored:,} items in the cluster, not {keys.count:,}")


def _fields(c: Counters) -> tuple[float, int, int, int, int]:
    return c.cpu_s, c.ops, c.hits, c.misses, c.items


def slot_bounds(masters: int) -> list[int]:
    """Where each master's slots start (master i: the i-th of equal runs, in order), and
    the end."""
    return [SLOTS * i // masters for i in range(masters + 1)]


@contextmanager
def redis_cluster(cpus: Cpus, masters: int = CLUSTER_MASTERS) -> Iterator[Cluster]:
    """A fresh Redis Cluster of ``masters`` masters pinned to the server CPUs, all slots
    served and ``cluster_state:ok`` on every node (the tests' fixture does the same:
    tests/support/redis_cluster.py)."""
    bounds = slot_bounds(masters)
    with ExitStack() as stack:
        buses = [free_port() for _ in range(masters)]
        nodes = [
            stack.enter_context(
                server("redis", 1, cpus, ("--cluster-enabled", "yes", "--cluster-port", str(bus)))
            )
            for bus in buses
        ]
        for i, node in enumerate(nodes):
            first, end = bounds[i], bounds[i + 1]
            node.call(b"CLUSTER", b"ADDSLOTSRANGE", b"%d" % first, b"%d" % (end - 1))
            node.call(b"CLUSTER", b"SET-CONFIG-EPOCH", b"%d" % (i + 1))
        for node, bus in zip(nodes[1:], buses[1:], strict=True):
            nodes[0].call(b"CLUSTER", b"MEET", b"127.0.0.1", b"%d" % node.port, b"%d" % bus)
        deadline = time.monotonic() + 20
        while not all(b"cluster_state:ok" in n.call(b"CLUSTER", b"INFO") for n in nodes) or any(
            len(n.call(b"CLUSTER", b"NODES").splitlines()) < masters for n in nodes
        ):
            if time.monotonic() > deadline:
                raise BenchError(f"the {masters} cluster nodes did not agree within 20 s")
            time.sleep(0.05)
        yield Cluster(nodes)


# nginx in front of memcached as the memc README's third synopsis sets a location up (the
# tests' gateway, tests/support/servers.py): one worker, keep-alive to the clients and to
# memcached, no access log.
MEMC_MODULE = "/usr/lib/nginx/modules/ngx_http_memc_module.so"
GATEWAY_CONF = """\
load_module {module};
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
worker_processes 1;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    keepalive_requests 1000000;
    upstream memcached {{
        server 127.0.0.1:{memcached_port};
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        location /memc {{
            set $memc_cmd $arg_cmd;
            set $memc_key $arg_key;
            set $memc_value $arg_val;
            memc_pass memcached;
        }}
    }}
}}
"""


@dataclass
class Gateway:
    """nginx with the memc module in front of a fresh memcached, both on the server CPUs:
    its counters are memcached's (each request one get or set there), its CPU both's
    (nginx's from psutil: it runs as one process, no master)."""

    memcached: Server
    port: int
    proc: subprocess.Popen[bytes]
    kind: str = "gateway"

    def url(self, scheme: str | None = None) -> str:
        return f"http+memc://127.0.0.1:{self.port}/memc"

    def counters(self) -> Counters:
        own = self.memcached.counters()
        nginx = psutil.Process(self.proc.pid).cpu_times()
        return replace(own, cpu_s=own.cpu_s + nginx.user + nginx.system)

    def prefill(self, keys: KeySpace) -> None:
        self.memcached.prefill(keys)  # (100 bytes of "x": what a gateway stores as is)


@contextmanager
def gateway(cpus: Cpus) -> Iterator[Gateway]:
    """A fresh memcached behind a fresh nginx + memc, both pinned to the server CPUs."""
    if not shutil.which("nginx") or not os.path.exists(MEMC_MODULE):
        raise BenchError("nginx or its memc module is missing (apt-get install nginx "
                         "libnginx-mod-http-memc)")  # fmt: skip
    with server("memcached", 1, cpus) as memcached:
        port = free_port()
        workdir = tempfile.mkdtemp(prefix="kvbench-peers-nginx-")
        conf = Path(workdir) / "nginx.conf"
        conf.write_text(
            GATEWAY_CONF.format(
                module=MEMC_MODULE, workdir=workdir, port=port, memcached_port=memcached.port
            )
        )
        argv = ["nginx", "-p", workdir, "-c", str(conf), "-e", f"{workdir}/error.log",
                "-g", "daemon off; master_process off;"]  # fmt: skip
        proc = subprocess.Popen(pinned(cpus.server, argv), stderr=subprocess.PIPE)
        try:
            _wait_listening("nginx", proc, port)
            yield Gateway(memcached, port, proc)
        finally:
            proc.terminate()
            proc.wait()
            shutil.rmtree(workdir, ignore_errors=True)


def _wait_listening(kind: str, proc: subprocess.Popen[bytes], port: int) -> None:
    """Until ``proc`` listens on ``port`` (10 s at most). Raises BenchError if it exits."""
    deadline = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            error = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace")
            raise BenchError(f"{kind} exited {proc.returncode}: {error.strip()[-200:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise BenchError(f"{kind} did not listen on port {port} within 10 s") from None
            time.sleep(0.01)


def _resp(*words: bytes) -> bytes:
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%b\r\n" % (len(w), w) for w in words)


def _server_argv(kind: str, port: int, threads: int, workdir: str) -> list[str]:
    if kind == "redis":
        return [
            "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", workdir,
        ]  # fmt: skip
    argv = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", str(threads)]
    argv += ["-m", "1024"]  # room for memaslap, whose sets add keys instead of replacing them
    return argv + (["-u", "root"] if os.geteuid() == 0 else [])


@contextmanager
def server(kind: str, threads: int, cpus: Cpus, extra: tuple[str, ...] = ()) -> Iterator[Server]:
    """A fresh, empty server for one tool's run; stopped (and its files removed) after.
    ``extra``: more of the server's own flags (memcached ``-c 20000``)."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="kvbench-peers-")
    argv = pinned(cpus.server, [*_server_argv(kind, port, threads, workdir), *extra])
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_listening(kind, proc, port)
        yield Server(kind, port, proc)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass(frozen=True)
class ToolRun:
    """What one load tool reported about one run."""

    ops_per_s: float
    ops: int  # the ops the tool counted (kvbench: in its measured window)
    client_cpu_s: float  # the client's CPU over those ops
    client_cores: float  # client CPU seconds per wall second over those ops
    driver: str = ""  # kvbench's environment.driver


def run_tool(what: str, argv: list[str], budget_s: float) -> tuple[str, float, float]:
    """Run a tool to completion: (stdout, its CPU seconds, wall seconds).

    Raises:
        BenchError: it exited non-zero (with the last line it wrote) or overran.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=budget_s + OVERRUN_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"{what} ran {OVERRUN_S} s past its time and was stopped") from None
    wall_s = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
        raise BenchError(f"{what} exited {done.returncode}: {lines[-1]}")
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.stdout, cpu_s, wall_s


def kvbench_argv(url: str, keys: KeySpace, processes: int, pipeline: int) -> list[str]:
    """kvbench's options for the common settings; the caller adds ratio and length."""
    if keys.first != 0:
        raise ValueError("kvbench numbers its keys from 0")
    return [
        sys.executable, "-m", "kvbench", "run", url,
        "-c", str(CONNECTIONS), "--processes", str(processes), "-P", str(pipeline),
        "--keys", str(keys.count), "--key-prefix", keys.prefix, "--key-size", str(keys.key_bytes),
        "--key-pattern", "uniform", "--value-size", str(VALUE_BYTES), "--no-save", "-q",
    ]  # fmt: skip


def kvbench(
    url: str,
    keys: KeySpace,
    processes: int,
    pipeline: int,
    seconds: int,
    cpus: Cpus,
    extra: tuple[str, ...] = (),
) -> ToolRun:
    """A timed kvbench run (1 s warm-up, then ``seconds`` measured), from its result document;
    ``extra``: more options."""
    return kvbench_report(kvbench_doc(url, keys, processes, pipeline, seconds, cpus, extra))


def kvbench_doc(
    url: str,
    keys: KeySpace,
    processes: int,
    pipeline: int,
    seconds: int,
    cpus: Cpus,
    extra: tuple[str, ...] = (),
    env: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A timed kvbench run's result document (1 s warm-up, then ``seconds`` measured).

    Args:
        extra: more options (``--rate`` ...); with ``--command``s they are the mix, else
            sets and gets 1:1.
        env: ``NAME=value`` settings for its environment (``KVBENCH_PURE_PYTHON=1``).
    """
    mix = () if "--command" in extra else ("--ratio", "1:1")
    with tempfile.TemporaryDirectory(prefix="kvbench-peers-") as tmp:
        out = Path(tmp) / "run.json"
        argv = [
            *kvbench_argv(url, keys, processes, pipeline),
            *mix, "--duration", f"{seconds}s", "--warmup", "1s", "--json", str(out),
            *extra,
        ]  # fmt: skip
        if env:
            argv = ["env", *env, *argv]
        run_tool("kvbench", pinned(cpus.client, argv), seconds + 1)
        return dict(json.loads(out.read_text()))


def kvbench_report(doc: dict[str, Any]) -> ToolRun:
    """What a kvbench result document says about its measured window.

    Raises:
        BenchError: the run did not end ok, or had errors.
    """
    if doc["status"] != "ok" or doc["totals"]["errors"]:
        raise BenchError(
            f"kvbench run {doc['status']} with {doc['totals']['errors']} errors: "
            f"{doc.get('status_reasons')}"
        )
    # The measured intervals' CPU (all workers): workers[].cpu_s adds warm-up and drain.
    cpu_s = sum(float(row["cpu_s"]) for row in doc["intervals"])
    return ToolRun(
        ops_per_s=float(doc["totals"]["throughput_per_s"]),
        ops=int(doc["totals"]["ops"]),
        client_cpu_s=cpu_s,
        client_cores=cpu_s / float(doc["window_s"]),
        driver=str(doc["environment"]["driver"]),
    )


def memtier_argv(
    port: int, protocol: str, keys: KeySpace, threads: int, pipeline: int, cluster: bool = False
) -> list[str]:
    """memtier_benchmark's options for the common settings; the caller adds ratio and length.

    ``--distinct-client-seed``: without it every connection draws the same key sequence,
    which makes the server's lookups cache-friendly (DESIGN.md §7).
    """
    last = keys.first + keys.count - 1
    if len(str(keys.first)) != keys.width or len(str(last)) != keys.width:
        raise ValueError("memtier cannot pad key numbers: every number needs `width` digits")
    return [
        "memtier_benchmark", "-s", "127.0.0.1", "-p", str(port), f"--protocol={protocol}",
        f"--threads={threads}", f"--clients={CONNECTIONS // threads}", f"--pipeline={pipeline}",
        f"--key-prefix={keys.prefix}", f"--key-minimum={keys.first}", f"--key-maximum={last}",
        "--key-pattern=R:R", f"--data-size={VALUE_BYTES}", "--distinct-client-seed",
        "--hide-histogram", *(["--cluster-mode"] if cluster else []),
    ]  # fmt: skip


def memtier(
    protocol: str,
    port: int,
    keys: KeySpace,
    threads: int,
    pipeline: int,
    seconds: int,
    cpus: Cpus,
    commands: tuple[str, ...] = (),
    cluster: bool = False,
) -> ToolRun:
    """A timed memtier_benchmark run, from its JSON output: sets and gets 1:1, or
    ``commands`` (arbitrary commands, each in turn, its keys drawn at random); ``cluster``:
    ``port`` is a Redis Cluster node (``--cluster-mode``: each key to its slot's master)."""
    common = memtier_argv(port, protocol, keys, threads, pipeline, cluster)
    mix = ["--ratio=1:1"]
    if commands:  # (each command's key pattern is its own: memtier refuses --key-pattern)
        common = [arg for arg in common if not arg.startswith("--key-pattern=")]
        mix = [arg for text in commands for arg in (f"--command={text}", "--command-key-pattern=R")]
    with tempfile.TemporaryDirectory(prefix="kvbench-peers-") as tmp:
        out = Path(tmp) / "memtier.json"
        argv = [
            *common, *mix, f"--test-time={seconds}", f"--json-out-file={out}",
        ]  # fmt: skip
        _, cpu_s, wall_s = run_tool("memtier_benchmark", pinned(cpus.client, argv), seconds)
        totals = json.loads(out.read_text())["ALL STATS"]["Totals"]
    return ToolRun(float(totals["Ops/sec"]), int(totals["Count"]), cpu_s, cpu_s / wall_s)


class RedisBenchmark:
    """redis-benchmark ``-t set,get``: a SET run, then a GET run, over ``key:%012d`` keys.

    It stops after a number of requests, not a time: each run asks for what the previous
    one did in ``seconds``. The figure is both runs' requests over both runs' time.
    """

    keys = KeySpace("key:", 0, 12)

    def __init__(self, pipeline: int) -> None:
        self.pipeline = pipeline
        self.rate_per_s = 100_000.0 * (5 if pipeline > 1 else 1)

    def __call__(self, port: int, seconds: int, cpus: Cpus) -> ToolRun:
        requests = max(10_000, int(self.rate_per_s * seconds / 2))  # per test: SET, then GET
        argv = [
            "redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(CONNECTIONS),
            "-n", str(requests), "-d", str(VALUE_BYTES), "-r", str(self.keys.count),
            "-P", str(self.pipeline), "-t", "set,get", "--csv",
        ]  # fmt: skip
        text, cpu_s, wall_s = run_tool("redis-benchmark", pinned(cpus.client, argv), seconds)
        rates = [float(row) for row in re.findall(r'^"(?:SET|GET)","([\d.]+)"', text, re.M)]
        if len(rates) != 2:
            raise BenchError(f"redis-benchmark printed no SET and GET rates: {text[:200]!r}")
        self.rate_per_s = len(rates) / sum(1 / r for r in rates)
        return ToolRun(self.rate_per_s, 2 * requests, cpu_s, cpu_s / wall_s)


def memaslap(port: int, seconds: int, cpus: Cpus) -> ToolRun:
    """memaslap (memcaslap in libmemcached-tools): 16-byte keys, gets only of keys it set.

    Its sets add new keys rather than replace (``-o`` overwrites one key per connection),
    so its keyspace grows past the window (-w: 2,000 keys a connection, 100,000 in all).
    """
    binary = shutil.which("memaslap") or shutil.which("memcaslap")
    if binary is None:
        raise BenchError("memaslap is not installed (apt-get install libmemcached-tools)")
    with tempfile.TemporaryDirectory(prefix="kvbench-peers-") as tmp:
        cfg = Path(tmp) / "memaslap.cfg"
        # key sizes, value sizes, then command proportions (0 = set, 1 = get)
        cfg.write_text(f"key\n16 16 1\nvalue\n{VALUE_BYTES} {VALUE_BYTES} 1\ncmd\n0 0.5\n1 0.5\n")
        argv = [
            binary, "-s", f"127.0.0.1:{port}", "-T", "1", "-c", str(CONNECTIONS),
            "-w", f"{KEYS // CONNECTIONS // 1000}k", "-t", f"{seconds}s", "-F", str(cfg),
        ]  # fmt: skip
        text, cpu_s, wall_s = run_tool("memaslap", pinned(cpus.client, argv), seconds)
    found = re.search(r"Ops:\s*(\d+)\s+TPS:\s*(\d+)", text)
    if not found:
        raise BenchError(f"no 'Ops: N TPS: N' in memaslap's output: {text[-200:]!r}")
    return ToolRun(float(found.group(2)), int(found.group(1)), cpu_s, cpu_s / wall_s)


# wrk's Lua: each request a set then a get in turn (as kvbench's --op-order cycle), of a
# key drawn at random from the key space, 100 bytes of "x" in a set's URL.
WRK_SCRIPT = """\
local n = 0
local value = string.rep("x", {value_bytes})
math.randomseed({seed})
request = function()
  n = n + 1
  local key = string.format("{prefix}%0{width}d", math.random({first}, {last}))
  if n % 2 == 1 then
    return wrk.format("GET", "/memc?cmd=set&key=" .. key .. "&val=" .. value)
  end
  return wrk.format("GET", "/memc?cmd=get&key=" .. key)
end
"""


def wrk(port: int, keys: KeySpace, seconds: int, cpus: Cpus) -> ToolRun:
    """A timed wrk run (one thread, 50 connections) against a memc gateway: its requests
    completed, from its summary."""
    with tempfile.TemporaryDirectory(prefix="kvbench-peers-") as tmp:
        script = Path(tmp) / "memc.lua"
        script.write_text(
            WRK_SCRIPT.format(value_bytes=VALUE_BYTES, seed=port, prefix=keys.prefix,
                              width=keys.width, first=keys.first,
                              last=keys.first + keys.count - 1)
        )  # fmt: skip
        argv = ["wrk", "-t", "1", "-c", str(CONNECTIONS), "-d", f"{seconds}s", "--timeout", "2s",
                "-s", str(script), f"http://127.0.0.1:{port}/memc"]  # fmt: skip
        text, cpu_s, wall_s = run_tool("wrk", pinned(cpus.client, argv), seconds)
    found = re.search(r"(\d+) requests in ([\d.]+)(m?s)", text)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", text)
    if not found:
        raise BenchError(f"no 'N requests in T' in wrk's output: {text[-200:]!r}")
    if errors:
        raise BenchError(f"wrk: {errors.group(0)}")
    elapsed = float(found.group(2)) / (1000 if found.group(3) == "ms" else 1)
    requests = int(found.group(1))
    return ToolRun(requests / elapsed, requests, cpu_s, cpu_s / wall_s)


VERSION_FLAGS = {
    "memcached": "-V",
    "redis-server": "--version",
    "memtier_benchmark": "--version",
    "redis-benchmark": "--version",
    "memcaslap": "-V",
    "nginx": "-v",
    "wrk": "-v",
}


def versions() -> dict[str, str]:
    """The first line each installed server and tool prints about its version."""
    found = {"python": sys.version.split()[0]}
    for binary, flag in VERSION_FLAGS.items():
        if shutil.which(binary):
            done = subprocess.run([binary, flag], capture_output=True, text=True, check=False)
            found[binary] = (done.stdout or done.stderr).strip().split("\n")[0]
    return found


def expected_distinct(keys: int, draws: int) -> float:
    """Distinct keys ``draws`` independent uniform draws from ``keys`` keys touch, on average."""
    return keys * (1 - (1 - 1 / keys) ** draws)
