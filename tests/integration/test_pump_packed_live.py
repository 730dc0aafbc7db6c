"""A compiled pump fed packed chunks (a replay's lane's form) against real servers.

Over a real socket to memcached (text, meta, binary) and Redis: the replies the pump
accounts, and the servers' own counters, equal the requests of the chunks, from each
chunk's start; each chunk's stores carry its TTL (the server says so).
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from kvbench.engine import fastpath
from kvbench.protocols.base import KEYS_SHIFT, Op, ReplyKind
from tests.support import pump_oracle, servers
from tests.support.redis_cluster import Node
from tests.support.servers import Server

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

pytestmark = pytest.mark.integration

K = ReplyKind
HIT = int(K.HIT) | 1 << KEYS_SHIFT
SCHEMES = {
    "memcache-text": "memcached",
    "memcache-meta": "memcached+meta",
    "memcache-binary": "memcached+binary",
    "resp2": "redis",
}


def keys(prefix: str, n: int) -> list[bytes]:
    return [b"pk:%s:%d" % (prefix.encode(), i) for i in range(n)]


def lane(protocol: str) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Three packed chunks and the reply code of each request sent: 20 sets (ttl 60); two
    gets before the start, then 20 hits and 10 misses; 5 adds of present keys, 5 of new
    ones (ttl 0), 5 deletes, an append."""
    stored, missing = keys(protocol, 20), keys(protocol + "-miss", 10)
    new = keys(protocol + "-new", 5)
    sets = pump_oracle.pack([int(Op.SET)] * 20, stored, [b"v%d" % i * i for i in range(20)], 0, 60)
    gets = [int(Op.GET)] * 32
    read_keys = [b"skipped", b"skipped", *stored, *missing]
    reads = pump_oracle.pack(gets, read_keys, [None] * 32, 2, 0, "bytes", 7)
    ops = [int(Op.ADD)] * 10 + [int(Op.DELETE)] * 5 + [int(Op.APPEND)]
    names = [*stored[:5], *new, *stored[10:15], stored[15]]
    values = [b"a"] * 10 + [None] * 5 + [b"+"]
    writes = pump_oracle.pack(ops, names, values, 0, 0, "array", 3)
    expected = (
        [int(K.STORED)] * 20 + [HIT] * 20 + [int(K.MISS)] * 10 + [int(K.NOT_STORED)] * 5
        + [int(K.STORED)] * 5 + [int(K.DELETED)] * 5 + [int(K.STORED)]
    )  # fmt: skip
    return [sets, reads, writes], expected


def drive(server: Server, protocol: str, chunks: list[tuple[Any, ...]]) -> list[int]:
    """Send the chunks through a closed-loop pump (a pipeline of 16) on a real socket, read
    until every request is answered; the codes accounted."""
    number, families = fastpath.PROTOCOLS[protocol]
    tally = _pump.Tally()
    tally.issuing = True
    queue = iter(chunks)
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        stream = _pump.Stream(
            lambda: next(queue, None), number, **pump_oracle.stream_frame(protocol)
        )
        pump = _pump.Pump(tally, stream, sock.sendall, number, families, 1 << 20)
        pump.issue(16)
        while pump.inflight:  # each read sends as many: bounded by the chunks' requests
            data = sock.recv(1 << 16)
            assert data, "the server closed the connection"
            assert pump.received(data) != 2, pump.error
    _, codes, _ = (memoryview(b).cast("q").tolist() for b in tally.take())
    return codes


def grew(before: dict[str, int], after: dict[str, int], *names: str) -> dict[str, int]:
    return {name: after.get(name, 0) - before.get(name, 0) for name in names}


def memcached_ttl(server: Server, key: bytes) -> int:
    """The remaining TTL memcached gives ``key`` (meta ``mg <key> t``; -1: none)."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"mg %s t\r\n" % key)
        data = b""
        while not data.endswith(b"\r\n"):
            data += sock.recv(4096)
    code, flag = data.split()
    assert code == b"HD" and flag.startswith(b"t"), data
    return int(flag[1:])


@pytest.mark.parametrize("protocol", ["memcache-text", "memcache-meta", "memcache-binary"])
def test_memcached_counts_the_packed_requests_sent(fresh_memcached: Server, protocol: str) -> None:
    chunks, expected = lane(protocol)
    url = f"{SCHEMES[protocol]}://{fresh_memcached.address}"
    before = servers.counters(url)
    assert drive(fresh_memcached, protocol, chunks) == expected
    after = servers.counters(url)
    assert grew(before, after, "cmd_set", "cmd_get", "get_hits", "get_misses", "delete_hits") == {
        "cmd_set": 20 + 10 + 1,  # sets, adds (stored or not), the append
        "cmd_get": 30,  # not the two before the chunk's start
        "get_hits": 20,
        "get_misses": 10,
        "delete_hits": 5,
    }
    assert 55 <= memcached_ttl(fresh_memcached, keys(protocol, 20)[0]) <= 60
    assert memcached_ttl(fresh_memcached, keys(protocol + "-new", 5)[0]) == -1


def test_redis_counts_the_packed_requests_sent(fresh_redis: Server) -> None:
    chunks, expected = lane("resp2")
    url = f"redis://{fresh_redis.address}"
    before = servers.counters(url)
    assert drive(fresh_redis, "resp2", chunks) == expected
    after = servers.counters(url)
    assert grew(
        before, after, "set", "get", "del", "append", "keyspace_hits", "keyspace_misses"
    ) == {
        "set": 20 + 10,  # the adds are SET NX
        "get": 30,
        "del": 5,
        "append": 1,
        "keyspace_hits": 20,
        "keyspace_misses": 10,
    }
    node = Node(fresh_redis)
    assert 55 <= node.call("TTL", keys("resp2", 20)[0]) <= 60
    assert node.call("TTL", keys("resp2-new", 5)[0]) == -1
