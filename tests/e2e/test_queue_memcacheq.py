"""``kvbench queue`` end to end against a memcacheq STAND-IN (tests/support/memcacheq_standin.py).

memcacheq is not packaged for Debian, so these runs talk to an asyncio server written for
the tests that answers as memcacheq documents (set enqueues / STORED, get dequeues /
``VALUE ... END`` or a bare ``END`` when empty, ``stats queue``, ERROR for the rest). It is
a stand-in, not the real server: what it proves is kvbench's side of the protocol and its
accounting, including a variant that loses every 1000th message on purpose.
"""

from __future__ import annotations

import signal
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvbench.results.store import Store
from kvbench.workload.queue import read_header
from tests.support.cli import read_json, read_until, run_kvbench, start_kvbench
from tests.support.memcacheq_standin import MemcacheqStandin, running_standin

pytestmark = pytest.mark.integration


@pytest.fixture
def standin() -> Iterator[MemcacheqStandin]:
    server = MemcacheqStandin()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def lossy_standin() -> Iterator[MemcacheqStandin]:
    server = MemcacheqStandin(drop_every=200)
    server.start()
    yield server
    server.stop()


def run_queue(
    server: MemcacheqStandin, tmp_path: Path, *args: str
) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / "queue.json"
    result = run_kvbench(
        "queue",
        f"memcacheq://127.0.0.1:{server.port}/q",
        *args,
        "--json",
        str(out),
        "--db",
        str(tmp_path / "history.db"),
        timeout_s=180,
    )
    assert out.exists(), result.stderr
    return result.code, read_json(out), result.stdout


STANDARD = ("--producers", "2", "--consumers", "2", "--messages", "4000", "--message-size", "100")


def test_the_standin_answers_as_memcacheq_documents(standin: MemcacheqStandin) -> None:
    def ask(request: bytes, until: bytes) -> bytes:
        data = b""
        sock.sendall(request)
        while not data.endswith(until):
            data += sock.recv(4096)
        return data

    with socket.create_connection(("127.0.0.1", standin.port)) as sock:
        assert ask(b"get q\r\n", b"END\r\n") == b"END\r\n"
        assert ask(b"set q 0 0 5\r\nhello\r\n", b"\r\n") == b"STORED\r\n"
        assert ask(b"set q 0 0 5 noreply\r\n", b"\r\n") == b"ERROR\r\n"
        assert ask(b"stats queue\r\n", b"END\r\n") == b"STAT q 1/0\r\nEND\r\n"
        for command in (b"gets q\r\n", b"add q 0 0 1\r\n", b"incr q 1\r\n"):
            assert ask(command, b"\r\n") == b"ERROR\r\n"
        assert ask(b"get q\r\n", b"END\r\n") == b"VALUE q 0 5\r\nhello\r\nEND\r\n"
        assert ask(b"stats queue\r\n", b"END\r\n") == b"STAT q 1/1\r\nEND\r\n"


def test_two_producers_two_consumers_lose_and_duplicate_nothing(
    standin: MemcacheqStandin, tmp_path: Path
) -> None:
    code, doc, stdout = run_queue(standin, tmp_path, *STANDARD)
    queue = doc["queue"]
    assert code == 0, stdout
    assert (queue["produced"], queue["received"], queue["unique"]) == (4000, 4000, 4000)
    assert (queue["lost"], queue["duplicated"], queue["out_of_order"], queue["foreign"]) == (
        0,
        0,
        0,
        0,
    )
    assert [p["sent"] for p in queue["producers"]] == [2000, 2000]
    assert queue["puts_per_s"] > 0 and queue["gets_per_s"] > 0
    assert queue["e2e_latency_us"]["p50"] is not None
    # The server's own counts agree with the client's.
    state = standin.queues[b"q"]
    assert (state.enqueued, state.dequeued, len(state.messages)) == (4000, 4000, 0)
    assert queue["backlog"]["server_after"] == 0
    assert doc["ops"]["put"]["outcomes"] == {"stored": 4000}
    assert doc["ops"]["get"]["outcomes"]["hit"] == 4000
    assert doc["ops"]["get"]["outcomes"].get("miss", 0) == queue["empty_polls"]
    assert "lost 0" in stdout


def test_messages_the_server_drops_are_exactly_the_lost_ones(
    lossy_standin: MemcacheqStandin, tmp_path: Path
) -> None:
    code, doc, stdout = run_queue(lossy_standin, tmp_path, *STANDARD)
    queue = doc["queue"]
    dropped = [read_header(data) for data in lossy_standin.dropped]
    assert len(dropped) == 20 and all(h is not None for h in dropped)
    dropped_by_producer = Counter(h.producer for h in dropped if h)
    assert code == 1, stdout  # a lost message fails the run
    assert queue["lost"] == 20 and queue["duplicated"] == 0
    assert queue["drained"] is True
    for row in queue["producers"]:
        assert row["lost"] == dropped_by_producer[row["producer"]]
        dropped_seqs = {h.seq for h in dropped if h and h.producer == row["producer"]}
        assert set(row["lost_examples"]) <= dropped_seqs
        assert len(row["lost_examples"]) == min(10, len(dropped_seqs))
    assert any(v["id"] == "delivery.lost" for v in doc["verdicts"])
    # failed in the document and the history too (seen: exit 1 but JSON and history ok)
    assert (doc["status"], doc["process_status"]) == ("failed", "ok")
    assert doc["status_reasons"] == ["20 acknowledged messages were never received"]
    assert "\nstatus: failed - 20 acknowledged messages were never received\n" in stdout
    with Store(str(tmp_path / "history.db")) as store:
        (row,) = store.list_runs()
    assert row["run_id"] == doc["run_id"] and row["status"] == "failed"


def test_consumers_starting_late_leave_a_backlog(standin: MemcacheqStandin, tmp_path: Path) -> None:
    code, doc, stdout = run_queue(standin, tmp_path, *STANDARD, "--consumers-start-after", "1000")
    queue = doc["queue"]
    assert code == 0, stdout
    assert queue["backlog"]["peak"] >= 1000
    assert queue["lost"] == 0 and queue["unique"] == 4000
    assert "consumers started" in stdout


def test_a_stored_queue_run_shows_again_from_the_history(
    standin: MemcacheqStandin, tmp_path: Path
) -> None:
    code, doc, _ = run_queue(standin, tmp_path, "--messages", "2000", "-P", "4")
    assert code == 0 and doc["status"] == "ok"
    db = str(tmp_path / "history.db")
    listed = run_kvbench("history", "--db", db)
    (line,) = [line for line in listed.stdout.splitlines() if doc["run_id"] in line]
    assert " ok " in line
    shown = run_kvbench("show", doc["run_id"], "--db", db)
    assert shown.code == 0 and "delivery per producer" in shown.stdout
    as_json = run_kvbench("show", "last", "--db", db, "--json")
    assert '"mode": "queue"' in as_json.stdout


def test_a_reply_to_no_put_is_a_protocol_error_not_a_crash(tmp_path: Path) -> None:
    """The stand-in answers every 97th enqueue twice: producers count a protocol error,
    reconnect and go on; every message is still sent, acknowledged and received once."""
    server = MemcacheqStandin(extra_reply_every=97)
    server.start()
    try:
        result = run_kvbench(
            "queue",
            f"memcacheq://127.0.0.1:{server.port}/q",
            *STANDARD,
            "-P",
            "4",
            "--json",
            str(tmp_path / "queue.json"),
            "--no-save",
            timeout_s=180,
        )
    finally:
        server.stop()
    doc = read_json(tmp_path / "queue.json")
    queue = doc["queue"]
    assert result.code == 0, result.stdout
    assert "Traceback" not in result.stderr and doc["status"] == "ok"
    assert server.extra_replies == 4000 // 97
    assert (queue["produced"], queue["received"], queue["unique"]) == (4000, 4000, 4000)
    assert (queue["lost"], queue["duplicated"], queue["unexpected"]) == (0, 0, 0)
    assert server.queues[b"q"].enqueued == 4000
    assert doc["ops"]["put"]["outcomes"] == {"stored": 4000}
    problems = [v["message"] for v in doc["verdicts"] if v["id"] == "run.error"]
    assert problems and all("no request pending" in m for m in problems)
    assert sum(i["reconnects"] for i in doc["intervals"]) > 0


def test_a_restarted_queue_server_is_said_and_its_counts_not_compared(tmp_path: Path) -> None:
    """memcacheq restarted mid-run keeps its messages (BerkeleyDB) but counts enqueued and
    dequeued from zero again: enqueued - dequeued of the new process is no backlog (it went
    negative as the consumers drained the old messages). The report says the server
    restarted and shows no server backlog from then on."""
    first = MemcacheqStandin()
    port = first.start()
    out = tmp_path / "queue.json"
    proc = start_kvbench(
        "queue",
        f"memcacheq://127.0.0.1:{port}/q",
        "--messages",
        "200000",
        "-P",
        "8",
        "--consumers-start-after",
        "20000",
        "--duration",
        "8s",
        "--json",
        str(out),
        "--no-save",
    )
    try:
        read_until(proc, "put ")  # the first interval: a backlog is building up
        first.stop()
        second = MemcacheqStandin(port=port, pid=first.pid + 1, queues=first.persisted())
        second.start()
        try:
            _, stderr = proc.communicate(timeout=120)
        finally:
            second.stop()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (0, 1), stderr  # messages in flight at the restart may be lost
    assert "Traceback" not in stderr
    doc = read_json(out)
    shown = [row["server_backlog"] for row in doc["intervals"]]
    assert all(n is None or n >= 0 for n in shown), shown
    assert shown[-1] is None  # after the restart
    backlog = doc["queue"]["backlog"]
    assert backlog["server_restart"]["evidence"] == f"pid {first.pid} -> {first.pid + 1}"
    assert backlog["server_after"] is None
    assert "queue.server_restarted" in {v["id"] for v in doc["verdicts"]}
    # The restart came with a backlog on the old process (the consumers start after 20,000
    # puts), so the new one counts from zero with messages stored: without the restart
    # check its enqueued - dequeued went negative once the consumers drained them (how far
    # they got in the window is the machine's to decide, not the test's).
    assert first.queues[b"q"].enqueued > first.queues[b"q"].dequeued


# Every message is stored before the consumer asks (so each of the gets held by the stall
# dequeues one); the stall starts at the 300th get, with 16 gets in flight.
STALLED = (
    "--producers", "1", "--consumers", "1", "--messages", "2000", "-P", "16",
    "--consumers-start-after", "2000", "--timeout", "2s", "--grace", "500ms",
)  # fmt: skip


def test_messages_taken_by_gets_that_timed_out_are_of_unknown_fate_not_lost(
    tmp_path: Path,
) -> None:
    # A stall longer than the timeout and the wait for late answers after it: the client
    # drops the connection, and the messages the held gets dequeued never reach it.
    with running_standin(stall_at_get=300, stall_s=60.0) as server:
        code, doc, stdout = run_queue(server, tmp_path, *STALLED)
        held = server.held_hits
    queue = doc["queue"]
    assert held > 0, stdout
    assert code == 0, stdout  # unknown fate is no failure by itself
    assert (queue["lost"], queue["unknown_fate"], queue["duplicated"]) == (0, held, 0)
    assert queue["unanswered_gets"] >= held
    assert queue["unique"] == 2000 - held and queue["drained"] is True
    assert doc["status"] == "ok" and doc["status_reasons"] == []
    (verdict,) = [v for v in doc["verdicts"] if v["id"] == "delivery.unknown_fate"]
    assert verdict["level"] == "warning"
    assert f"unknown fate {held:,} (" in stdout and "never received" not in stdout


def test_late_answers_to_timed_out_gets_are_read_before_the_connection_is_dropped(
    tmp_path: Path,
) -> None:
    # A stall longer than the timeout, shorter than the timeout and the wait after it:
    # the held answers come on the same connection and their messages are received.
    with running_standin(stall_at_get=300, stall_s=3.0) as server:
        code, doc, stdout = run_queue(server, tmp_path, *STALLED)
        held, stalls = server.held_hits, server.stalls_ended
    queue = doc["queue"]
    assert held > 0 and stalls == 1, stdout
    assert code == 0, stdout
    assert doc["ops"]["get"]["outcomes"].get("timeout", 0) > 0  # they did time out
    assert (queue["lost"], queue["unknown_fate"], queue["late_received"]) == (0, 0, held)
    assert (queue["received"], queue["unique"], queue["duplicated"]) == (2000, 2000, 0)


def test_an_interrupted_run_reconciles_every_message_with_the_server(
    standin: MemcacheqStandin, tmp_path: Path
) -> None:
    out = tmp_path / "queue.json"
    proc = start_kvbench(
        "queue", f"memcacheq://127.0.0.1:{standin.port}/q", "--producers", "2",
        "--consumers", "2", "--messages", "2000000", "-P", "8", "--json", str(out),
        "--db", str(tmp_path / "history.db"),
    )  # fmt: skip
    try:
        read_until(proc, "[   1.0s]")
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stdout
    doc = read_json(out)
    queue, state = doc["queue"], standin.queues[b"q"]
    assert doc["status"] == "interrupted"
    # Every message is told once: received (all of the server's dequeues: each get was
    # answered before the consumers stopped), or in flight when interrupted (still queued).
    assert (queue["lost"], queue["duplicated"], queue["unknown_fate"]) == (0, 0, 0)
    assert queue["produced"] == state.enqueued
    assert queue["received"] == queue["unique"] == state.dequeued
    assert sum(c["received"] for c in queue["consumers"]) == queue["received"]
    assert queue["in_flight"] == queue["produced"] - queue["unique"] == len(state.messages)
    if queue["in_flight"]:  # the consumers may have caught up at the very instant
        assert f"in flight when interrupted {queue['in_flight']:,}" in stdout
