"""A run's status: decided once, from the stored run and its max error rate."""

from __future__ import annotations

from typing import Any

import pytest

from kvbench.metrics import IntervalSnapshot
from kvbench.results.model import RunResult
from kvbench.results.status import (
    EXIT_CODES,
    Tally,
    judge,
    run_status,
    tally,
    worst,
)

S = 1_000_000_000


def run_of(counts: dict[str, dict[str, int]], status: str = "ok", **load: Any) -> RunResult:
    snap = IntervalSnapshot("measure", 0, 0, S, counts, {})
    return RunResult(
        "r", "t", status, "closed", "0", {"load": load}, [], 0, S, [snap] if counts else []
    )


def test_error_replies_timeouts_and_drops_are_errors_and_not_successes() -> None:
    counts = {
        "get": {"hit": 5, "miss": 3, "error_reply": 2, "timeout": 1, "late": 4},
        "set": {"stored": 6, "not_stored": 1, "conn_error": 2, "dropped": 1},
    }
    found = tally(run_of(counts).total())
    assert (found.attempted, found.succeeded, found.errors) == (21, 15, 6)
    assert found.kinds == {"conn_error": 2, "error_reply": 2, "dropped": 1, "timeout": 1}
    assert found.error_rate == pytest.approx(6 / 21)


def test_failed_connection_attempts_are_errors_of_the_window() -> None:
    snap = IntervalSnapshot(
        "measure", 0, 0, S, {"get": {"hit": 90}}, {}, stats={"connect_failures": 8.0}
    )
    snap_reset = IntervalSnapshot(
        "measure", 1, S, 2 * S, {"get": {"hit": 0}}, {}, stats={"connect_resets": 2.0}
    )
    run = RunResult("r", "t", "ok", "closed", "0", {}, [], 0, 2 * S, [snap, snap_reset])
    found = tally(run.total())
    assert (found.attempted, found.succeeded, found.errors) == (100, 90, 10)
    assert found.kinds == {"connect_failures": 8, "connect_resets": 2}
    assert run_status(run).name == "failed"  # 10% > 1%


def test_a_clean_run_is_ok() -> None:
    status = run_status(run_of({"get": {"hit": 1000}}))
    assert (status.name, status.reasons, status.exit_code) == ("ok", (), 0)


def test_errors_above_the_default_limit_fail_the_run() -> None:
    """Seen: a memcached answering CLIENT_ERROR to 99.9% of requests, status ok."""
    status = run_status(run_of({"set": {"stored": 1, "error_reply": 999}}))
    assert status.name == "failed" and status.exit_code == 1
    (reason,) = status.reasons
    assert reason == (
        "errors were 99.90% of 1,000 ops, above the 1% allowed (--max-error-rate): error_reply 999"
    )


def test_the_limit_is_the_runs_own() -> None:
    counts = {"get": {"hit": 95, "timeout": 5}}
    assert run_status(run_of(counts)).name == "failed"  # 5% > 1%
    assert run_status(run_of(counts, max_error_rate=0.05)).name == "ok"  # not above 5%
    assert run_status(run_of(counts, max_error_rate=0.049)).name == "failed"
    assert run_status(run_of({"get": {"hit": 1000}}, max_error_rate=0.0)).name == "ok"


def test_no_success_fails_whatever_the_limit() -> None:
    """Seen: 236 attempts, all conn_error, status ok, exit 0."""
    status = run_status(run_of({"get": {"conn_error": 236}}, max_error_rate=1.0))
    assert status.name == "failed"
    assert status.reasons == ("no op succeeded (236 attempts, all failed: conn_error 236)",)
    nothing = run_status(run_of({}))
    assert nothing.name == "failed"
    assert nothing.reasons == ("no op succeeded (no op ended in the window)",)


def test_precedence_is_interrupted_then_failed_then_partial() -> None:
    bad = {"get": {"hit": 1, "error_reply": 99}}
    assert run_status(run_of(bad, status="interrupted")).name == "interrupted"
    both = run_status(run_of(bad, status="partial"))
    assert both.name == "failed" and len(both.reasons) == 2
    assert both.reasons[0].startswith("errors were")  # the deciding reason first
    assert run_status(run_of({"get": {"hit": 10}}, status="partial")).name == "partial"
    assert [EXIT_CODES[s] for s in ("ok", "failed", "partial", "interrupted")] == [0, 1, 4, 130]


def test_a_queue_run_fails_on_its_delivery_only() -> None:
    counts = Tally(0, 0, 0, {})
    assert judge("ok", counts, None).name == "ok"
    lost = judge("ok", counts, None, "3 acknowledged messages were never received")
    assert lost.name == "failed" and lost.reasons == (
        "3 acknowledged messages were never received",
    )
    assert judge("interrupted", counts, None, "lost").name == "interrupted"


def test_the_worst_of_several() -> None:
    assert worst(["ok", "partial", "failed"]) == "failed"
    assert worst(["ok", "failed", "interrupted"]) == "interrupted"
    assert worst(["ok", "ok"]) == "ok" and worst([]) == "ok"


def test_runs_stored_before_the_limit_existed_use_the_default() -> None:
    old = run_of({"get": {"hit": 98, "timeout": 2}})
    old.config = {}
    assert run_status(old).name == "failed"


def test_set_then_get_counts_a_get_miss_and_a_mismatch_as_errors() -> None:
    """Every get follows the set of its key: a miss (or another value) is the stack failing."""
    counts = {"get": {"hit": 90, "miss": 6, "mismatch": 4}, "set": {"stored": 100}}
    plain = tally(run_of(counts).total())
    assert (plain.errors, plain.succeeded) == (0, 196)
    paired = tally(run_of(counts).total(), set_then_get=True)
    assert paired.kinds == {"miss": 6, "mismatch": 4}
    assert (paired.attempted, paired.succeeded, paired.errors) == (196, 186, 10)
    run = run_of(counts)
    run.config["workload"] = {"set_then_get": True}
    status = run_status(run)
    assert status.name == "failed" and "miss 6, mismatch 4" in status.reasons[0]


def refused_run(refused: int, live_min: int, settings: dict[str, str] | None) -> RunResult:
    snap = IntervalSnapshot(
        "measure", 0, 0, S, {"get": {"hit": 900}}, {}, stats={"connections_live_min": live_min}
    )
    before = IntervalSnapshot("warmup", 0, 0, S, {}, {}, stats={"connect_resets_before": refused})
    return RunResult(
        "r", "t", "ok", "closed", "0", {"load": {"connections": 500}}, [], 0, S, [snap],
        phases={"warmup": before}, server={"settings": settings},
    )  # fmt: skip


def test_connections_the_server_refused_fail_the_run_with_its_limit() -> None:
    status = run_status(refused_run(461, 39, {"maxconns": "64"}))
    assert (status.name, status.exit_code) == ("failed", 1)
    assert status.reasons == (
        "only 39 of the 500 connections asked for were live: the server refused 461 right "
        "after accepting them (its limit: maxconns 64)",
    )
    unknown = run_status(refused_run(461, 39, None))
    assert unknown.name == "failed" and unknown.reasons[0].endswith("(over its connection limit?)")


def test_of_several_servers_those_that_refused_are_named_and_the_limit_only_where_known() -> None:
    """Settings are asked of the first server only: a limit from them is said of it alone.
    Was: a cluster whose second master (maxclients 20) refused 14 connections ended
    'the server refused 14 (its limit: maxclients 10000)', the first master's limit."""
    run = refused_run(14, 76, {"maxclients": "10000"})
    run.config["targets"] = [{"url": f"redis+cluster://h:{port}"} for port in (1, 2, 3)]
    run.phases["warmup"].stats["server1_refused"] = 14
    assert run_status(run).reasons == (
        "only 76 of the 500 connections asked for were live: redis+cluster://h:2 refused 14 "
        "right after accepting them (over its connection limit?)",
    )
    run.phases["warmup"].stats.update(server0_refused=4, server1_refused=10)
    assert (
        run_status(run)
        .reasons[0]
        .endswith(
            ": redis+cluster://h:1 refused 4 right after accepting them (its limit: maxclients "
            "10000), redis+cluster://h:2 refused 10 right after accepting them (over its "
            "connection limit?)"
        )
    )


def test_connections_lost_and_reopened_or_all_live_are_no_shortfall() -> None:
    assert run_status(refused_run(0, 39, None)).name == "ok"  # lost, not refused
    assert run_status(refused_run(3, 500, None)).name == "ok"  # refused, then reopened


def test_protocol_errors_are_their_own_error_kind() -> None:
    counts = {"get": {"hit": 10, "protocol_error": 5, "conn_error": 1}}
    found = tally(run_of(counts).total())
    assert found.kinds == {"protocol_error": 5, "conn_error": 1}
    status = run_status(run_of(counts))
    assert status.name == "failed" and "protocol_error 5, conn_error 1" in status.reasons[0]


def two_servers_run(stats: dict[str, float], workers: int = 1) -> RunResult:
    """A one-interval run of 9,000 hits against two servers, with these worker stats."""
    snap = IntervalSnapshot(
        "measure", 0, 0, S, {"get": {"hit": 9_000}}, {}, stats=stats, workers=workers
    )
    config = {
        "load": {"timeout_ns": 500_000_000},
        "targets": [{"url": "memcached://10.0.0.1:11211"}, {"url": "memcached://10.0.0.2:11211"}],
    }
    return RunResult("r", "t", "ok", "closed", "0", config, [], 0, S, [snap])


def test_a_server_gone_fails_the_run_naming_it() -> None:
    """A worker found server 1 gone (no live connection for twice --timeout, reconnects
    failing): failed, whatever the error rate, the reason naming that server's URL."""
    stats = {"connect_failures": 3.0, "server1_lost": 1.0}
    status = run_status(two_servers_run(stats))
    assert (status.name, status.exit_code) == ("failed", 1)
    assert status.reasons == (
        "memcached://10.0.0.2:11211 went away: none of its connections was live for twice "
        "--timeout (1s), "
        "every reconnect failing (what was measured until then is kept)",
    )
    assert run_status(two_servers_run({**stats, "server1_lost": 0.0})).name == "ok"


def test_a_server_down_when_the_window_ended_fails_the_run_naming_it() -> None:
    """Two workers found server 1 down at the window's end (3.0 s and 2.0 s), not yet
    gone: failed, whatever the error rate, the reason naming it and how long it had been
    down on average; a server also gone is said once, as gone."""
    stats = {"connect_failures": 3.0, "server1_down_at_end": 2.0, "server1_down_at_end_ns": 5.0 * S}
    status = run_status(two_servers_run(stats, workers=2))
    assert (status.name, status.exit_code) == ("failed", 1)
    assert status.reasons == (
        "memcached://10.0.0.2:11211 was down when the window ended: none of its connections "
        "live for the last 2.5s, every reconnect failing (what was measured until then is kept)",
    )
    # the third could reach it: a route lost, not a server
    [reason] = run_status(two_servers_run(stats, workers=3)).reasons
    assert reason.startswith(
        "memcached://10.0.0.2:11211 was down when the window ended, as 2 of the 3 workers "
        "saw it: none of its connections live for the last 2.5s"
    )
    [reason] = run_status(two_servers_run({**stats, "server1_lost": 1.0}, workers=2)).reasons
    assert reason.startswith("memcached://10.0.0.2:11211 went away: ")
    quiet = {**stats, "server1_down_at_end": 0.0}
    assert run_status(two_servers_run(quiet, workers=2)).name == "ok"


def test_a_server_down_at_the_end_of_one_round_of_several_names_that_round() -> None:
    """Each round's window ends on its own: counted over the rounds together, 1 of 2
    workers down at the end of round 1 and 1 of 2 at the end of round 2 read as "2 of 2"
    (the same server everywhere), and the round was not named."""
    stats = {"server0_down_at_end": 1.0, "server0_down_at_end_ns": 1.5 * S}
    snaps = [
        IntervalSnapshot(
            "measure", 0, 0, S, {"get": {"hit": 10}}, {}, stats=stats, workers=2, round=r
        )
        for r in (0, 1)
    ]
    config = {"load": {}, "targets": [{"url": "memcached://10.0.0.1:11211"}]}
    run = RunResult("r", "t", "ok", "closed", "0", config, [], 0, 2 * S, snaps)
    status = run_status(run)
    assert status.name == "failed"
    [reason] = status.reasons
    assert reason.split("; ") == [
        f"memcached://10.0.0.1:11211 was down when round {r}'s window ended, as 1 of the 2 "
        "workers saw it: none of its connections live for the last 1.5s, every reconnect "
        "failing (what was measured until then is kept)"
        for r in (1, 2)
    ]


def test_an_error_rate_is_written_one_way_and_a_small_one_is_not_none() -> None:
    """The errors line said 54.19% where the verdict and the status said 54.2%, and 18
    errors in 383,248 ops were 0.00% on one line and 0.0% on the next."""
    from kvbench.results.status import format_error_rate

    assert format_error_rate(58_235 / 107_471) == "54.19%"
    assert format_error_rate(18 / 383_248) == "<0.01%"
    assert format_error_rate(0.0) == "0.00%"
    assert format_error_rate(1.0) == "100.00%"
