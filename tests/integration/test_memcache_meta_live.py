"""MemcacheMetaCodec against a real memcached on loopback: every op in one pipeline."""

from __future__ import annotations

import socket

import pytest

from kvbench.protocols.base import CodecOptions, Op, ReplyKind
from kvbench.protocols.memcache_meta import MemcacheMetaCodec
from tests.support import memcached_script
from tests.support.codec_checks import Request, run_batches, run_pipeline
from tests.support.memcached_script import KEEP
from tests.support.servers import Server

pytestmark = pytest.mark.integration

K = ReplyKind


@pytest.fixture
def prefix() -> bytes:
    return memcached_script.unique_prefix("meta")


def cas_unique(server: Server, key: bytes) -> int:
    """Read the cas unique of ``key`` with a test-side ``mg <key> c`` (Reply lacks it)."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"mg %s c\r\n" % key)
        data = b""
        while not data.endswith(b"\r\n"):
            data += sock.recv(4096)
    code, flag = data.rstrip(b"\r\n").split(b" ")
    assert code == b"HD" and flag.startswith(b"c")
    return int(flag[1:])


def test_pipeline_of_every_op(memcached_server: Server, prefix: bytes) -> None:
    requests, kinds = memcached_script.every_op(prefix, noop=True)
    codec = MemcacheMetaCodec(KEEP)
    replies = run_pipeline(memcached_server, codec, requests)
    assert [r.kind for r in replies] == kinds
    memcached_script.check_every_op(replies, memcached_server)
    assert codec.quiet_failures == 0


def test_cas_with_the_current_unique_stores(memcached_server: Server, prefix: bytes) -> None:
    key = prefix + b"cas"
    codec = MemcacheMetaCodec(KEEP)
    assert [r.kind for r in run_pipeline(memcached_server, codec, [(Op.SET, key, b"1", 0)])] == [
        K.STORED
    ]
    memcached_script.cas_round_trip(memcached_server, codec, key, cas_unique(memcached_server, key))


def test_quiet_pipeline_counts_failures_and_keeps_replies_aligned(
    memcached_server: Server, prefix: bytes
) -> None:
    x, y, n, missing = prefix + b"x", prefix + b"y", prefix + b"n", prefix + b"missing"
    codec = MemcacheMetaCodec(CodecOptions(keep_payload=True, noreply=True))
    requests: list[Request] = [
        (Op.SET, x, b"one", 0),
        (Op.SET, y, b"two", 0),
        (Op.ADD, x, b"fails: NS", 0),
        (Op.SET, n, b"1", 0),
        (Op.INCR, n, None, 41),
        (Op.DELETE, y, None, 0),
        (Op.DELETE, missing, None, 0),  # fails: NF
        (Op.TOUCH, x, None, 300),  # never quiet: TOUCHED
        (Op.MGET, [x, y, n], None, 0),
        (Op.REPLACE, missing, b"fails: NS", 0),
        (Op.GET, y, None, 0),
    ]
    replies = run_pipeline(memcached_server, codec, requests)
    assert [(r.kind, r.keys, r.payload) for r in replies] == [
        (K.TOUCHED, 0, None),
        (K.HIT, 2, b"one42"),
        (K.MISS, 0, None),
    ]
    assert codec.quiet_failures == 3


def test_large_value_arrives_over_many_reads(memcached_server: Server, prefix: bytes) -> None:
    hit = memcached_script.large_value(memcached_server, MemcacheMetaCodec(KEEP), prefix + b"big")
    assert hit.nbytes == len(b"VA 512000 O1\r\n") + 512000 + 2


def test_batch_paths_against_the_server(memcached_server: Server, prefix: bytes) -> None:
    ops, keys, values, kinds = memcached_script.batch(prefix, noop=True)
    assert run_batches(memcached_server, MemcacheMetaCodec(), ops, keys, values) == kinds
    replies = run_pipeline(memcached_server, MemcacheMetaCodec(KEEP), [(Op.GET, keys[3], None, 0)])
    assert replies[0].payload == b"10"  # +1 -1
