"""Ketama placement checked against a real nutcracker (twemproxy) over two memcached."""

from __future__ import annotations

import socket

import pytest

from kvbench.workload.ketama import KetamaRing
from tests.support import servers
from tests.support.servers import Server

pytestmark = pytest.mark.integration

KEYS = [b"kvbench:%d" % i for i in range(400)]


def request(server: Server, payload: bytes, replies: int) -> bytes:
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(payload)
        data = b""
        while data.count(b"END\r\n") + data.count(b"STORED\r\n") < replies:
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            data += chunk
        return data


def test_keys_written_through_nutcracker_are_where_the_ring_says_and_back() -> None:
    with servers.memcached() as a, servers.memcached() as b:
        backends = [a, b]
        ring = KetamaRing([s.address for s in backends])
        with servers.nutcracker(backends) as proxy:
            request(proxy, b"".join(b"set %s 0 0 1\r\nx\r\n" % k for k in KEYS), len(KEYS))
            for index, backend in enumerate(backends):
                found = request(backend, b"".join(b"get %s\r\n" % k for k in KEYS), len(KEYS))
                held = {
                    line.split()[1] for line in found.split(b"\r\n") if line.startswith(b"VALUE")
                }
                assert held == {k for k in KEYS if ring.server_for(k) == index}
            assert 0 < sum(ring.server_for(k) for k in KEYS) < len(KEYS)  # both servers used
            # the reverse: written directly where the ring says, found through the proxy
            others = [b"direct:%d" % i for i in range(200)]
            for key in others:
                request(backends[ring.server_for(key)], b"set %s 0 0 1\r\ny\r\n" % key, 1)
            found = request(proxy, b"".join(b"get %s\r\n" % k for k in others), len(others))
            assert found.count(b"VALUE ") == len(others)
