"""Redis Cluster placement: key -> hash slot -> master, as the cluster itself places keys.

A key's slot is CRC16(key) mod 16384, where CRC16 is the XMODEM variant (poly 0x1021, init
0, no reflection: ``binascii.crc_hqx`` computes exactly it, in C) and, when the key holds a
hash tag, only the tag is hashed (the Redis Cluster specification, "Key distribution model"
and "Hash tags"). ``SlotMap`` says which master serves each slot, as discovered before the
run; ``SlotPlacement`` is one worker's live copy, which a ``MOVED`` redirect updates, and
groups the workload's keys by the master that serves them, like ``ketama`` does for
sharded memcached.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvbench.config.targets import hash_tag
from kvbench.protocols.resp_cluster import SLOTS, Master

# The owner of a slot no master serves.
NO_NODE = -1


def key_slot(key: bytes) -> int:
    """The hash slot of ``key`` (0..16383): CRC16-XMODEM of its hash tag, mod 16384."""
    return binascii.crc_hqx(hash_tag(key), 0) & (SLOTS - 1)


def key_slots(keys: Iterable[bytes]) -> npt.NDArray[np.int64]:
    """The slot of every key, in order."""
    crc = binascii.crc_hqx
    mask = SLOTS - 1
    return np.fromiter(
        (crc(hash_tag(k) if b"{" in k else k, 0) & mask for k in keys), dtype=np.int64
    )


def shared_tag(keys: Iterable[bytes]) -> bool:
    """All ``keys`` share one hash slot (so a multi-key command may name any of them)."""
    slots = {key_slot(k) for k in keys}
    return len(slots) <= 1


@dataclass(frozen=True, slots=True)
class SlotMap:
    """Which master serves each slot: the cluster as discovered before a run.

    Attributes:
        nodes: each master's (host, port), in the order the run reports them.
        owners: per slot, the index in ``nodes`` of its master, or ``NO_NODE``.
    """

    nodes: tuple[tuple[str, int], ...]
    owners: tuple[int, ...]

    @classmethod
    def from_masters(cls, masters: Sequence[Master], default_host: str) -> SlotMap:
        """The map a CLUSTER SHARDS/SLOTS reply describes, masters in slot order.

        Args:
            masters: from ``parse_cluster_shards``/``parse_cluster_slots``.
            default_host: the host of the node that was asked, for masters whose host it
                left empty ("the host you asked").

        Raises:
            ValueError: two masters claim one slot.
        """
        owners = [NO_NODE] * SLOTS
        nodes: list[tuple[str, int]] = []
        # Masters in slot order (the replies' order is not stable), those without slots last.
        for master in sorted(masters, key=lambda m: (min(m.ranges, default=(SLOTS,)), m.port)):
            address = (master.host or default_host, master.port)
            if address in nodes:
                index = nodes.index(address)
            else:
                index = len(nodes)
                nodes.append(address)
            for start, end in master.ranges:
                for slot in range(start, end + 1):
                    if owners[slot] not in (NO_NODE, index):
                        raise ValueError(f"slot {slot} is claimed by two masters")
                    owners[slot] = index
        return cls(tuple(nodes), tuple(owners))

    def reindexed(self, nodes: Sequence[tuple[str, int]]) -> SlotMap:
        """The same map with its masters in the order ``nodes`` gives (the same masters).

        Raises:
            ValueError: ``nodes`` are not this map's masters.
        """
        if sorted(nodes) != sorted(self.nodes):
            raise ValueError("not the same masters")
        index = [list(nodes).index(node) for node in self.nodes]
        owners = tuple(NO_NODE if o == NO_NODE else index[o] for o in self.owners)
        return SlotMap(tuple(nodes), owners)

    def node_index(self, host: str, port: int) -> int | None:
        """The index of the master at ``host:port``, or None when the map has none there."""
        try:
            return self.nodes.index((host, port))
        except ValueError:
            return None

    def unserved(self) -> list[tuple[int, int]]:
        """The ranges of slots no master serves (a cluster with any is down)."""
        ranges: list[tuple[int, int]] = []
        for slot, owner in enumerate(self.owners):
            if owner != NO_NODE:
                continue
            if ranges and ranges[-1][1] == slot - 1:
                ranges[-1] = (ranges[-1][0], slot)
            else:
                ranges.append((slot, slot))
        return ranges

    def slot_counts(self) -> list[int]:
        """How many slots each master serves."""
        counts = [0] * len(self.nodes)
        for owner in self.owners:
            if owner != NO_NODE:
                counts[owner] += 1
        return counts


class SlotPlacement:
    """One worker's live slot map, and its keys grouped by the master serving them.

    Args:
        slot_map: the map discovered before the run.
        tables: the key tables to place (the workload's keys, its counter keys).
    """

    def __init__(self, slot_map: SlotMap, tables: Sequence[Sequence[bytes]]) -> None:
        self.nodes = slot_map.nodes
        self.node_index = slot_map.node_index
        self.owners = np.array(slot_map.owners, dtype=np.int64)
        self._slots = [key_slots(table) for table in tables]

    def owner(self, slot: int) -> int:
        """The master serving ``slot`` now (``NO_NODE`` when none)."""
        return int(self.owners[slot])

    def move(self, slot: int, node: int) -> int:
        """``slot`` is served by ``node`` from now on (a MOVED said so).

        Returns:
            The master that served it before (the same ``node`` when nothing changed).
        """
        before = int(self.owners[slot])
        self.owners[slot] = node
        return before

    def indexes(self, node: int) -> list[list[int]]:
        """Per table, the indexes of the keys that ``node`` serves, in table order."""
        owners = self.owners
        return [np.flatnonzero(owners[slots] == node).tolist() for slots in self._slots]
