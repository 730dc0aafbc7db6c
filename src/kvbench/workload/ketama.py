"""Ketama consistent hashing, placing keys as twemproxy (nutcracker) does with
``distribution: ketama`` and ``hash: md5``.

Each server gets 160 points per unit of weight on a 32-bit ring (40 MD5 digests of
``"<name>-<i>"``, four points from each); a key goes to the first point at or after the
MD5 hash of the key, wrapping around. Server names default to ``host:port``, as in
nutcracker's config. (libmemcached names a server on the default port 11211 by its host
alone, so its placement differs for such servers; give names explicitly to match it.)
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence

# twemproxy nc_ketama.c: KETAMA_POINTS_PER_SERVER 160, 4 points per MD5 digest.
POINTS_PER_SERVER = 160
POINTS_PER_HASH = 4


def md5_point(data: bytes, alignment: int = 0) -> int:
    """Bytes ``4*alignment .. 4*alignment+3`` of MD5(data) as a little-endian uint32."""
    digest = hashlib.md5(data, usedforsecurity=False).digest()
    return int.from_bytes(digest[alignment * 4 : alignment * 4 + 4], "little")


class KetamaRing:
    """A continuum of server points.

    Args:
        names: server names (``host:port``), in the order their indexes are reported.
        weights: relative weights (default all 1).
    """

    def __init__(self, names: Sequence[str], weights: Sequence[int] | None = None) -> None:
        if not names:
            raise ValueError("a ring needs at least one server")
        weights = list(weights) if weights is not None else [1] * len(names)
        total = sum(weights)
        points: list[tuple[int, int]] = []
        for index, (name, weight) in enumerate(zip(names, weights, strict=True)):
            share = weight / total * POINTS_PER_SERVER / POINTS_PER_HASH * len(names)
            per_server = int(share + 1e-10) * POINTS_PER_HASH
            for pointer in range(per_server // POINTS_PER_HASH):
                label = f"{name}-{pointer}".encode()
                for alignment in range(POINTS_PER_HASH):
                    points.append((md5_point(label, alignment), index))
        points.sort()
        self._values = [value for value, _ in points]
        self._servers = [server for _, server in points]
        self.names = tuple(names)

    def server_for(self, key: bytes) -> int:
        """The index of the server ``key`` is placed on."""
        position = bisect.bisect_left(self._values, md5_point(key))
        if position == len(self._values):
            position = 0
        return self._servers[position]

    def partition(self, keys: Sequence[bytes]) -> list[list[int]]:
        """Key indexes grouped by server: ``result[s]`` holds the keys placed on server s."""
        groups: list[list[int]] = [[] for _ in self.names]
        for i, key in enumerate(keys):
            groups[self.server_for(key)].append(i)
        return groups
