"""Start real servers (memcached, redis-server) on free loopback ports for tests.

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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(
    host: str, port: int, proc: subprocess.Popen[bytes], timeout_s: float = 10.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"server did not listen on {host}:{port} within {timeout_s}s")


@dataclass
class Server:
    """A running server process."""

    name: str
    host: str
    port: int
    proc: subprocess.Popen[bytes]
    workdir: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
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
    name: str, argv: Sequence[str], port: int, workdir: str | None = None
) -> Iterator[Server]:
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=workdir,
    )
    server = Server(name, "127.0.0.1", port, proc, workdir)
    try:
        wait_listening(server.host, port, proc)
        yield server
    finally:
        server.stop()


@contextmanager
def memcached(*extra_args: str, port: int | None = None) -> Iterator[Server]:
    """A memcached on a free loopback port (64 MiB, 2 threads unless extra_args say), or on
    ``port`` (a restart where a stopped one listened)."""
    binary = require_binary("memcached", "memcached")
    port = port or free_port()
    argv = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64", "-u", "root"]
    if "-t" not in extra_args:
        argv += ["-t", "2"]
    with running("memcached", [*argv, *extra_args], port) as server:
        yield server


@contextmanager
def redis(*extra_args: str, port: int | None = None) -> Iterator[Server]:
    """A redis-server on a free loopback port (or on ``port``), no persistence, in a
    private work dir."""
    binary = require_binary("redis-server", "redis-server")
    port = port or free_port()
    workdir = tempfile.mkdtemp(prefix="kvbench-redis-")
    argv = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
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
    with running("redis-server", argv, port, workdir) as server:
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
