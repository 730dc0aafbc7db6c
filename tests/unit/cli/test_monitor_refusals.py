"""A MONITOR capture's replay refused before any connection: one line, exit 2 (the
listener counts the connections it was offered: tests/unit/cli/test_refusals.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kvbench.cli import main
from tests.support.cli import offered_connections

CAPTURE = b'OK\n1.0 [0 10.0.0.1:1] "SET" "k" "v"\n1.1 [0 10.0.0.1:1] "GET" "k"\n'


def refused(
    capsys: pytest.CaptureFixture[str], listener: socket.socket, content: bytes, tmp_path: Path,
    url: str, *flags: str,
) -> str:  # fmt: skip
    """``kvbench replay`` of ``content`` to ``url`` (``PORT``: the listener's): refused
    with one line and no connection; the line."""
    path = tmp_path / "monitor.log"
    path.write_bytes(content)
    url = url.replace("PORT", str(listener.getsockname()[1]))
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(path), url, "--db", str(tmp_path / "h.db"), *flags])
    out, err = capsys.readouterr()
    assert exited.value.code == 2
    assert out == "" and err.count("\n") == 1
    assert offered_connections(listener) == 0
    return err.removeprefix("kvbench: error: ").rstrip("\n").replace(str(path), "CAPTURE")


@pytest.mark.parametrize(
    ("url", "flags", "message"),
    [
        ("redis://127.0.0.1:PORT", ["-c", "4"], "--connections: a MONITOR capture opens one"),
        ("redis://127.0.0.1:PORT/2", [], "a MONITOR capture names each command's database"),
        ("memcached://127.0.0.1:PORT", [], "a Redis MONITOR capture replays to redis://"),
        ("redis://127.0.0.1:PORT", ["--format", "pcap"], "--format: 'pcap' is not one of"),
        # (a replay's clients each have one connection, to one server: no slots followed)
        ("redis+cluster://127.0.0.1:PORT", [], "TARGET: a replay sends to one server"),
    ],
)
def test_what_a_capture_cannot_be_replayed_as(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    url: str,
    flags: list[str],
    message: str,
) -> None:
    assert message in refused(capsys, listener, CAPTURE, tmp_path, url, *flags)


def test_a_bad_line_and_a_capture_with_nothing_to_send(
    listener: socket.socket, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = CAPTURE + b'1.2 [0 10.0.0.1:1] "GET" "k\n'
    assert refused(capsys, listener, bad, tmp_path, "redis://127.0.0.1:PORT") == (
        "CAPTURE:4: argument 2 is not a quoted string: '\"k'"
    )
    only_skipped = b'OK\n1.0 [0 a:1] "AUTH" "(redacted)"\n1.0 [0 lua] "GET" "k"\n'
    line = refused(capsys, listener, only_skipped, tmp_path, "redis://127.0.0.1:PORT")
    assert line.startswith("CAPTURE: no command to replay (3 lines read, 2 commands skipped)")


def test_value_size_is_a_captures_flag(
    listener: socket.socket, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = b"timestamp_s,key,key_size,value_size,client_id,operation,ttl_s\n0,k,1,0,1,get,0\n"
    line = refused(
        capsys, listener, trace, tmp_path, "redis://127.0.0.1:PORT", "--value-size", "10"
    )
    assert line == "--value-size: resizes a redis-monitor capture's values only"
