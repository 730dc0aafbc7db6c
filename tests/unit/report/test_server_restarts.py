"""A server restarted during a run, told from its samples: no negative deltas anywhere."""

from __future__ import annotations

from typing import Any

import pytest

from kvbench.metrics import IntervalSnapshot
from kvbench.report.reconcile import restart_evidence, server_cpu, server_restarts
from kvbench.report.summary import summarize
from kvbench.results.model import RunResult
from tests.support.runs import summary_text

S = 1_000_000_000


def sample(taken_s: float, index: int | None = None, **stats: str) -> dict[str, Any]:
    out: dict[str, Any] = {"taken_ns": int(taken_s * S), "stats": dict(stats)}
    if index is not None:
        out.update(round=0, index=index)
    return out


def memcached(pid: str, uptime: str, cmd_get: str, cpu: str) -> dict[str, str]:
    return {
        "pid": pid,
        "uptime": uptime,
        "cmd_get": cmd_get,
        "get_hits": "0",
        "rusage_user": cpu,
        "rusage_system": "0",
        "threads": "4",
    }


@pytest.mark.parametrize(
    ("previous", "current", "evidence"),
    [
        ({"pid": "10", "uptime": "50"}, {"pid": "11", "uptime": "2"}, "pid 10 -> 11"),
        ({"pid": "10", "uptime": "50"}, {"pid": "10", "uptime": "2"}, "uptime 50 s -> 2 s"),
        ({"pid": "10", "uptime": "50"}, {"pid": "10", "uptime": "51"}, None),
        (
            {"run_id": "ab", "process_id": "7"},
            {"run_id": "cd", "process_id": "7"},
            "run_id ab -> cd",
        ),
        ({"process_id": "7"}, {"process_id": "8"}, "process_id 7 -> 8"),
        ({"uptime_in_seconds": "9"}, {"uptime_in_seconds": "1"}, "uptime_in_seconds 9 s -> 1 s"),
        ({"cmd_get": "5"}, {"cmd_get": "1"}, None),  # no identity: nothing can be told
    ],
)
def test_a_restart_is_another_process_or_an_uptime_gone_backwards(
    previous: dict[str, str], current: dict[str, str], evidence: str | None
) -> None:
    assert restart_evidence(previous, current) == evidence


def restarted_server() -> dict[str, Any]:
    """memcached pid 10 until interval 2; down for interval 3's sample; pid 11 after."""
    return {
        "before": sample(0, **memcached("10", "100", "0", "1.0")),
        "intervals": [
            sample(1, 0, **memcached("10", "101", "1000", "2.0")),
            sample(2, 1, **memcached("10", "102", "2000", "3.0")),
            sample(4, 3, **memcached("11", "1", "500", "0.5")),
            sample(5, 4, **memcached("11", "2", "1500", "1.5")),
        ],
        "after": sample(6, **memcached("11", "3", "1600", "1.6")),
    }


def test_the_restart_is_placed_between_the_samples_it_fell_between() -> None:
    restarts = server_restarts(restarted_server())
    assert [(r.after, r.before, r.evidence) for r in restarts] == [
        ("interval 2", "interval 4", "pid 10 -> 11")
    ]


def test_server_cpu_leaves_out_the_gap_the_restart_fell_in() -> None:
    """Pairs (1 s, 1 cpu s), (1 s, 1 cpu s) around the restart: 1 core, never negative."""
    cpu = server_cpu("memcache", restarted_server())
    assert cpu is not None and cpu.cores == pytest.approx(1.0)


def test_a_sharded_run_tells_each_server_apart() -> None:
    def shard_sample(taken_s: float, pids: tuple[str, str]) -> dict[str, Any]:
        return {
            "taken_ns": int(taken_s * S),
            "stats": {"pid": str(int(pids[0]) + int(pids[1]))},
            "targets": [
                {"url": "memcached://a", "stats": {"pid": pids[0]}},
                {"url": "memcached://b", "stats": {"pid": pids[1]}},
            ],
        }

    server = {"before": shard_sample(0, ("1", "2")), "after": shard_sample(1, ("1", "3"))}
    restarts = server_restarts(server)
    assert [(r.url, r.evidence) for r in restarts] == [("memcached://b", "pid 2 -> 3")]


def test_a_comparisons_per_round_samples_are_walked_in_time_order() -> None:
    server = {
        "intervals": [sample(1, 0, pid="5"), sample(11, 0, pid="5")],
        "rounds": [
            {"before": sample(0, pid="5"), "after": sample(2, pid="5")},
            {"before": sample(10, pid="5"), "after": sample(12, pid="6")},
        ],
    }
    restarts = server_restarts(server)
    assert [(r.after, r.before) for r in restarts] == [("interval 1", "the end")]


def restarted_run() -> RunResult:
    snap = IntervalSnapshot("measure", 0, 0, S, {"get": {"miss": 1600}}, {})
    target = {"url": "memcached://h:1", "protocol": "memcache-text"}
    return RunResult(
        "r", "t", "ok", "closed", "0", {}, [target], 0, S, [snap], server=restarted_server()
    )


def test_a_restarted_run_reconciles_nothing_and_says_which_counters_it_did_not() -> None:
    model = summarize(restarted_run())
    assert model.reconciliation == []
    assert model.not_comparable == ["get (keys)", "get misses"]  # an all-miss run
    [verdict] = [v for v in model.verdicts if v.id == "server.restarted"]
    assert "pid 10 -> 11" in verdict.message and "get (keys)" in verdict.message
    assert model.server_cpu is not None and model.server_cpu.cores > 0


def test_the_terminal_says_the_counters_are_not_comparable() -> None:
    text = summary_text(restarted_run())
    assert (
        "server counters vs client: not comparable, the server restarted (pid 10 -> 11, "
        "between the samples at interval 2 and interval 4)"
    ) in text
    assert "server CPU 1.00 cores of 4 thread(s)" in text
    assert "MISMATCH" not in text


def test_samples_that_do_not_name_the_process_are_passed_over() -> None:
    """Runs stored before interval samples kept the pid: before and after still tell."""
    server = {
        "before": sample(0, pid="5", uptime="10"),
        "intervals": [sample(1, 0, cmd_get="5")],
        "after": sample(2, pid="6", uptime="1"),
    }
    assert [(r.after, r.before) for r in server_restarts(server)] == [("the start", "the end")]


def test_a_cpu_counter_gone_backwards_is_left_out_too() -> None:
    """Interval samples without the pid (stored by an older kvbench) across a restart."""
    server = {
        "intervals": [
            sample(1, 0, rusage_user="5.0", rusage_system="0", threads="4"),
            sample(2, 1, rusage_user="6.0", rusage_system="0", threads="4"),
            sample(3, 2, rusage_user="0.5", rusage_system="0", threads="4"),
            sample(4, 3, rusage_user="1.0", rusage_system="0", threads="4"),
        ]
    }
    cpu = server_cpu("memcache", server)
    assert cpu is not None and cpu.cores == pytest.approx(0.75)  # (1 + 0.5) cpu s / 2 s
