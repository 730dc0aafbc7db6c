"""Shared fixtures: real servers on free loopback ports.

Session-scoped servers are shared by tests that only add keys of their own; tests that
need a clean or private server (stats deltas, stopping the server) use the ``fresh_*``
fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import servers
from tests.support.servers import Server


@pytest.fixture(scope="session")
def memcached_server() -> Iterator[Server]:
    with servers.memcached() as server:
        yield server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Server]:
    with servers.redis() as server:
        yield server


@pytest.fixture
def fresh_memcached() -> Iterator[Server]:
    with servers.memcached() as server:
        yield server


@pytest.fixture
def fresh_redis() -> Iterator[Server]:
    with servers.redis() as server:
        yield server
