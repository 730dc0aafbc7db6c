"""``kvbench run`` against servers whose replies are hostile, on both drivers.

Reply bytes that are not UTF-8, RESP integers of 19 digits and beyond, binary responses
with another request's opaque or a body past every bound, meta replies with another
request's token or a 20-digit value size, an arbitrary command's reply with a RESP3
attribute before it or a 20-digit VA size: a fake server writes what a real one would not
(a real redis-server for the 64-bit edge it does reach). Bad replies are protocol errors,
counted, and the connection is reopened, the same on the compiled and the Python driver,
in a closed and an open loop; never a traceback, never a silent ``conn_error``: the
requests in flight on the connection end as ``protocol_error``.
"""

from __future__ import annotations

import re
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hiredis
import pytest

from kvbench.engine import fastpath
from tests.support import pump_oracle
from tests.support.cli import Result, all_phase_counts, read_json, run_kvbench
from tests.support.reply_grammar import packet
from tests.support.servers import Server

pytestmark = pytest.mark.integration

DRIVERS = ["compiled", "python"]
# The closed loop, and the open loop (the dispatcher's scheduled sends; nothing dropped).
LOOPS = {"closed": (), "open": ("--rate", "3000", "--max-lag", "10s")}
# Cut inside "\u20ac" (3 bytes) at byte 48 of the line; and bytes that are no UTF-8 at all.
CUT_CHARACTER = b"x" * 47 + "\u20ac".encode() + b"\r\n"
NOT_UTF8 = b"\xff\xfe garbage\r\n"


# memcached binary opcodes -> the verb FakeServer.reply counts them by.
BINARY_VERBS = {0x00: b"get", 0x01: b"set", 0x04: b"delete", 0x05: b"incr", 0x10: b"stat"}


class FakeServer(socketserver.ThreadingTCPServer):
    """memcached (text, meta, binary) or RESP2 on a free loopback port; ``answer`` writes
    each reply.

    ``answer(command, n)`` gets the request's words (a text or meta line split on spaces;
    the RESP array; for a binary request its verb, its opaque and its key) and how many
    requests of that verb came before; ``stats`` / ``INFO`` and ``version`` are answered
    here so that the run's probe passes. A memcached connection whose first byte is 0x80
    speaks binary, as memcached decides.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, resp: bool, answer: Callable[[list[bytes], int], bytes]) -> None:
        super().__init__(("127.0.0.1", 0), _Session)
        self.resp = resp
        self.answer = answer
        self.counts: dict[bytes, int] = {}
        self.lock = threading.Lock()

    def reply(self, command: list[bytes]) -> bytes:
        verb = command[0].lower() if command else b""
        with self.lock:
            n = self.counts.get(verb, 0)
            self.counts[verb] = n + 1
        if verb == b"stat":  # binary: one statistic, then the empty key that ends them
            opaque = int.from_bytes(command[1], "big")
            return packet(0x10, opaque, key=b"pid", value=b"1") + packet(0x10, opaque)
        if verb in (b"stats", b"info"):
            text = b"redis_version:7.0.0\r\nuptime_in_seconds:1\r\n"
            return b"$%d\r\n%b\r\n" % (len(text), text) if self.resp else b"STAT pid 1\r\nEND\r\n"
        if verb == b"version":
            return b"VERSION 1.6.0\r\n"
        return self.answer(command, n)


class _Session(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: FakeServer = self.server  # type: ignore[assignment]
        reader = hiredis.Reader()
        buffer = b""
        while data := self.request.recv(65536):
            out = []
            buffer += data
            if server.resp:
                reader.feed(data)
                while (command := reader.gets()) is not False:
                    out.append(server.reply(command))
            elif buffer[:1] == b"\x80":
                while len(buffer) >= 24 and len(buffer) >= 24 + (
                    body := int.from_bytes(buffer[8:12], "big")
                ):
                    key = buffer[24 + buffer[4] : 24 + buffer[4] + buffer[3]]
                    verb = BINARY_VERBS.get(buffer[1], b"opcode %d" % buffer[1])
                    out.append(server.reply([verb, buffer[12:16], key]))
                    buffer = buffer[24 + body :]
            else:
                while (eol := buffer.find(b"\r\n")) >= 0:
                    words = buffer[:eol].split(b" ")
                    end = eol + 2
                    if words[0] in (b"set", b"ms"):  # the data block follows the line
                        end += int(words[4 if words[0] == b"set" else 2]) + 2
                        if len(buffer) < end:
                            break
                    buffer = buffer[end:]
                    out.append(server.reply(words))
            try:
                self.request.sendall(b"".join(out))
            except OSError:
                return


@contextmanager
def fake_server(resp: bool, answer: Callable[[list[bytes], int], bytes]) -> Iterator[FakeServer]:
    server = FakeServer(resp, answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def run(url: str, driver: str, tmp_path: Path, *args: str) -> tuple[Result, dict[str, Any]]:
    if driver == "compiled":
        pump_oracle.require_compiled()
    out = tmp_path / f"{driver}.json"
    flags = ["--duration", "1s", "-c", "2", "--processes", "1", "--no-save", "--json", str(out)]
    env = {fastpath.PURE_PYTHON_ENV: "1"} if driver == "python" else {}
    result = run_kvbench("run", url, *flags, *args, env=env)
    assert "Traceback" not in result.stderr and "Fatal error" not in result.stderr, result.stderr
    doc = read_json(out)
    expected = "compiled loop" if driver == "compiled" else "python (KVBENCH_PURE_PYTHON is set)"
    assert doc["environment"]["driver"] == expected
    return result, doc


def reconnects(doc: dict[str, Any]) -> int:
    return sum(row["reconnects"] for row in doc["intervals"])


def protocol_errors(doc: dict[str, Any]) -> list[str]:
    return [e for e in doc["errors"] if "protocol_error" in e]


def text_garbage(command: list[bytes], n: int) -> bytes:
    """Every 25th get answered with bytes that are no reply (and no UTF-8); else a miss."""
    if command[0] != b"get":
        return b"STORED\r\n" if command[0] == b"set" else b"ERROR\r\n"
    if n % 25 == 24:
        return NOT_UTF8 if n % 50 == 24 else CUT_CHARACTER
    return b"END\r\n"


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("driver", DRIVERS)
def test_reply_bytes_that_are_not_utf8_are_protocol_errors_and_reconnects(
    tmp_path: Path, driver: str, loop: str
) -> None:
    with fake_server(False, text_garbage) as server:
        port = server.server_address[1]
        url = f"memcached://127.0.0.1:{port}"
        _, doc = run(url, driver, tmp_path, "--ratio", "0:1", *LOOPS[loop])
        gets = server.counts[b"get"]
    outcomes = doc["ops"]["get"]["outcomes"]
    assert outcomes["miss"] > 50
    # every bad reply closed its connection: its in-flight requests are protocol_error
    # (their own outcome), and the connection came back
    assert outcomes.get("protocol_error", 0) >= 1 and reconnects(doc) >= 1
    errors = protocol_errors(doc)
    assert errors, doc["errors"]
    assert any(
        "unexpected reply to get: b'\\xff\\xfe garbage'" in e
        or "unexpected reply to get: b'" + "x" * 47 + "\\xe2\\x82\\xac'" in e
        for e in errors
    ), errors
    # the client's count of gets is the server's (less those still in flight at the end)
    assert gets - 4 <= all_phase_counts(doc, "get") <= gets


def binary_opaques(command: list[bytes], n: int) -> bytes:
    """Every 50th get answered with the next request's opaque, every 50th with a header
    declaring a body of 2**32-1 bytes; else a miss."""
    verb, opaque = command[0], int.from_bytes(command[1], "big")
    if verb != b"get":
        return packet(0x01, opaque)
    if n % 50 == 24:
        return packet(0x00, opaque + 1, 1, value=b"Not found")
    if n % 50 == 49:
        return packet(0x00, opaque, 1, body=2**32 - 1)[:24]
    return packet(0x00, opaque, 1, value=b"Not found")


def meta_tokens(command: list[bytes], n: int) -> bytes:
    """Every 50th get answered with the next request's token, every 50th with a 20-digit
    value size; else a miss."""
    token = int(command[-1][1:])
    if command[0] != b"mg":
        return b"HD O%d\r\n" % token
    if n % 50 == 24:
        return b"EN O%d\r\n" % (token + 1)
    if n % 50 == 49:
        return b"VA 99999999999999999999 O%d\r\n" % token
    return b"EN O%d\r\n" % token


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(
    ("scheme", "answer", "faults"),
    [
        ("memcached+binary", binary_opaques, ("opaque", "of 4294967295 bytes exceeds")),
        ("memcached+meta", meta_tokens, ("opaque mismatch: expected O", "bad VA line: b'VA 999")),
    ],
)
def test_replies_for_another_request_or_past_every_bound_are_protocol_errors(
    tmp_path: Path,
    driver: str,
    scheme: str,
    answer: Callable[[list[bytes], int], bytes],
    faults: tuple[str, str],
    loop: str,
) -> None:
    with fake_server(False, answer) as server:
        port = server.server_address[1]
        url = f"{scheme}://127.0.0.1:{port}"
        _, doc = run(url, driver, tmp_path, "--ratio", "0:1", *LOOPS[loop])
        gets = server.counts[b"get" if scheme == "memcached+binary" else b"mg"]
    outcomes = doc["ops"]["get"]["outcomes"]
    assert outcomes["miss"] > 50 and "hit" not in outcomes
    assert outcomes.get("protocol_error", 0) >= 1 and reconnects(doc) >= 1
    # one protocol error per fault the server wrote (each 25th get), less those still in
    # flight at the end; the worker names the last, in the same text on both drivers
    errors = protocol_errors(doc)
    counted = sum(
        int(n.replace(",", "")) for e in errors for n in re.findall(r"protocol_error ([\d,]+)", e)
    )
    assert gets // 25 - 2 <= counted <= gets // 25 and counted >= 2, (gets, errors)
    assert all(any(fault in e for fault in faults) for e in errors), errors
    assert gets - 4 <= all_phase_counts(doc, "get") <= gets


def resp_numbers(number: bytes) -> Callable[[list[bytes], int], bytes]:
    """INCR answered with ``number``; SET +OK, GET a miss."""

    def answer(command: list[bytes], n: int) -> bytes:
        verb = command[0].lower()
        if verb == b"incr":
            return b":" + number + b"\r\n"
        return b"$-1\r\n" if verb == b"get" else b"+OK\r\n"

    return answer


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("number", [b"1000000000000000000", b"-9223372036854775808"])
def test_resp_integers_of_19_digits_are_values(tmp_path: Path, driver: str, number: bytes) -> None:
    with fake_server(True, resp_numbers(number)) as server:
        port = server.server_address[1]
        _, doc = run(f"redis://127.0.0.1:{port}/0", driver, tmp_path, "--ratio", "incr=1")
        incrs = server.counts[b"incr"]
    outcomes = doc["ops"]["incr"]["outcomes"]
    assert set(outcomes) == {"value"}, outcomes
    assert incrs - 4 <= all_phase_counts(doc, "incr", "value") <= incrs
    assert reconnects(doc) == 0 and doc["errors"] == []


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("number", [b"9223372036854775808"])
def test_resp_integers_beyond_64_bits_are_protocol_errors(
    tmp_path: Path, driver: str, number: bytes
) -> None:
    with fake_server(True, resp_numbers(number)) as server:
        port = server.server_address[1]
        _, doc = run(f"redis://127.0.0.1:{port}/0", driver, tmp_path, "--ratio", "incr=1")
    outcomes = doc["ops"]["incr"]["outcomes"]
    assert "value" not in outcomes and outcomes.get("protocol_error", 0) >= 1
    assert reconnects(doc) >= 1 and protocol_errors(doc), doc["errors"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_incr_up_to_the_64_bit_limit_on_a_real_redis(
    fresh_redis: Server, tmp_path: Path, driver: str
) -> None:
    """Seven INCRs reach 2^63-1; every one after is Redis's own overflow error reply.

    With ``--keys 1`` every incr goes to the one counter key (workload/plan.py).
    """
    key = b"kvbench:counter:0"
    with socket.create_connection((fresh_redis.host, fresh_redis.port), timeout=5) as sock:
        sock.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\n%b\r\n$19\r\n%d\r\n" % (len(key), key, 2**63 - 8))
        assert sock.recv(100) == b"+OK\r\n"
    _, doc = run(
        f"redis://{fresh_redis.address}/0", driver, tmp_path, "--ratio", "incr=1", "--keys", "1"
    )
    outcomes = doc["ops"]["incr"]["outcomes"]
    assert all_phase_counts(doc, "incr", "value") == 7
    assert all_phase_counts(doc, "incr", "error_reply") > 100
    assert not {"conn_error", "protocol_error"} & set(outcomes) and reconnects(doc) == 0
    assert not protocol_errors(doc), doc["errors"]
    with socket.create_connection((fresh_redis.host, fresh_redis.port), timeout=5) as sock:
        sock.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%b\r\n" % (len(key), key))
        assert sock.recv(100) == b"$19\r\n%d\r\n" % (2**63 - 1)


def resp_attributes(command: list[bytes], n: int) -> bytes:
    """HGET answered with a bulk string; every 25th with a RESP3 attribute before it."""
    if command[0].lower() != b"hget":
        return b"+OK\r\n"
    if n % 25 == 24:
        return b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n"
    return b"$1\r\nv\r\n"


def memcached_va_sizes(command: list[bytes], n: int) -> bytes:
    """mg answered with a value; every 25th with a 20-digit value size."""
    if command[0] != b"mg":
        return b"ERROR\r\n"
    if n % 25 == 24:
        return b"VA 99999999999999999999\r\n"
    return b"VA 1 f0\r\nv\r\n"


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_commands_reply_with_a_resp3_attribute_is_never_given_to_it(
    tmp_path: Path, driver: str
) -> None:
    """A --command's reply is any value, but an attribute before it is refused by the
    compiled driver: a protocol error, the connection reopened, no reply counted for the
    request it preceded. The Python driver's hiredis returns the attribute as a reply of
    its own (pump_oracle's exception) and gives it to the HGET, then finds the value with
    no request pending: a protocol error in the same read, whose replies neither driver
    counts, so here both count alike."""
    with fake_server(True, resp_attributes) as server:
        port = server.server_address[1]
        url = f"redis://127.0.0.1:{port}/0"
        _, doc = run(url, driver, tmp_path, "--command", "HGET h:__key__ f")
        hgets = server.counts[b"hget"]
    outcomes = doc["ops"]["hget"]["outcomes"]
    faults = hgets // 25
    assert outcomes.get("protocol_error", 0) >= 1 and reconnects(doc) >= 1 and faults >= 2
    assert outcomes["ok"] <= hgets - faults  # the HGETs answered with a value alone
    fault = "RESP3 attribute: not read" if driver == "compiled" else "with no request pending"
    assert all(fault in e for e in protocol_errors(doc)), doc["errors"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_memcached_commands_reply_past_every_bound_is_a_protocol_error(
    tmp_path: Path, driver: str
) -> None:
    with fake_server(False, memcached_va_sizes) as server:
        port = server.server_address[1]
        _, doc = run(f"memcached://127.0.0.1:{port}", driver, tmp_path, "--command", "mg __key__ v")
        mgs = server.counts[b"mg"]
    outcomes = doc["ops"]["mg"]["outcomes"]
    assert outcomes["ok"] > 50 and outcomes.get("protocol_error", 0) >= 1 and reconnects(doc) >= 1
    errors = protocol_errors(doc)
    assert errors and all("bad VA line: b'VA 9999" in e for e in errors), errors
    assert outcomes["ok"] <= mgs - mgs // 25
