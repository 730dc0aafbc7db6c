"""A real Redis Cluster for tests: masters started on free loopback ports, slots assigned here.

``redis_cluster(3)`` starts three ``redis-server --cluster-enabled yes`` processes (each its
own node config and work dir, its cluster bus on a free port of its own: ``cluster-port``,
Redis 7.0), gives master i the i-th third of the 16384 slots (CLUSTER ADDSLOTSRANGE), makes
them meet (CLUSTER MEET) and waits until every node says ``cluster_state:ok`` and knows every
other. ``Cluster.migrate`` moves one slot the way redis-cli --cluster reshard does (the
Redis Cluster specification, "Live resharding"), in steps a test can interleave with load.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hiredis

from tests.support import servers

SLOTS = 16384


class Node:
    """A blocking RESP2 client to one node (hiredis parses; errors come back as values)."""

    def __init__(self, server: servers.Server, password: str | None = None) -> None:
        self.server = server
        self.host, self.port = server.host, server.port
        self._password = password

    def call(self, *args: str | int | bytes, timeout_s: float = 5.0) -> Any:
        """Send one command on a fresh connection; its reply (a ReplyError is returned)."""
        return self.pipeline([args], timeout_s)[-1]

    def pipeline(
        self, commands: Sequence[Sequence[str | int | bytes]], timeout_s: float = 5.0
    ) -> list[Any]:
        packed = [tuple(str(a) if isinstance(a, int) else a for a in c) for c in commands]
        if self._password is not None:
            packed.insert(0, ("AUTH", self._password))
        with socket.create_connection((self.host, self.port), timeout=timeout_s) as sock:
            sock.sendall(b"".join(hiredis.pack_command(c) for c in packed))  # type: ignore[arg-type]
            reader = hiredis.Reader()
            replies: list[Any] = []
            while len(replies) < len(packed):
                reply = reader.gets()
                if reply is False:
                    data = sock.recv(1 << 16)
                    if not data:
                        raise EOFError(f"{self.host}:{self.port} closed the connection")
                    reader.feed(data)
                    continue
                replies.append(reply)
        return replies[1:] if self._password is not None else replies

    def info(self, section: str = "all") -> dict[str, str]:
        text = self.call("INFO", section).decode()
        return dict(
            line.split(":", 1) for line in text.splitlines() if ":" in line and line[0] != "#"
        )

    @property
    def node_id(self) -> str:
        return str(self.call("CLUSTER", "MYID").decode())

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class Cluster:
    """The running cluster: ``nodes[i]`` is master i, holding ``ranges[i]`` at the start."""

    nodes: list[Node]
    ranges: list[tuple[int, int]]

    @property
    def seed(self) -> str:
        return self.nodes[0].address

    def owner(self, slot: int) -> Node:
        """The master that owns ``slot`` now (asked of node 0, whose view the test drives)."""
        for start, end, master, *_ in self.nodes[0].call("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                port = int(master[1])
                return next(n for n in self.nodes if n.port == port)
        raise LookupError(f"slot {slot} is not served")

    def begin_migration(self, slot: int, source: Node, target: Node) -> None:
        """Mark ``slot`` IMPORTING on ``target`` and MIGRATING on ``source`` (that order:
        the specification's, so that no ASK is sent to a node not yet importing)."""
        _ok(target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", source.node_id))
        _ok(source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target.node_id))

    def move_keys(self, slot: int, source: Node, target: Node, batch: int = 10) -> int:
        """MIGRATE up to ``batch`` of the slot's keys from ``source`` to ``target``; how many
        moved (0 when the slot is empty on ``source``)."""
        keys = source.call("CLUSTER", "GETKEYSINSLOT", slot, batch)
        if not keys:
            return 0
        reply = source.call(
            "MIGRATE", target.host, target.port, "", 0, 5000, "REPLACE", "KEYS", *keys
        )
        _ok(reply)
        return len(keys)

    def end_migration(self, slot: int, source: Node, target: Node) -> None:
        """Give ``slot`` to ``target`` on every node (the target first, then the source)."""
        target_id = target.node_id
        _ok(target.call("CLUSTER", "SETSLOT", slot, "NODE", target_id))
        _ok(source.call("CLUSTER", "SETSLOT", slot, "NODE", target_id))
        for node in self.nodes:
            if node not in (source, target):
                _ok(node.call("CLUSTER", "SETSLOT", slot, "NODE", target_id))

    def migrate(self, slot: int, source: Node, target: Node, pause_s: float = 0.0) -> None:
        """Move ``slot`` with all its keys, pausing between batches of keys."""
        self.begin_migration(slot, source, target)
        while self.move_keys(slot, source, target):
            time.sleep(pause_s)
        self.end_migration(slot, source, target)


def _ok(reply: Any) -> None:
    if isinstance(reply, hiredis.ReplyError) or reply not in (b"OK", b"NOKEY"):
        raise RuntimeError(f"cluster command failed: {reply!r}")


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """Master i's share of the slots: the i-th of ``masters`` equal runs, in order."""
    bounds = [SLOTS * i // masters for i in range(masters + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(masters)]


def cluster_node(*extra_args: str, port: int | None = None) -> Any:
    """One cluster-enabled redis-server (``servers.redis`` with the cluster settings)."""
    bus = servers.free_port()
    args = [
        "--cluster-enabled", "yes",
        # In the server's own work dir (--dir), removed when it stops.
        "--cluster-config-file", "nodes.conf",
        "--cluster-port", str(bus),
        "--cluster-node-timeout", "3000",
        # A test's cluster never fails over: a slow CI machine must not make it try.
        "--cluster-replica-no-failover", "yes",
        *extra_args,
    ]  # fmt: skip
    tls_port = int(args[args.index("--tls-port") + 1]) if "--tls-port" in args else None
    return _with_bus(servers.redis(*args, port=port), bus, tls_port)


@contextmanager
def _with_bus(started: Any, bus: int, tls_port: int | None) -> Iterator[servers.Server]:
    with started as server:
        server.extra["bus_port"] = bus
        if tls_port is not None:
            server.extra["tls_port"] = tls_port
        yield server


@contextmanager
def redis_cluster(
    masters: int = 3,
    *extra_args: str,
    password: str | None = None,
    tls: tuple[Path, Path] | None = None,
    timeout_s: float = 20.0,
) -> Iterator[Cluster]:
    """``masters`` masters on loopback, all slots assigned, ``cluster_state:ok`` everywhere.

    Args:
        password: every node's ``requirepass``.
        tls: a certificate and its key: each node also listens with TLS on a port of its
            own (``server.extra["tls_port"]``) and the cluster bus speaks TLS; the test's
            own commands keep to the plain port.
    """
    if password is not None:
        extra_args = (*extra_args, "--requirepass", password, "--masterauth", password)
    with ExitStack() as stack:
        nodes = [
            Node(stack.enter_context(cluster_node(*extra_args, *_tls_args(tls))), password)
            for _ in range(masters)
        ]
        ranges = slot_ranges(masters)
        for epoch, (node, (start, end)) in enumerate(zip(nodes, ranges, strict=True), 1):
            _ok(node.call("CLUSTER", "ADDSLOTSRANGE", start, end))
            _ok(node.call("CLUSTER", "SET-CONFIG-EPOCH", epoch))
        for node in nodes[1:]:
            bus = node.server.extra["bus_port"]
            _ok(nodes[0].call("CLUSTER", "MEET", node.host, node.port, bus))
        wait_cluster_ok(nodes, timeout_s)
        yield Cluster(nodes, ranges)


def _tls_args(tls: tuple[Path, Path] | None) -> list[str]:
    """A TLS port and the cluster bus over TLS, with ``tls``'s certificate (as its CA)."""
    if tls is None:
        return []
    cert, key = tls
    return [
        "--tls-port", str(servers.free_port()),
        "--tls-cluster", "yes",
        "--tls-cert-file", str(cert),
        "--tls-key-file", str(key),
        "--tls-ca-cert-file", str(cert),
        "--tls-auth-clients", "no",
    ]  # fmt: skip


def wait_cluster_ok(nodes: Sequence[Node], timeout_s: float) -> None:
    """Until every node reports ``cluster_state:ok`` and knows all the others."""
    deadline = time.monotonic() + timeout_s
    while True:
        infos = [_cluster_info(node) for node in nodes]
        if all(
            i.get("cluster_state") == "ok" and i.get("cluster_known_nodes") == str(len(nodes))
            for i in infos
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cluster did not come up within {timeout_s}s: {infos}")
        time.sleep(0.05)


def _cluster_info(node: Node) -> dict[str, str]:
    text = node.call("CLUSTER", "INFO").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
