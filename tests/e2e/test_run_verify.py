"""``kvbench run --verify`` against real servers: clean runs find nothing, interference is
caught; on the compiled loop (the pumps check in C) and on the Python driver alike."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from tests.support import servers
from tests.support.cli import all_phase_counts, read_json, run_kvbench
from tests.support.servers import Server, counters

pytestmark = pytest.mark.integration


# The driver a run takes by default, and the Python one (its codecs check the values).
COMPILED, PYTHON = "compiled loop", "python (KVBENCH_PURE_PYTHON is set)"
DRIVERS = [COMPILED, PYTHON]


def _run(url: str, tmp_path: Path, *extra: str, driver: str = COMPILED) -> dict:  # type: ignore[type-arg]
    out = tmp_path / "run.json"
    result = run_kvbench(
        "run",
        url,
        "--verify",
        "-c",
        "4",
        "--processes",
        "1",
        "-P",
        "4",
        "--json",
        str(out),
        "--no-save",
        "--no-live",
        *extra,
        env={"KVBENCH_PURE_PYTHON": "1"} if driver == PYTHON else {},
    )
    assert result.code == 0, result.stderr + result.stdout
    doc = read_json(out)
    assert doc["environment"]["driver"] == driver
    doc["_stdout"] = result.stdout
    return doc


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("scheme", ["memcached", "memcached+binary", "memcached+meta"])
def test_a_clean_memcached_run_finds_no_mismatch(
    fresh_memcached: Server, tmp_path: Path, scheme: str, driver: str
) -> None:
    doc = _run(
        f"{scheme}://{fresh_memcached.address}",
        tmp_path,
        "--preload",
        "--keys",
        "2000",
        "--value-size",
        "16-2000",
        "--ratio",
        "set=1,get=4,delete=1",
        "--duration",
        "1s",
        driver=driver,
    )
    verify = doc["verify"]
    assert verify["mismatches"] == 0 and verify["example_keys"] == []
    assert verify["checked"] == all_phase_counts(doc, "get", "hit") > 1000
    assert "mismatch" not in doc["ops"]["get"]["outcomes"]
    assert "0 mismatches" in doc["_stdout"]
    assert not [v for v in doc["verdicts"] if v["id"] == "verify.mismatch"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_clean_redis_run_finds_no_mismatch(
    fresh_redis: Server, tmp_path: Path, driver: str
) -> None:
    doc = _run(
        f"redis://{fresh_redis.address}",
        tmp_path,
        "--preload",
        "--keys",
        "1000",
        "--duration",
        "1s",
        driver=driver,
    )
    assert doc["verify"]["mismatches"] == 0
    assert doc["verify"]["checked"] == all_phase_counts(doc, "get", "hit") > 1000


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("scheme", ["memcached", "memcached+binary"])
def test_set_then_get_pairs_read_back_exactly_what_each_set_wrote(
    fresh_memcached: Server, tmp_path: Path, scheme: str, driver: str
) -> None:
    """Each get right after the set of its key (a key per connection), checked against
    that set's value; the server's counters agree: every get a hit."""
    url = f"{scheme}://{fresh_memcached.address}"
    before = counters(url)
    doc = _run(url, tmp_path, "--ratio", "set-then-get", "-n", "4000", driver=driver)
    after = counters(url)
    sets, gets = all_phase_counts(doc, "set"), all_phase_counts(doc, "get")
    hits = all_phase_counts(doc, "get", "hit")
    assert sets + gets == 4000 and hits == gets > 1000
    assert after["cmd_set"] - before["cmd_set"] == sets
    assert after["get_hits"] - before["get_hits"] == hits
    assert after["get_misses"] == before["get_misses"]
    assert doc["verify"] == {"checked": hits, "mismatches": 0, "example_keys": []}
    assert doc["status"] == "ok"


class GarbageWriter(threading.Thread):
    """Overwrites kvbench's keys with bytes it never wrote, until stopped."""

    def __init__(self, server: Server, keys: list[bytes]) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.writes = 0
        self._server = server
        self._batch = b"".join(b"set %s 0 0 7 noreply\r\ngarbage\r\n" % k for k in keys)

    def run(self) -> None:
        with socket.create_connection((self._server.host, self._server.port)) as sock:
            while not self.stop.wait(0.005):
                sock.sendall(self._batch)
                self.writes += 1


@pytest.mark.parametrize(
    ("scheme", "driver"),
    [
        ("memcached", COMPILED),
        ("memcached", PYTHON),
        ("memcached+binary", COMPILED),
        ("memcached+meta", COMPILED),
    ],
)
def test_values_overwritten_behind_kvbench_s_back_are_caught(
    fresh_memcached: Server, tmp_path: Path, scheme: str, driver: str
) -> None:
    keys = [b"kvbench:%d" % i for i in range(200)]
    writer = GarbageWriter(fresh_memcached, keys)
    writer.start()
    try:
        doc = _run(
            f"{scheme}://{fresh_memcached.address}",
            tmp_path,
            "--keys",
            "200",
            "--ratio",
            "set=1,get=9",
            "--duration",
            "2s",
            driver=driver,
        )
    finally:
        writer.stop.set()
        writer.join()
    assert writer.writes > 10
    verify = doc["verify"]
    assert verify["mismatches"] > 0
    assert 0 < len(verify["example_keys"]) <= 10
    assert {k.encode() for k in verify["example_keys"]} <= set(keys)
    assert doc["ops"]["get"]["outcomes"].get("mismatch", 0) > 0
    # A mismatching get still counts as the hit the server answered.
    assert verify["checked"] == all_phase_counts(doc, "get", "hit")
    (verdict,) = [v for v in doc["verdicts"] if v["id"] == "verify.mismatch"]
    assert verdict["evidence"]["mismatches"] == verify["mismatches"]
    assert "MISMATCHES, e.g. kvbench:" in doc["_stdout"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_through_a_gateway_each_get_reads_back_the_set_as_the_gateway_stored_it(
    fresh_memcached: Server, tmp_path: Path, driver: str
) -> None:
    """nginx + memc stores each value's bytes mapped to URL-safe ones: a get right after
    its set must return that set's value so mapped (the compiled pump maps in C)."""
    with servers.nginx_memc(fresh_memcached) as gateway:
        stats = f"memcached://{fresh_memcached.address}"
        url = f"http+memc://{gateway.address}/memc?stats={stats}"
        before = counters(stats)
        doc = _run(url, tmp_path, "-P", "1", "--ratio", "set-then-get", "-n", "2000", driver=driver)
        after = counters(stats)
    hits = all_phase_counts(doc, "get", "hit")
    assert hits == all_phase_counts(doc, "get") > 500
    assert after["get_hits"] - before["get_hits"] == hits
    assert doc["verify"] == {"checked": hits, "mismatches": 0, "example_keys": []}
    assert doc["status"] == "ok"


@pytest.mark.parametrize("driver", DRIVERS)
def test_through_a_gateway_values_overwritten_behind_its_back_are_caught(
    fresh_memcached: Server, tmp_path: Path, driver: str
) -> None:
    """The backing memcached's values overwritten between a set and its get, through the
    gateway, on either driver."""
    keys = [b"kvbench:%d" % i for i in range(40)]
    writer = GarbageWriter(fresh_memcached, keys)
    with servers.nginx_memc(fresh_memcached) as gateway:
        writer.start()
        try:
            doc = _run(
                f"http+memc://{gateway.address}/memc", tmp_path, "-P", "1", "--keys", "40",
                "--ratio", "set-then-get", "--duration", "2s", "--max-error-rate", "100%",
                driver=driver,
            )  # fmt: skip
        finally:
            writer.stop.set()
            writer.join()
    verify = doc["verify"]
    assert writer.writes > 10 and verify["mismatches"] > 0
    assert {k.encode() for k in verify["example_keys"]} <= set(keys)
    assert verify["checked"] == all_phase_counts(doc, "get", "hit")
