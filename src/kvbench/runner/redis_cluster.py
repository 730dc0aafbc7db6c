"""Redis Cluster discovery before a run: the seed nodes' slot map, the masters as targets.

The run's ``redis+cluster://`` targets are seed nodes. The coordinator asks them in turn
(on a side connection, as the probe asks for stats) for CLUSTER SHARDS, or CLUSTER SLOTS
before Redis 7.0, until one answers; the masters it names become the run's targets, in
the map's order, each with the seeds' scheme, credentials and TLS settings, and the map
travels to the workers in their spec. A cluster that leaves any slot unserved is down
(it refuses every key: ``cluster-require-full-coverage``), and the run stops there.
"""

from __future__ import annotations

import socket
from dataclasses import replace
from functools import partial
from urllib.parse import urlsplit

from kvbench.config.model import RunConfig, TargetConfig
from kvbench.errors import ConfigError, TargetUnreachable
from kvbench.protocols.resp_cluster import SlotsAnswer, SlotsQuery
from kvbench.runner.probe import ask
from kvbench.workload.slots import SlotMap as SlotMap  # the coordinator passes it on

# Unserved slot ranges named in the message of a cluster that is down.
_SHOWN_RANGES = 3


def discover(config: RunConfig, timeout_s: float) -> tuple[RunConfig, SlotMap]:
    """The run with its seed targets replaced by the cluster's masters, and the slot map.

    Processes are capped so that every worker has a connection to every master.

    Raises:
        TargetUnreachable: no seed answered, a seed refused (a bad password, a node not
            in cluster mode), or the cluster leaves slots unserved.
        ConfigError: fewer connections than masters.
    """
    slot_map = ask_seeds(config.targets, timeout_s)
    seed = config.targets[0]
    masters = tuple(master_target(seed, host, port) for host, port in slot_map.nodes)
    load = config.load
    if load.connections < len(masters):
        raise ConfigError(
            "--connections",
            f"{load.connections}: the cluster has {len(masters)} masters; every one needs a "
            "connection",
        )
    processes = max(1, min(load.processes, load.connections // len(masters)))
    return replace(config, targets=masters, load=replace(load, processes=processes)), slot_map


def remap(config: RunConfig, slot_map: SlotMap, timeout_s: float) -> SlotMap:
    """The slot map now (a later round starts from it), over the same masters; the one
    given when the cluster's masters changed or it cannot be asked."""
    try:
        return ask_seeds(config.targets, timeout_s).reindexed(slot_map.nodes)
    except (TargetUnreachable, ValueError):
        return slot_map


def ask_seeds(seeds: tuple[TargetConfig, ...], timeout_s: float) -> SlotMap:
    """The slot map of the first seed that answers.

    Raises:
        TargetUnreachable: as ``discover``.
    """
    failures: list[str] = []
    for seed in seeds:
        try:
            answer = ask(seed, timeout_s, "CLUSTER SHARDS", partial(_exchange, seed=seed))
        except TargetUnreachable as exc:
            failures.append(str(exc))
            continue
        if answer.masters is None:
            raise TargetUnreachable(f"{seed.url} refused CLUSTER SHARDS/SLOTS: {answer.error}")
        try:
            slot_map = SlotMap.from_masters(answer.masters, seed.host)
        except ValueError as exc:
            raise TargetUnreachable(f"{seed.url} gave a slot map that cannot be: {exc}") from None
        unserved = slot_map.unserved()
        if unserved:
            raise TargetUnreachable(
                f"{seed.url}: the cluster serves no master for slots {_ranges_text(unserved)}: "
                "it is down"
            )
        return slot_map
    raise TargetUnreachable(failures[0] if len(failures) == 1 else "; ".join(failures))


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    """``0-99, 200, 300-310 and 4 more ranges``."""
    text = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in ranges[:_SHOWN_RANGES])
    more = len(ranges) - _SHOWN_RANGES
    return text + (f" and {more} more ranges" if more > 0 else "")


def _exchange(sock: socket.socket, seed: TargetConfig) -> SlotsAnswer:
    """Send the discovery exchange; read until it has its answer.

    Raises:
        EOFError: the node closed the connection first.
        ProtocolError: from SlotsQuery.
    """
    query = SlotsQuery(seed.password, seed.username, seed.tls)
    sock.sendall(query.request)
    while True:
        data = sock.recv(1 << 16)
        if not data:
            raise EOFError
        answer = query.feed(data)
        if answer is not None:
            return answer


def master_target(seed: TargetConfig, host: str, port: int) -> TargetConfig:
    """The target of one master: the seed's scheme, credentials, TLS and options, at
    ``host:port`` (its URL, credentials masked as the seed's, names the master)."""
    parts = urlsplit(seed.url)
    userinfo = parts.netloc.rpartition("@")[0]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    netloc = f"{userinfo}@{address}" if userinfo else address
    return replace(seed, host=host, port=port, url=parts._replace(netloc=netloc).geturl())
