"""Workers on a Dask distributed cluster: one load worker per Dask worker process.

Dask only places, starts and collects. The coordinator listens on one TCP port; each Dask
task connects back (a ``multiprocessing`` Connection, authenticated with a key made for
the run), says Hello and runs the same worker entry as a local process, in the task's
thread. Requests, snapshots and commands never pass through Dask. ``distributed`` is
imported only when a cluster run opens, so kvbench does not need it otherwise.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import queue
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client as connect_back
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import Listener
from typing import Any
from urllib.parse import urlsplit

from kvbench import __version__
from kvbench.config.cluster import INSTALL_HINT, split_listen_address
from kvbench.config.model import LoadConfig
from kvbench.engine.spec import WorkerSpec
from kvbench.errors import ConfigError, MessageError, TargetUnreachable, WorkerFailed
from kvbench.results.model import WorkerRecord
from kvbench.runner import messages as m
from kvbench.runner.process import ProcessSpec, run_worker

# Start-message headroom: a LAN round trip plus the hosts' clock disagreement (NTP keeps
# it to milliseconds); the local default of 50 ms is too tight for a loaded network.
CLUSTER_START_DELAY_NS = 1_000_000_000
# How long the Dask workers may take, beyond the connect timeout, to connect back.
CONNECT_BACK_GRACE_NS = 30_000_000_000
# A connected worker says Hello at once; one that does not within this is not ours.
HELLO_TIMEOUT_S = 10.0
# The Dask client's own connect timeout is at least this (it also handshakes).
SCHEDULER_TIMEOUT_MIN_S = 5.0
# distributed's client-side loggers, quieted while a cluster run is open.
QUIET_LOGGERS = ("distributed", "distributed.client")
# How long ``stop`` waits for this round's Dask tasks to return before cancelling them.
STOP_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class ClockReference:
    """One host's clocks read together.

    Attributes:
        domain: processes with equal domains share one monotonic clock (the Linux boot id).
        wall_minus_monotonic_ns: ``time.time_ns() - time.monotonic_ns()`` on that host.
    """

    domain: str
    wall_minus_monotonic_ns: int


def clock_domain() -> str:
    """The boot id on Linux (one monotonic clock per boot), else the host name."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return "boot:" + handle.read().strip()
    except OSError:
        return "host:" + socket.gethostname()


def read_clock() -> ClockReference:
    return ClockReference(clock_domain(), time.time_ns() - time.monotonic_ns())


def clock_offset_ns(coordinator: ClockReference, local: ClockReference) -> int:
    """The coordinator's monotonic clock minus this host's.

    Exactly 0 on the coordinator's host (one monotonic clock); across hosts it is derived
    from the wall clocks, so it is as good as their synchronisation (NTP: ~0.1-1 ms).
    """
    if coordinator.domain == local.domain:
        return 0
    return local.wall_minus_monotonic_ns - coordinator.wall_minus_monotonic_ns


def cluster_worker_main(
    spec: WorkerSpec, address: tuple[str, int], authkey: bytes, clock: ClockReference
) -> str:
    """Dask task: connect back to the coordinator at ``address`` and run ``spec``.

    Runs in a thread of the Dask worker: the event loop is made in this thread and no
    signal handler is installed. Returns this host's name once the worker has ended.
    """
    offset_ns = clock_offset_ns(clock, read_clock())
    pipe = connect_back(address, authkey=authkey)
    pipe.send(m.Hello(spec.worker_index, __version__))
    run_worker(spec, pipe, offset_ns)
    return socket.gethostname()


def _accept_loop(
    listener: Listener, count: int, out: queue.Queue[Pipe], stop: threading.Event
) -> None:
    """Accept ``count`` authenticated connections; strays that fail the key are dropped."""
    accepted = 0
    while accepted < count and not stop.is_set():
        try:
            conn = listener.accept()
        except (AuthenticationError, EOFError, ConnectionError):
            continue  # a stray client, or one without the run's key: not one of ours
        except OSError:
            return  # the listener was closed
        if stop.is_set():
            conn.close()
            return
        out.put(conn)
        accepted += 1


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1]}" if text else type(exc).__name__


class DaskLauncher:
    """Places one worker per spec on a Dask cluster's workers (one per worker process).

    Args:
        load: the run's load settings: ``cluster`` (the scheduler), ``cluster_listen``
            and ``connect_timeout_ns``.
    """

    start_delay_ns = CLUSTER_START_DELAY_NS

    def __init__(self, load: LoadConfig) -> None:
        assert load.cluster is not None
        self.scheduler = load.cluster
        self._listen = load.cluster_listen
        self._timeout_s = max(load.connect_timeout_ns / 1e9, SCHEDULER_TIMEOUT_MIN_S)
        self._connect_back_ns = load.connect_timeout_ns + CONNECT_BACK_GRACE_NS
        self._client: Any = None
        self._addresses: list[str] = []
        self._listener: Listener | None = None
        self.address: tuple[str, int] = ("", 0)
        self._authkey = b""
        self._futures: list[Any] = []
        self._token = uuid.uuid4().hex[:8]
        self._round = 0
        self._log_levels: dict[str, int] = {}

    # -- open / close ------------------------------------------------------------------

    def open(self, wanted: int) -> int:
        """Connect to the scheduler, pick up to ``wanted`` workers, listen for them.

        Raises:
            ConfigError: ``distributed`` is not installed, or the listen address is unusable.
            TargetUnreachable: no scheduler answers, or it has no workers.
        """
        distributed = _distributed()
        self._quiet_logs()
        host, port = self._scheduler_host_port()
        try:
            socket.create_connection((host, port), timeout=self._timeout_s).close()
            self._client = distributed.Client(
                self.scheduler, timeout=self._timeout_s, set_as_default=False
            )
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise TargetUnreachable(
                f"cannot reach the Dask scheduler at {self.scheduler}: {reason.lower()}"
            ) from None
        workers = sorted(self._client.nthreads())
        if not workers:
            raise TargetUnreachable(
                f"the Dask cluster at {self.scheduler} has no workers "
                f"(start them with: dask worker {self.scheduler} --nthreads 1)"
            )
        self._addresses = workers[:wanted]
        self._open_listener(host, port)
        return len(self._addresses)

    def _scheduler_host_port(self) -> tuple[str, int]:
        parts = urlsplit(self.scheduler)
        assert parts.hostname is not None and parts.port is not None
        return parts.hostname, parts.port

    def _open_listener(self, scheduler_host: str, scheduler_port: int) -> None:
        bind_host, port = split_listen_address(self._listen) if self._listen else ("", 0)
        advertised = bind_host
        if bind_host in ("", "0.0.0.0", "::"):
            advertised = _facing_address(scheduler_host, scheduler_port)
        self._authkey = secrets.token_bytes(32)
        try:
            self._listener = Listener((bind_host or advertised, port), authkey=self._authkey)
        except OSError as exc:
            raise ConfigError(
                "load.cluster_listen",
                f"cannot listen on {bind_host or advertised}:{port}: {exc.strerror or exc}",
            ) from None
        self.address = (advertised, int(self._listener.address[1]))

    def _quiet_logs(self) -> None:
        """Quiet distributed's client-side logs (restored by ``close``).

        On a lost scheduler they print reconnect tracebacks; the run says what matters
        in one line or as a counted failure.
        """
        for name in QUIET_LOGGERS:
            logger = logging.getLogger(name)
            self._log_levels.setdefault(name, logger.level)
            logger.setLevel(logging.CRITICAL)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._client is not None:
            with contextlib.suppress(OSError):  # a scheduler gone by now changes nothing
                self._client.close(timeout=self._timeout_s)
            self._client = None
        for name, level in self._log_levels.items():
            logging.getLogger(name).setLevel(level)
        self._log_levels = {}

    # -- a round -----------------------------------------------------------------------

    def start(self, specs: Sequence[ProcessSpec]) -> list[Pipe]:
        """Submit one task per spec, pinned to its Dask worker; accept their connections.

        Raises:
            WorkerFailed: a task failed, or not every worker connected back in time.
        """
        assert self._client is not None and len(specs) <= len(self._addresses)
        assert all(isinstance(spec, WorkerSpec) for spec in specs), "load runs only"
        self._round += 1
        clock = read_clock()
        self._futures = [
            self._client.submit(
                cluster_worker_main,
                spec,
                self.address,
                self._authkey,
                clock,
                key=f"kvbench-{self._token}-round{self._round}-worker{spec.worker_index}",
                pure=False,
                workers=[worker],
                allow_other_workers=False,
                retries=0,
            )
            for spec, worker in zip(specs, self._addresses, strict=False)
        ]
        return self._accept(len(specs))

    def _accept(self, count: int) -> list[Pipe]:
        assert self._listener is not None
        arrivals: queue.Queue[Pipe] = queue.Queue()
        stop = threading.Event()
        thread = threading.Thread(
            target=_accept_loop,
            args=(self._listener, count, arrivals, stop),
            name="kvbench-accept",
            daemon=True,
        )
        thread.start()
        pipes: dict[int, Pipe] = {}
        deadline = time.monotonic_ns() + self._connect_back_ns
        try:
            while len(pipes) < count:
                self._raise_on_task_error()
                if time.monotonic_ns() > deadline:
                    raise WorkerFailed("preflight", self._not_connected(count - len(pipes)))
                try:
                    conn = arrivals.get(timeout=0.2)
                except queue.Empty:
                    continue
                index = self._greet(conn, count)
                if index is None or index in pipes:
                    conn.close()
                else:
                    pipes[index] = conn
        except BaseException:
            for pipe in pipes.values():
                pipe.close()
            raise
        finally:
            stop.set()
            if thread.is_alive():
                self._wake(thread)
        return [pipes[i] for i in range(count)]

    def _greet(self, conn: Pipe, count: int) -> int | None:
        """Read a new connection's Hello; its worker index, or None for a stranger."""
        try:
            if not conn.poll(HELLO_TIMEOUT_S):
                return None
            hello = m.check(conn.recv())
        except (EOFError, OSError):
            return None
        except MessageError as exc:
            raise WorkerFailed(
                "preflight", f"a worker spoke another message version: {exc}"
            ) from None
        if not isinstance(hello, m.Hello) or not 0 <= hello.worker < count:
            return None
        if hello.kvbench_version != __version__:
            raise WorkerFailed(
                "preflight",
                f"worker {hello.worker} ({self._addresses[hello.worker]}) runs kvbench "
                f"{hello.kvbench_version}, this coordinator {__version__}: install the same "
                "kvbench on every machine",
            )
        return hello.worker

    def _wake(self, thread: threading.Thread) -> None:
        """Unblock the accept thread (waiting in accept()) with a connection that says nothing."""
        with contextlib.suppress(OSError):
            socket.create_connection(self._local_address(), timeout=1).close()
        thread.join(timeout=2)

    def _local_address(self) -> tuple[str, int]:
        assert self._listener is not None
        host, port = self._listener.address
        return (self.address[0] if host in ("0.0.0.0", "::") else host), port

    def _raise_on_task_error(self) -> None:
        """Before all have connected back: a task that ended, or that Dask gave up, never will."""
        for index, reason in self._ended(abandoned_too=True).items():
            raise WorkerFailed("preflight", f"worker {index} ({self._addresses[index]}): {reason}")

    def _not_connected(self, missing: int) -> str:
        host, port = self.address
        return (
            f"{missing} of {len(self._futures)} Dask worker(s) did not connect back to "
            f"{host}:{port} within {self._connect_back_ns / 1e9:.0f}s: that port must be "
            "reachable from the load machines (pin it with --cluster-listen HOST:PORT and "
            "open it in the firewall)"
        )

    def exited(self) -> dict[int, str]:
        """Tasks that ended: they raised or returned.

        A task Dask marks cancelled or lost (say, the scheduler went away) does not count:
        its worker may still be running and reporting over its own connection, which Dask
        is not part of. A worker that is really gone closes that connection, or misses
        the report deadline.
        """
        return self._ended(abandoned_too=False)

    def _ended(self, abandoned_too: bool) -> dict[int, str]:
        gone: dict[int, str] = {}
        for index, future in enumerate(self._futures):
            status = future.status
            if status == "error":
                gone[index] = f"the Dask task failed: {_one_line(future.exception(timeout=1))}"
            elif status == "finished":
                gone[index] = "the worker ended without reporting"
            elif abandoned_too and status in ("cancelled", "lost"):
                gone[index] = f"the Dask task was {status}"
        return gone

    def stop(self) -> None:
        """Give this round's tasks a moment to return, then cancel what is left."""
        if not self._futures:
            return
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline and not all(f.done() for f in self._futures):
            time.sleep(0.05)
        pending = [f for f in self._futures if not f.done()]
        if pending and self._client is not None:
            self._client.cancel(pending)
        self._futures = []


def workers_line(workers: Sequence[WorkerRecord]) -> str:
    """The ``workers:`` line after a cluster run: each worker's machine (host name and
    address), pid, ops, share, how long after the earliest it began, and its status."""
    return "workers: " + "  ".join(_worker_words(w) for w in workers)


def _worker_words(worker: WorkerRecord) -> str:
    where = worker.get("host", "?")
    if worker.get("address"):
        where += f" {worker['address']}"
    started = f" start +{worker['start_skew_ms']:.1f}ms" if "start_skew_ms" in worker else ""
    return (
        f"{where} pid {worker.get('pid', '?')} {worker['ops']:,} ops {worker.get('share', 0.0):.1%}"
        f"{started} ({worker['status']})"
    )


def _distributed() -> Any:
    """The ``distributed`` module, imported on first use (typed Any: its typing varies)."""
    try:
        return importlib.import_module("distributed")
    except ImportError:
        raise ConfigError("load.cluster", INSTALL_HINT) from None


def _facing_address(host: str, port: int) -> str:
    """This machine's address on the interface that routes to ``host`` (no packet is sent)."""
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(sockaddr)
            return str(probe.getsockname()[0])
    except OSError as exc:
        raise TargetUnreachable(
            f"cannot find this machine's address towards the Dask scheduler {host}: {exc}"
        ) from None
