"""Shared fixtures: real servers on free loopback ports, and a TLS certificate for them.

Session-scoped servers are shared by tests that only add keys of their own; tests that
need a clean or private server (stats deltas, stopping the server) use the ``fresh_*``
fixtures.

Every test is marked with its tier, from the folder it is in (``pytest -m unit``):
``unit`` (tests/unit, tests/property and the checks at the top: no server of their own
but the few they start in a fixture, seconds in all), ``integration`` (a component against
a real server) and ``e2e`` (the ``kvbench`` command end to end). ``make check`` runs the
unit tier; ``make test`` all three.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import servers
from tests.support.servers import Server

# Each `kvbench` a test starts is a new interpreter (and so is its fork server): with
# PYTHONDONTWRITEBYTECODE set (some CI images and sandboxes set it) each one compiled
# kvbench's ~160 modules from source again, ~0.8 s of CPU per interpreter, over a thousand
# times a suite. Cached bytecode (gitignored __pycache__) is the same code, read faster.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# tests/<folder>/... -> its tier; a file at the top (test_docs.py) is a unit test.
TIERS = {"unit": "unit", "property": "unit", "integration": "integration", "e2e": "e2e"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its folder's tier."""
    root = Path(__file__).parent
    for item in items:
        parts = item.path.relative_to(root).parts
        tier = TIERS.get(parts[0], "unit") if len(parts) > 1 else "unit"
        item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(scope="session", autouse=True)
def private_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs that save to the default history write under a directory of this session's
    (of each xdist worker's), never the user's ~/.local/share, nor one another's."""
    previous = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
    yield
    if previous is None:
        del os.environ["XDG_DATA_HOME"]
    else:
        os.environ["XDG_DATA_HOME"] = previous


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


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate and its key for 127.0.0.1 (openssl), made per test."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key
