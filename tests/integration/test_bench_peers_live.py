"""bench/peers.py against real servers: a fresh prefilled server per tool and round, each
side's figures from the server's own counters, distinct key sequences per connection."""

from __future__ import annotations

import shutil
import socket
from typing import Any

import pytest

from tests.support.bench import bench_module
from tests.support.servers import require_binary

pytestmark = pytest.mark.integration

peers = bench_module("peers")
tools = bench_module("peer_tools")
CPUS = tools.Cpus("0", "1")
SMALL = tools.KeySpace("peers:", 0, 4, count=1000)


def exchange(port: int, request: bytes, until: bytes) -> bytes:
    """Send ``request``; read until ``until`` and then the end of a line has come."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        got = b""
        while until not in got or not got.endswith(b"\r\n"):
            chunk = sock.recv(65536)
            assert chunk, f"closed after {got!r}"
            got += chunk
    return got


@pytest.mark.parametrize("kind", ["memcached", "redis"])
def test_prefill_stores_every_key_once(kind: str) -> None:
    require_binary("memcached" if kind == "memcached" else "redis-server", kind)
    with tools.server(kind, 1, CPUS) as srv:
        srv.prefill(SMALL)
        assert srv.counters().items == 1000
        last = SMALL.names()[-1]
        if kind == "memcached":
            reply = exchange(srv.port, b"get %s\r\n" % last, b"END\r\n")
            assert reply == b"VALUE %s 0 100\r\n%s\r\nEND\r\n" % (last, b"x" * 100)
        else:
            reply = exchange(srv.port, b"GET %s\r\n" % last, b"x" * 100)
            assert reply == b"$100\r\n%s\r\n" % (b"x" * 100)


class GetsAndSets:
    """A load tool in miniature: a marker key proves the server fresh, then ``n`` gets and
    ``n`` sets of the prefilled keys; reports ``claim`` times the ops it sent."""

    def __init__(self, n: int, claim: int = 1) -> None:
        self.n, self.claim = n, claim
        self.ports: list[int] = []

    def __call__(self, port: int, seconds: int, cpus: Any) -> Any:
        self.ports.append(port)
        assert exchange(port, b"get peers-marker\r\n", b"END\r\n") == b"END\r\n", "not fresh"
        exchange(port, b"set peers-marker 0 0 1\r\n1\r\n", b"STORED\r\n")
        keys = SMALL.names()[: self.n]
        gets = b"".join(b"get %s\r\n" % k for k in keys)
        sets = b"".join(b"set %s 0 0 3\r\nnew\r\n" % k for k in keys)
        exchange(port, gets + sets + b"version\r\n", b"VERSION")
        ops = 2 * self.n + 2
        return tools.ToolRun(1000.0, ops * self.claim, 0.01, 0.5)


def fake_cell(tool: GetsAndSets) -> Any:
    side = peers.Side("fake", SMALL, tool)
    return peers.Cell("fake", "fake", "memcached", 1, side, side)


def test_each_run_gets_a_fresh_prefilled_server_and_its_own_counts() -> None:
    require_binary("memcached", "memcached")
    tool = GetsAndSets(200)
    cell = fake_cell(tool)
    first = peers.measure(cell, cell.ours, 1, 1, CPUS)
    second = peers.measure(cell, cell.peer, 1, 1, CPUS)
    assert len(set(tool.ports)) == 2  # and each saw no marker: a fresh server
    for got in (first, second):
        # 1 marker get + 1 marker set + 200 gets + 200 sets, as the server counted them
        assert got.server_ops == got.tool_ops == 402
        assert got.hit_rate == pytest.approx(200 / 201)  # every prefilled key hit
        assert got.server_us_per_op > 0


def test_a_tool_claiming_more_ops_than_the_server_saw_is_refused() -> None:
    require_binary("memcached", "memcached")
    cell = fake_cell(GetsAndSets(50, claim=2))
    with pytest.raises(tools.BenchError, match="the server counted 102"):
        peers.measure(cell, cell.ours, 1, 1, CPUS)


def test_a_kvbench_round_measured_from_both_ends() -> None:
    require_binary("memcached", "memcached")
    side = peers.kvbench_side("memcached", peers.KVBENCH_KEYS, 1)
    cell = peers.Cell("mc-text-p1", "memcached text, P1", "memcached", 1, side, side)
    got = peers.measure(cell, side, 1, 1, CPUS)
    assert got.hit_rate == 1.0  # prefilled with the keys kvbench reads
    assert 0 < got.tool_ops <= got.server_ops  # the server also saw the warm-up
    assert got.ops_per_s > 0 and got.server_us_per_op > 0 and got.driver
    assert 0 < got.client_cores <= 1.05  # one process, over its measured window


def test_kvbench_connections_draw_distinct_keys(capsys: pytest.CaptureFixture[str]) -> None:
    require_binary("memcached", "memcached")
    side = peers.kvbench_side("memcached", peers.KVBENCH_KEYS, 1)
    found = peers.distinct_keys([peers.Cell("c", "c", "memcached", 1, side, side)], CPUS)
    assert found["kvbench with 1 process(s)"] > 0.97 * tools.expected_distinct(100_000, 10_000)


@pytest.mark.skipif(not shutil.which("memtier_benchmark"), reason="memtier_benchmark not on PATH")
def test_memtier_distinct_client_seed_is_what_spreads_its_keys() -> None:
    """Without the flag its 50 connections write the same 200 keys in 10,000 sets."""
    require_binary("memcached", "memcached")
    found = {}
    for flag in (True, False):
        with tools.server("memcached", 1, CPUS) as srv:
            argv = peers.spread_argv("memtier_benchmark", 1, srv.port)
            if not flag:
                argv.remove("--distinct-client-seed")
            tools.run_tool("memtier", argv, 10)
            found[flag] = srv.counters().items
    assert found[True] > 0.97 * tools.expected_distinct(100_000, 10_000)
    assert found[False] == 200


def test_rss_of_a_failed_run_is_an_error_not_a_figure() -> None:
    rss = bench_module("rss")
    unreachable = f"memcached://127.0.0.1:{tools.free_port()}"
    with pytest.raises(RuntimeError, match="kvbench exited 3"):
        rss.peak_rss_bytes(unreachable, keys=1000, processes=1, seconds=1)


def test_a_gateway_round_counts_memcached_s_ops_and_both_servers_cpu() -> None:
    """nginx + memc in front of memcached: kvbench's round through it, each request one get
    or set at memcached, every get a hit of the prefilled keys; the server CPU is nginx's
    and memcached's."""
    require_binary("nginx", "nginx")
    side = peers.kvbench_side("http+memc", peers.KVBENCH_KEYS, 1, path="/memc")
    cell = peers.Cell("http-p1", "gateway, P1", "gateway", 1, side, side)
    got = peers.measure(cell, side, 1, 1, CPUS)
    assert got.hit_rate == 1.0 and got.driver == "compiled loop"
    assert 0 < got.tool_ops <= got.server_ops  # the server also saw the warm-up
    with tools.gateway(CPUS) as gw:
        gw.prefill(peers.KVBENCH_KEYS)
        before = gw.memcached.counters(), gw.counters()
        side.run(gw.port, 1, CPUS)
        after = gw.memcached.counters(), gw.counters()
    memcached_cpu, both_cpu = ((a - b).cpu_s for a, b in zip(after, before, strict=True))
    assert both_cpu > memcached_cpu > 0  # nginx's CPU is counted besides memcached's


@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk not on PATH (apt-get install wrk)")
def test_a_wrk_round_is_sets_and_gets_in_turn_of_the_key_space() -> None:
    require_binary("nginx", "nginx")
    side = peers.Side("wrk", SMALL, lambda port, s, cpus: tools.wrk(port, SMALL, s, cpus))
    cell = peers.Cell("http-p1-wrk", "gateway, P1 (wrk)", "gateway", 1, side, side)
    got = peers.measure(cell, side, 1, 1, CPUS)
    assert got.hit_rate == 1.0  # every get a key of the prefilled space
    assert 0 < got.tool_ops <= got.server_ops and got.client_us_per_op > 0


@pytest.mark.skipif(not shutil.which("memtier_benchmark"), reason="memtier_benchmark not on PATH")
def test_the_command_cells_send_sets_and_gets_as_templates_on_both_sides() -> None:
    """redis-cmd-p*: kvbench's --command and memtier's --command, a SET then a GET of a
    random key of the prefilled space: Redis's own get and set counts are what each sent."""
    require_binary("redis-server", "redis-server")
    cell = next(c for c in peers.cells()[0] if c.name == "redis-cmd-p1")
    for side in (cell.ours, cell.peer):
        got = peers.measure(cell, side, 1, 1, CPUS)
        assert got.hit_rate == 1.0, side.tool  # every GET a key of the prefilled space
        assert 0 < got.tool_ops <= got.server_ops and got.client_us_per_op > 0, side.tool
        if side.tool == "kvbench":
            assert got.driver == "compiled loop"  # RESP's --command is compiled


def test_a_cluster_prefill_puts_each_key_on_its_slots_master() -> None:
    """The cluster cells' Redis Cluster: each key stored once, on the master whose slots
    hold it (no MOVED in the tools' runs), its counters the masters' added up."""
    require_binary("redis-server", "redis-server")
    with tools.redis_cluster(CPUS) as cluster:
        cluster.prefill(SMALL)
        owned = [int(node.call(b"DBSIZE")) for node in cluster.nodes]
        assert sum(owned) == cluster.counters().items == 1000 and min(owned) > 0
        for node in cluster.nodes:  # each of its keys is in its own slots
            for key in node.call(b"RANDOMKEY"), node.call(b"RANDOMKEY"):
                slot = int(node.call(b"CLUSTER", b"KEYSLOT", key))
                assert int(node.call(b"CLUSTER", b"COUNTKEYSINSLOT", b"%d" % slot)) > 0


@pytest.mark.skipif(not shutil.which("memtier_benchmark"), reason="memtier_benchmark not on PATH")
def test_the_cluster_cells_send_every_key_to_its_master_on_both_sides() -> None:
    """redis-cluster-p*: kvbench's redis+cluster:// and memtier's --cluster-mode against a
    fresh prefilled 3-master cluster: every get a hit, and the masters' own counts, added
    up, what each sent."""
    require_binary("redis-server", "redis-server")
    cell = next(c for c in peers.cells()[0] if c.name == "redis-cluster-p16")
    for side in (cell.ours, cell.peer):
        got = peers.measure(cell, side, 1, 1, CPUS)
        assert got.hit_rate == 1.0, side.tool
        assert 0 < got.tool_ops <= got.server_ops and got.client_us_per_op > 0, side.tool
        if side.tool == "kvbench":
            assert got.driver == "compiled loop"
