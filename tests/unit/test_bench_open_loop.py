"""bench/open_loop.py's figures, recomputed from a result document (no load here)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.bench import bench_module

open_loop = bench_module("open_loop")


def doc(completed: int, late: int) -> dict[str, Any]:
    """An open-loop result document of two 1 s intervals offering 1,000/s each."""
    return {
        "environment": {"driver": "compiled"},
        "window_s": 2.0,
        "intervals": [{"offered_per_s": 1000.0, "length_s": 1.0, "cpu_s": 0.25}] * 2,
        "ops": {
            "get": {"outcomes": {"miss": completed - 100, "late": late}},
            "set": {"outcomes": {"stored": 100, "dropped": 3}},
        },
        "totals": {"completed": completed, "throughput_per_s": completed / 2.0},
    }


def test_late_and_achieved_are_recomputed_from_the_document() -> None:
    run = open_loop.open_run("text", 2500.0, doc(completed=1990, late=10))
    assert run.offered == 2000 and run.offered_per_s == 1000.0
    assert run.achieved_ratio == pytest.approx(0.995)
    assert run.late_fraction == pytest.approx(10 / 1990)
    assert run.dropped == 3 and run.client_cores == pytest.approx(0.25)
    assert run.on_target  # late 0.5%, achieved within 0.5%
    row = open_loop.table([run])[2]
    assert "0.9950" in row and "0.50%" in row and row.endswith("met")


def test_the_worst_interval_is_the_most_late_sends_in_one() -> None:
    document = doc(completed=1990, late=10)
    document["intervals"] = [
        {**row, "late": late} for row, late in zip(document["intervals"], (2, 8), strict=True)
    ]
    run = open_loop.open_run("text", 2500.0, document)
    assert run.worst_late == 8
    header, _, row = open_loop.table([run])
    at = header.index("worst s")
    assert row[at : at + len("worst s")].strip() == "8"  # under its header, right-aligned


@pytest.mark.parametrize(("completed", "late"), [(1970, 0), (2000, 20)])
def test_a_run_off_either_target_is_missed(completed: int, late: int) -> None:
    run = open_loop.open_run("redis", 2500.0, doc(completed, late))
    assert not run.on_target
    assert open_loop.table([run])[2].endswith("missed")


def test_the_loop_is_measured_only_when_asked() -> None:
    assert open_loop.drivers(False) == [(), ("KVBENCH_PURE_PYTHON=1",)]
    assert open_loop.drivers(False, python=False) == [()]
    assert open_loop.drivers(True) == [
        (),
        ("KVBENCH_DRIVER=transports",),
        ("KVBENCH_PURE_PYTHON=1",),
    ]
