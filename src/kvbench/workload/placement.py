"""Where a key goes among several memcached servers: ketama or python-memcached's modula.

``ketama`` is twemproxy's consistent hashing (workload/ketama.py). ``modula-crc32`` is
how python-memcached (``memcache.Client``) places a key: ``crc32(key)``, bits 16..30
(``(crc >> 16) & 0x7fff``, and 1 where that is 0: its ``cmemcache_hash``), modulo the
number of servers (each of weight 1), so an old Python benchmark's split across its
servers can be reproduced. Both give a server index in the order the servers were given.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Protocol

from kvbench.config.workload_fields import PLACEMENTS
from kvbench.workload.ketama import KetamaRing

__all__ = ["PLACEMENTS", "ModulaCrc32", "Placement", "cmemcache_hash", "placement_for"]


class Placement(Protocol):
    """Puts a key on one of ``names`` (its index)."""

    names: tuple[str, ...]

    def server_for(self, key: bytes) -> int: ...

    def partition(self, keys: Sequence[bytes]) -> list[list[int]]: ...


def cmemcache_hash(key: bytes) -> int:
    """python-memcached's key hash: 15 bits of CRC-32, never 0."""
    return ((zlib.crc32(key) >> 16) & 0x7FFF) or 1


class ModulaCrc32:
    """python-memcached's placement: ``cmemcache_hash(key) % len(servers)``."""

    def __init__(self, names: Sequence[str]) -> None:
        if not names:
            raise ValueError("a placement needs at least one server")
        self.names = tuple(names)

    def server_for(self, key: bytes) -> int:
        """The index of the server ``key`` is placed on."""
        return cmemcache_hash(key) % len(self.names)

    def partition(self, keys: Sequence[bytes]) -> list[list[int]]:
        """Key indexes grouped by server: ``result[s]`` holds the keys placed on server s."""
        groups: list[list[int]] = [[] for _ in self.names]
        count = len(self.names)
        for i, key in enumerate(keys):
            groups[cmemcache_hash(key) % count].append(i)
        return groups


def placement_for(kind: str, names: Sequence[str]) -> Placement:
    """The placement called ``kind`` (one of ``PLACEMENTS``) over servers ``names``."""
    if kind == "modula-crc32":
        return ModulaCrc32(names)
    return KetamaRing(names)
