"""Shared by the CLI's refusal tests: a server that never answers, to prove nothing
connected to it."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback socket that listens but never accepts: connections queue up in it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.setblocking(False)
        yield sock
