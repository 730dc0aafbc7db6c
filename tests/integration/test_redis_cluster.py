"""Redis Cluster placement and discovery against a real 3-master cluster on loopback."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator

import pytest

from kvbench.config import load_config, parse_target
from kvbench.config.model import RunConfig
from kvbench.engine.redirect import fetch_masters
from kvbench.errors import ConfigError, TargetUnreachable
from kvbench.runner.redis_cluster import discover
from kvbench.workload.slots import SlotMap, key_slot
from tests.support import redis_cluster, servers

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[redis_cluster.Cluster]:
    """One cluster for the tests here that only read it."""
    with redis_cluster.redis_cluster(3) as running:
        yield running


def config(*urls: str, connections: int = 6, processes: int = 2) -> RunConfig:
    overrides = {
        "target.urls": (list(urls), "TARGET"),
        "load.connections": (str(connections), "-c"),
        "load.processes": (str(processes), "--processes"),
    }
    return load_config(None, overrides, 1)


def test_key_slots_agree_with_the_servers_cluster_keyslot(cluster: redis_cluster.Cluster) -> None:
    rng = random.Random(7)
    alphabet = b"ab{}x:"
    keys = [b"kvbench:%d" % i for i in range(500)]
    keys += [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(1500)]
    replies = cluster.nodes[0].pipeline([("CLUSTER", "KEYSLOT", key) for key in keys])
    assert [key_slot(key) for key in keys] == replies


def test_discovery_finds_each_master_and_its_slots(cluster: redis_cluster.Cluster) -> None:
    # The seed is the last master: the map still lists them in slot order.
    run, slot_map = discover(config(f"redis+cluster://{cluster.nodes[2].address}"), 3.0)
    assert slot_map.nodes == tuple((n.host, n.port) for n in cluster.nodes)
    for index, (start, end) in enumerate(cluster.ranges):
        assert set(slot_map.owners[start : end + 1]) == {index}
    assert [t.url for t in run.targets] == [f"redis+cluster://{n.address}" for n in cluster.nodes]
    assert all(t.cluster for t in run.targets)
    assert run.load.processes == 2  # 6 connections: 2 per master on each of 2 workers


def test_processes_are_capped_so_each_worker_reaches_every_master(
    cluster: redis_cluster.Cluster,
) -> None:
    run, _ = discover(config(f"redis+cluster://{cluster.seed}", connections=7, processes=4), 3.0)
    assert run.load.processes == 2
    with pytest.raises(ConfigError, match="the cluster has 3 masters"):
        discover(config(f"redis+cluster://{cluster.seed}", connections=2, processes=1), 3.0)


def test_a_seed_that_does_not_answer_is_passed_over(cluster: redis_cluster.Cluster) -> None:
    dead = servers.free_port()
    run, slot_map = discover(
        config(f"redis+cluster://127.0.0.1:{dead}", f"redis+cluster://{cluster.seed}"), 3.0
    )
    assert len(slot_map.nodes) == 3 and len(run.targets) == 3
    with pytest.raises(
        TargetUnreachable, match=f"cannot connect to redis\\+cluster://127.0.0.1:{dead}"
    ):
        discover(config(f"redis+cluster://127.0.0.1:{dead}"), 3.0)


def test_the_workers_refresh_asks_the_same_map(cluster: redis_cluster.Cluster) -> None:
    _, slot_map = discover(config(f"redis+cluster://{cluster.seed}"), 3.0)
    masters = asyncio.run(fetch_masters(parse_target(f"redis+cluster://{cluster.seed}"), None))
    assert SlotMap.from_masters(masters, "127.0.0.1") == slot_map


def test_a_node_not_in_cluster_mode_is_refused() -> None:
    with servers.redis() as plain, pytest.raises(TargetUnreachable, match="support disabled"):
        discover(config(f"redis+cluster://{plain.address}"), 3.0)


def test_a_cluster_with_unserved_slots_is_down() -> None:
    with redis_cluster.cluster_node() as server:
        node = redis_cluster.Node(server)
        node.call("CLUSTER", "ADDSLOTSRANGE", 0, 99)
        node.call("CLUSTER", "ADDSLOTSRANGE", 200, 16000)
        with pytest.raises(TargetUnreachable, match="slots 100-199, 16001-16383: it is down"):
            discover(config(f"redis+cluster://{server.address}", connections=1, processes=1), 3.0)


def test_a_password_protected_cluster() -> None:
    with redis_cluster.redis_cluster(3, password="s3cret") as cluster:
        run, slot_map = discover(config(f"redis+cluster://:s3cret@{cluster.seed}"), 3.0)
        assert len(slot_map.nodes) == 3
        assert all(t.password == "s3cret" and "***" in t.url for t in run.targets)
        with pytest.raises(
            TargetUnreachable, match=r"refused CLUSTER SHARDS/SLOTS: AUTH: WRONGPASS"
        ):
            discover(config(f"redis+cluster://:wrong@{cluster.seed}"), 3.0)
