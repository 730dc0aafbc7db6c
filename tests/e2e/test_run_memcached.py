"""``kvbench run`` end to end against a real memcached: counts reconcile with the server's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from kvbench.config.targets import parse_target
from kvbench.engine import fastpath
from kvbench.results.store import Store
from kvbench.runner.probe import fetch_stats
from tests.support import servers
from tests.support.cli import all_phase_counts, kvbench_argv, read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration


def stats(server: Server) -> dict[str, int]:
    raw = fetch_stats(parse_target(f"memcached://{server.address}"))
    return {k: int(v) for k, v in raw.items() if v.isdigit()}


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("scheme", ["memcached", "memcached+binary", "memcached+meta"])
def test_client_counts_equal_server_counter_deltas(
    fresh_memcached: Server, tmp_path: Path, scheme: str, pure: bool
) -> None:
    """Every op a mix sends (multi-gets of 3 keys: text get, binary getkq + noop, meta
    mg q + mn), on each protocol and both drivers: each op's count, the keys the
    multi-gets asked for and the hits equal the server's counter deltas."""
    if not pure and not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    before = stats(fresh_memcached)
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run",
        f"{scheme}://{fresh_memcached.address}",
        "--duration",
        "1s",
        "-c",
        "4",
        "--processes",
        "2",
        "-P",
        "4",
        "--ratio",
        "set=2,get=3,delete=1,incr=1,mget=1",
        "--multiget",
        "3",
        "--keys",
        "500",
        "--seed",
        "7",
        "--json",
        str(out),
        "--db",
        str(tmp_path / "h.db"),
        env={fastpath.PURE_PYTHON_ENV: "1"} if pure else {},
    )
    assert result.code == 0, result.stderr
    after = stats(fresh_memcached)
    delta = {name: after[name] - before[name] for name in after if name in before}
    doc = read_json(out)
    assert doc["status"] == "ok"
    assert 0.9 < doc["window_s"] < 1.5
    assert doc["totals"]["ops"] > 1000 and doc["ops"]["mget"]["completed"] > 100
    assert doc["totals"]["errors"] == 0
    mget_keys = 3 * all_phase_counts(doc, "mget")
    assert delta["cmd_get"] == all_phase_counts(doc, "get") + mget_keys
    assert delta["cmd_set"] == all_phase_counts(doc, "set", "stored")
    assert delta["delete_hits"] == all_phase_counts(doc, "delete", "deleted")
    assert delta["delete_misses"] == all_phase_counts(doc, "delete", "not_found")
    assert delta["incr_hits"] == all_phase_counts(doc, "incr", "value")
    assert delta["incr_misses"] == all_phase_counts(doc, "incr", "not_found")
    rows = {row["name"]: row for row in doc["server"]["reconciliation"]}
    assert rows["get hits"]["server"] == delta["get_hits"] and rows["get hits"]["matches"]
    assert rows["get hits"]["client"] >= all_phase_counts(doc, "get", "hit")
    assert rows["get misses"]["server"] == delta["get_misses"] and rows["get misses"]["matches"]
    # the bytes on the wire: the window's, within what the server counted over the whole
    # run (the drain's few ops and kvbench's stats probes are the rest)
    net = doc["totals"]["network"]
    assert 0.9 * delta["bytes_read"] <= net["bytes_out"] <= delta["bytes_read"]
    assert 0.9 * delta["bytes_written"] <= net["bytes_in"] <= delta["bytes_written"]
    assert net["out_per_s"] == pytest.approx(net["bytes_out"] / doc["window_s"], rel=1e-3)
    # by op (either driver): each request's bytes to its op, exactly the total sent; each
    # reply's to its op, the total received but for replies cut by the window's edges
    by_op = [row["network"] for row in doc["ops"].values()]
    assert sum(n["bytes_out"] for n in by_op) == net["bytes_out"]
    assert net["bytes_out_other"] == 0
    assert sum(n["bytes_in"] for n in by_op) + net["bytes_in_other"] == net["bytes_in"]
    assert abs(net["bytes_in_other"]) <= 0.01 * net["bytes_in"], net
    assert all(n["bytes_in"] > 0 and n["bytes_out"] > 0 for n in by_op), by_op
    assert all(row["matches"] for row in rows.values()), rows
    assert sum(w["ops"] for w in doc["workers"]) == doc["totals"]["ops"]
    assert doc["targets"][0]["server_version"].startswith("1.")
    assert "get" in result.stdout and "p99" in result.stdout
    driver = "python (KVBENCH_PURE_PYTHON is set)" if pure else "compiled loop"
    assert doc["environment"]["driver"] == driver


def test_requests_sends_exactly_n(fresh_memcached: Server, tmp_path: Path) -> None:
    before = stats(fresh_memcached)
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run",
        f"memcached://{fresh_memcached.address}",
        "-n",
        "5001",
        "-c",
        "3",
        "--processes",
        "2",
        "-P",
        "8",
        "--json",
        str(out),
        "--no-save",
    )
    assert result.code == 0, result.stderr
    after = stats(fresh_memcached)
    sent = (after["cmd_get"] - before["cmd_get"]) + (after["cmd_set"] - before["cmd_set"])
    assert sent == 5001
    assert read_json(out)["totals"]["ops"] == 5001


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_op_order_cycle_sends_the_ratio_exactly(
    fresh_memcached: Server, tmp_path: Path, pure: bool
) -> None:
    """``--op-order cycle`` sends a set then ten gets, over and over, whatever the
    connections take from the stream: 2,200 requests at 1:10 are exactly 200 sets and
    2,000 gets at the server."""
    before = stats(fresh_memcached)
    result = run_kvbench(
        "run", f"memcached://{fresh_memcached.address}", "-n", "2200", "-c", "3",
        "--processes", "1", "-P", "8", "--ratio", "1:10", "--op-order", "cycle", "--no-save",
        env={fastpath.PURE_PYTHON_ENV: "1"} if pure else {},
    )  # fmt: skip
    assert result.code == 0, result.stderr
    after = stats(fresh_memcached)
    assert after["cmd_set"] - before["cmd_set"] == 200
    assert after["cmd_get"] - before["cmd_get"] == 2000


def test_worker_cpu_is_the_measured_windows(fresh_memcached: Server, tmp_path: Path) -> None:
    """workers[].cpu_s is divided by the window (the client.cpu verdict): a warm-up's CPU
    counted in it made a 1 s run after 3 s of warm-up read as a client at ~300% of a core."""
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run", f"memcached://{fresh_memcached.address}", "-c", "4",
        "--warmup", "3s", "--duration", "1s", "--json", str(out), "--no-save",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    doc = read_json(out)
    window_s = doc["window_s"]
    intervals_cpu = sum(row["cpu_s"] for row in doc["intervals"])
    for worker in doc["workers"]:
        # one single-threaded process: at most the window's wall-clock (+ a cut's slack)
        assert 0 < worker["cpu_s"] <= window_s * 1.1 + 0.05, (worker, window_s)
    assert sum(w["cpu_s"] for w in doc["workers"]) == pytest.approx(intervals_cpu, abs=0.01)


def start_until_window(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``kvbench ARGS`` started, once its window runs (its live line: its workers were
    forked); if it ends before, the test fails with its stderr (not "no fork server")."""
    proc = subprocess.Popen(
        kvbench_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "ops/s" in line:
            return proc
    raise AssertionError(proc.communicate(timeout=30)[1])


def fork_server_of(coordinator: int) -> int:
    """The pid of the fork server a running coordinator started its workers from: its
    child that is a fork of it (its command line the same: runner/forkserver.py) or, if
    it was exec'd, multiprocessing's fork server."""
    own = Path(f"/proc/{coordinator}/cmdline").read_bytes()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == coordinator and (cmdline == own or b"forkserver import" in cmdline):
                return int(entry)
    raise AssertionError(f"no fork server under pid {coordinator}")


@pytest.mark.parametrize("chosen", [None, "2"], ids=["default", "users-choice"])
def test_numpy_starts_no_blas_threads_unless_the_user_chose(
    fresh_memcached: Server, chosen: str | None
) -> None:
    """Was: numpy's OpenBLAS started a thread for each core but one in the coordinator
    and in the fork server, and each spun about 0.1 s of CPU at every run. The fork server
    (it imported numpy for the workers, or was forked from the coordinator after that
    imported it) now runs one thread; a value set by the user is passed on as it is."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if chosen:
        env["OPENBLAS_NUM_THREADS"] = chosen
    proc = start_until_window(
        "run", f"memcached://{fresh_memcached.address}", "-c", "2", "--processes", "1",
        "--duration", "3s", "--no-save", env=env,
    )  # fmt: skip
    try:
        server = fork_server_of(proc.pid)
        environ = Path(f"/proc/{server}/environ").read_bytes().split(b"\0")
        threads = len(os.listdir(f"/proc/{server}/task"))
    finally:
        proc.send_signal(signal.SIGINT)  # ends as interrupted, its processes with it
        proc.communicate(timeout=30)
    if chosen is None:
        assert threads == 1
    else:  # numpy's threads run in the coordinator: its server is exec'd, with the value
        assert f"OPENBLAS_NUM_THREADS={chosen}".encode() in environ


def test_preload_makes_gets_hit(fresh_memcached: Server, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run",
        f"memcached://{fresh_memcached.address}",
        "--duration",
        "1s",
        "--ratio",
        "0:1",
        "--keys",
        "2000",
        "--preload",
        "-c",
        "4",
        "--processes",
        "2",
        "--json",
        str(out),
        "--no-save",
    )
    assert result.code == 0, result.stderr
    doc = read_json(out)
    assert doc["phases"]["preload"]["counts"]["set"] == {"stored": 2000}
    assert doc["ops"]["get"]["hit_ratio"] == 1.0


def test_run_is_saved_and_shown_from_history(fresh_memcached: Server, tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    result = run_kvbench(
        "run",
        f"memcached://{fresh_memcached.address}",
        "--duration",
        "1s",
        "-c",
        "2",
        "--processes",
        "1",
        "--db",
        db,
    )
    assert result.code == 0, result.stderr
    listing = run_kvbench("history", "--db", db)
    assert listing.code == 0 and fresh_memcached.address in listing.stdout
    shown = run_kvbench("show", "last", "--db", db, "--json")
    assert shown.code == 0
    assert '"schema_version": 1' in shown.stdout


def test_unreachable_target_is_one_line_and_exit_3() -> None:
    port = servers.free_port()
    result = run_kvbench("run", f"memcached://127.0.0.1:{port}", "--duration", "1s", "--no-save")
    assert result.code == 3
    assert result.stderr.strip() == (
        f"kvbench: error: cannot connect to memcached://127.0.0.1:{port}: connection refused"
    )


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--pipeline", "0", "--pipeline: must be at least 1"),
        ("--duration", "soon", "--duration: 'soon' is not a duration"),
        ("--ratio", "1:x", "--ratio: 'x' is not a count"),
    ],
)
def test_bad_flag_values_name_the_flag_and_exit_2(flag: str, value: str, message: str) -> None:
    result = run_kvbench("run", "memcached://127.0.0.1:1", flag, value)
    assert result.code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_scheme_is_a_usage_error() -> None:
    result = run_kvbench("run", "mongodb://127.0.0.1:1")
    assert result.code == 2
    assert "unknown scheme 'mongodb://'" in result.stderr


def test_no_target_starts_a_throwaway_memcached_on_cores_of_its_own(tmp_path: Path) -> None:
    """The server gets half of the CPUs (its threads), the workers the rest (the default
    --processes): sharing them, make run's first screen warned of its own defaults."""
    servers.require_binary("memcached", "memcached")
    out = tmp_path / "run.json"
    result = run_kvbench("run", "--duration", "1s", "-c", "2", "--no-save", "--json", str(out))
    assert result.code == 0, result.stderr
    assert "started a throwaway memcached at memcached://127.0.0.1:" in result.stdout
    doc = read_json(out)
    cpus = len(os.sched_getaffinity(0))
    server_cpus = max(1, cpus // 2)
    assert doc["config"]["load"]["processes"] == max(1, cpus - server_cpus)
    assert int(doc["server"]["settings"]["num_threads"]) == server_cpus


def test_the_throwaway_memcacheds_cores_are_not_its_workers(tmp_path: Path) -> None:
    """Was (with the fork server forked before the CLI): the coordinator kept to the
    client's cores, but its workers came from a server made before it did, and ran on
    every core, memcached's too. Each worker now takes its coordinator's CPUs at its
    start (runner/local.py, ``Inherited``)."""
    servers.require_binary("memcached", "memcached")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: the server and the client share it")
    proc = start_until_window("run", "--duration", "5s", "-c", "2", "--no-save")
    try:
        server = fork_server_of(proc.pid)
        workers = [p.pid for p in psutil.Process(server).children()]
        memcached = [p.pid for p in psutil.Process(proc.pid).children() if p.name() == "memcached"]
        client_cpus = os.sched_getaffinity(proc.pid)
        worker_cpus = [os.sched_getaffinity(pid) for pid in workers]
        server_cpus = os.sched_getaffinity(memcached[0])
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert workers and worker_cpus == [client_cpus] * len(workers)
    assert not client_cpus & server_cpus


def test_no_target_without_memcached_says_how_to_install(tmp_path: Path) -> None:
    result = run_kvbench("run", "--no-save", env={"PATH": str(tmp_path)})
    assert result.code == 2
    assert "memcached is not installed" in result.stderr
    assert "apt-get install memcached" in result.stderr


def test_ctrl_c_keeps_and_saves_the_partial_result(fresh_memcached: Server, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    db = str(tmp_path / "h.db")
    proc = subprocess.Popen(
        kvbench_argv(
            "run",
            f"memcached://{fresh_memcached.address}",
            "--duration",
            "60s",
            "-c",
            "4",
            "--processes",
            "2",
            "--json",
            str(out),
            "--db",
            db,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while time.monotonic() < deadline:  # wait for the first live line
        line = proc.stdout.readline()
        if "ops/s" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    doc = read_json(out)
    assert doc["status"] == "interrupted"
    assert doc["totals"]["ops"] > 0
    assert 0.5 < doc["window_s"] < 30
    assert "interrupted" in run_kvbench("history", "--db", db).stdout


def test_rounds_give_a_spread_and_merge_latency(fresh_memcached: Server, tmp_path: Path) -> None:
    before = stats(fresh_memcached)
    out = tmp_path / "run.json"
    db = str(tmp_path / "h.db")
    result = run_kvbench(
        "run",
        f"memcached://{fresh_memcached.address}",
        "--rounds",
        "3",
        "--duration",
        "1s",
        "-c",
        "2",
        "--processes",
        "1",
        "--keys",
        "100",
        "--json",
        str(out),
        "--db",
        db,
    )
    assert result.code == 0, result.stderr
    after = stats(fresh_memcached)
    doc = read_json(out)
    rounds = doc["rounds"]
    assert [r["round"] for r in rounds] == [1, 2, 3]
    assert doc["window_s"] == pytest.approx(sum(r["window_s"] for r in rounds))
    assert sum(r["completed"] for r in rounds) == doc["totals"]["completed"]
    lo, hi = doc["throughput_ci95_per_s"]
    spread = doc["throughput_per_s_spread"]
    assert lo <= spread["mean"] <= hi and spread["min"] <= spread["max"]
    assert {i["round"] for i in doc["intervals"]} == {0, 1, 2}
    gets = all_phase_counts(doc, "get")
    assert gets == after["cmd_get"] - before["cmd_get"]  # every round's ops reached the server
    shown = run_kvbench("show", "last", "--db", db, "--json")
    assert json.loads(shown.stdout)["throughput_ci95_per_s"] == [lo, hi]


def test_op_order_from_a_config_file_is_run_stored_and_reported(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """``[workload] op_order = "cycle"`` in a config file: each of two workers sends its
    share in turn (1,100 requests each: 100 sets, 1,000 gets, exactly, at the server), and
    the result, the stored run and the HTML report's workload facts say the order; a value
    that is no order is one line naming the file and the key (exit 2)."""
    config = tmp_path / "cycle.toml"
    config.write_text('[workload]\nop_order = "cycle"\nratio = "1:10"\n')
    out, db, page = tmp_path / "run.json", tmp_path / "h.db", tmp_path / "run.html"
    before = stats(fresh_memcached)
    result = run_kvbench(
        "run", f"memcached://{fresh_memcached.address}", "--config", str(config), "-n", "2200",
        "-c", "4", "--processes", "2", "-P", "4", "--json", str(out), "--db", str(db),
        "--report", str(page),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    after = stats(fresh_memcached)
    assert after["cmd_set"] - before["cmd_set"] == 200
    assert after["cmd_get"] - before["cmd_get"] == 2000
    doc = read_json(out)
    assert doc["config"]["workload"]["op_order"] == "cycle"
    assert [w["ops"] for w in doc["workers"]] == [1100, 1100]
    with Store(str(db)) as store:
        assert store.load_run(doc["run_id"]).config["workload"]["op_order"] == "cycle"
    assert "<dt>op order</dt><dd>cycle</dd>" in page.read_text()

    config.write_text('[workload]\nop_order = "cyclic"\n')
    bad = run_kvbench("run", f"memcached://{fresh_memcached.address}", "--config", str(config))
    assert bad.code == 2
    assert bad.stderr.strip().splitlines() == [
        f"kvbench: error: workload.op_order in {config}: 'cyclic' is not one of random, cycle"
    ]


def test_a_busy_poll_is_said_and_recorded_and_counts_what_the_server_counts(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """--busy-poll: the workers poll before they sleep; the run's header, its document and
    the HTML report's facts say so, and its counts are the server's; a bad value is one
    line naming the option (exit 2)."""
    out, page = tmp_path / "run.json", tmp_path / "run.html"
    before = stats(fresh_memcached)
    result = run_kvbench(
        "run", f"memcached://{fresh_memcached.address}", "-n", "2200", "--ratio", "1:10",
        "-c", "4", "--processes", "2", "-P", "4", "--busy-poll", "20us", "--json", str(out),
        "--report", str(page), "--no-save",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    after = stats(fresh_memcached)
    doc = read_json(out)
    assert doc["config"]["load"]["busy_poll_ns"] == 20_000
    assert doc["environment"]["event_loop"] == "poller"
    assert ", busy poll 20.0us," in result.stdout
    assert "<dt>busy poll</dt><dd>20.0us</dd>" in page.read_text()
    sets, gets = doc["ops"]["set"]["count"], doc["ops"]["get"]["count"]
    assert sets + gets == 2200
    assert (after["cmd_set"] - before["cmd_set"], after["cmd_get"] - before["cmd_get"]) == (
        sets,
        gets,
    )

    bad = run_kvbench("run", f"memcached://{fresh_memcached.address}", "--busy-poll", "1s")
    assert bad.code == 2
    assert bad.stderr.strip().splitlines() == [
        "kvbench: error: --busy-poll: '1s' is more than 100ms: the loop would spin while idle"
    ]
