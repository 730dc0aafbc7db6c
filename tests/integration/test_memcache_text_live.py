"""MemcacheTextCodec against a real memcached on loopback: every op in one pipeline."""

from __future__ import annotations

import socket

import pytest

from kvbench.protocols.base import CodecOptions, Op, ReplyKind
from kvbench.protocols.memcache_text import MemcacheTextCodec
from tests.support import memcached_script
from tests.support.codec_checks import Request, run_batches, run_pipeline
from tests.support.memcached_script import KEEP
from tests.support.servers import Server

pytestmark = pytest.mark.integration

K = ReplyKind


@pytest.fixture
def prefix() -> bytes:
    return memcached_script.unique_prefix("text")


def cas_unique(server: Server, key: bytes) -> int:
    """Read the cas unique of ``key`` with a test-side ``gets`` (Reply does not carry it)."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"gets %s\r\n" % key)
        data = b""
        while not data.endswith(b"END\r\n"):
            data += sock.recv(4096)
    header = data.split(b"\r\n", 1)[0].split(b" ")
    assert header[:2] == [b"VALUE", key]
    return int(header[4])


def test_pipeline_of_every_op(memcached_server: Server, prefix: bytes) -> None:
    requests, kinds = memcached_script.every_op(prefix, noop=False)  # no text form of NOOP
    replies = run_pipeline(memcached_server, MemcacheTextCodec(KEEP), requests)
    assert [r.kind for r in replies] == kinds
    memcached_script.check_every_op(replies, memcached_server)


def test_cas_with_the_current_unique_stores(memcached_server: Server, prefix: bytes) -> None:
    key = prefix + b"cas"
    codec = MemcacheTextCodec(KEEP)
    assert [r.kind for r in run_pipeline(memcached_server, codec, [(Op.SET, key, b"1", 0)])] == [
        K.STORED
    ]
    memcached_script.cas_round_trip(memcached_server, codec, key, cas_unique(memcached_server, key))


def test_noreply_pipeline_keeps_replies_aligned(memcached_server: Server, prefix: bytes) -> None:
    x, y, n = prefix + b"x", prefix + b"y", prefix + b"n"
    codec = MemcacheTextCodec(CodecOptions(keep_payload=True, noreply=True))
    requests: list[Request] = [
        (Op.SET, x, b"one", 0),
        (Op.SET, y, b"two", 0),
        (Op.ADD, x, b"not stored, silently", 0),
        (Op.SET, n, b"1", 0),
        (Op.INCR, n, None, 41),
        (Op.DELETE, y, None, 0),
        (Op.TOUCH, x, None, 300),
        (Op.MGET, [x, y, n], None, 0),
        (Op.GET, y, None, 0),
    ]
    replies = run_pipeline(memcached_server, codec, requests)
    assert [(r.kind, r.keys, r.payload) for r in replies] == [
        (K.HIT, 2, b"one42"),
        (K.MISS, 0, None),
    ]


def test_large_value_arrives_over_many_reads(memcached_server: Server, prefix: bytes) -> None:
    key = prefix + b"big"
    hit = memcached_script.large_value(memcached_server, MemcacheTextCodec(KEEP), key)
    assert hit.nbytes == len(b"VALUE %s 0 512000\r\n" % key) + 512000 + 7


def test_batch_paths_against_the_server(memcached_server: Server, prefix: bytes) -> None:
    ops, keys, values, kinds = memcached_script.batch(prefix, noop=False)
    assert run_batches(memcached_server, MemcacheTextCodec(), ops, keys, values) == kinds
    replies = run_pipeline(memcached_server, MemcacheTextCodec(KEEP), [(Op.GET, keys[3], None, 0)])
    assert replies[0].payload == b"10"  # +1 -1
