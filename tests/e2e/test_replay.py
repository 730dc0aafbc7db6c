"""``kvbench replay`` end to end against real servers: what was sent equals what the
server counted, by op, on both drivers (the compiled pumps and the Python connections);
each write carries its row's TTL; a bad row is one line and exit 2; ``--speed`` scales the
span; the replay is a stored run whose trace section every output shows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kvbench.config.targets import parse_target
from kvbench.engine import fastpath
from kvbench.runner.probe import fetch_stats
from tests.support import pump_oracle
from tests.support.cli import all_phase_counts, kvbench_argv, read_json, read_until, run_kvbench
from tests.support.servers import Server
from tests.support.traces import WRITES, Row, every_op_rows, write_trace

pytestmark = pytest.mark.integration

# Each replay test runs on both drivers: the compiled pumps (every protocol's pump sends
# every op its replay mapping has), and the Python connections.
DRIVERS = ("compiled", "python")


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> str:
    """The driver a test's replays run on: the compiled one (where the build has it) or
    the Python one (``KVBENCH_PURE_PYTHON``)."""
    if request.param == "compiled":
        pump_oracle.require_compiled()
    return str(request.param)


def driver_env(driver: str) -> dict[str, str]:
    return {fastpath.PURE_PYTHON_ENV: "1"} if driver == "python" else {}


def replay_max(
    trace: Path, url: str, tmp_path: Path, *flags: str, driver: str = "compiled"
) -> dict[str, Any]:
    """``kvbench replay TRACE URL --speed max FLAGS`` on ``driver``: its result document,
    checked to record the driver it ran on."""
    out = tmp_path / "run.json"
    result = run_kvbench(
        "replay", str(trace), url, "--speed", "max", *flags, "--no-save", "--no-live", "--json", str(out),
        env=driver_env(driver),
    )  # fmt: skip
    assert result.code in (0, 1), result.stderr
    doc = read_json(out)
    check_driver(doc, driver)
    return doc


def check_driver(doc: dict[str, Any], driver: str) -> None:
    """The run records the driver it ran on."""
    if driver == "python":
        expected = f"python ({fastpath.PURE_PYTHON_ENV} is set)"
    elif fastpath.compiled():
        expected = "compiled loop"
    else:
        return
    assert doc["environment"]["driver"] == expected
    assert {w["driver"] for w in doc["workers"]} == {expected}


def memcached_stats(server: Server) -> dict[str, int]:
    raw = fetch_stats(parse_target(f"memcached://{server.address}"))
    return {k: int(v) for k, v in raw.items() if v.isdigit()}


def deltas(before: dict[str, int], after: dict[str, int], *names: str) -> int:
    return sum(after.get(n, 0) - before.get(n, 0) for n in names)


@pytest.mark.parametrize("scheme", ["memcached", "memcached+meta", "memcached+binary"])
def test_memcached_counters_equal_the_requests_sent(
    fresh_memcached: Server, tmp_path: Path, scheme: str, driver: str
) -> None:
    """Every trace op, two processes, keys fitted to their sizes: each of memcached's
    counters grew by exactly the requests of the ops it counts, and every row was sent
    (on the compiled pumps too: all eleven ops on text and meta, ten on binary)."""
    rows = every_op_rows(4000)
    trace = write_trace(tmp_path / "t.csv.zst", rows, compress=True)
    before = memcached_stats(fresh_memcached)
    doc = replay_max(trace, f"{scheme}://{fresh_memcached.address}", tmp_path, "-c", "6",
                     "-P", "4", "--processes", "2", driver=driver)  # fmt: skip
    after = memcached_stats(fresh_memcached)
    ops = {name: row["count"] for name, row in doc["ops"].items()}
    trace_ops = Counter(r[5] for r in rows)
    assert doc["trace"]["profile"]["ops"] == dict(trace_ops)
    if scheme == "memcached+binary":  # a tokenless cas cannot be sent (CAS 0 is no check)
        assert doc["trace"]["sent"]["skipped"] == {
            "cas has no memcache-binary form without a token (CAS 0 is no check)": trace_ops["cas"]
        }
        del trace_ops["cas"]
        ops.setdefault("cas", 0)
        trace_ops["cas"] = 0
    assert doc["trace"]["sent"]["total"] == sum(trace_ops.values()) == sum(ops.values())
    assert ops == {op: n for op, n in trace_ops.items()}  # each row sent as itself
    assert deltas(before, after, "cmd_get") == ops["get"] + ops["gets"]
    hits = sum(doc["ops"][op]["outcomes"].get("hit", 0) for op in ("get", "gets"))
    assert deltas(before, after, "get_hits") == hits
    assert deltas(before, after, "cmd_set") == sum(ops[op] for op in WRITES)
    assert deltas(before, after, "delete_hits", "delete_misses") == ops["delete"]
    assert deltas(before, after, "incr_hits", "incr_misses") == ops["incr"]
    assert deltas(before, after, "decr_hits", "decr_misses") == ops["decr"]
    assert deltas(before, after, "cas_hits", "cas_badval", "cas_misses") == ops["cas"]
    assert doc["totals"]["errors"] == 0
    assert all(r["matches"] for r in doc["server"]["reconciliation"])


@pytest.mark.parametrize("resp", [2, 3])
def test_redis_counters_equal_the_requests_sent(
    fresh_redis: Server, tmp_path: Path, driver: str, resp: int
) -> None:
    """On Redis: gets is a GET, add and replace SET NX/XX; cas and prepend have no form
    and are skipped and counted; each command's calls grew by the requests sent as it.
    Over RESP3 too, where a refused SET NX/XX is answered by RESP3's null."""
    rows = every_op_rows(3000)
    trace = write_trace(tmp_path / "t.csv", rows)
    before = redis_calls(fresh_redis)
    url = f"redis://{fresh_redis.address}/0?resp={resp}"
    doc = replay_max(trace, url, tmp_path, "-c", "4", "-P", "8", driver=driver)
    after = redis_calls(fresh_redis)
    ops = {name: row["count"] for name, row in doc["ops"].items()}
    trace_ops = Counter(r[5] for r in rows)
    sent = doc["trace"]["sent"]
    assert sent["skipped"] == {
        f"cas has no resp{resp} form": trace_ops["cas"],
        f"prepend has no resp{resp} form": trace_ops["prepend"],
    }
    assert sent["total"] == len(rows) - trace_ops["cas"] - trace_ops["prepend"]
    assert ops["get"] == trace_ops["get"] + trace_ops["gets"]

    def grew(command: str) -> int:
        return after.get(command, 0) - before.get(command, 0)

    assert grew("get") == ops["get"]
    assert grew("set") == ops["set"] + ops["add"] + ops["replace"]
    assert grew("append") == ops["append"]
    assert grew("del") == ops["delete"]
    assert grew("incr") == ops["incr"]
    assert grew("decr") == ops["decr"]
    assert doc["totals"]["errors"] == 0


def test_lanes_with_few_clients_finish_with_every_row_sent(
    fresh_memcached: Server, tmp_path: Path, driver: str
) -> None:
    """Two clients on six connections: most lanes never get a row, one client's rows come
    only after the other's; every lane waits (its pump sends nothing) until it has rows or
    the trace ends, and the replay ends with every row sent and counted by the server."""
    rows = [
        (i // 1000, f"k:{i % 700}", 5, 20 if i % 4 == 0 else 0, "early" if i < 3000 else "late",
         "set" if i % 4 == 0 else "get", 0)
        for i in range(4000)
    ]  # fmt: skip
    trace = write_trace(tmp_path / "t.csv", rows)
    before = memcached_stats(fresh_memcached)
    url = f"memcached://{fresh_memcached.address}"
    doc = replay_max(trace, url, tmp_path, "-c", "6", "-P", "4", driver=driver)
    after = memcached_stats(fresh_memcached)
    assert doc["status"] == "ok" and doc["totals"]["ops"] == 4000 == doc["trace"]["sent"]["total"]
    assert deltas(before, after, "cmd_get") == doc["ops"]["get"]["count"] == 3000
    assert deltas(before, after, "cmd_set") == doc["ops"]["set"]["count"] == 1000
    assert doc["connections"]["errors"] == 0 and doc["totals"]["errors"] == 0


def redis_calls(server: Server) -> dict[str, int]:
    raw = fetch_stats(parse_target(f"redis://{server.address}"))
    return {
        k.removeprefix("cmdstat_"): int(v.split("calls=")[1].split(",")[0])
        for k, v in raw.items()
        if k.startswith("cmdstat_")
    }


@pytest.mark.parametrize("line", [3, 40_000])
def test_a_bad_row_is_one_line_naming_the_file_and_line(
    memcached_server: Server, tmp_path: Path, line: int
) -> None:
    """In the first block (found before connecting) or deep in the file (found by a worker
    reading the trace before anything is sent): one line, the file and line number, exit
    2, nothing stored."""
    rows = [(i // 1000, f"k:{i % 500}", 5, 0, i % 7, "get", 0) for i in range(45_000)]
    path = write_trace(tmp_path / "bad.csv", rows)
    lines = path.read_text().splitlines()
    lines[line - 1] = lines[line - 1].replace(",get,", ",fetch,")
    path.write_text("\n".join(lines) + "\n")
    db = tmp_path / "h.db"
    result = run_kvbench(
        "replay",
        str(path),
        f"memcached://{memcached_server.address}",
        "--speed",
        "max",
        "-c",
        "2",
        "--db",
        str(db),
        "--no-live",
    )
    assert result.code == 2, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1, result.stderr
    assert f"{path}:{line}: unknown operation 'fetch'" in errors[0]
    assert "Traceback" not in result.stderr + result.stdout
    listed = run_kvbench("history", "--db", str(db))
    assert "replay" not in listed.stdout and "bad.csv" not in listed.stdout


def test_speed_2_takes_half_the_traces_span(
    memcached_server: Server, tmp_path: Path, driver: str
) -> None:
    """A 4 s trace at --speed 2: its requests go out over about 2 s, each at its row's time
    (rows of one second spread over it) halved; offered per interval follows the trace.
    On the compiled driver the open-loop dispatcher hands each pump its lane's due rows
    (``Pump.issue_scheduled``)."""
    rows = [
        (i // 150, f"k:{i % 300}", 6, 0 if i % 3 else 50, i % 5, "get" if i % 3 else "set", 0)
        for i in range(600)
    ]
    trace = write_trace(tmp_path / "t.csv", rows)
    out = tmp_path / "run.json"
    result = run_kvbench(
        "replay",
        str(trace),
        f"memcached://{memcached_server.address}",
        "--speed",
        "2",
        "-c",
        "4",
        "--interval",
        "500ms",
        "--no-save",
        "--no-live",
        "--json",
        str(out),
        env=driver_env(driver),
    )
    assert result.code == 0, result.stderr + result.stdout
    doc = read_json(out)
    check_driver(doc, driver)
    # The last row is due at (3 + 149/150) / 2 = 1.997 s; replies follow within the run.
    assert 1.95 <= doc["window_s"] <= 2.4, doc["window_s"]
    assert doc["mode"] == "open"
    assert doc["trace"]["sent"]["replay_span_s"] == 2.0
    assert doc["trace"]["sent"]["offered_per_s"] == 300.0
    assert doc["totals"]["ops"] == 600
    offered = sum(
        round(r["offered_per_s"] * r["length_s"])
        for r in doc["intervals"]
        if r.get("offered_per_s") is not None
    )
    assert offered == 600


def test_a_replay_is_a_stored_run_with_its_trace_section(
    memcached_server: Server, tmp_path: Path
) -> None:
    """show, show --json, export --json and the HTML report give the trace section the
    run printed: the same document."""
    rows = every_op_rows(800, seconds=2)
    trace = write_trace(tmp_path / "t.csv", rows, header=True)
    db = tmp_path / "h.db"
    out = tmp_path / "run.json"
    page = tmp_path / "run.html"
    result = run_kvbench(
        "replay",
        str(trace),
        f"memcached://{memcached_server.address}",
        "--speed",
        "max",
        "--limit",
        "500",
        "-c",
        "3",
        "--db",
        str(db),
        "--json",
        str(out),
        "--report",
        str(page),
        "--no-live",
    )
    assert result.code in (0, 1), result.stderr
    assert "trace " in result.stdout and "op mix:" in result.stdout
    printed = read_json(out)["trace"]
    assert printed["profile"]["rows"] == 500 == printed["sent"]["total"]
    assert printed["slice"]["limit"] == 500
    shown = run_kvbench("show", "last", "--db", str(db), "--json")
    assert json.loads(shown.stdout)["trace"] == printed
    plain = run_kvbench("show", "last", "--db", str(db))
    assert "op mix:" in plain.stdout
    exported = tmp_path / "export.json"
    run_kvbench("export", "last", "--db", str(db), "--json", str(exported))
    assert read_json(exported)["trace"] == printed
    html = page.read_text()
    assert "Trace" in html and 'data-chart="trace-rate"' in html
    assert f'data-doc="/0/trace/sent/total" data-value="{printed["sent"]["total"]}"' in html


def _ask(server: Server, request: bytes, end: bytes) -> bytes:
    import socket

    host, port = server.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        while not data.endswith(end):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


TTL_ROWS: list[Row] = [
    (0, "ttl:long", 8, 10, 1, "set", 1000),
    (0, "ttl:short", 9, 10, 2, "set", 50),
    (0, "ttl:none", 8, 10, 1, "set", 0),
    (0, "ttl:added", 9, 10, 1, "add", 70),
    # a get of the item with no expiry: a get moves an item's last access (memcached's
    # "la", which the TTLs below are read against) to its own second
    (0, "ttl:none", 8, 0, 1, "get", 0),
]


@pytest.mark.parametrize("scheme", ["memcached", "memcached+meta", "memcached+binary"])
def test_each_write_is_sent_with_its_rows_ttl_memcached(
    fresh_memcached: Server, tmp_path: Path, driver: str, scheme: str
) -> None:
    """Writes of four TTLs on two connections: each chunk of a lane carries its own (the
    compiled stream's too), and the server's items have their rows' TTLs."""
    trace = write_trace(tmp_path / "t.csv", TTL_ROWS)
    url = f"{scheme}://{fresh_memcached.address}"
    assert replay_max(trace, url, tmp_path, "-c", "2", driver=driver)["status"] == "ok"
    dump = _ask(fresh_memcached, b"lru_crawler metadump all\r\n", b"END\r\n").decode()
    items = {
        fields["key"]: fields
        for line in dump.splitlines()
        if line.startswith("key=")
        for fields in [dict(part.split("=", 1) for part in line.split())]
    }
    ttls = {
        key.replace("%3A", ":"): int(f["exp"]) - int(f["la"]) if f["exp"] != "-1" else 0
        for key, f in items.items()
    }
    assert ttls == {"ttl:long": 1000, "ttl:short": 50, "ttl:none": 0, "ttl:added": 70}


def test_a_ttl_over_30_days_still_stores_on_memcached(
    fresh_memcached: Server, tmp_path: Path, driver: str
) -> None:
    """memcached reads an exptime over 30 days as a Unix time (1970: expired at once), so
    a get after the set missed with status ok; it is sent as 30 days and counted."""
    rows = [(0, "month:a", 7, 10, 1, "set", 31 * 24 * 3600), (0, "month:a", 7, 0, 1, "get", 0)]
    trace = write_trace(tmp_path / "t.csv", rows)
    doc = replay_max(trace, f"memcached://{fresh_memcached.address}", tmp_path, "-c", "1",
                     driver=driver)  # fmt: skip
    assert doc["ops"]["get"]["outcomes"] == {"hit": 1}
    assert doc["trace"]["sent"]["ttls_clamped"] == 1
    assert doc["status"] == "ok"


def test_each_write_is_sent_with_its_rows_ttl_redis(
    fresh_redis: Server, tmp_path: Path, driver: str
) -> None:
    trace = write_trace(tmp_path / "t.csv", TTL_ROWS)
    url = f"redis://{fresh_redis.address}"
    assert replay_max(trace, url, tmp_path, "-c", "2", driver=driver)["status"] == "ok"
    got = {}
    for key in ("ttl:long", "ttl:short", "ttl:none", "ttl:added"):
        reply = _ask(fresh_redis, b"TTL %s\r\n" % key.encode(), b"\r\n")
        got[key] = int(reply[1:-2])
    assert 990 <= got["ttl:long"] <= 1000 and 40 <= got["ttl:short"] <= 50
    assert got["ttl:none"] == -1 and 60 <= got["ttl:added"] <= 70


@pytest.mark.parametrize("speed", ["max", "4"])
def test_the_replays_html_report_draws_the_trace_in_a_browser(
    memcached_server: Server, tmp_path: Path, speed: str
) -> None:
    """Opened in headless Chromium: no console output, every chart drawn (the trace's rate
    among them), each figure of the trace tables equal to the document's."""
    from tests.integration.test_html_report_browser import load
    from tests.support.report_page import resolve

    trace = write_trace(tmp_path / "t.csv", every_op_rows(600, seconds=2))
    out, page = tmp_path / "run.json", tmp_path / "run.html"
    result = run_kvbench(
        "replay", str(trace), f"memcached://{memcached_server.address}", "--speed", speed,
        "-c", "3", "--no-save", "--no-live", "--json", str(out), "--report", str(page),
        "--max-error-rate", "100%",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    shown = load(tmp_path, page)
    charts = {f.get("data-chart") for f in shown.figures}
    assert "trace-rate" in charts
    doc = read_json(out)
    trace_cells = [(p, v) for p, v, _ in shown.cells if p.startswith("/0/trace/")]
    assert len(trace_cells) > 10
    for pointer, value in trace_cells:
        assert json.loads(value) == resolve([doc], pointer), pointer


@pytest.mark.parametrize("flags", [(), ("--from", "100")], ids=["empty", "slice"])
def test_nothing_to_replay_is_a_config_error(
    memcached_server: Server, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    path = tmp_path / "t.csv"
    if flags:
        write_trace(path, [(s, "k", 1, 0, 1, "get", 0) for s in range(5)])
    else:
        path.write_bytes(b"")
    result = run_kvbench(
        "replay",
        str(path),
        f"memcached://{memcached_server.address}",
        *flags,
        "--no-save",
        "--no-live",
    )
    assert result.code == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"kvbench: error: {path}: no rows to replay (of 5 lines read): an "
        "empty trace, or --from/--to outside its times"
        if flags  # found only when the slice is read
        else f"kvbench: error: {path}: no rows to replay: the trace holds nothing"
    ]


def _spool_in(directory: Path) -> Path | None:
    """The /proc path of a process's open file in ``directory`` (the replay's spool: a
    nameless file in TMPDIR), or None while no process has one."""
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            if os.readlink(fd).startswith(str(directory)):
                return fd
        except OSError:  # (a process or descriptor gone meanwhile)
            continue
    return None


@pytest.mark.parametrize("speed", ["1", "max"])
def test_a_spool_cut_short_mid_replay_fails_the_run_in_one_line(
    fresh_memcached: Server, tmp_path: Path, driver: str, speed: str
) -> None:
    """The replay's spool cut to nothing while the replay runs (a failing disk, a file
    truncated under it): the lane that reads its next segment back finds it short, and the
    run ends then as partial (exit 4), that one line saying why, what was sent counted and
    equal to the server's count. Before, a replay at --speed max waited for ever for the
    lane whose connection had stopped, and a timed one ended as a bug with a traceback's
    last line. Every other row stores alternately for 60 s and 3600 s: each row is a
    segment of its own, read back as it comes due."""
    rows = 100_000 if speed == "max" else 2_000  # (max: about 5 s at pipeline 1, 3 s at best)
    trace = write_trace(
        tmp_path / "t.csv",
        [(i // 100, f"k:{i % 50}", 4, 20, "c0", "set", 60 if i % 2 else 3600) for i in range(rows)],
    )
    # (not under tmp_path: the workers' Unix socket is made in TMPDIR too, and pytest-xdist's
    # tmp_path is too long a TMPDIR for one)
    spool_dir = Path(tempfile.mkdtemp(prefix="kvbench-spool-", dir="/tmp"))
    out = tmp_path / "run.json"
    before = memcached_stats(fresh_memcached)
    proc = subprocess.Popen(
        kvbench_argv(
            "replay", str(trace), f"memcached://{fresh_memcached.address}", "-c", "1",
            "-P", "1", "--speed", speed, "--no-save", "--json", str(out),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ, "TMPDIR": str(spool_dir), "COLUMNS": "200", "PYTHONUNBUFFERED": "1",
            **driver_env(driver),
        },
    )  # fmt: skip
    try:
        lines = read_until(proc, "[   1.0s]")  # running
        assert any("[   1.0s]" in line for line in lines), "".join(lines) + proc.communicate()[1]
        spool = _spool_in(spool_dir)
        assert spool is not None
        fd = os.open(spool, os.O_WRONLY)
        os.ftruncate(fd, 0)
        os.close(fd)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        shutil.rmtree(spool_dir, ignore_errors=True)
    assert proc.returncode == 4, stdout + stderr
    cut = [line for line in stdout.splitlines() if "the replay's spool in" in line]
    assert len(cut) == 1 and "was cut short while it ran" in cut[0], cut
    assert cut[0].endswith("(seen: replay_spool 1 time)"), cut
    assert "Traceback" not in stderr
    doc = read_json(out)
    assert doc["status"] == "partial"
    sent = all_phase_counts(doc, "set")
    assert 0 < sent < rows
    assert deltas(before, memcached_stats(fresh_memcached), "cmd_set") == sent
