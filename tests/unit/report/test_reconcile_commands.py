"""Reconciliation of commands (--command) with the server's own counters."""

from __future__ import annotations

from typing import Any

from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.reconcile import counter_deltas, reconcile

S = 10**9


def sample(**stats: Any) -> dict[str, Any]:
    return {"taken_ns": 0, "stats": {k.replace("__", "|"): str(v) for k, v in stats.items()}}


def total(
    counts: dict[str, dict[str, int]], keys: dict[str, int] | None = None
) -> IntervalSnapshot:
    return IntervalSnapshot("measure", 0, 0, S, counts, {}, keys=keys or {})


def test_redis_commands_meet_their_commandstats_subcommands_included() -> None:
    snap = total({"hset": {"ok": 9, "error_reply": 1}, "config": {"ok": 3}, "get": {"hit": 2}})
    server = {
        "before": sample(cmdstat_hset="calls=5", cmdstat_get="calls=0"),
        "after": sample(
            cmdstat_hset="calls=15", cmdstat_get="calls=2", cmdstat_config__get="calls=3"
        ),
    }
    rows = {r.name: r for r in reconcile("redis", snap, server)}
    assert (rows["hset"].client, rows["hset"].server, rows["hset"].ambiguous) == (9, 10, 1)
    assert rows["hset"].matches and rows["config"].matches and rows["get"].matches
    assert (rows["config"].client, rows["config"].server) == (3, 3)


def test_a_redis_command_named_like_a_fixed_op_is_one_row() -> None:
    snap = total({"del": {"ok": 4}})
    server = {"before": sample(cmdstat_del="calls=0"), "after": sample(cmdstat_del="calls=4")}
    (row,) = reconcile("redis", snap, server)
    assert (row.name, row.client, row.server) == ("del", 4, 4)


def test_memcached_commands_meet_their_counters_in_keys_where_they_count_keys() -> None:
    snap = total(
        {"gat": {"ok": 5}, "touch": {"ok": 3}, "mg": {"ok": 2}, "version": {"ok": 1}},
        keys={"gat": 10, "touch": 3, "mg": 2, "version": 0},
    )
    server = {
        "before": sample(cmd_touch=0, cmd_get=0, get_hits=0),
        "after": sample(cmd_touch=13, cmd_get=2, get_hits=1),
    }
    rows = {r.name: r for r in reconcile("memcache", snap, server)}
    # gat of two keys counts twice in cmd_touch; touch once: one row for the counter.
    assert (rows["gat + touch"].client, rows["gat + touch"].server) == (13, 13)
    assert (rows["mg"].client, rows["mg"].server) == (2, 2)
    assert "get hits" not in rows  # a command's reply is ok or error, not a hit
    assert "version" not in rows  # no counter


def test_a_command_beside_a_ratio_op_on_the_same_counter_is_one_row() -> None:
    snap = total({"set": {"stored": 6}, "add": {"ok": 4}, "get": {"hit": 1}})
    server = {
        "before": sample(cmd_set=0, cmd_get=0, get_hits=0),
        "after": sample(cmd_set=10, cmd_get=1, get_hits=1),
    }
    rows = {r.name: r for r in reconcile("memcache", snap, server)}
    assert (rows["set + add"].client, rows["set + add"].server) == (10, 10)
    assert rows["get hits"].matches  # no command gets: the hits row stays


def test_a_memcached_get_command_counts_its_keys_not_the_fixed_gets() -> None:
    snap = total({"get": {"ok": 3}}, keys={"get": 6})  # get __key__ __key__
    server = {"before": sample(cmd_get=0), "after": sample(cmd_get=6)}
    (row,) = reconcile("memcache", snap, server)
    assert (row.name, row.client, row.server) == ("get", 6, 6)


def test_counter_deltas_are_none_for_a_counter_or_a_sample_the_server_did_not_give() -> None:
    server = {"before": sample(cmd_set=5, get_hits=1), "after": sample(cmd_set=8, get_misses=2)}
    names = ("cmd_set", "get_hits", "get_misses")
    # A missing counter is unknown ("?" in put-get-batches' line), not a growth of 0.
    assert counter_deltas(server, names) == {"cmd_set": 3, "get_hits": None, "get_misses": None}
    assert counter_deltas({"before": None, "after": sample(cmd_set=1)}, names) == dict.fromkeys(
        names
    )


def test_a_replayed_captures_script_commands_count_beside_the_sent_ones() -> None:
    # The capture's EVAL ran one SET of its own: replayed, the server counts it again.
    snap = total({"set": {"ok": 3}, "eval": {"ok": 1}})
    server = {
        "before": sample(cmdstat_set="calls=0", cmdstat_eval="calls=0"),
        "after": sample(cmdstat_set="calls=4", cmdstat_eval="calls=1"),
    }
    rows = {r.name: r for r in reconcile("redis", snap, server, by_script={"set": 1})}
    assert (rows["set (+1 run by scripts)"].client, rows["set (+1 run by scripts)"].server) == (
        4,
        4,
    )
    assert rows["set (+1 run by scripts)"].matches and rows["eval"].matches
    assert not {r.name: r for r in reconcile("redis", snap, server)}["set"].matches
