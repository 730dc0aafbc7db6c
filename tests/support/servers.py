"""Start real servers (memcached, redis-server) on free loopback ports for tests.

memcached and redis-server can also listen on ::1 (``host="::1"``; ``require_ipv6``
skips a test on a machine without an IPv6 loopback) or only on a Unix socket in a private
directory (``memcached_unix``, ``redis_unix``: ``server.socket_path``).

Each server runs in its own process group and is stopped when its fixture ends. When the
binary is not installed the fixture skips with the install hint, except under CI=true
where a missing server is a failure: CI must install what its tests need.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import pytest

from kvbench.config.targets import parse_target
from kvbench.runner.probe import fetch_stats


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ipv6_loopback() -> str | None:
    """Why this machine cannot listen on ::1, or None when it can."""
    if not socket.has_ipv6:
        return "Python was built without IPv6"
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError as exc:
        return f"no IPv6 loopback here (binding ::1: {exc.strerror})"
    return None


def require_ipv6() -> None:
    """Skip the calling test, saying why, when ::1 cannot be listened on."""
    reason = ipv6_loopback()
    if reason is not None:
        pytest.skip(reason)


def _connect(host: str, port: int, socket_path: str | None) -> None:
    if socket_path is not None:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(0.2)
            sock.connect(socket_path)
        return
    with socket.create_connection((host, port), timeout=0.2):
        return


def wait_listening(
    host: str,
    port: int,
    proc: subprocess.Popen[bytes],
    timeout_s: float = 10.0,
    socket_path: str | None = None,
) -> None:
    """Wait until the server takes connections on host:port (or on its Unix socket)."""
    where = socket_path or f"{host}:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {where}")
        try:
            _connect(host, port, socket_path)
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"server did not listen on {where} within {timeout_s}s")


@dataclass
class Server:
    """A running server process."""

    name: str
    host: str
    port: int
    proc: subprocess.Popen[bytes]
    workdir: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
    socket_path: str | None = None  # a Unix socket server's (then it has no TCP port)
    stop_signal: int = signal.SIGTERM

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
            self.proc.send_signal(self.stop_signal)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def require_binary(name: str, package: str) -> str:
    path = shutil.which(name) or (
        f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None
    )
    if path is None:
        message = f"{name} is not installed (apt-get install {package})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@contextmanager
def running(
    name: str,
    argv: Sequence[str],
    port: int,
    workdir: str | None = None,
    host: str = "127.0.0.1",
    socket_path: str | None = None,
    stop_signal: int = signal.SIGTERM,
) -> Iterator[Server]:
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=workdir,
    )
    server = Server(
        name, host, port, proc, workdir, socket_path=socket_path, stop_signal=stop_signal
    )
    try:
        wait_listening(server.host, port, proc, socket_path=socket_path)
        yield server
    finally:
        server.stop()


def free_port_on(host: str) -> int:
    """A free TCP port on ``host`` (``free_port`` for 127.0.0.1)."""
    if host == "127.0.0.1":
        return free_port()
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# A test's memcached keeps nothing worth a graceful stop, which takes it most of a second
# (SIGTERM: it waits for its background threads' sleeps), hundreds of times a suite;
# killed, it is gone at once and its sockets closed all the same.
MEMCACHED_STOP = signal.SIGKILL


@contextmanager
def memcached(
    *extra_args: str, port: int | None = None, host: str = "127.0.0.1"
) -> Iterator[Server]:
    """A memcached on a free loopback port (64 MiB, 2 threads unless extra_args say), or on
    ``port`` (a restart where a stopped one listened); ``host="::1"`` for IPv6."""
    binary = require_binary("memcached", "memcached")
    port = port or free_port_on(host)
    argv = [binary, "-l", host, "-p", str(port), "-U", "0", "-m", "64", "-u", "root"]
    if "-t" not in extra_args:
        argv += ["-t", "2"]
    with running(
        "memcached", [*argv, *extra_args], port, host=host, stop_signal=MEMCACHED_STOP
    ) as server:
        yield server


@contextmanager
def memcached_unix(*extra_args: str) -> Iterator[Server]:
    """A memcached listening only on a Unix socket in a private directory (``-s``)."""
    binary = require_binary("memcached", "memcached")
    workdir = tempfile.mkdtemp(prefix="kvbench-memcached-")
    path = os.path.join(workdir, "memcached.sock")
    argv = [binary, "-s", path, "-a", "0700", "-m", "64", "-u", "root", "-t", "2", *extra_args]
    with running(
        "memcached", argv, 0, workdir, host="", socket_path=path, stop_signal=MEMCACHED_STOP
    ) as server:
        yield server


@contextmanager
def redis_unix(*extra_args: str) -> Iterator[Server]:
    """A redis-server listening only on a Unix socket in its private work dir."""
    with redis(
        "--unixsocket", "redis.sock", "--unixsocketperm", "700", *extra_args, port=0
    ) as server:
        yield server


@contextmanager
def redis(*extra_args: str, port: int | None = None, host: str = "127.0.0.1") -> Iterator[Server]:
    """A redis-server on a free loopback port (or on ``port``; port 0 with ``--unixsocket``
    for a Unix socket only), no persistence, in a private work dir; ``host="::1"`` for IPv6."""
    binary = require_binary("redis-server", "redis-server")
    port = free_port_on(host) if port is None else port
    workdir = tempfile.mkdtemp(prefix="kvbench-redis-")
    socket_path = None
    if "--unixsocket" in extra_args:
        name = extra_args[extra_args.index("--unixsocket") + 1]
        socket_path = os.path.join(workdir, name)
        extra_args = tuple(socket_path if arg == name else arg for arg in extra_args)
    argv = [
        binary,
        "--port",
        str(port),
        "--bind",
        host,
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        workdir,
        "--protected-mode",
        "no",
        *extra_args,
    ]
    with running("redis-server", argv, port, workdir, host, socket_path) as server:
        yield server


# Debian's libnginx-mod-http-memc installs the memc module here.
MEMC_MODULE = "/usr/lib/nginx/modules/ngx_http_memc_module.so"
# nginx in front of memcached, as the memc README sets a location up (its third synopsis).
# keepalive_requests is raised from nginx's 1000 (tests that exercise the close pass a
# smaller one): the engine reopens an announced close at once, but fewer reconnects keep
# runs comparable; the upstream keeps connections to memcached open (the README's keep-alive section) so a run
# does not spend loopback ports on one connection per request; max_fails=0 lets memcached
# come back at once after a restart; short memc timeouts turn a stopped memcached into 504.
NGINX_MEMC_CONF = """\
load_module {module};
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
worker_processes 1;
events {{ worker_connections 1024; }}
http {{
    access_log {access_log};
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    keepalive_requests {keepalive_requests};
    upstream memcached {{
        server 127.0.0.1:{memcached_port} max_fails=0;
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location /memc {{
            set $memc_cmd $arg_cmd;
            set $memc_key $arg_key;
            set $memc_value $arg_val;
            set $memc_exptime $arg_exptime;
            set $memc_flags $arg_flags;
            memc_connect_timeout 1s;
            memc_send_timeout 1s;
            memc_read_timeout 1s;
            memc_pass memcached;
        }}
    }}
}}
"""


@contextmanager
def nginx_memc(
    memcached_server: Server, keepalive_requests: int = 1_000_000, log_requests: bool = False
) -> Iterator[Server]:
    """nginx with the memc module on a free loopback port, location /memc in front of
    ``memcached_server`` (``extra["path"]`` is the location, ``extra["memcached"]`` the
    server). Its own prefix, config, pid, logs and temp paths live in a private work dir.
    ``log_requests``: one access-log line per request in ``extra["access_log"]`` (nginx's
    own request count, unbuffered)."""
    binary = require_binary("nginx", "nginx")
    if not os.path.exists(MEMC_MODULE):
        message = f"{MEMC_MODULE} is missing (apt-get install libnginx-mod-http-memc)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="kvbench-nginx-")
    conf = os.path.join(workdir, "nginx.conf")
    with open(conf, "w") as handle:
        handle.write(
            NGINX_MEMC_CONF.format(
                module=MEMC_MODULE,
                workdir=workdir,
                port=port,
                memcached_port=memcached_server.port,
                keepalive_requests=keepalive_requests,
                access_log=os.path.join(workdir, "access.log") if log_requests else "off",
            )
        )
    argv = [
        binary,
        "-p",
        workdir,
        "-c",
        conf,
        "-e",
        os.path.join(workdir, "error.log"),
        "-g",
        "daemon off; master_process off;",
    ]
    with running("nginx", argv, port, workdir) as server:
        server.extra.update(
            path="memc", memcached=memcached_server, access_log=os.path.join(workdir, "access.log")
        )
        yield server


@contextmanager
def nutcracker(backends: Sequence[Server], hash_name: str = "md5") -> Iterator[Server]:
    """twemproxy (nutcracker) on a free loopback port: ketama over ``backends``."""
    binary = require_binary("nutcracker", "nutcracker")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="kvbench-nutcracker-")
    servers_yaml = "".join(f"   - {b.host}:{b.port}:1\n" for b in backends)
    conf = os.path.join(workdir, "nutcracker.yml")
    with open(conf, "w", encoding="utf-8") as handle:
        handle.write(
            "pool:\n"
            f"  listen: 127.0.0.1:{port}\n"
            f"  hash: {hash_name}\n"
            "  distribution: ketama\n"
            "  auto_eject_hosts: false\n"
            "  timeout: 2000\n"
            "  servers:\n" + servers_yaml
        )
    argv = [binary, "-c", conf, "-s", str(free_port()), "-o", os.path.join(workdir, "log")]
    with running("nutcracker", argv, port, workdir) as server:
        yield server


def counters(url: str) -> dict[str, int]:
    """A server's own counters, asked through the probe's stats: memcached's numeric
    stats, or Redis's INFO numbers with commandstats as calls (``cmdstat_get`` -> ``get``)."""
    out: dict[str, int] = {}
    for name, value in fetch_stats(parse_target(url)).items():
        if name.startswith("cmdstat_"):
            fields = dict(part.split("=") for part in value.split(","))
            out[name.removeprefix("cmdstat_")] = int(fields["calls"])
        elif value.isdigit():
            out[name] = int(value)
    return out
