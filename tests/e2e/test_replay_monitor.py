"""``kvbench replay`` of a Redis MONITOR capture end to end: traffic captured by a real
``redis-cli monitor`` from a real redis-server while two scripted clients ran SET, GET,
INCR, MULTI..EXEC, SELECT 1, HSET (and an AUTH, a BLPOP and a script, which the replay
skips), replayed against a fresh redis-server: every command the replay says it sent is
what the server's INFO commandstats counted, and the data is as captured, DB 1 included."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hiredis
import pytest

from kvbench.engine import fastpath
from tests.support import servers
from tests.support.cli import read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration

VALUE = b'line one\nsays "hi"\\ \x00\xff\t'  # every escape sdscatrepr writes
MARKER = b"capture-complete"


class Client:
    """A scripted Redis client: one connection, one command at a time (hiredis reads)."""

    def __init__(self, server: Server) -> None:
        self.sock = socket.create_connection((server.host, server.port), timeout=10)
        self.reader = hiredis.Reader()

    def __call__(self, *argv: bytes | str) -> Any:
        words = [a.encode() if isinstance(a, str) else a for a in argv]
        self.sock.sendall(
            b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%b\r\n" % (len(w), w) for w in words)
        )
        while (reply := self.reader.gets()) is False:
            self.reader.feed(self.sock.recv(65536))
        return reply

    def close(self) -> None:
        self.sock.close()


def wait_for(condition: Any, what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def scripted_traffic(server: Server) -> None:
    """Two clients; client a ends in DB 1, client b's AUTH and BLPOP are skipped."""
    a, b = Client(server), Client(server)
    a("SET", "user:1", VALUE)
    b("SET", "b:1", "x")
    assert a("GET", "user:1") == VALUE
    for _ in range(3):
        a("INCR", "counter")
    a("MULTI")
    a("INCR", "counter")
    a("HSET", "h", "f1", "v1", "f2", "v2")
    assert a("EXEC") == [4, 2]
    assert isinstance(b("AUTH", "secret"), hiredis.ReplyError)  # no password set
    assert b("BLPOP", "empty", "0.01") is None
    b("EVAL", "return redis.call('set', 'by:script', 'v')", "0")
    b("GET", "b:1")
    a("SELECT", "1")
    a("SET", "k1", "v1")
    a("HSET", "h1", "f", "v")
    b("ECHO", MARKER)
    a.close()
    b.close()


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The scripted traffic as ``redis-cli monitor`` wrote it."""
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("redis-cli is not installed (apt-get install redis-tools)")
    path = tmp_path_factory.mktemp("monitor") / "monitor.log"
    with servers.redis() as source, path.open("wb") as out:
        monitor = subprocess.Popen(
            [cli, "-h", source.host, "-p", str(source.port), "monitor"], stdout=out
        )
        try:
            wait_for(lambda: path.read_bytes().startswith(b"OK\n"), "MONITOR's OK")
            scripted_traffic(source)
            wait_for(lambda: MARKER in path.read_bytes(), "the last command in the capture")
        finally:
            monitor.terminate()
            monitor.wait(timeout=10)
    yield path


def commandstats(server: Server) -> Counter[str]:
    """Calls per command (subcommands added to their command), from INFO commandstats."""
    info = Client(server)("INFO", "commandstats").decode()
    calls: Counter[str] = Counter()
    for line in info.splitlines():
        if line.startswith("cmdstat_"):
            name, fields = line.removeprefix("cmdstat_").split(":", 1)
            calls[name.split("|")[0]] += int(fields.split(",")[0].removeprefix("calls="))
    return calls


@pytest.mark.parametrize("speed", ["max", "4"])
@pytest.mark.parametrize("driver", ["compiled loop", "python (KVBENCH_PURE_PYTHON is set)"])
def test_the_server_counts_what_the_replay_sent_and_holds_the_captured_data(
    capture: Path, fresh_redis: Server, tmp_path: Path, speed: str, driver: str
) -> None:
    """On both drivers: the compiled pump sends each client's rendered requests on its
    own connection and reads any RESP value in reply, as the Python driver does."""
    if driver != "python (KVBENCH_PURE_PYTHON is set)" and not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    out = tmp_path / "run.json"
    result = run_kvbench(
        "replay", str(capture), f"redis://{fresh_redis.address}", "--speed", speed,
        "--no-save", "--no-live", "--json", str(out),
        env={fastpath.PURE_PYTHON_ENV: "1"} if driver.startswith("python") else {},
    )  # fmt: skip
    assert result.code == 0, result.stderr
    doc = read_json(out)
    assert doc["environment"]["driver"] == driver
    sent = doc["trace"]["sent"]
    assert sent["clients"] == 2
    assert sent["selects_inserted"] == 0  # client a's SELECT 1 is in the capture
    assert sent["skipped"] == {
        "auth: the target URL's credentials are used": 1,
        "blpop: blocking": 1,
        "run by a script (its EVAL is replayed)": 1,
    }
    assert sent["by_script"] == {"set": 1}
    assert sent["by_op"] == {
        "echo": 1,
        "eval": 1,
        "exec": 1,
        "get": 2,
        "hset": 2,
        "incr": 4,
        "multi": 1,
        "select": 1,
        "set": 3,
    }
    assert doc["mode"] == ("closed" if speed == "max" else "open")
    calls = commandstats(fresh_redis)
    for name, count in sent["by_op"].items():
        expected = count + sent["by_script"].get(name, 0)  # the EVAL's SET ran again
        assert calls[name] == expected, name
    rows = doc["server"]["reconciliation"]
    assert rows and all(row["matches"] for row in rows), rows
    check_data(fresh_redis)


def check_data(server: Server) -> None:
    client = Client(server)
    assert client("GET", "user:1") == VALUE
    assert client("GET", "counter") == b"4"
    assert client("HGETALL", "h") == [b"f1", b"v1", b"f2", b"v2"]
    assert client("GET", "by:script") == b"v"
    assert client("SELECT", "1") == b"OK"
    assert sorted(client("KEYS", "*")) == [b"h1", b"k1"]
    assert client("GET", "k1") == b"v1"
    assert client("HGETALL", "h1") == [b"f", b"v"]


def test_a_bad_line_is_one_line_and_exit_2_before_anything_is_sent(
    redis_server: Server, tmp_path: Path
) -> None:
    path = tmp_path / "monitor.log"
    path.write_bytes(b'OK\n1.0 [0 a:1] "SET" "k" "v"\n1.1 [0 a:1] "GET" k\n')
    before = commandstats(redis_server)
    result = run_kvbench("replay", str(path), f"redis://{redis_server.address}", "--no-save")
    assert result.code == 2
    assert result.stderr.strip().count("\n") == 0
    assert f"{path}:3" in result.stderr and "argument 2 is not a quoted string" in result.stderr
    assert commandstats(redis_server)["set"] == before["set"]
