"""SIGINT, SIGTERM and SIGHUP end a run in every phase, as the user asked (issue 19, A).

Each case starts ``kvbench`` in a session of its own against a real server, waits for the
line that says the phase began, and signals the coordinator alone (as ``kill``,
``timeout`` or a container runtime do). The run must end soon, with exit 128 + the
signal, status ``interrupted``, stored and written, no traceback, and no process of its
session left behind. Was: a SIGINT before the window was lost (the run went on, status
ok, exit 0); SIGTERM left the fork server and the workers running; a preload of millions
of keys ran on to its end; a queue run interrupted while starting stored nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from kvbench.engine.worker import PRELOAD_PIPELINE
from kvbench.results.store import Store
from tests.support import redis_cluster, servers
from tests.support.cli import all_phase_counts, read_json, start_in_session
from tests.support.servers import Server, counters

pytestmark = pytest.mark.integration

# How long a signalled run may take to end on a loaded machine (it takes well under 2 s
# on a quiet one); what decides is what it kept, and that it ended before its planned end.
END_WITHIN_S = 15


def wait_for_line(proc: subprocess.Popen[str], marker: str, timeout_s: float = 90) -> str:
    """Stdout up to the first line holding ``marker``."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while True:
        assert time.monotonic() < deadline, "".join(seen)
        line = proc.stdout.readline()
        assert line, "".join(seen)  # ended before the phase began
        seen.append(line)
        if marker in line:
            return "".join(seen)


def session_processes(sid: int) -> list[psutil.Process]:
    """The live processes of session ``sid`` (the coordinator's, and all it started)."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, PermissionError):
            continue
    return found


def wait_session_empty(sid: int, timeout_s: float = END_WITHIN_S) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while (left := session_processes(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def signal_and_finish(proc: subprocess.Popen[str], signum: int) -> tuple[str, str, float]:
    os.kill(proc.pid, signum)
    sent = time.monotonic()
    stdout, stderr = proc.communicate(timeout=120)
    return stdout, stderr, time.monotonic() - sent


def interrupt_while_stalled(
    proc: subprocess.Popen[str], server: Server, marker: str, stall_s: float
) -> tuple[str, str, float]:
    """Once ``proc`` prints ``marker``, stop ``server`` (SIGSTOP), and ``stall_s`` later
    send SIGINT; the server goes on (SIGCONT) only after ``proc`` has ended."""
    try:
        wait_for_line(proc, marker)
        os.kill(server.proc.pid, signal.SIGSTOP)
        time.sleep(stall_s)
        return signal_and_finish(proc, signal.SIGINT)
    finally:
        proc.kill()
        os.kill(server.proc.pid, signal.SIGCONT)


def assert_kept_as_interrupted(
    proc: subprocess.Popen[str], signum: int, out: Path, db: str, stderr: str, took_s: float
) -> dict:
    assert proc.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert took_s < END_WITHIN_S, took_s
    doc = read_json(out)
    assert doc["status"] == "interrupted"
    with Store(db) as store:
        assert {r["run_id"]: r["status"] for r in store.list_runs()} == {
            doc["run_id"]: "interrupted"
        }
    assert wait_session_empty(proc.pid) == []
    return doc


# (signal, phase, the line that says the phase began, extra flags)
RUN_PHASES = [
    # resolving, probing, starting the workers: the lost Ctrl-C of the issue
    (signal.SIGINT, "start-up", "kvbench: memcached://", ()),
    (signal.SIGHUP, "start-up", "kvbench: memcached://", ()),
    (signal.SIGINT, "preload", "preloading", ("--preload", "--keys", "3000000")),
    (signal.SIGTERM, "window", "[", ()),
]


@pytest.mark.parametrize(
    ("signum", "phase", "marker", "extra"),
    RUN_PHASES,
    ids=[f"{signal.Signals(s).name}-{p}" for s, p, _, _ in RUN_PHASES],
)
def test_a_signal_in_any_phase_ends_the_run_keeping_it(
    fresh_memcached: Server,
    tmp_path: Path,
    signum: int,
    phase: str,
    marker: str,
    extra: tuple[str, ...],
) -> None:
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    proc = start_in_session(
        "run", f"memcached://{fresh_memcached.address}", "--duration", "30s", "-c", "4",
        "--processes", "2", "--json", str(out), "--db", db, *extra,
    )  # fmt: skip
    wait_for_line(proc, marker)
    stdout, stderr, took_s = signal_and_finish(proc, signum)
    doc = assert_kept_as_interrupted(proc, signum, out, db, stderr, took_s)
    assert "status: interrupted" in stdout
    assert f"interrupted ({signal.Signals(signum).name})" in stdout
    if phase == "preload":  # stopped within a round trip, not after 3,000,000 sets
        assert doc["phases"]["preload"]["ops"] < 3_000_000
    if phase == "window":
        assert doc["totals"]["ops"] > 0  # what was measured is kept


def kvbench_code_runs(pid: int, timeout_s: float = 60) -> None:
    """Wait until process ``pid`` runs kvbench's own code: its first import, numpy, is
    mapped (the interpreter's start before it is CPython's: a Ctrl-C while ``site`` is
    imported is a fatal error there, before any code of kvbench's), bounded."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text():
            return
        time.sleep(0.002)
    raise AssertionError(f"pid {pid} never imported numpy")


START_UP_SIGNALS = [
    (signal.SIGINT, 0.0), (signal.SIGINT, 0.1), (signal.SIGINT, 0.2), (signal.SIGINT, 0.4),
    (signal.SIGTERM, 0.0), (signal.SIGTERM, 0.2),
]  # fmt: skip


@pytest.mark.parametrize(
    ("signum", "after_s"),
    START_UP_SIGNALS,
    ids=[f"{signal.Signals(s).name}-{after}s" for s, after in START_UP_SIGNALS],
)
def test_a_signal_at_any_instant_of_start_up_ends_in_a_line_leaving_no_process(
    fresh_memcached: Server, tmp_path: Path, signum: int, after_s: float
) -> None:
    """The kvbench command forks its fork server before it imports its CLI
    (runner/forkserver.py). A Ctrl-C or SIGTERM at any instant from its first import on
    (numpy and the other shared imports, that fork, the CLI's imports, the preflight;
    which one each delay meets is the scheduler's) ends the command with 128 + the
    signal, one line on stderr at most, no traceback, and no process of its session left
    (the server ends with it). Was: inside numpy's import, numpy's ImportError and its
    traceback; inside the import machinery, death by SIGINT (-2) after the line; a
    SIGTERM before the CLI, no line at all."""
    db = str(tmp_path / "h.db")
    proc = start_in_session(
        "run", f"memcached://{fresh_memcached.address}", "--duration", "30s", "-c", "2",
        "--processes", "2", "--db", db,
    )  # fmt: skip
    kvbench_code_runs(proc.pid)
    time.sleep(after_s)
    stdout, stderr, took_s = signal_and_finish(proc, signum)
    assert proc.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) <= 1, stderr
    assert "interrupted" in stdout + stderr  # said, on stderr before the run, else with it
    assert took_s < END_WITHIN_S, took_s
    assert wait_session_empty(proc.pid) == []


def test_ctrl_c_while_a_replay_reads_its_trace(fresh_memcached: Server, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    with trace.open("w") as f:
        for i in range(300_000):
            f.write(f"{i // 1000},key{i % 5000},8,100,{i % 20},{'get' if i % 3 else 'set'},0\n")
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    proc = start_in_session(
        "replay", str(trace), f"memcached://{fresh_memcached.address}", "--json", str(out),
        "--db", db,
    )  # fmt: skip
    wait_for_line(proc, "reading the trace")
    stdout, stderr, took_s = signal_and_finish(proc, signal.SIGINT)
    assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    assert "status: interrupted" in stdout


def test_ctrl_c_while_a_queue_run_starts(redis_server: Server, tmp_path: Path) -> None:
    out, db = tmp_path / "q.json", str(tmp_path / "h.db")
    proc = start_in_session(
        "queue", f"redis-queue://{redis_server.address}/sig", "-n", "2000000", "--json",
        str(out), "--db", db,
    )  # fmt: skip
    wait_for_line(proc, "kvbench queue:")
    stdout, stderr, took_s = signal_and_finish(proc, signal.SIGINT)
    assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    assert "status: interrupted" in stdout


def test_no_process_outlives_a_killed_coordinator(fresh_memcached: Server) -> None:
    """SIGKILL: the coordinator can do nothing; its workers notice and exit at once, the
    fork server after them. Killed during a long preload, which a worker does not stop
    for a message (was: the workers preloaded all 3,000,000 keys for nobody, then died of
    a broken pipe)."""
    url = f"memcached://{fresh_memcached.address}"
    proc = start_in_session(
        "run", url, "--duration", "30s", "-c", "4", "--processes", "2", "--preload",
        "--keys", "3000000", "--no-save",
    )  # fmt: skip
    wait_for_line(proc, "preloading")
    before = session_processes(proc.pid)
    assert len(before) >= 4  # the coordinator, the fork server and two workers
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert wait_session_empty(proc.pid, timeout_s=120) == []
    assert counters(url)["cmd_set"] < 3_000_000  # they stopped, not finished the preload


def test_no_throwaway_server_outlives_a_killed_coordinator(tmp_path: Path) -> None:
    """A run with no target starts memcached in a session of its own; the kernel ends it
    with the coordinator (was: SIGKILL left it running, listening, for good)."""
    proc = start_in_session("run", "--duration", "30s", "-c", "2", "--no-save")
    seen = wait_for_line(proc, "started a throwaway memcached at memcached://")
    port = int(seen.split("memcached://127.0.0.1:")[1].split()[0])
    [server] = [p for p in psutil.Process(proc.pid).children() if p.name().startswith("memcached")]
    assert any(c.laddr.port == port for c in server.net_connections(kind="tcp"))
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    server.wait(timeout=END_WITHIN_S)  # psutil.TimeoutExpired if it lived on
    assert not server.is_running()


@pytest.mark.parametrize("command", ["run", "replay"])
def test_ctrl_c_while_the_server_is_stalled_ends_the_run(
    fresh_memcached: Server, tmp_path: Path, command: str
) -> None:
    """The server stopped (SIGSTOP) and left stopped; Ctrl-C some intervals later. The run
    ends as interrupted, what was measured kept. Was: the coordinator asked the stalled
    server for its stats at every interval, each ask waiting --timeout, so the intervals
    the workers cut meanwhile piled up behind it, and after the Ctrl-C it went on asking,
    once per interval piled up (a 3 s stall at 100 ms intervals: 30 asks of 1 s more)."""
    url = f"memcached://{fresh_memcached.address}"
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    if command == "replay":
        trace = tmp_path / "trace.csv"
        with trace.open("w") as f:  # (60 s of trace time: the run outlasts the test)
            for i in range(60_000):
                f.write(f"{i // 1000},key{i % 500},8,10,{i % 4},{'get' if i % 3 else 'set'},0\n")
        head = ["replay", str(trace), url]
    else:
        head = ["run", url, "--duration", "60s"]
    proc = start_in_session(
        *head, "-c", "4", "--processes", "2", "-P", "8", "--interval", "100ms", "--timeout", "1s",
        "--json", str(out), "--db", db,
    )  # fmt: skip
    try:
        wait_for_line(proc, "[   0.2s]")  # the window runs
        os.kill(fresh_memcached.proc.pid, signal.SIGSTOP)
        time.sleep(3)  # the stall: 30 intervals cut while the server answers nothing
        stdout, stderr, took_s = signal_and_finish(proc, signal.SIGINT)
    finally:
        proc.kill()
        os.kill(fresh_memcached.proc.pid, signal.SIGCONT)
    doc = assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    assert "status: interrupted" in stdout
    assert doc["totals"]["ops"] > 0
    # the stats the coordinator could not have: noted, and not asked for at every interval
    assert doc["server"]["sample_errors"]
    asked = doc["server"]["side_requests"][url]
    assert asked < len(doc["intervals"]) / 2, (asked, len(doc["intervals"]))


def test_a_worker_killed_mid_run_leaves_a_partial_run_saying_how_it_ended(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """One worker SIGKILLed in the window (as the kernel's out-of-memory killer does):
    the run goes on to its end with the other, partial (exit 4), stored, the worker named
    with the signal that ended it and where an OOM kill shows; nothing left behind. Was:
    "worker process exited", never how."""
    url = f"memcached://{fresh_memcached.address}"
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    proc = start_in_session(
        "run", url, "--duration", "5s", "-c", "4", "--processes", "2", "--json", str(out),
        "--db", db,
    )  # fmt: skip
    wait_for_line(proc, "[   1.0s]")
    coordinator = psutil.Process(proc.pid)
    workers = [p for p in coordinator.children(recursive=True) if p.ppid() != proc.pid]
    assert len(workers) == 2, workers  # the fork server's children
    workers[0].kill()
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 4, stderr
    assert "Traceback" not in stderr
    doc = read_json(out)
    assert doc["status"] == "partial"
    killed = [e for e in doc["errors"] if "worker process was killed by SIGKILL" in e]
    assert len(killed) == 1, doc["errors"]
    assert "dmesg or journalctl -k says whether it did" in killed[0]
    assert "status: partial - a worker failed" in stdout
    with Store(db) as store:
        assert {r["run_id"]: r["status"] for r in store.list_runs()} == {doc["run_id"]: "partial"}
    assert wait_session_empty(proc.pid) == []


def test_a_signal_in_the_drain_ends_it_keeping_the_whole_window(
    fresh_redis: Server, tmp_path: Path
) -> None:
    """Every request a BLPOP that never returns: the 2 s window ends with one in flight on
    each connection, and the drain would wait --timeout (60 s) for them. SIGINT there ends
    the run at once: interrupted (exit 130), the four abandoned requests counted in the
    drain, stored, nothing left behind, and said as what it was: the window was measured
    whole (was: "the window was cut short", "figures cover 2.00s of the planned window")."""
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    proc = start_in_session(
        "run", f"redis://{fresh_redis.address}", "--command", "BLPOP kvbench:never:__key__ 0",
        "--duration", "2s", "-c", "4", "--processes", "1", "--timeout", "60s",
        "--json", str(out), "--db", db,
    )  # fmt: skip
    wait_for_line(proc, "[   2.0s]")  # the window's last interval: the drain is on
    stdout, stderr, took_s = signal_and_finish(proc, signal.SIGINT)
    doc = assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    assert doc["window_s"] == pytest.approx(2.0, abs=0.01)
    drain = doc["phases"]["drain"]
    assert drain["ops"] == drain["errors"] == 4, drain
    assert doc["status_reasons"][0] == (
        "interrupted (Ctrl-C, SIGTERM or SIGHUP) in the drain: the window was measured whole"
    )
    assert "the run is interrupted in its drain: its 2.00s window was measured whole" in stdout


def test_a_replay_stopped_with_requests_in_flight_counts_them_sent(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """A timed replay whose server stalls (SIGSTOP) in its first second: what it sends after
    that stays in flight, and a replay's window waits for every reply, so Ctrl-C ends it
    with them abandoned in the drain. They were sent all the same: the trace's sent figure
    counts them and says how many ended in the drain (was: "sent 292 of 300 queued" for
    a replay that wrote all 300); its figures cover the time it ran, no planned window."""
    trace = tmp_path / "trace.csv"
    # 10 s of trace time, 200 rows a second: far more than the ~2 s it runs, so that a
    # loaded machine's late live line (the marker below) still finds it sending (with 3 s
    # it once ended before the stall, and there was no drain to count).
    with trace.open("w") as f:
        f.write("timestamp_s,key,key_size,value_size,client_id,operation,ttl_s\n")
        for i in range(2000):
            f.write(f"{i / 200:.3f},k{i % 50},8,{0 if i % 2 else 20},{i % 2},")
            f.write(f"{'get' if i % 2 else 'set'},0\n")
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    proc = start_in_session(
        "replay", str(trace), f"memcached://{fresh_memcached.address}", "-c", "2",
        "--processes", "1", "--timeout", "60s", "--json", str(out), "--db", db,
    )  # fmt: skip
    # the schedule sends ~200 more, which stay unanswered
    stdout, stderr, took_s = interrupt_while_stalled(proc, fresh_memcached, "[   1.0s]", 1.0)
    doc = assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    sent, drain = doc["trace"]["sent"], doc["phases"]["drain"]
    assert sent["in_drain"] == drain["ops"] == drain["errors"] > 0, (sent, drain)
    in_window = sum(
        n
        for op in doc["ops"].values()
        for outcome, n in op["outcomes"].items()
        if outcome not in ("late", "mismatch", "dropped")
    )
    assert sent["total"] == in_window + drain["ops"] == sum(sent["by_op"].values())
    assert f"sent {sent['total']:,} of 2,000 queued" in stdout
    assert f"; {drain['ops']:,} of them in the drain" in stdout
    assert f"figures cover its first {doc['window_s']:.2f}s" in stdout
    assert "timed in the drain" in stdout or "Little's law" not in stdout


def test_ctrl_c_in_a_preload_to_a_stalled_server_ends_within_a_second_of_waiting(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """The server stalls (SIGSTOP) mid-preload, with each connection's preload pipeline
    full; Ctrl-C then waits 1 s for those sets and abandons them, counted as the preload's
    errors (was: it waited --timeout, 60 s here, for replies that could not come)."""
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    proc = start_in_session(
        "run", f"memcached://{fresh_memcached.address}", "--preload", "--keys", "3000000",
        "-c", "4", "--processes", "1", "--timeout", "60s", "--json", str(out), "--db", db,
    )  # fmt: skip
    stdout, stderr, took_s = interrupt_while_stalled(proc, fresh_memcached, "preloading", 0.5)
    assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    preload = read_json(out)["phases"]["preload"]
    assert f"preload (not in the figures): {preload['ops']:,} ops" in stdout
    # every connection's pipeline was full when the server stalled: those sets, abandoned
    assert preload["errors"] == 4 * PRELOAD_PIPELINE, preload
    assert preload["counts"]["set"]["conn_error"] == preload["errors"]


def test_ctrl_c_through_a_stalled_gateway_ends_on_the_compiled_pump_within_a_second(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """nginx + memc stalls (SIGSTOP) mid-window with each connection's request in flight;
    Ctrl-C waits 1 s for them on the compiled pump (which gateways now run on) and abandons
    them in the drain, one per connection."""
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    with servers.nginx_memc(fresh_memcached) as gateway:
        proc = start_in_session(
            "run", f"http+memc://{gateway.address}/memc", "-c", "8", "--processes", "1",
            "--timeout", "60s", "--json", str(out), "--db", db,
        )  # fmt: skip
        stdout, stderr, took_s = interrupt_while_stalled(proc, gateway, "[   1.0s]", 1.0)
    doc = assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    assert doc["environment"]["driver"] == "compiled loop"
    drain = doc["phases"]["drain"]
    assert drain["ops"] == drain["errors"] == 8, drain  # pipeline 1: one each, abandoned
    assert f"drain (not in the figures): {drain['ops']:,} ops" in stdout


def test_ctrl_c_in_a_queue_run_to_a_stalled_server_abandons_what_is_in_flight(
    fresh_redis: Server, tmp_path: Path
) -> None:
    """Redis stalls (SIGSTOP) mid-run; Ctrl-C then waits 1 s for the put and the get in
    flight and abandons them: the put unacknowledged, the get's message of unknown fate,
    neither counted lost, and the connections not called lost. Was: the run waited
    --timeout (60 s here) for them, after the coordinator had waited 2 s per interval for
    the stalled server's backlog."""
    out, db = tmp_path / "q.json", str(tmp_path / "h.db")
    proc = start_in_session(
        "queue", f"redis-queue://{fresh_redis.address}/stall", "-n", "100000000",
        "--timeout", "60s", "--json", str(out), "--db", db,
    )  # fmt: skip
    stdout, stderr, took_s = interrupt_while_stalled(proc, fresh_redis, "[   1.0s]", 0.5)
    doc = assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    outcomes = {op: doc["ops"][op]["outcomes"] for op in ("put", "get")}
    # a pipeline of 1: the producer always has its one put in flight; the consumer its
    # get, unless it was waiting out an empty read
    assert outcomes["put"].get("conn_error") == 1, outcomes
    assert doc["queue"]["unanswered_gets"] == outcomes["get"].get("conn_error", 0) <= 1
    assert doc["queue"]["lost"] == 0
    assert "connections were lost" not in stdout


# A Redis Cluster run has phases of its own: the coordinator asks a seed for the slot map
# before any worker starts, and each worker preloads one master's keys after another.


def test_ctrl_c_while_a_cluster_seed_stalls_discovery_ends_the_run_keeping_it(
    tmp_path: Path,
) -> None:
    """The seed is stopped (SIGSTOP) before the run asks it for the slot map; Ctrl-C ends
    the run then, not when the ask's --timeout (60 s) is over."""
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    with redis_cluster.redis_cluster(3) as cluster:
        seed = cluster.nodes[0].server
        os.kill(seed.proc.pid, signal.SIGSTOP)
        try:
            proc = start_in_session(
                "run", f"redis+cluster://{cluster.seed}", "--duration", "30s", "-c", "6",
                "--timeout", "60s", "--json", str(out), "--db", db,
            )  # fmt: skip
            seen = wait_for_line(proc, "kvbench: redis+cluster://")
            time.sleep(0.5)
            stdout, stderr, took_s = signal_and_finish(proc, signal.SIGINT)
        finally:
            proc.kill()
            os.kill(seed.proc.pid, signal.SIGCONT)
    doc = assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    assert "Redis Cluster:" not in seen + stdout  # interrupted before the slot map came
    assert doc["phases"] == {} and doc["totals"]["ops"] == 0


def test_ctrl_c_in_a_cluster_preload_to_a_stalled_master_abandons_its_sets(
    tmp_path: Path,
) -> None:
    """The first master stops (SIGSTOP) as the preload starts, the shard a worker preloads
    first; Ctrl-C then waits 1 s for its connections' full pipelines and abandons those
    sets, counted as the preload's errors."""
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    with redis_cluster.redis_cluster(3) as cluster:
        proc = start_in_session(
            "run", f"redis+cluster://{cluster.seed}", "--preload", "--keys", "3000000",
            "-c", "6", "--processes", "1", "--timeout", "60s", "--json", str(out), "--db", db,
        )  # fmt: skip
        first = cluster.nodes[0].server
        stdout, stderr, took_s = interrupt_while_stalled(proc, first, "preloading", 0.5)
    doc = assert_kept_as_interrupted(proc, signal.SIGINT, out, db, stderr, took_s)
    preload = doc["phases"]["preload"]
    assert f"preload (not in the figures): {preload['ops']:,} ops" in stdout
    # 6 connections over 3 masters: the first master's 2, each pipeline full, abandoned
    assert preload["errors"] == 2 * PRELOAD_PIPELINE, preload
    assert preload["counts"]["set"]["conn_error"] == preload["errors"]


def test_sigterm_in_a_cluster_window_keeps_it_and_each_master_reconciles(
    tmp_path: Path,
) -> None:
    """SIGTERM mid-window: the run ends kept, and what the masters served, by their own
    counters, is what the run counts over its phases, the drain's requests included (an
    interrupted run asks no server for its counters after: the test does)."""
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    with redis_cluster.redis_cluster(3) as cluster:
        before = [served(node) for node in cluster.nodes]
        proc = start_in_session(
            "run", f"redis+cluster://{cluster.seed}", "--duration", "30s", "-c", "6",
            "--processes", "2", "--json", str(out), "--db", db,
        )  # fmt: skip
        wait_for_line(proc, "[   1.0s]")
        stdout, stderr, took_s = signal_and_finish(proc, signal.SIGTERM)
        after = [served(node) for node in cluster.nodes]
    doc = assert_kept_as_interrupted(proc, signal.SIGTERM, out, db, stderr, took_s)
    assert doc["totals"]["ops"] > 0 and doc["window_s"] < 30
    assert "interrupted (SIGTERM)" in stdout
    for op in ("get", "set"):
        by_masters = sum(a[op] - b[op] for a, b in zip(after, before, strict=True))
        assert by_masters == all_phase_counts(doc, op) > 0, op
    assert doc["cluster"]["moved"] == doc["cluster"]["ask"] == 0


def served(node: redis_cluster.Node) -> dict[str, int]:
    """The GETs and SETs ``node`` has served, by its commandstats."""
    stats = node.info("commandstats")
    return {
        op: int(dict(f.split("=") for f in stats[f"cmdstat_{op}"].split(","))["calls"])
        if f"cmdstat_{op}" in stats
        else 0
        for op in ("get", "set")
    }
