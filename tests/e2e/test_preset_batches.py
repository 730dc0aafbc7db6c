"""put-get-batches against two real memcached servers: exact counts, exact placement, and
every printed figure recomputed from the printed figures."""

from __future__ import annotations

import re
import signal
import subprocess
import time
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from kvbench.config.targets import parse_target
from kvbench.runner.probe import fetch_stats
from kvbench.workload.ketama import KetamaRing
from tests.support import fake_servers, servers
from tests.support.cli import read_json, run_kvbench, start_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration

KEYS = 300
COUNTERS = ("cmd_set", "get_hits", "get_misses")


@pytest.fixture
def two_memcached() -> Iterator[list[Server]]:
    with ExitStack() as stack:
        yield [stack.enter_context(servers.memcached()) for _ in range(2)]


def counters(server: Server) -> dict[str, int]:
    stats = fetch_stats(parse_target(f"memcached://{server.address}", "test"))
    return {name: int(stats[name]) for name in COUNTERS}


def python_memcached_split(keys: int, n_servers: int) -> list[int]:
    """Keys per server as python-memcached places test_key0.. (computed here)."""
    split = [0] * n_servers
    for i in range(keys):
        crc = ((zlib.crc32(b"test_key%d" % i) & 0xFFFFFFFF) >> 16) & 0x7FFF
        split[(crc or 1) % n_servers] += 1
    return split


def ketama_split(keys: int, pool: list[Server]) -> list[int]:
    ring = KetamaRing([s.address for s in pool])
    split = [0] * len(pool)
    for i in range(keys):
        split[ring.server_for(b"test_key%d" % i)] += 1
    return split


@pytest.mark.parametrize("placement", ["modula-crc32", "ketama"])
def test_each_client_sets_then_gets_every_key_exactly(
    two_memcached: list[Server], tmp_path: Path, placement: str
) -> None:
    before = [counters(s) for s in two_memcached]
    out = tmp_path / "batches.json"
    result = run_kvbench(
        "run",
        "--preset",
        "put-get-batches",
        *(f"memcached://{s.address}" for s in two_memcached),
        "--connections",
        "2,3",
        "--keys",
        str(KEYS),
        "--placement",
        placement,
        "--json",
        str(out),
        "--no-save",
    )
    assert result.code == 0, result.stderr + result.stdout
    after = [counters(s) for s in two_memcached]
    clients_total = 2 + 3
    # The servers' own counters: exactly N x R sets and hits over both levels, no miss.
    summed = {n: sum(a[n] - b[n] for a, b in zip(after, before, strict=True)) for n in COUNTERS}
    assert summed == {
        "cmd_set": clients_total * KEYS,
        "get_hits": clients_total * KEYS,
        "get_misses": 0,
    }
    # Each server got exactly its placed keys' share, as computed here.
    split = (
        python_memcached_split(KEYS, 2)
        if placement == "modula-crc32"
        else ketama_split(KEYS, two_memcached)
    )
    for server, (a, b) in enumerate(zip(after, before, strict=True)):
        assert a["cmd_set"] - b["cmd_set"] == clients_total * split[server]
        assert a["get_hits"] - b["get_hits"] == clients_total * split[server]
    doc = read_json(out)
    assert [row["clients"] for row in doc["batches"]] == [2, 3]
    for row in doc["batches"]:
        n = row["clients"]
        sets, gets, whole = row["set"], row["get"], row["whole"]
        assert sets["ok"] == gets["ok"] == n * KEYS
        assert gets["misses"] == gets["mismatches"] == sets["errors"] == gets["errors"] == 0
        assert row["server_deltas"] == {"cmd_set": n * KEYS, "get_hits": n * KEYS, "get_misses": 0}
        assert sets["servers"] == gets["servers"] == [n * k for k in split]
        # Throughput = replies / the batch's wall-clock, recomputed from the printed figures.
        for batch in (sets, gets, whole):
            assert batch["per_s"] == pytest.approx(batch["ok"] / batch["seconds"], rel=1e-3)
        # Each batch from its first request sent to its last reply; the whole run from the
        # first set to the last reply. A client gets once its own sets are done, so the
        # first get follows the first client's last set (batches may overlap).
        for batch in (sets, gets):
            assert batch["seconds"] == pytest.approx(batch["to_s"] - batch["from_s"], abs=2e-6)
        assert sets["from_s"] == 0 and gets["from_s"] > 0
        assert whole["seconds"] == pytest.approx(max(sets["to_s"], gets["to_s"]), abs=1e-6)
        # The original's summed-thread-times formula reads lower with more than one client.
        assert sets["original_per_s"] < sets["per_s"]
    # The printed line gives the same figures.
    line = next(x for x in result.stdout.splitlines() if x.startswith("3 client(s)"))
    printed = re.search(r"puts/s [\d.,k]+ \(([\d,]+) in ([\d.]+)s\)", line)
    assert printed is not None and int(printed[1].replace(",", "")) == 3 * KEYS
    assert f"cmd_set +{3 * KEYS}, get_hits +{3 * KEYS}, get_misses +0" in line
    assert f"servers ({placement})" in result.stdout


def test_one_client_with_two_servers_works(two_memcached: list[Server], tmp_path: Path) -> None:
    """A client is a connection to every server: one client over two servers is fine
    (was: -c must be at least the number of servers)."""
    before = [counters(s) for s in two_memcached]
    result = run_kvbench(
        "run",
        "--preset",
        "put-get-batches",
        *(f"memcached://{s.address}" for s in two_memcached),
        "--connections",
        "1",
        "--keys",
        "100",
        "--no-save",
        "--no-live",
    )
    assert result.code == 0, result.stderr + result.stdout
    after = [counters(s) for s in two_memcached]
    assert sum(a["cmd_set"] - b["cmd_set"] for a, b in zip(after, before, strict=True)) == 100
    assert all(a["cmd_set"] > b["cmd_set"] for a, b in zip(after, before, strict=True))


def test_batches_connect_over_a_unix_socket_like_a_load_run() -> None:
    """A client's connections are the load run's links: a ``+unix`` server works (was:
    TCP only), and the server counts every set and get."""
    with servers.memcached_unix() as server:
        url = f"memcached+unix://{server.socket_path}"
        stats = lambda: fetch_stats(parse_target(url, "test"))  # noqa: E731
        before = stats()
        result = run_kvbench(
            "run", "--preset", "put-get-batches", url, "--connections", "2", "--keys", "50",
            "--no-save", "--no-live",
        )  # fmt: skip
        after = stats()
    assert result.code == 0, result.stderr + result.stdout
    assert int(after["cmd_set"]) - int(before["cmd_set"]) == 2 * 50
    assert int(after["get_hits"]) - int(before["get_hits"]) == 2 * 50
    assert int(after["get_misses"]) == int(before["get_misses"])


def test_batches_refuse_a_request_count() -> None:
    result = run_kvbench(
        "run", "--preset", "put-get-batches", "memcached://127.0.0.1:1", "-n", "10", "--no-save"
    )
    assert result.code == 2 and "R is --keys" in result.stderr


@pytest.mark.parametrize(
    "flag",
    [
        ("--duration", "2s"),
        ("--pipeline", "4"),
        ("--ratio", "1:1"),
        ("--rate", "100"),
        ("--rounds", "2"),
        ("--warmup", "1s"),
        ("--processes", "2"),
        ("--connections", "2.5"),
        ("--connections", "1:2:0.5"),
    ],
)
def test_batches_refuse_flags_they_would_ignore(
    fresh_memcached: Server, flag: tuple[str, str]
) -> None:
    """A flag that cannot apply is refused in one line naming it, before any request
    (was: ignored, --connections 2.5 ran 2 clients)."""
    before = counters(fresh_memcached)
    result = run_kvbench(
        "run", "--preset", "put-get-batches", f"memcached://{fresh_memcached.address}",
        *flag, "--keys", "10", "--no-save", "--no-live",
    )  # fmt: skip
    assert result.code == 2, result.stderr + result.stdout
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert f"error: {flag[0]}:" in result.stderr and "Traceback" not in result.stderr
    assert counters(fresh_memcached) == before


def test_batches_report_an_unreachable_server_in_one_line() -> None:
    port = servers.free_port()
    result = run_kvbench(
        "run", "--preset", "put-get-batches", f"memcached://127.0.0.1:{port}", "--no-save"
    )
    assert result.code == 3 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def two_clients_started(server: Server, keys: int, out: Path) -> subprocess.Popen[str]:
    """put-get-batches, 2 clients over ``keys`` keys, in the background, once the server
    has stored 1,000 of its sets."""
    proc = start_kvbench(
        "run",
        "--preset",
        "put-get-batches",
        f"memcached://{server.address}",
        "--connections",
        "2",
        "--keys",
        str(keys),
        "--json",
        str(out),
        "--no-save",
        "--no-live",
    )
    deadline = time.monotonic() + 60
    while counters(server)["cmd_set"] < 1000 and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc


def test_ctrl_c_keeps_the_batches_done_so_far(fresh_memcached: Server, tmp_path: Path) -> None:
    """Ctrl-C mid-batch: every client stops after its current request; the level is kept
    (status interrupted, exit 130) and its sets agree with the server's."""
    out = tmp_path / "cut.json"
    proc = two_clients_started(fresh_memcached, 100_000, out)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    (row,) = read_json(out)["batches"]
    stored = counters(fresh_memcached)["cmd_set"]
    assert 1000 <= row["set"]["ok"] == stored < 200_000
    assert read_json(out)["status"] == "interrupted"


def test_a_server_stopped_mid_batch_is_counted_and_the_run_ends(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """Every request after the stop is a conn_error (a down server is retried after a
    backoff, not reconnected per request: that took 27-44 s here), the status is failed
    (exit 1), one line per problem, no traceback."""
    out = tmp_path / "died.json"
    proc = two_clients_started(fresh_memcached, 20_000, out)
    stored = counters(fresh_memcached)["cmd_set"]
    fresh_memcached.stop()
    stopped = time.monotonic()
    _, stderr = proc.communicate(timeout=120)
    assert time.monotonic() - stopped < 20
    assert proc.returncode == 1 and "Traceback" not in stderr
    (row,) = read_json(out)["batches"]
    sets, gets = row["set"], row["get"]
    assert sets["ok"] >= stored and sets["ok"] + sets["errors"] == 2 * 20000
    assert gets["ok"] == 0 and gets["errors"] == 2 * 20000


def test_misses_on_an_evicting_server_fail_the_run(tmp_path: Path) -> None:
    """A server too small for the keys evicts them before they are read: every get miss
    is an error of a batch run (each client set the key just before), so the level is
    failed (exit 1), the misses named (was: status ok, exit 0, with most gets missed)."""
    out = tmp_path / "evicted.json"
    with servers.memcached("-m", "2") as server:
        before = counters(server)
        result = run_kvbench(
            "run", "--preset", "put-get-batches", f"memcached://{server.address}",
            "--connections", "1", "--keys", "4000", "--value-size", "4000",
            "--json", str(out), "--no-save",
        )  # fmt: skip
        after = counters(server)
    misses = after["get_misses"] - before["get_misses"]
    assert misses > 0
    assert result.code == 1, result.stderr + result.stdout
    doc = read_json(out)
    assert doc["status"] == "failed"
    (row,) = doc["batches"]
    assert row["get"]["misses"] == misses
    assert row["status"] == "failed"
    (run,) = doc["runs"]
    assert run["document"]["status"] == "failed"
    assert f"miss {misses:,}" in result.stdout


def shown_rate(text: str) -> tuple[float, float]:
    """A printed rate (``8,312``, ``27.3k``, ``1.25M``) and half its last printed unit."""
    text = text.replace(",", "")
    for suffix, scale, unit in (("k", 1e3, 100.0), ("M", 1e6, 10_000.0)):
        if text.endswith(suffix):
            return float(text[:-1]) * scale, unit / 2
    return float(text), 0.5


def test_each_printed_rate_recomputes_from_the_printed_count_and_seconds(
    two_memcached: list[Server], tmp_path: Path
) -> None:
    """``puts/s R (N in Ss)``: N / S is R to R's own printed precision, for every batch
    and every level (was: seconds to the ms, 2,000 in 0.073s beside 27.6k/s); the final
    table and each ``batches[]`` row carry the level's status."""
    out = tmp_path / "rates.json"
    result = run_kvbench(
        "run", "--preset", "put-get-batches",
        *(f"memcached://{s.address}" for s in two_memcached),
        "--connections", "1,3", "--keys", "400", "--json", str(out), "--no-save",
    )  # fmt: skip
    assert result.code == 0, result.stderr + result.stdout
    figure = re.compile(r"(puts|gets|ops)/s ([\d.,kM]+) \(([\d,]+) in ([\d.]+)s\)")
    lines = [x for x in result.stdout.splitlines() if re.match(r"\d+ client\(s\) x", x)]
    assert len(lines) == 2
    for line in lines:
        found = figure.findall(line)
        assert [f[0] for f in found] == ["puts", "gets", "ops"]
        for _, rate, count, seconds in found:
            shown, half_unit = shown_rate(rate)
            recomputed = int(count.replace(",", "")) / float(seconds)
            # 4 significant digits of seconds: at most 0.05% off, plus the rate's rounding.
            assert abs(shown - recomputed) <= half_unit + recomputed * 5e-4, line
    assert [row["status"] for row in read_json(out)["batches"]] == ["ok", "ok"]
    assert re.search(r"│\s+1 │\s+ok │", result.stdout) and re.search(
        r"│\s+3 │\s+ok │", result.stdout
    )


def test_a_later_level_that_cannot_connect_keeps_the_levels_before(
    fresh_memcached: Server, tmp_path: Path
) -> None:
    """The server goes once the first level is done: the second level cannot connect, the
    run stops there (exit 3, one line naming it), and the first level is still printed and
    written (was: the TargetUnreachable lost every finished level). The door shuts after
    as many connections as a run of the first level alone opens (memcached's count), not
    after a moment the scheduler picked."""
    keys = 2_000
    args = ("run", "--preset", "put-get-batches", "--keys", str(keys), "--no-save", "--no-live")
    before = fetch_stats(parse_target(f"memcached://{fresh_memcached.address}", "test"))
    run_kvbench(*args, f"memcached://{fresh_memcached.address}", "--connections", "1")
    after = fetch_stats(parse_target(f"memcached://{fresh_memcached.address}", "test"))
    # the stats connection that read ``before`` is counted in ``after``
    level_one = int(after["total_connections"]) - int(before["total_connections"]) - 1
    out = tmp_path / "stopped.json"
    with fake_servers.admitting(fresh_memcached.port, level_one) as port:
        proc = start_kvbench(
            *args, f"memcached://127.0.0.1:{port}", "--connections", "1,2", "--json", str(out)
        )
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr + stdout
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == [stderr.strip()] and "2 client(s)" in stderr
    doc = read_json(out)
    (row,) = doc["batches"]
    assert row["clients"] == 1 and row["status"] == "ok"
    assert row["set"]["ok"] == row["get"]["ok"] == keys
    assert "2 client(s)" in doc["unreachable"]
    assert re.search(r"│\s+1 │\s+ok │", stdout)
