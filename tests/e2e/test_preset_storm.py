"""memcached-storm against a real memcached: running totals and averages recomputed from
the printed figures, the get phase reading what the set phase wrote, timestamps verified,
and the original's keys."""

from __future__ import annotations

import csv
import re
import socket
import struct
import time
from pathlib import Path

import pytest

from kvbench.config.targets import parse_target
from kvbench.runner.probe import fetch_stats
from tests.support import servers
from tests.support.cli import all_phase_counts, read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration

LIVE = re.compile(r"^\[\s*([\d.]+)s\].*\btotal ([\d,]+) avg [\d.,]+[kM]?/s")
PHASE_END = re.compile(
    r"^(\S+) ends: total ([\d,]+) ops in ([\d.]+)s, average \S+ ops/s \(([\d,.]+)/s\), errors (\d+)"
)


def counters(server: Server) -> dict[str, int]:
    stats = fetch_stats(parse_target(f"memcached://{server.address}", "test"))
    return {k: int(stats[k]) for k in ("cmd_set", "get_hits", "get_misses", "curr_items")}


def stored_keys(server: Server) -> list[bytes]:
    """The keys the server holds (memcached's LRU crawler). The dump's lines end in LF
    alone (its END in CRLF); until 2026-12-04 this split them at CRLF and so saw one key,
    the first, whatever the server held. The crawler walks the LRUs live, so a dump taken
    while the LRU maintainer still moves fresh items may miss or repeat a few."""
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(b"lru_crawler metadump all\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = sock.recv(65536)
            assert chunk, "memcached closed the connection"
            data += chunk
    return [
        line.split(b" ", 1)[0].removeprefix(b"key=")
        for line in data.splitlines()
        if line.startswith(b"key=")
    ]


def storm(server: Server, tmp_path: Path, *flags: str) -> tuple[str, dict, list[dict[str, str]]]:
    result = run_kvbench(
        "run",
        "--preset",
        "memcached-storm",
        f"memcached://{server.address}",
        "-c",
        "8",
        "--processes",
        "2",
        "--json",
        str(tmp_path / "storm.json"),
        "--csv",
        str(tmp_path / "storm.csv"),
        "--no-save",
        *flags,
        timeout_s=180,
    )
    assert result.code == 0, result.stderr + result.stdout
    with open(tmp_path / "storm.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return result.stdout, read_json(tmp_path / "storm.json"), rows


def test_storm_lines_add_up_and_gets_read_what_the_sets_wrote(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """A 1 s set phase, then a 3 s get phase (was: 85.8% hits for a 1 s variant; no
    cumulative ops or running average; --verify refused with timestamp values)."""
    before = counters(fresh_memcached)
    started_ms = time.time_ns() // 1_000_000
    stdout, doc, rows = storm(
        fresh_memcached, tmp_path, "--duration", "1s", "--verify", "--key-prefix", ""
    )
    sets_doc, gets_doc = (run["document"] for run in doc["runs"])
    after = counters(fresh_memcached)
    # Server counters: every set (window and drain) stored, every get a hit.
    assert after["cmd_set"] - before["cmd_set"] == all_phase_counts(sets_doc, "set")
    hits = all_phase_counts(gets_doc, "get", "hit")
    gets = all_phase_counts(gets_doc, "get")
    assert after["get_hits"] - before["get_hits"] == hits
    assert after["get_misses"] - before["get_misses"] == gets - hits
    assert hits >= 0.99 * gets and gets > 0
    # --verify: every hit checked as an 8-byte time from the set phase (in the window's
    # bounds, by the compiled pumps); none bad.
    assert gets_doc["environment"]["driver"] == "compiled loop"
    verified = gets_doc["verify"]
    assert verified["checked"] == hits and verified["mismatches"] == 0
    # The original's keys: a random float and a counter, ~25 bytes, no prefix.
    keys = stored_keys(fresh_memcached)
    assert len(set(keys)) >= after["curr_items"] / 2 > 0  # every key, or most of them
    assert all(re.fullmatch(rb"(0\.\d+|\d\.\d+e-\d+)\d+", k) for k in keys)
    assert 18 <= sum(map(len, keys)) / len(keys) <= 28
    # CSV: cumulative = sum of the intervals' counts; average = cumulative / elapsed.
    for step in ("set-only", "get-only"):
        series = [r for r in rows if r["step"] == step]
        running = 0
        for r in series:
            running += int(r["succeeded"])
            assert int(r["total"]) == running
            assert float(r["avg_per_s"]) == pytest.approx(running / float(r["t_s"]), rel=2e-3)
    # Live lines and each phase's end line, from the printed figures alone.
    lines = stdout.splitlines()
    ends = [m for m in map(PHASE_END.match, lines) if m]
    assert [m[1] for m in ends] == ["set-only", "get-only"]
    for end, step in zip(ends, ("set-only", "get-only"), strict=True):
        series = [r for r in rows if r["step"] == step]
        total = int(end[2].replace(",", ""))
        assert total == sum(int(r["succeeded"]) for r in series)
        assert float(end[4].replace(",", "")) == pytest.approx(total / float(end[3]), rel=2e-3)
        assert int(end[5]) == 0
    live_totals = [int(m[2].replace(",", "")) for m in map(LIVE.match, lines) if m]
    assert live_totals == [int(r["total"]) for r in rows]
    # Every value a timestamp from the set phase (read back directly).
    with socket.create_connection((fresh_memcached.host, fresh_memcached.port)) as sock:
        sock.sendall(b"get " + keys[0] + b"\r\n")
        time.sleep(0.1)
        reply = sock.recv(4096)
    value = reply.split(b"\r\n")[1]
    assert len(value) == 8
    assert started_ms <= struct.unpack(">Q", value)[0] <= time.time_ns() // 1_000_000


def test_get_phase_hits_whatever_the_phase_lengths(fresh_memcached: Server, tmp_path: Path) -> None:
    """Gets outrun sets (the compiled driver's gets are faster) in a 1 s variant: still
    every get reads a key the set phase wrote."""
    _, doc, _ = storm(fresh_memcached, tmp_path, "--duration", "1s", "--no-live")
    gets_doc = doc["runs"][1]["document"]
    gets = all_phase_counts(gets_doc, "get")
    assert all_phase_counts(gets_doc, "get", "hit") >= 0.99 * gets > 0


def test_verify_counts_bad_timestamps(fresh_memcached: Server, tmp_path: Path) -> None:
    """Timestamp values under --verify: not 8 bytes, or a time not yet come, is bad."""
    now_ms = time.time_ns() // 1_000_000
    good = struct.pack(">Q", now_ms - 1000)
    values = [good] * 6 + [b"abc", struct.pack(">Q", now_ms + 10**9)]  # 2 bad of 8
    with socket.create_connection((fresh_memcached.host, fresh_memcached.port)) as sock:
        for i, value in enumerate(values):
            sock.sendall(b"set k%d 0 0 %d\r\n%s\r\n" % (i, len(value), value))
            assert sock.recv(100) == b"STORED\r\n"
    out = tmp_path / "verify.json"
    result = run_kvbench(
        "run",
        f"memcached://{fresh_memcached.address}",
        "--ratio",
        "0:1",
        "--keys",
        "8",
        "--key-prefix",
        "k",
        "--key-pattern",
        "sequential",
        "--value-kind",
        "timestamp",
        "--verify",
        "-n",
        "80",
        "-c",
        "1",
        "--processes",
        "1",
        "--max-error-rate",
        "50%",
        "--json",
        str(out),
        "--no-save",
        "--no-live",
    )
    doc = read_json(out)
    assert doc["environment"]["driver"] == "compiled loop"  # (the pumps check in C)
    assert doc["verify"]["checked"] == 80
    assert doc["verify"]["mismatches"] == 20, result.stdout
    assert "20 MISMATCHES" in result.stdout


def test_refused_values_are_no_throughput_in_the_running_totals(tmp_path: Path) -> None:
    """Every set refused (values over memcached's -I 1k item limit): each live line's and
    CSV row's running total and average count successes only, so they stay 0 (was: every
    error reply added, e.g. ``total 40, avg_per_s 1666.7`` beside ``per_s 0.0``)."""
    with servers.memcached("-I", "1k", "-o", "slab_chunk_max=512") as server:
        before = counters(server)
        result = run_kvbench(
            "run", f"memcached://{server.address}", "--ratio", "1:0", "--value-size", "2000",
            "--allow-oversize",
            "-c", "2", "--duration", "2s", "--interval", "0.5s",
            "--csv", str(tmp_path / "refused.csv"), "--no-save",
        )  # fmt: skip
        after = counters(server)
    assert result.code == 1, result.stderr + result.stdout
    assert after["cmd_set"] - before["cmd_set"] == 0  # the server stored none of them
    with open(tmp_path / "refused.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and sum(int(r["count"]) for r in rows) > 0
    running = 0
    for r in rows:
        assert int(r["succeeded"]) == 0
        running += int(r["succeeded"])
        assert int(r["total"]) == running == 0
        assert float(r["avg_per_s"]) == 0.0
    live = [m for m in map(LIVE.match, result.stdout.splitlines()) if m]
    assert live and all(m[2] == "0" for m in live)
    assert all(" avg 0/s" in m[0] for m in live)


def test_get_phase_spans_only_the_sets_that_were_stored(tmp_path: Path) -> None:
    """A memcached that refuses sets once full (-M, 2 MB): the get phase's key span is
    the slowest worker's successful sets, so no worker reads more keys than the server
    stored (was: every set sent, refused ones too, e.g. a span of 72,625 keys per worker
    after 21,243 sets stored). 40,000 sets, counted (-n replaces the preset's duration),
    are more than the server can hold however slowly a busy machine sends them (a 1 s
    phase on a loaded CI machine once sent fewer, and none was refused)."""
    out = tmp_path / "full.json"
    with servers.memcached("-m", "2", "-M") as server:
        before = counters(server)
        result = run_kvbench(
            "run", "--preset", "memcached-storm", f"memcached://{server.address}",
            "-c", "8", "--processes", "2", "-n", "40000",
            "--json", str(out), "--no-save", "--no-live",
            timeout_s=180,
        )  # fmt: skip
        after = counters(server)
    assert result.code == 1, result.stderr + result.stdout  # the refused sets fail the set phase
    sets_doc, gets_doc = (run["document"] for run in read_json(out)["runs"])
    stored = after["cmd_set"] - before["cmd_set"]
    refused = all_phase_counts(sets_doc, "set") - stored
    assert refused > 0, "the server refused no set: fill it faster"
    workers = sets_doc["workers"]
    assert sum(w["succeeded"] for w in workers) <= stored
    span = gets_doc["config"]["workload"]["key_span"]
    assert span == min(w["succeeded"] for w in workers)
    assert span * len(workers) <= stored
