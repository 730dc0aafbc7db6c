"""What a replay of a MONITOR capture sends, per client (workload/monitor_feed.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import hiredis
import pytest

from kvbench.config.replay import ReplayConfig
from kvbench.errors import ConfigError
from kvbench.protocols.base import Op
from kvbench.workload.chunk import Cursor
from kvbench.workload.commands import COMMAND_BASE
from kvbench.workload.monitor_feed import MonitorFeed, scan_capture


def capture(tmp_path: Path, *lines: str) -> ReplayConfig:
    path = tmp_path / "monitor.log"
    path.write_text("OK\n" + "".join(line + "\n" for line in lines))
    return ReplayConfig(str(path), speed=None, format="redis-monitor")


def sent(config: ReplayConfig, worker: int = 0, workers: int = 1) -> list[list[list[bytes]]]:
    """Each lane's requests as argv lists (after the scan, as a run does)."""
    scan = scan_capture(config)
    config = replace(config, commands=tuple(scan.names), clients=scan.counts.clients)
    share = [config.clients // workers + (i < config.clients % workers) for i in range(workers)]
    feed = MonitorFeed(config, worker, workers, share[worker], seed=1)
    feed.prepare()
    out = []
    for lane in feed.lanes:
        chunk = lane.next_chunk()
        assert chunk is not None and chunk.ops == [int(Op.COMMAND)] * chunk.size
        out.append([argv(request) for request in chunk.keys])
    return out


def argv(request: bytes) -> list[bytes]:
    """A RESP request's words: an array of bulk strings, read as hiredis reads one."""
    reader = hiredis.Reader()
    reader.feed(request)
    words = reader.gets()
    assert reader.gets() is False  # one request, whole
    return list(words)


def test_each_client_is_a_lane_with_its_commands_in_order(tmp_path: Path) -> None:
    config = capture(
        tmp_path,
        '1.0 [0 10.0.0.1:1] "SET" "a" "1"',
        '1.1 [0 10.0.0.2:2] "GET" "a"',
        '1.2 [0 10.0.0.1:1] "INCR" "a"',
        '1.3 [0 unix:/tmp/r.sock] "GET" "b"',
        '1.4 [0 10.0.0.2:2] "DEL" "a"',
    )
    assert sent(config) == [
        [[b"SET", b"a", b"1"], [b"INCR", b"a"]],
        [[b"GET", b"a"], [b"DEL", b"a"]],
        [[b"GET", b"b"]],
    ]
    scan = scan_capture(config)
    assert scan.names == ["set", "get", "incr", "del"]
    assert scan.counts.clients == 3


def test_results_are_recorded_per_command_name(tmp_path: Path) -> None:
    config = capture(
        tmp_path, '1 [0 a:1] "SET" "k" "v"', '2 [0 a:1] "get" "k"', '3 [0 a:1] "GET" "k"'
    )
    scan = scan_capture(config)
    config = replace(config, commands=tuple(scan.names), clients=1)
    feed = MonitorFeed(config, 0, 1, 1, seed=1)
    feed.prepare()
    chunk = feed.lanes[0].next_chunk()
    assert chunk is not None
    assert chunk.record_ops == [COMMAND_BASE, COMMAND_BASE + 1, COMMAND_BASE + 1]


def test_captured_selects_are_sent_and_a_client_already_elsewhere_gets_one(
    tmp_path: Path,
) -> None:
    # Client a selects during the capture (Redis 7 writes SELECT's line with the new db);
    # client b had selected 3 before the capture began.
    config = capture(
        tmp_path,
        '1 [0 a:1] "SET" "k" "0"',
        '2 [1 a:1] "SELECT" "1"',
        '3 [1 a:1] "SET" "k" "1"',
        '4 [3 b:2] "GET" "k"',
        '5 [3 b:2] "GET" "k"',
    )
    assert sent(config) == [
        [[b"SET", b"k", b"0"], [b"SELECT", b"1"], [b"SET", b"k", b"1"]],
        [[b"SELECT", b"3"], [b"GET", b"k"], [b"GET", b"k"]],
    ]
    assert scan_capture(config).counts.selects_inserted == 1


def test_an_older_servers_select_line_written_before_it_ran_adds_no_select(
    tmp_path: Path,
) -> None:
    config = capture(tmp_path, '1 [0 a:1] "SELECT" "2"', '2 [2 a:1] "GET" "k"')
    assert sent(config) == [[[b"SELECT", b"2"], [b"GET", b"k"]]]


def test_a_transaction_goes_as_captured_on_its_clients_connection(tmp_path: Path) -> None:
    config = capture(
        tmp_path,
        '1 [0 a:1] "MULTI"',
        '2 [0 b:2] "GET" "x"',
        '3 [0 a:1] "INCR" "c"',
        '3 [0 a:1] "HSET" "h" "f" "v"',
        '3 [0 a:1] "EXEC"',
    )
    assert sent(config)[0] == [[b"MULTI"], [b"INCR", b"c"], [b"HSET", b"h", b"f", b"v"], [b"EXEC"]]


def test_a_transaction_cut_off_is_left_out_and_a_lone_exec_skipped(tmp_path: Path) -> None:
    config = capture(
        tmp_path,
        '1 [0 a:1] "INCR" "q"',
        '1 [0 a:1] "EXEC"',
        '2 [0 a:1] "SET" "k" "v"',
        '3 [0 a:1] "MULTI"',
        '4 [0 a:1] "INCR" "c"',
    )
    assert sent(config) == [[[b"INCR", b"q"], [b"SET", b"k", b"v"]]]
    counts = scan_capture(config).counts
    assert counts.skipped == {
        "exec without its MULTI in the capture": 1,
        "in a transaction the capture cuts off": 2,
    }


def test_skipped_commands_are_counted_and_a_scripts_own_by_name(tmp_path: Path) -> None:
    config = capture(
        tmp_path,
        '1 [0 a:1] "AUTH" "(redacted)"',
        "2 [0 a:1] \"EVAL\" \"return redis.call('set','k','v')\" \"0\"",
        '2 [0 lua] "set" "k" "v"',
        '3 [0 b:2] "BLPOP" "q" "0"',
        '4 [0 a:1] "GET" "k"',
    )
    assert sent(config) == [[[b"EVAL", b"return redis.call('set','k','v')", b"0"], [b"GET", b"k"]]]
    counts = scan_capture(config).counts
    assert counts.clients == 1  # b sent nothing that is replayed: no connection
    assert counts.by_script == {"set": 1}
    assert sum(counts.skipped.values()) == 3


def test_value_size_resizes_the_writes_values_not_keys_or_fields(tmp_path: Path) -> None:
    config = replace(
        capture(
            tmp_path,
            '1 [0 a:1] "SET" "k" "v" "EX" "10"',
            '2 [0 a:1] "HSET" "h" "f1" "v1" "f2" "v2"',
            '3 [0 a:1] "GET" "k"',
        ),
        value_size_bytes=5,
    )
    ((set_, hset, get),) = sent(config)
    assert set_[:2] == [b"SET", b"k"] and len(set_[2]) == 5 and set_[3:] == [b"EX", b"10"]
    assert [hset[0], hset[1], hset[2], hset[4]] == [b"HSET", b"h", b"f1", b"f2"]
    assert len(hset[3]) == len(hset[5]) == 5
    assert get == [b"GET", b"k"]


def test_limit_and_time_slice(tmp_path: Path) -> None:
    lines = [f'{t}.5 [0 a:1] "GET" "k{t}"' for t in range(10)]
    config = capture(tmp_path, *lines)
    assert sent(replace(config, limit=3)) == [[[b"GET", b"k0"], [b"GET", b"k1"], [b"GET", b"k2"]]]
    assert sent(replace(config, from_s=4.0, to_s=6.0)) == [[[b"GET", b"k4"], [b"GET", b"k5"]]]


def test_timed_offsets_are_the_captured_times_scaled(tmp_path: Path) -> None:
    config = replace(
        capture(
            tmp_path,
            '100.5 [0 a:1] "GET" "k"',
            '101.0 [0 b:2] "GET" "k"',
            '102.5 [0 a:1] "GET" "k"',
        ),
        speed=2.0,
    )
    scan = scan_capture(config)
    config = replace(config, commands=tuple(scan.names), clients=2)
    feed = MonitorFeed(config, 0, 1, 2, seed=1)
    feed.prepare()
    assert [lane.offsets(0, 10**6) for lane in feed.lanes] == [
        [0, 1_000_000_000],
        [250_000_000],
    ]
    assert feed.lanes[0].due_count(999_999_999) == 1
    assert feed.lanes[0].due_count(1_000_000_000) == 2


def test_workers_share_the_clients_in_blocks(tmp_path: Path) -> None:
    config = capture(tmp_path, *(f'1 [0 c:{i}] "GET" "k{i}"' for i in range(5)))
    first = sent(config, 0, 2)
    second = sent(config, 1, 2)
    assert first == [[[b"GET", b"k0"]], [[b"GET", b"k1"]], [[b"GET", b"k2"]]]
    assert second == [[[b"GET", b"k3"]], [[b"GET", b"k4"]]]


def test_a_lane_refills_once_then_is_at_its_end(tmp_path: Path) -> None:
    config = capture(tmp_path, '1 [0 a:1] "GET" "k"', '2 [0 a:1] "GET" "k"')
    scan = scan_capture(config)
    feed = MonitorFeed(replace(config, commands=tuple(scan.names), clients=1), 0, 1, 1, seed=1)
    feed.prepare()
    lane = feed.lanes[0]
    cursor = Cursor(lane)
    assert lane.pending() == 2 and not feed.exhausted()
    assert cursor.advance() and cursor.size == 2
    assert lane.pending() == 2  # handed out, not sent
    cursor.pos = 2
    assert lane.pending() == 0
    assert not cursor.advance()
    assert lane.taken == 2 and feed.exhausted()


@pytest.mark.parametrize("line", ['1 [0 a:1] "GET" k', "garbage"])
def test_the_scan_fails_on_a_bad_line_with_its_number(tmp_path: Path, line: str) -> None:
    config = capture(tmp_path, '1 [0 a:1] "GET" "k"', line)
    with pytest.raises(ConfigError, match=r"monitor\.log:3"):
        scan_capture(config)


def test_the_report_has_a_traces_shape_and_the_capture_is_counted_once(tmp_path: Path) -> None:
    config = capture(
        tmp_path, '1 [0 a:1] "SET" "k" "v"', '2 [0 b:2] "GET" "k"', '2 [0 lua] "get" "k"'
    )
    scan = scan_capture(config)
    config = replace(config, commands=tuple(scan.names), clients=2)
    reports = []
    for worker in (0, 1):
        feed = MonitorFeed(config, worker, 2, 1, seed=1)
        feed.prepare()
        reports.append(feed.report())
    first, second = reports
    assert first["mapping"] == second["mapping"] == {"set": "set", "get": "get"}
    assert first["profile"]["ops"] == {"set": 1, "get": 2} and second["profile"]["ops"] == {}
    assert (first["counts"]["requests"], second["counts"]["requests"]) == (1, 1)
    assert first["counts"]["by_script"] == {"get": 1} and second["counts"]["by_script"] == {}
    assert (first["counts"]["clients"], second["counts"]["clients"]) == (2, 0)


def test_the_report_profiles_the_capture_by_second_and_value_size(tmp_path: Path) -> None:
    config = capture(
        tmp_path,
        '1.5 [0 a:1] "SET" "k" "vv"',
        '1.75 [0 a:1] "SET" "k" "vvvv"',
        '2.25 [0 b:2] "GET" "k"',
    )
    scan = scan_capture(config)
    config = replace(config, commands=tuple(scan.names), clients=2)
    feed = MonitorFeed(config, 0, 1, 2, seed=1)
    feed.prepare()
    profile = feed.report()["profile"]
    assert (profile["rows"], profile["ops"]) == (3, {"set": 2, "get": 1})
    assert profile["per_second"] == [(1, 2), (2, 1)]
    assert profile["value_sizes"] == [(2, 1), (4, 1)]
    assert (profile["first_time_s"], profile["last_time_s"]) == (1.5, 2.25)
    assert profile["whole_seconds"] is False
