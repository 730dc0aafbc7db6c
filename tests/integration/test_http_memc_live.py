"""HttpMemcCodec against real nginx + memc in front of a real memcached, on loopback."""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from kvbench.config.targets import parse_target
from kvbench.errors import TargetUnreachable
from kvbench.protocols.base import KEYS_SHIFT, NEED_DATA, CodecOptions, Op, Reply, ReplyKind
from kvbench.protocols.http1 import HttpMemcCodec, host_header, url_safe_value
from kvbench.runner import probe
from tests.support import servers
from tests.support.servers import Server

pytestmark = pytest.mark.integration

K = ReplyKind


@pytest.fixture(scope="module")
def gateway(memcached_server: Server) -> Iterator[Server]:
    with servers.nginx_memc(memcached_server) as server:
        yield server


@pytest.fixture
def private_gateway(fresh_memcached: Server) -> Iterator[Server]:
    """A gateway in front of a memcached of its own (the test stops or pauses it)."""
    with servers.nginx_memc(fresh_memcached) as server:
        yield server


@pytest.fixture
def prefix() -> bytes:
    """A key prefix no other test uses: the memcached is shared by the whole session."""
    return b"http:%s:" % uuid.uuid4().hex[:12].encode()


def make(server: Server, **options: object) -> HttpMemcCodec:
    return HttpMemcCodec(
        CodecOptions(**options),  # type: ignore[arg-type]
        path=str(server.extra["path"]),
        host=host_header(server.host, server.port),
    )


def exchange(
    server: Server, codec: HttpMemcCodec, write: Callable[[bytearray], int]
) -> list[Reply]:
    """Send what ``write`` encodes in one write; read until every announced reply is parsed."""
    out = bytearray()
    announced = write(out)
    replies: list[Reply] = []
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(out)
        while len(replies) < announced:
            data = sock.recv(65536)
            if not data:
                codec.feed_eof()
            else:
                codec.feed(data)
            while (reply := codec.next_reply()) is not NEED_DATA:
                assert isinstance(reply, Reply)
                replies.append(reply)
    return replies


def one(
    server: Server,
    codec: HttpMemcCodec,
    op: Op,
    key: bytes,
    value: bytes | None = None,
    arg: int = 0,
) -> Reply:
    [reply] = exchange(server, codec, lambda out: codec.encode(op, key, value, out, arg))
    return reply


def test_every_reply_kind(gateway: Server, prefix: bytes) -> None:
    codec = make(gateway, keep_payload=True)
    key, counter = prefix + b"k", prefix + b"n"
    value = bytes(range(256))
    assert one(gateway, codec, Op.GET, key).kind == K.MISS
    assert one(gateway, codec, Op.SET, key, value).kind == K.STORED
    hit = one(gateway, codec, Op.GET, key)
    assert (hit.kind, hit.keys, hit.payload) == (K.HIT, 1, url_safe_value(value))
    assert one(gateway, codec, Op.ADD, key, b"x").kind == K.NOT_STORED
    assert one(gateway, codec, Op.REPLACE, prefix + b"none", b"x").kind == K.NOT_STORED
    assert one(gateway, codec, Op.APPEND, key, b"tail").kind == K.STORED
    assert one(gateway, codec, Op.DELETE, key).kind == K.DELETED
    assert one(gateway, codec, Op.DELETE, key).kind == K.NOT_FOUND
    assert one(gateway, codec, Op.INCR, counter, arg=1).kind == K.NOT_FOUND
    assert one(gateway, codec, Op.SET, counter, b"41").kind == K.STORED
    incr = one(gateway, codec, Op.INCR, counter, arg=1)
    assert (incr.kind, incr.payload) == (K.VALUE, b"42")
    assert one(gateway, codec, Op.DECR, counter, arg=2).payload == b"40"
    stats = one(gateway, codec, Op.STATS, b"")
    assert stats.kind == K.VALUE and b"cmd_get " in (stats.payload or b"")
    [version] = exchange(gateway, codec, codec.encode_version)
    assert version.kind == K.VALUE and (version.payload or b"").startswith(b"VERSION 1.")
    assert codec.server_software.startswith("nginx/")


def test_ttl_reaches_memcached(gateway: Server, prefix: bytes) -> None:
    # memcached's clock ticks in whole seconds: a key set with a TTL of 2 s lives more
    # than 1 s and less than 3 s. (A TTL of 1 s could expire before the get right after
    # the set, when the clock ticked between them: CI saw that miss once.)
    codec = make(gateway, ttl_s=2)
    assert one(gateway, codec, Op.SET, prefix + b"t", b"v").kind == K.STORED
    assert one(gateway, codec, Op.GET, prefix + b"t").kind == K.HIT
    # it expires within 3 s: wait for that; a TTL not sent, or sent as 5 s or more, fails
    deadline = time.monotonic() + 4.5
    while one(gateway, codec, Op.GET, prefix + b"t").kind == K.HIT:
        assert time.monotonic() < deadline, "a 2 s TTL did not expire in 4.5 s"
        time.sleep(0.05)


def test_a_value_too_long_for_a_url_is_an_error_reply(gateway: Server, prefix: bytes) -> None:
    # nginx's large_client_header_buffers (4 x 8k) bound the request line.
    reply = one(gateway, make(gateway), Op.SET, prefix + b"big", b"x" * 10_000)
    assert reply.kind == K.ERROR_REPLY
    assert reply.payload == b"HTTP/1.1 414 Request-URI Too Large"


def test_batch_path_pipelined(gateway: Server, prefix: bytes) -> None:
    codec = make(gateway)
    n = 300
    ops = [int(Op.SET), int(Op.GET), int(Op.DELETE)] * (n // 3)
    keys = [prefix + b"%d" % (i // 3) for i in range(n)]
    values = [memoryview(b"value-%d" % i) for i in range(n)]
    out = bytearray()
    codec.encode_many(ops, keys, values, 0, n, out)
    kinds: list[int] = []
    with socket.create_connection((gateway.host, gateway.port), timeout=10) as sock:
        sock.sendall(out)
        while len(kinds) < n:
            codec.feed(sock.recv(65536))
            codec.read_kinds(kinds)
    expected = [int(K.STORED), int(K.HIT) | 1 << KEYS_SHIFT, int(K.DELETED)] * (n // 3)
    assert kinds == expected


def test_stopped_memcached_gives_502(private_gateway: Server) -> None:
    codec = make(private_gateway)
    assert one(private_gateway, codec, Op.SET, b"k", b"v").kind == K.STORED
    private_gateway.extra["memcached"].stop()  # type: ignore[union-attr]
    for op in (Op.GET, Op.SET):
        reply = one(private_gateway, codec, op, b"k", b"v")
        assert (reply.kind, reply.payload) == (K.ERROR_REPLY, b"HTTP/1.1 502 Bad Gateway")


def test_paused_memcached_gives_504(private_gateway: Server) -> None:
    memcached = private_gateway.extra["memcached"]
    assert isinstance(memcached, Server)
    codec = make(private_gateway)
    os.kill(memcached.proc.pid, signal.SIGSTOP)
    try:
        reply = one(private_gateway, codec, Op.GET, b"k")  # memc_read_timeout is 1s
    finally:
        os.kill(memcached.proc.pid, signal.SIGCONT)
    assert (reply.kind, reply.payload) == (K.ERROR_REPLY, b"HTTP/1.1 504 Gateway Time-out")


def test_probe_records_nginx_and_memcached_versions(gateway: Server) -> None:
    memcached = gateway.extra["memcached"]
    assert isinstance(memcached, Server)
    url = f"http+memc://{gateway.address}/memc"
    stats = probe.fetch_stats(parse_target(url))
    assert stats == {"gateway_version": stats["gateway_version"]}
    version = probe.server_version(stats)
    assert version.startswith("nginx/") and ", memcached 1." in version
    assert probe.sample(parse_target(url))["stats"] == {}
    backed = parse_target(f"{url}?stats=memcached://{memcached.address}")
    assert int(probe.fetch_stats(backed)["cmd_get"]) >= 0
    assert "cmd_set" in probe.sample(backed)["stats"]
    assert probe.fetch_settings(backed)["maxconns"]


def test_probe_failures_are_one_line(gateway: Server, private_gateway: Server) -> None:
    with pytest.raises(TargetUnreachable, match="404 Not Found"):
        probe.fetch_stats(parse_target(f"http+memc://{gateway.address}/elsewhere"))
    private_gateway.extra["memcached"].stop()  # type: ignore[union-attr]
    with pytest.raises(TargetUnreachable, match=r"answered \?cmd=version with HTTP/1\.1 502"):
        probe.fetch_stats(parse_target(f"http+memc://{private_gateway.address}/memc"))
    port = servers.free_port()
    with pytest.raises(TargetUnreachable, match="connection refused"):
        probe.fetch_stats(parse_target(f"http+memc://127.0.0.1:{port}/memc"))
