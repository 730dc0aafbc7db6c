from __future__ import annotations

import zlib

import pytest

from kvbench.config import load_config
from kvbench.engine.shards import build_shards
from kvbench.errors import ConfigError
from kvbench.workload.ketama import KetamaRing
from kvbench.workload.placement import ModulaCrc32, placement_for

KEYS = [b"test_key%d" % i for i in range(1000)]


def reference_server(key: bytes, servers: int) -> int:
    """python-memcached 1.59 memcache.Client._get_server, all weights 1, every server up."""
    crc = (((zlib.crc32(key) & 0xFFFFFFFF) >> 16) & 0x7FFF) or 1
    return crc % servers


@pytest.mark.parametrize("servers", [2, 3])
def test_modula_crc32_splits_test_keys_as_python_memcached(servers: int) -> None:
    placement = ModulaCrc32([f"s{i}:1" for i in range(servers)])
    expected: list[list[int]] = [[] for _ in range(servers)]
    for i, key in enumerate(KEYS):
        expected[reference_server(key, servers)].append(i)
    assert placement.partition(KEYS) == expected
    assert [placement.server_for(k) for k in KEYS] == [reference_server(k, servers) for k in KEYS]
    # Not a trivial split: both servers get a real share.
    assert all(200 < len(group) < 800 for group in expected[:2]) if servers == 2 else True


def test_placement_for_names_both_and_ketama_differs() -> None:
    names = ["127.0.0.1:11211", "127.0.0.1:11212"]
    assert isinstance(placement_for("ketama", names), KetamaRing)
    modula = placement_for("modula-crc32", names).partition(KEYS)
    ketama = placement_for("ketama", names).partition(KEYS)
    assert modula != ketama
    assert sorted(modula[0] + modula[1]) == list(range(1000))


def config(placement: str | None) -> object:
    settings = {
        "target.urls": (["memcached://127.0.0.1:11211", "memcached://127.0.0.1:11212"], "T"),
        "workload.keys": (1000, "--keys"),
        "workload.key_prefix": ("test_key", "--key-prefix"),
    }
    if placement is not None:
        settings["workload.placement"] = (placement, "--placement")
    return load_config(None, settings, 1)


@pytest.mark.parametrize("placement", ["ketama", "modula-crc32"])
def test_shards_follow_the_placement(placement: str) -> None:
    shards = build_shards(config(placement), 0, 1)  # type: ignore[arg-type]
    names = [f"127.0.0.1:{port}" for port in (11211, 11212)]
    expected = placement_for(placement, names).partition(KEYS)
    assert [s.plan.key_table for s in shards] == [[KEYS[i] for i in g] for g in expected]


def test_the_default_placement_is_ketama_and_a_wrong_one_is_refused() -> None:
    assert config(None).workload.placement == "ketama"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"--placement.*modula"):
        config("crc")
