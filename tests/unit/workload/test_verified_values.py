"""Verified values: derived from (key, version), checked without client memory."""

from __future__ import annotations

import pytest

from kvbench.config.model import WorkloadConfig
from kvbench.protocols.base import Op
from kvbench.workload import RequestSource, compile_plan
from kvbench.workload.verify import HEADER, check_value, derive_value


@pytest.mark.parametrize("size", [12, 100, 4096])
def test_a_derived_value_checks(size: int) -> None:
    value = derive_value(b"kvbench:1", 7, size)
    assert len(value) == size and HEADER.unpack_from(value) == (7, size)
    assert check_value(b"kvbench:1", value)


def test_derivation_is_deterministic_and_depends_on_key_and_version() -> None:
    a = derive_value(b"k1", 1, 64)
    assert a == derive_value(b"k1", 1, 64)
    assert a[8:] != derive_value(b"k2", 1, 64)[8:]
    assert a[8:] != derive_value(b"k1", 2, 64)[8:]


@pytest.mark.parametrize(
    "payload",
    [
        derive_value(b"other", 1, 64),  # another key's value
        derive_value(b"k", 1, 64)[:-1],  # truncated
        derive_value(b"k", 1, 64) + b"x",  # extended
        b"garbage",
        b"",
        bytes(64),
    ],
    ids=["other-key", "truncated", "extended", "garbage", "empty", "zeros"],
)
def test_anything_else_fails(payload: bytes) -> None:
    assert not check_value(b"k", payload)


def test_a_flipped_byte_fails() -> None:
    value = bytearray(derive_value(b"k", 3, 100))
    value[50] ^= 1
    assert not check_value(b"k", value)


def test_verify_mode_sets_store_derived_values_of_the_configured_sizes() -> None:
    config = WorkloadConfig(
        ratio=(("set", 1), ("get", 1)),
        value_size_min_bytes=20,
        value_size_max_bytes=200,
        verify=True,
        seed=4,
    )
    source = RequestSource(compile_plan(config, 1, 2)).next_chunk()
    sets = [
        (k, v)
        for op, k, v in zip(source.ops, source.keys, source.values, strict=True)
        if op == Op.SET
    ]
    assert sets
    assert all(check_value(k, v) for k, v in sets)  # type: ignore[arg-type]
    assert {len(v) for _, v in sets} <= set(range(20, 201))
    versions = [HEADER.unpack_from(v)[0] for _, v in sets]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert versions[0] >> 24 == 1  # worker 1's versions


def test_verify_mode_preload_values_check() -> None:
    config = WorkloadConfig(keys=50, verify=True, seed=4)
    plan = compile_plan(config, 0, 1)
    values = RequestSource(plan).preload_values(range(50))
    assert all(check_value(plan.key_table[i], values[i]) for i in range(50))  # type: ignore[arg-type]


def test_timestamp_values_are_checked_as_times_from_the_set_phase() -> None:
    from kvbench.workload.values import timestamp_value
    from kvbench.workload.verify import timestamp_check

    inside = timestamp_check((1_000, 2_000))
    assert inside(b"k", timestamp_value(1_500 * 10**6))
    assert inside(b"other", timestamp_value(1_000 * 10**6)) and inside(
        b"k", timestamp_value(2_000 * 10**6)
    )
    assert not inside(b"k", timestamp_value(999 * 10**6))
    assert not inside(b"k", timestamp_value(2_001 * 10**6))
    assert not inside(b"k", timestamp_value(1_500 * 10**6)[:7])
    assert not inside(b"k", timestamp_value(1_500 * 10**6) + b"\x00")
    unbounded = timestamp_check(None, now_ms=lambda: 5_000)
    assert unbounded(b"k", timestamp_value(4_999 * 10**6))
    assert not unbounded(b"k", timestamp_value(5_001 * 10**6))
    assert not unbounded(b"k", bytes(8))  # time 0: nothing stored that
