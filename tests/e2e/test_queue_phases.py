"""The queue experiment's phases end to end: write only, drain, mixed, one ledger across
them, each phase's figures in the original's units, and puts the server refuses.

Every server here is the memcacheq STAND-IN of tests/support/memcacheq_standin.py: it
stands in for memcacheq 0.2.1 (not packaged for Debian) and answers as 0.2.1 does,
including ``SERVER_ERROR out of memory storing object`` for a message longer than its
``-B``. What these runs prove is kvbench's side: its accounting and its arithmetic.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Result, read_json, run_kvbench
from tests.support.memcacheq_standin import MemcacheqStandin, running_standin

pytestmark = pytest.mark.integration

# A phase's line in the terminal: "over the whole phase: puts 20,000  puts/s 37.2k  gets 0
# gets/s 0  duration 0.537s".
PHASE_LINE = re.compile(
    r"^over the whole phase: puts ([\d,]+)  puts/s ([\d.,]+[kM]?)  gets ([\d,]+)  gets/s ([\d.,]+[kM]?)  "
    r"duration ([\d.]+)s$",
    re.MULTILINE,
)
SUFFIX = {"": 1, "k": 1_000, "M": 1_000_000}


@pytest.fixture
def lossy() -> Iterator[MemcacheqStandin]:
    """Stands in for memcacheq 0.2.1, and loses every 1000th message it acknowledges."""
    with running_standin(drop_every=1000) as server:
        yield server


def queue_run(server: MemcacheqStandin, *args: str) -> Result:
    """``kvbench queue`` on the stand-in's queue ``q``, not stored, no live lines."""
    url = f"memcacheq://127.0.0.1:{server.port}/q"
    return run_kvbench("queue", url, *args, "--no-save", "--no-live")


def printed_rate(text: str) -> tuple[float, float]:
    """A rate as printed (``37.2k``) -> (its value, half its last digit's step)."""
    number, suffix = (text[:-1], text[-1]) if text[-1] in SUFFIX else (text, "")
    number = number.replace(",", "")
    decimals = len(number.split(".")[1]) if "." in number else 0
    scale = SUFFIX[suffix]
    return float(number) * scale, 0.5 * scale * 10**-decimals


def check_rate(count: int, duration_s: float, printed: str, duration_step: float) -> None:
    """The printed rate is the printed count over the printed duration, to the precision
    of both (the duration is printed to the millisecond)."""
    value, half_step = printed_rate(printed)
    if count == 0:
        assert value == 0
        return
    low = count / (duration_s + duration_step / 2)
    high = count / max(1e-9, duration_s - duration_step / 2)
    assert low - half_step <= value <= high + half_step, (count, duration_s, printed)


def test_the_preset_writes_drains_and_mixes_with_one_ledger(
    lossy: MemcacheqStandin, tmp_path: Path
) -> None:
    """Stands in for memcacheq 0.2.1. The write phase (--consumers 0) leaves 20,000
    acknowledged messages queued, the server silently drops 20 of them; the drain
    (--producers 0) reads the rest and counts those 20 lost, across the phases; the mixed
    phase adds 20 more drops of its own. Every printed rate is its printed count over the
    printed duration, and the counts match the server's. (Was: --consumers 0 and
    --producers 0 refused, the preset two runs with a ledger each.)"""
    data_dir = tmp_path / "bdb"
    data_dir.mkdir()
    (data_dir / "log.0000000001").write_bytes(b"x" * 123_456)
    out = tmp_path / "phases.json"
    result = run_kvbench(
        "run",
        "--preset",
        "queue-producer-consumer",
        f"memcacheq://127.0.0.1:{lossy.port}/q",
        "-n",
        "20000",
        "--data-dir",
        str(data_dir),
        "--json",
        str(out),
        "--db",
        str(tmp_path / "h.db"),
        "--no-live",
        timeout_s=300,
    )
    assert result.code == 1, result.stdout + result.stderr  # the lost messages fail it
    doc = read_json(out)
    assert [run["step"] for run in doc["runs"]] == ["write", "drain", "mixed"]
    write, drain, mixed = (run["document"] for run in doc["runs"])
    phases = [d["queue"]["phase"] for d in (write, drain, mixed)]

    # Write only: everything stored stays queued; nothing is lost yet.
    assert (phases[0]["puts"], phases[0]["gets"]) == (20_000, 0)
    assert write["status"] == "ok" and write["queue"]["lost"] == 0
    assert write["queue"]["left_in_queue"] == 20_000
    assert phases[0]["stats_queue_before"] == {"enqueued": 0, "dequeued": 0, "backlog": 0}
    assert phases[0]["stats_queue_after"] == {
        "enqueued": 20_000,
        "dequeued": 0,
        "backlog": 20_000,
    }
    # The drain reads what the server kept; the write's 20 dropped messages are lost.
    assert (phases[1]["puts"], phases[1]["gets"]) == (0, 19_980)
    assert drain["queue"]["lost"] == 20 and drain["status"] == "failed"
    assert drain["queue"]["drained"] is True
    assert drain["queue"]["stop_reason"].startswith("drained: the queue was empty")
    # The drain's backlog starts from what the write left (the client knows it: 20,000
    # acknowledged, none received), never 0 while the queue is full.
    assert drain["queue"]["backlog"]["peak"] == 20_000
    assert phases[1]["stats_queue_after"] == {
        "enqueued": 20_000,
        "dequeued": 19_980,
        "backlog": 20,  # the server's count: it dropped them after counting them enqueued
    }
    # Mixed: its own 20,000, 20 of them dropped: 40 lost over the whole ledger.
    assert (phases[2]["puts"], phases[2]["gets"]) == (20_000, 19_980)
    assert mixed["queue"]["lost"] == len(lossy.dropped) == 40
    assert [p["producer"] for p in mixed["queue"]["producers"]] == [0, 1, 2, 3]
    # The server's own counts: every put it answered STORED and every message it handed out.
    assert sum(p["puts"] for p in phases) == lossy.sets == 40_000
    assert sum(p["gets"] for p in phases) == lossy.get_hits == 39_960
    for phase in phases:
        assert phase["data_dir"] == {"path": str(data_dir), "bytes": 123_456}
        for count, rate in (("puts", "puts_per_s"), ("gets", "gets_per_s")):
            expected = phase[count] / phase["duration_s"] if phase["duration_s"] else 0.0
            assert phase[rate] == pytest.approx(expected, abs=0.06)

    # The terminal: one phase line per run, each rate its count over the printed duration.
    lines = PHASE_LINE.findall(result.stdout)
    assert len(lines) == 3
    for (puts, puts_rate, gets, gets_rate, duration), phase in zip(lines, phases, strict=True):
        assert (int(puts.replace(",", "")), int(gets.replace(",", ""))) == (
            phase["puts"],
            phase["gets"],
        )
        check_rate(phase["puts"], float(duration), puts_rate, 0.001)
        check_rate(phase["gets"], float(duration), gets_rate, 0.001)
    assert "stats queue q (enqueued/dequeued): 0/0 before, 20,000/0 after" in result.stdout
    assert f"data dir {data_dir}: 123,456 bytes" in result.stdout
    # The closing table gives the same figures, phase by phase.
    table = result.stdout.split("each phase in the original's units")[1]
    rows = [line for line in table.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == ["write", "drain", "mixed"]
    for row, (puts, puts_rate, gets, gets_rate, duration) in zip(rows, lines, strict=True):
        cells = [cell.strip() for cell in row.split("│")[2:-1]]
        assert cells[:5] == [puts, puts_rate, gets, gets_rate, f"{duration}s"]
    assert [row.split("│")[7].strip() for row in rows] == ["0", "20", "40"]


def test_every_put_refused_is_a_failed_run_in_the_servers_words(tmp_path: Path) -> None:
    """Stands in for memcacheq 0.2.1 started with -B 64: a 100-byte message is answered
    ``SERVER_ERROR out of memory storing object``. (Was: "(0.00s, ok)", exit 0.)"""
    out = tmp_path / "q.json"
    with running_standin(max_message_bytes=64) as server:
        result = queue_run(server, "-n", "500", "--message-size", "100", "--json", str(out))
        fits = queue_run(server, "-n", "500", "--message-size", "64")
    assert result.code == 1, result.stdout + result.stderr
    doc = read_json(out)
    said = "SERVER_ERROR out of memory storing object"
    assert doc["status"] == "failed"
    assert doc["status_reasons"][0].startswith("every put was refused (500 sent, none stored)")
    assert said in doc["status_reasons"][0]
    assert any(said in line for line in doc["errors"])
    assert doc["queue"]["failed_puts"] == 500 and doc["queue"]["phase"]["puts"] == 0
    assert "status: failed - every put was refused (500 sent, none stored): " in result.stdout
    assert server.refused == 500 and server.sets == 500  # the ones that fit: 500
    assert fits.code == 0, fits.stdout


def test_a_drain_alone_reads_until_the_queue_is_confirmed_empty(tmp_path: Path) -> None:
    """Stands in for memcacheq 0.2.1 holding 300 messages another tool put there: a
    drain (--producers 0) reads them all (foreign: not this run's) and stops only after
    an empty read a --grace after the first."""
    out = tmp_path / "drain.json"
    with running_standin() as server:
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(b"set q 0 0 5\r\nhello\r\n" * 300)
            data = b""
            while data.count(b"STORED\r\n") < 300:
                data += sock.recv(65536)
        drain = ("--producers", "0", "--consumers", "2", "--grace", "300ms")
        result = queue_run(server, *drain, "--json", str(out))
    assert result.code == 0, result.stdout + result.stderr
    doc = read_json(out)
    queue: dict[str, Any] = doc["queue"]
    assert (queue["phase"]["gets"], queue["foreign"], queue["phase"]["puts"]) == (300, 300, 0)
    assert queue["drained"] is True
    assert queue["stop_reason"] == "drained: the queue was empty, and again 0.3s later"
    assert queue["phase"]["stats_queue_after"] == {"enqueued": 300, "dequeued": 300, "backlog": 0}
    assert server.get_hits == 300 and server.gets - server.get_hits == queue["empty_polls"]
    # No producer of this run stored them: the backlog is the server's count or nothing.
    assert queue["backlog"]["peak"] is None and queue["backlog"]["series"] == []
    assert "backlog 0" not in result.stdout and "backlog peak 0" not in result.stdout
    assert "backlog: not known to the client" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("run", "memcached://127.0.0.1:1", "--data-dir", "/tmp"),
            "--data-dir: only for queue runs",
        ),
        (
            ("run", "--preset", "memcached-storm", "memcached://127.0.0.1:1", "--data-dir", "/tmp"),
            "--data-dir: preset memcached-storm runs no queue",
        ),
        (
            ("queue", "memcacheq://127.0.0.1:1/q", "--producers", "0", "--consumers", "0"),
            "--producers: a run needs producers, consumers or both",
        ),
        (
            ("queue", "memcacheq://127.0.0.1:1/q", "--data-dir", "/nonexistent/kvbench"),
            "--data-dir: '/nonexistent/kvbench' is not a directory",
        ),
    ],
)
def test_queue_phase_flags_out_of_place_are_one_line(args: tuple[str, ...], message: str) -> None:
    result = run_kvbench(*args, "--no-save")
    assert result.code == 2, result.stdout + result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
