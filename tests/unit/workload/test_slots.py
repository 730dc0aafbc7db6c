"""Redis Cluster placement: CRC16 and hash tags as the specification gives them, slot maps."""

from __future__ import annotations

import pytest

from kvbench.config.targets import hash_tag
from kvbench.protocols.resp_cluster import Master
from kvbench.workload.slots import (
    NO_NODE,
    SlotMap,
    SlotPlacement,
    key_slot,
    key_slots,
    shared_tag,
)


def test_crc16_is_xmodem_with_the_specifications_check_value() -> None:
    # The Redis Cluster specification: 'Output for "123456789": 31C3'.
    import binascii

    assert binascii.crc_hqx(b"123456789", 0) == 0x31C3
    assert key_slot(b"123456789") == 0x31C3 & 16383


@pytest.mark.parametrize(
    ("key", "slot"),
    [
        # CLUSTER KEYSLOT's page: "somekey" 11058, and two keys sharing the tag "hash_tag".
        (b"somekey", 11058),
        (b"foo{hash_tag}", 2515),
        (b"bar{hash_tag}", 2515),
        # The slot of "foo" (asked of a real node: tests/integration/test_redis_cluster.py
        # compares thousands more).
        (b"foo", 12182),
    ],
)
def test_slots_of_the_command_pages_examples(key: bytes, slot: int) -> None:
    assert key_slot(key) == slot


@pytest.mark.parametrize(
    ("key", "hashed"),
    [
        # The specification's examples, "Hash tags".
        (b"{user1000}.following", b"user1000"),
        (b"{user1000}.followers", b"user1000"),
        (b"foo{}{bar}", b"foo{}{bar}"),  # nothing between the first { and }: whole key
        (b"foo{{bar}}zap", b"{bar"),  # from the first { to the first } after it
        (b"foo{bar}{zap}", b"bar"),  # only the first tag
        (b"plain", b"plain"),
        (b"open{only", b"open{only"),
        (b"}{x}", b"x"),  # a } before the first { does not close anything
    ],
)
def test_hash_tag_rules(key: bytes, hashed: bytes) -> None:
    assert hash_tag(key) == hashed
    assert key_slot(key) == key_slot(hashed)


def test_key_slots_equals_key_slot_for_every_key() -> None:
    keys = [b"kvbench:%d" % i for i in range(500)] + [b"{t}%d" % i for i in range(5)]
    assert key_slots(keys).tolist() == [key_slot(k) for k in keys]


def test_shared_tag() -> None:
    assert shared_tag([b"{user}:1", b"{user}:2", b"x{user}"])
    assert not shared_tag([b"user:1", b"user:2"])


def masters() -> list[Master]:
    return [
        Master("10.0.0.1", 7000, ((0, 99), (101, 8191))),
        Master("", 7001, ((100, 100), (8192, 16383))),
        Master("10.0.0.3", 7002, ()),
    ]


def test_slot_map_from_masters() -> None:
    slot_map = SlotMap.from_masters(masters()[::-1], default_host="10.0.0.9")
    # in slot order, whatever the reply's order; a master without slots last
    assert slot_map.nodes == (("10.0.0.1", 7000), ("10.0.0.9", 7001), ("10.0.0.3", 7002))
    assert slot_map.owners[99] == 0 and slot_map.owners[100] == 1 and slot_map.owners[101] == 0
    assert slot_map.slot_counts() == [8191, 8193, 0]
    assert slot_map.unserved() == []
    assert slot_map.node_index("10.0.0.9", 7001) == 1
    assert slot_map.node_index("10.0.0.9", 7000) is None


def test_unserved_slots_are_reported_as_ranges() -> None:
    slot_map = SlotMap.from_masters([Master("h", 1, ((0, 9), (20, 16380)))], "h")
    assert slot_map.unserved() == [(10, 19), (16381, 16383)]
    assert slot_map.owners[15] == NO_NODE


def test_two_masters_claiming_a_slot_are_refused() -> None:
    with pytest.raises(ValueError, match="slot 5"):
        SlotMap.from_masters([Master("a", 1, ((0, 5),)), Master("b", 1, ((5, 16383),))], "h")


def test_placement_groups_keys_by_master_and_follows_a_move() -> None:
    slot_map = SlotMap.from_masters(masters(), default_host="10.0.0.9")
    keys = [b"k%d" % i for i in range(2000)]
    counters = [b"c%d" % i for i in range(50)]
    placement = SlotPlacement(slot_map, [keys, counters])
    groups = [placement.indexes(node) for node in range(3)]
    assert sorted(i for g in groups for i in g[0]) == list(range(2000))
    assert sorted(i for g in groups for i in g[1]) == list(range(50))
    assert groups[2] == [[], []]  # a master without slots serves no key
    for node, (key_indexes, _) in enumerate(groups):
        assert all(slot_map.owners[key_slot(keys[i])] == node for i in key_indexes)
    slot = key_slot(keys[0])
    before = placement.owner(slot)
    assert placement.move(slot, 2) == before
    moved = [i for i in range(2000) if key_slot(keys[i]) == slot]
    assert placement.indexes(2)[0] == moved
    assert not set(moved) & set(placement.indexes(before)[0])


def test_reindexed_keeps_every_slots_master() -> None:
    slot_map = SlotMap.from_masters(masters(), default_host="10.0.0.9")
    order = (("10.0.0.3", 7002), ("10.0.0.1", 7000), ("10.0.0.9", 7001))
    again = slot_map.reindexed(order)
    assert again.nodes == order
    assert all(
        again.nodes[a] == slot_map.nodes[b]
        for a, b in zip(again.owners, slot_map.owners, strict=True)
    )
    with pytest.raises(ValueError):
        slot_map.reindexed(order[:2])
