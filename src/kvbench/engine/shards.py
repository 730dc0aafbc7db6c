"""Several servers in one run: keys placed on them, one shard per server.

Several memcached servers: the keyspace is partitioned with the ketama ring twemproxy
uses (workload.ketama), or python-memcached's modula placement (``--placement
modula-crc32``: workload.placement). A Redis Cluster: keys go to the master serving their
hash slot (workload.slots), and the placement follows the cluster when a slot moves
during the run (engine/redirect.py calls ``placed_plan`` again). Either way each server
gets its own request source over the keys placed on it and its share of the connections,
so a connection only ever sends keys that live on its server. Load per server follows its
connections (closed loop) or its share of the schedule (open loop); within a server, keys
follow the configured pattern over that server's keys.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field, replace

from kvbench.config.model import RunConfig, TargetConfig
from kvbench.engine.setup import ssl_context_for
from kvbench.engine.spec import check_shards as check_shards  # (its home)
from kvbench.errors import ConfigError
from kvbench.workload.chunk import Cursor
from kvbench.workload.commands import compile_commands
from kvbench.workload.placement import placement_for
from kvbench.workload.plan import RequestSource, WorkloadPlan, compile_plan
from kvbench.workload.slots import SlotMap, SlotPlacement


@dataclass(slots=True)
class Shard:
    """One server of a run and what a worker sends it.

    Attributes:
        cursor: where its connections are in ``source``'s chunks (one, shared, as its
            compiled pumps share one stream: the open loop's drops read it too).
    """

    index: int
    target: TargetConfig
    plan: WorkloadPlan
    source: RequestSource
    ssl: ssl.SSLContext | None
    completed: int = 0  # replies since the last interval cut
    redirected: int = 0  # Redis Cluster: requests it redirected since the last cut
    # Redis Cluster: the commands it executed beyond the requests that completed there
    # since the last cut (an rmw is two; a request that ended on a redirect none): its
    # calls, by the client's count, are ``completed`` + this (report/reconcile.py).
    extra_calls: int = 0
    # ... and the commands it refused beyond the requests it redirected (an rmw both of
    # whose halves it redirected): ``redirected`` + this are its rejected calls.
    extra_rejected: int = 0
    cursor: Cursor = field(init=False)

    def __post_init__(self) -> None:
        self.cursor = Cursor(self.source)

    def rekey(self, plan: WorkloadPlan) -> None:
        """Send ``plan``'s keys from now on: the next request starts a fresh chunk drawn
        from them (a Redis Cluster slot moved to or from this server)."""
        self.plan = plan
        self.source.rekey(plan)
        self.cursor.restart()


def server_name(target: TargetConfig) -> str:
    """The name a server has on the ring: ``host:port``, as in nutcracker's config (a Unix
    socket's path, as nutcracker names one)."""
    if target.socket_path is not None:
        return target.socket_path
    return f"{target.host}:{target.port}"


def source_for(plan: WorkloadPlan, target: TargetConfig) -> RequestSource:
    """The requests of ``plan`` for ``target``: its commands compiled for its protocol."""
    return RequestSource(plan, templates=compile_commands(plan.config.commands, target.protocol))


def build_shards(config: RunConfig, worker_index: int, n_workers: int) -> list[Shard]:
    """One shard per target (a single target is one shard holding the whole keyspace).

    Raises:
        ConfigError: a server would get no keys.
    """
    plan = compile_plan(config.workload, worker_index, n_workers)
    targets = config.targets
    if len(targets) == 1:
        target = targets[0]
        return [Shard(0, target, plan, source_for(plan, target), ssl_context_for(target))]
    ring = placement_for(config.workload.placement, [server_name(t) for t in targets])
    key_groups = ring.partition(plan.key_table)
    counter_groups = ring.partition(plan.counter_table)
    shards = []
    for index, target in enumerate(targets):
        keys = key_groups[index]
        if not keys:
            raise ConfigError("--keys", f"too few keys: none is placed on {target.url}")
        counters = counter_groups[index] or counter_groups[0]
        shard_plan = replace(
            plan,
            config=replace(config.workload, keys=len(keys)),
            key_table=[plan.key_table[i] for i in keys],
            counter_table=[plan.counter_table[i] for i in counters],
        )
        shards.append(
            Shard(
                index, target, shard_plan, source_for(shard_plan, target), ssl_context_for(target)
            )
        )
    return shards


def cluster_shards(
    config: RunConfig, worker_index: int, n_workers: int, slot_map: SlotMap
) -> tuple[list[Shard], SlotPlacement, WorkloadPlan]:
    """One shard per master of a Redis Cluster (``config.targets`` are its masters, in
    ``slot_map.nodes`` order), each over the keys whose slot it serves; a master serving
    none of them gets an empty shard (a slot may move to it).

    Returns:
        The shards, the worker's live placement, and the whole plan (what a shard's plan
        is cut from when the placement changes).
    """
    plan = compile_plan(config.workload, worker_index, n_workers)
    placement = SlotPlacement(slot_map, [plan.key_table, plan.counter_table])
    shards = []
    for index, target in enumerate(config.targets):
        shard_plan = placed_plan(plan, placement, index)
        source = RequestSource(shard_plan)
        shards.append(Shard(index, target, shard_plan, source, ssl_context_for(target)))
    return shards, placement, plan


def placed_plan(plan: WorkloadPlan, placement: SlotPlacement, node: int) -> WorkloadPlan:
    """``plan`` cut down to the keys ``node`` serves under ``placement``.

    A master that serves keys but none of the counter keys (a small keyspace) sends its
    incr requests to counters of other masters: they are redirected, and counted so.
    """
    keys, counters = placement.indexes(node)
    counter_table = [plan.counter_table[i] for i in counters] if keys and counters else []
    return replace(
        plan,
        config=replace(plan.config, keys=len(keys)),
        key_table=[plan.key_table[i] for i in keys],
        counter_table=counter_table or (plan.counter_table if keys else []),
    )
