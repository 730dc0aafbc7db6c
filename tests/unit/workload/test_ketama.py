from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from kvbench.workload.ketama import POINTS_PER_SERVER, KetamaRing, md5_point


def test_md5_point_is_little_endian_words_of_the_digest() -> None:
    digest = hashlib.md5(b"abc").digest()
    assert md5_point(b"abc", 0) == int.from_bytes(digest[0:4], "little")
    assert md5_point(b"abc", 3) == int.from_bytes(digest[12:16], "little")


def test_each_server_gets_160_points_and_keys_spread_evenly() -> None:
    ring = KetamaRing(["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"])
    assert Counter(ring._servers) == {
        0: POINTS_PER_SERVER,
        1: POINTS_PER_SERVER,
        2: POINTS_PER_SERVER,
    }
    shares = Counter(ring.server_for(b"k%d" % i) for i in range(30_000))
    for n in shares.values():
        assert n == pytest.approx(10_000, rel=0.15)


def test_adding_a_server_moves_only_about_its_share_of_keys() -> None:
    keys = [b"k%d" % i for i in range(20_000)]
    two = KetamaRing(["a:1", "b:1"])
    three = KetamaRing(["a:1", "b:1", "c:1"])
    moved = sum(two.server_for(k) != three.server_for(k) for k in keys)
    assert moved / len(keys) == pytest.approx(1 / 3, abs=0.08)
    assert all(three.server_for(k) == 2 for k in keys if two.server_for(k) != three.server_for(k))


def test_partition_covers_every_key_once() -> None:
    keys = [b"k%d" % i for i in range(1000)]
    groups = KetamaRing(["a:1", "b:1"]).partition(keys)
    assert sorted(i for g in groups for i in g) == list(range(1000))
