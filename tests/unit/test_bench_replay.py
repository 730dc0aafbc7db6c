"""bench/replay.py --end-to-end's sides and figures, from result documents (no load here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.bench import bench_module

replay = bench_module("replay")


def test_the_replay_on_the_transports_is_measured_only_when_asked() -> None:
    plain = replay.sides(Path("t.csv"), 1000, 50, 8)
    assert [s.name for s in plain] == [
        "replay (compiled driver)",
        "run (compiled driver)",
        "replay (python driver)",
        "run (python driver)",
    ]
    both = replay.sides(Path("t.csv"), 1000, 50, 8, transports=True)
    added = [s for s in both if s not in plain]
    assert [(s.name, s.env) for s in added] == [
        ("replay (transports)", {"KVBENCH_DRIVER": "transports"})
    ]
    assert added[0].argv == plain[0].argv  # the same replay, on the other path
    assert both[0] == plain[0]  # the compiled replay first: the others' ratios are to it


def test_a_round_says_the_driver_its_run_recorded() -> None:
    doc: dict[str, Any] = {
        "environment": {"driver": "compiled loop"},
        "intervals": [{"cpu_s": 0.5}, {"cpu_s": 0.25}],
        "ops": {"get": {"hit_ratio": 0.9}},
        "totals": {"throughput_per_s": 1500.0, "ops": 3000},
    }
    got = replay.round_of(doc)
    assert got.driver == "compiled loop"
    assert got.ops_per_s == 1500.0 and got.cpu_us_per_op == 250.0
    assert round(got.hit_percent, 6) == 90.0


def test_a_timed_replay_s_late_share_is_every_op_s_late_sends_over_the_ops() -> None:
    doc: dict[str, Any] = {
        "environment": {"driver": "compiled loop"},
        "ops": {"get": {"outcomes": {"hit": 80, "late": 3}}, "set": {"outcomes": {"late": 1}}},
        "totals": {
            "throughput_per_s": 59_000.0,
            "ops": 200,
            "latency_us": {"p50": 380.5, "p99": 3600.0},
        },
        "intervals": [{"cpu_s": 0.001}, {"cpu_s": 0.002}],
    }
    got = replay.timed_of(doc)
    assert (got.late_percent, got.p50_us, got.p99_us) == (2.0, 380.5, 3600.0)
    assert got.cpu_us_per_op == 15.0  # 3 ms over 200 ops
    assert got.ops_per_s == 59_000.0 and got.driver == "compiled loop"
