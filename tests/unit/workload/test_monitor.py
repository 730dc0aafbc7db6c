"""The MONITOR capture reader: lines as ``redis-cli monitor`` prints them (Redis 7.0's
``replicationFeedMonitors`` + ``sdscatrepr``), odd client fields, bad lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbench.errors import ConfigError
from kvbench.workload.monitor import (
    MonitorCommand,
    MonitorReader,
    detect_format,
    parse_line,
    skip_reason,
)


def read(tmp_path: Path, text: bytes) -> tuple[list[MonitorCommand], MonitorReader]:
    path = tmp_path / "monitor.log"
    path.write_bytes(text)
    reader = MonitorReader(path)
    return list(reader.commands()), reader


def test_a_line_is_time_db_client_and_arguments() -> None:
    line = b'1701234567.123456 [0 10.0.0.5:51234] "SET" "user:1" "v"'
    assert parse_line(line) == (1701234567.123456, 0, b"10.0.0.5:51234", (b"SET", b"user:1", b"v"))


def test_sdscatrepr_escapes_are_undone() -> None:
    # What Redis wrote for SET bin "\xff\x00\t" and SET a "x y\n\"q" (captured from 7.0.15),
    # and the other escapes sdscatrepr writes.
    _, _, _, argv = parse_line(
        b'1.5 [1 127.0.0.1:4] "SET" "bin" "\\xff\\x00\\t" "x y\\n\\"q" "\\\\\\r\\a\\b" "\\x7F"'
    )
    assert argv[2:] == (b"\xff\x00\t", b'x y\n"q', b"\\\r\a\b", b"\x7f")


def test_empty_arguments_and_spaces_inside_quotes() -> None:
    assert parse_line(b'2 [3 c:1] "HSET" "" " a b "')[3] == (b"HSET", b"", b" a b ")


@pytest.mark.parametrize(
    ("field", "client"),
    [
        (b"[0 lua]", b"lua"),
        (b"[0 unix:/var/run/redis.sock]", b"unix:/var/run/redis.sock"),
        (b"[15 [::1]:6379]", b"[::1]:6379"),
        (b"[2 [fe80::1%eth0]:51234]", b"[fe80::1%eth0]:51234"),
    ],
)
def test_odd_client_fields(field: bytes, client: bytes) -> None:
    _, _, got, argv = parse_line(b"1701234567.000001 " + field + b' "GET" "k]"')
    assert (got, argv) == (client, (b"GET", b"k]"))


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"hello", "not a MONITOR line"),
        (b'1.0 [x 1.2.3.4:5] "GET"', "not a MONITOR line"),
        (b"1.0 [0 1.2.3.4:5] GET k", "not a MONITOR line"),
        (b'1.0 [0 1.2.3.4:5] "GET" k', "argument 2 is not a quoted string"),
        (b'1.0 [0 1.2.3.4:5] "GET" "k', "argument 2 is not a quoted string"),
        (b'1.0 [0 1.2.3.4:5] "GET""k"', "argument 1 is not a quoted string"),
        (b'1.0 [0 1.2.3.4:5] ""', "an empty command name"),
    ],
)
def test_a_bad_line_says_what_is_wrong(line: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_line(line)


def test_the_ok_line_blank_lines_and_crlf_are_skipped(tmp_path: Path) -> None:
    commands, reader = read(tmp_path, b'OK\r\n1.0 [0 a:1] "PING"\r\n\r\n2.0 [0 a:1] "GET" "k"\r\n')
    assert [(c.line, c.argv) for c in commands] == [(2, (b"PING",)), (4, (b"GET", b"k"))]
    assert reader.lines_read == 4


def test_a_bad_line_stops_the_read_naming_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        read(tmp_path, b'OK\n1.0 [0 a:1] "PING"\n1.1 [0 a:1] "GET" k\n2.0 [0 a:1] "PING"\n')
    assert str(error.value).count("\n") == 0
    assert "monitor.log:3" in str(error.value)
    assert "argument 2 is not a quoted string" in str(error.value)


def test_a_cut_off_last_line_is_counted_and_left_out(tmp_path: Path) -> None:
    commands, reader = read(tmp_path, b'1.0 [0 a:1] "PING"\n1.1 [0 a:1] "SET" "k" "ab')
    assert [c.argv for c in commands] == [(b"PING",)]
    assert reader.truncated == 1


def test_a_bad_last_line_with_its_newline_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"monitor\.log:2"):
        read(tmp_path, b'1.0 [0 a:1] "PING"\n1.1 [0 a:1] "SET" "k" "ab\n')


def test_an_ok_line_after_the_first_command_is_a_bad_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"monitor\.log:2"):
        read(tmp_path, b'1.0 [0 a:1] "PING"\nOK\n')


def test_format_is_told_by_the_first_line(tmp_path: Path) -> None:
    cases = {
        "ok.log": b'OK\n1.0 [0 a:1] "PING"\n',
        "bare.log": b'1701234567.123456 [0 10.0.0.5:51234] "GET" "k"\n',
        "csv.csv": b"0,key,3,0,1,get,0\n",
        "kvbench.csv": b"timestamp_s,key,key_size,value_size,client_id,operation,ttl_s\n",
    }
    found = {}
    for name, text in cases.items():
        (tmp_path / name).write_bytes(text)
        found[name] = detect_format(str(tmp_path / name))
    assert found == {
        "ok.log": "redis-monitor",
        "bare.log": "redis-monitor",
        "csv.csv": "cache-trace",
        "kvbench.csv": "cache-trace",
    }


@pytest.mark.parametrize(
    ("client", "argv", "reason"),
    [
        (b"lua", (b"set", b"k", b"v"), "run by a script"),
        (b"a:1", (b"AUTH", b"(redacted)"), "auth: the target URL's credentials"),
        (b"a:1", (b"HELLO", b"3"), "hello: the target URL's credentials"),
        (b"a:1", (b"BLPOP", b"q", b"0"), "blpop: blocking"),
        (b"a:1", (b"BLMOVE", b"a", b"b", b"LEFT", b"RIGHT", b"0"), "blmove: blocking"),
        (b"a:1", (b"WAIT", b"1", b"0"), "wait: blocking"),
        (b"a:1", (b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"), "xread block: blocking"),
        (b"a:1", (b"SUBSCRIBE", b"ch"), "subscribe: no reply per request"),
        (b"a:1", (b"UNSUBSCRIBE",), "unsubscribe: no reply per request"),
        (b"a:1", (b"CLIENT", b"REPLY", b"OFF"), "client reply: no reply per request"),
        (b"a:1", (b"XREAD", b"STREAMS", b"s", b"0"), None),
        (b"a:1", (b"MULTI",), None),
        (b"a:1", (b"SELECT", b"1"), None),
        (b"unix:/tmp/r.sock", (b"EVAL", b"return 1", b"0"), None),
    ],
)
def test_what_a_replay_skips(client: bytes, argv: tuple[bytes, ...], reason: str | None) -> None:
    got = skip_reason(MonitorCommand(1, 1.0, 0, client, argv))
    assert (got is None) if reason is None else (got is not None and got.startswith(reason))
