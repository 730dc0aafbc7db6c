"""Producer and consumer connections against a scripted in-memory transport (no sockets)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kvbench.config.model import ReportConfig
from kvbench.config.queue import build_queue_config
from kvbench.engine.queue_link import GET, PUT, QUEUE_OPS, Consumer, Producer, QueueCommands
from kvbench.metrics.recorder import Recorder
from kvbench.workload.queue import MessageFormat, read_header

TAG = 77


class ScriptedTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.aborted = False

    def write(self, data: Any) -> None:
        self.written += data

    def abort(self) -> None:
        self.aborted = True


class Owner:
    """Records what the link tells its worker (a ``LinkHost``)."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []
        self.broken = 0

    def connection_opened(self) -> None:
        pass

    def connection_ready(self, link: Any) -> None:
        pass

    def connection_broken(self, link: Any, announced: bool, was_live: bool, refused: bool) -> None:
        self.broken += 1

    def maybe_finished(self) -> None:
        pass

    def note_error(self, kind: str, text: str) -> None:
        self.errors.append((kind, text))


def commands(url: str = "memcacheq://127.0.0.1/q") -> QueueCommands:
    return QueueCommands(build_queue_config(url, {}, ReportConfig()))


def producer(
    quota: int, pipeline: int, url: str = "memcacheq://127.0.0.1/q"
) -> tuple[Producer, ScriptedTransport, Owner, Recorder]:
    owner, recorder, transport = Owner(), Recorder(QUEUE_OPS), ScriptedTransport()
    link = Producer(
        owner,
        commands(url),
        recorder,
        pipeline,
        message_format=MessageFormat(TAG, 3, 40),
        quota=quota,
    )
    link.connection_made(transport)
    link.issuing = True
    link.fill()
    return link, transport, owner, recorder


def test_a_producer_keeps_its_pipeline_full_of_numbered_messages() -> None:
    link, transport, _, _ = producer(quota=5, pipeline=2)
    requests = bytes(transport.written).split(b"\r\n")
    assert requests[0] == b"set q 0 0 40" and requests[2] == b"set q 0 0 40"
    headers = [read_header(requests[1]), read_header(requests[3])]
    assert [(h.run_tag, h.producer, h.seq) for h in headers if h] == [(TAG, 3, 0), (TAG, 3, 1)]
    assert link.inflight == 2 and link.next_seq == 2


def test_stored_puts_are_acknowledged_and_others_are_not() -> None:
    link, _, owner, recorder = producer(quota=5, pipeline=2)
    link.data_received(b"STORED\r\nSTORED\r\n")
    assert (link.stored, link.next_seq, link.inflight) == (2, 4, 2)
    link.data_received(b"STORED\r\nSERVER_ERROR out of memory\r\n")
    assert (link.stored, link.unacknowledged) == (3, [3])
    assert owner.errors and owner.errors[0][0] == "put_not_stored"
    link.data_received(b"STORED\r\n")
    assert link.exhausted and link.stored == 4
    snap = recorder.cut("measure", 0, 0, 1)
    assert snap.counts["put"] == {"stored": 4, "error_reply": 1}


def test_puts_in_flight_on_a_broken_connection_are_unacknowledged() -> None:
    link, _, owner, recorder = producer(quota=10, pipeline=3)
    link.data_received(b"STORED\r\n")
    link.connection_lost(ConnectionResetError())
    assert sorted(link.unacknowledged) == [1, 2, 3]
    assert owner.broken == 1
    assert recorder.counts[PUT][22] == 3  # conn_error


def test_redis_producers_lpush() -> None:
    link, transport, _, _ = producer(quota=1, pipeline=1, url="redis-queue://127.0.0.1/jobs")
    assert bytes(transport.written).startswith(b"*3\r\n$5\r\nLPUSH\r\n$4\r\njobs\r\n$40\r\nKVQ\x01")
    link.data_received(b":1\r\n")
    assert link.stored == 1 and link.exhausted


def consumer(
    pipeline: int, poll_ns: int = 0, url: str = "memcacheq://127.0.0.1/q"
) -> tuple[Consumer, ScriptedTransport, Owner, Recorder]:
    owner, recorder, transport = Owner(), Recorder(QUEUE_OPS), ScriptedTransport()
    link = Consumer(owner, commands(url), recorder, pipeline, run_tag=TAG, poll_interval_ns=poll_ns)
    link.connection_made(transport)
    link.issuing = True
    link.fill()
    return link, transport, owner, recorder


def value(data: bytes) -> bytes:
    return b"VALUE q 0 %d\r\n%s\r\nEND\r\n" % (len(data), data)


def test_a_consumer_records_messages_empties_and_foreign_values() -> None:
    link, transport, _, recorder = consumer(pipeline=3)
    assert transport.written == b"get q\r\nget q\r\nget q\r\n"
    ours = MessageFormat(TAG, 1, 40).build(seq=9, sent_ns=0)
    other_run = MessageFormat(TAG + 1, 1, 40).build(seq=9, sent_ns=0)
    link.data_received(value(ours) + b"END\r\n" + value(other_run))
    assert (link.received, link.foreign, link.empties) == (1, 1, 1)
    assert (list(link.producers), list(link.seqs)) == ([1], [9])
    assert len(link.e2e_ns) == 1 and link.e2e_ns[0] > 0
    assert link.empty_since_ns is None and link.last_receive_ns > 0
    producers, seqs = link.take_receipts()
    assert (list(producers), list(seqs), len(link.seqs)) == ([1], [9], 0)
    snap = recorder.cut("measure", 0, 0, 1)
    assert snap.counts["get"] == {"hit": 2, "miss": 1}
    assert link.inflight == 3  # refilled at once: the read brought a message


def test_an_empty_queue_is_asked_again_after_the_poll_interval() -> None:
    async def scenario() -> tuple[int, int, int | None]:
        link, transport, _, _ = consumer(pipeline=2, poll_ns=20_000_000)
        transport.written.clear()
        link.data_received(b"END\r\nEND\r\n")
        waiting = link.inflight
        await asyncio.sleep(0.05)
        return waiting, link.inflight, link.empty_since_ns

    waiting, later, since = asyncio.run(scenario())
    assert (waiting, later) == (0, 2)
    assert since is not None


def test_error_replies_to_gets_are_counted_not_raised() -> None:
    link, _, owner, recorder = consumer(pipeline=1)
    link.data_received(b"ERROR\r\n")
    assert owner.errors == [("get_error_reply", "ERROR")]
    assert recorder.cut("measure", 0, 0, 1).counts["get"] == {"error_reply": 1}


def test_a_timed_out_dequeue_is_waited_for_then_the_connection_dropped() -> None:
    link, transport, _, recorder = consumer(pipeline=2)
    sent = link._sent_ns[0]
    link.check_timeout(sent + 10, timeout_ns=5)
    assert recorder.counts[GET][21] == 2  # timeout
    assert list(recorder.latency_ns[GET]) == [5, 5]
    assert not transport.aborted and link.awaiting == 2  # late answers may still come
    link.check_timeout(sent + 15, timeout_ns=5)  # they did not: dropped, fate unknown
    assert transport.aborted
    link.connection_lost(None)
    assert (link.unknown_fate, link.awaiting, link.received) == (2, 0, 0)


def test_late_answers_to_timed_out_gets_bring_their_messages() -> None:
    link, transport, _, recorder = consumer(pipeline=2)
    written = len(transport.written)
    link.check_timeout(link._sent_ns[0] + 10, timeout_ns=5)
    link.fill()
    assert len(transport.written) == written  # no new get while answers are late
    message = MessageFormat(TAG, 1, 30).build(seq=9, sent_ns=0)
    link.data_received(b"VALUE q 0 30\r\n" + message + b"\r\nEND\r\n")
    assert (link.received, link.late_received, link.awaiting) == (1, 1, 1)
    link.data_received(b"END\r\n")  # the other took nothing
    assert (link.late_received, link.awaiting, link.unknown_fate) == (1, 2, 0)  # asks again
    assert list(link.seqs) == [9] and not transport.aborted
    assert len(transport.written) > written
    assert recorder.counts[GET][21] == 2  # still two timeouts, no hit counted twice


def test_gets_in_flight_on_a_broken_connection_are_of_unknown_fate() -> None:
    link, _, _, _ = consumer(pipeline=3)
    link.connection_lost(ConnectionResetError())
    assert link.unknown_fate == 3


def test_redis_consumers_brpop_with_the_block_time() -> None:
    link, transport, _, _ = consumer(pipeline=1, url="redis-queue://127.0.0.1/jobs?block=100ms")
    assert transport.written == b"*3\r\n$5\r\nBRPOP\r\n$4\r\njobs\r\n$5\r\n0.100\r\n"
    message = MessageFormat(TAG, 0, 30).build(seq=4, sent_ns=0)
    link.data_received(b"*2\r\n$4\r\njobs\r\n$30\r\n" + message + b"\r\n")
    assert list(link.seqs) == [4]


@pytest.mark.parametrize(
    ("url", "ack"),
    [("memcacheq://127.0.0.1/q", b"STORED\r\n"), ("redis-queue://127.0.0.1/jobs", b":1\r\n")],
)
def test_a_reply_with_no_put_in_flight_is_a_protocol_error_and_counts_stay_right(
    url: str, ack: bytes
) -> None:
    link, transport, owner, recorder = producer(quota=10, pipeline=2, url=url)
    link.data_received(ack * 2)  # seq 0, 1 stored; 2, 3 go out
    link.data_received(ack * 3)  # seq 2, 3 stored, then one reply to nothing
    assert [kind for kind, _ in owner.errors] == ["protocol_error"]
    assert transport.aborted
    assert (link.stored, link.inflight, link.next_seq) == (4, 0, 4)
    link.connection_lost(None)  # the abort's consequence: nothing was in flight
    assert link.unacknowledged == [] and owner.broken == 1
    # Reconnected: a fresh codec, and the puts go on from seq 4.
    fresh = ScriptedTransport()
    link.connection_made(fresh)
    link.fill()  # what the worker does when the link is ready
    link.data_received(ack * 2)
    assert (link.stored, link.next_seq) == (6, 8)
    snap = recorder.cut("measure", 0, 0, 1)
    assert snap.counts["put"] == {"stored": 6}


def test_replies_before_garbage_still_count_for_a_producer() -> None:
    link, transport, owner, recorder = producer(quota=10, pipeline=3)
    link.data_received(b"STORED\r\nSTORED\r\nBOGUS\r\n")
    assert owner.errors and owner.errors[0][0] == "protocol_error"
    assert link.stored == 2 and link.inflight == 1 and transport.aborted
    link.connection_lost(None)
    assert link.unacknowledged == [2]
    snap = recorder.cut("measure", 0, 0, 1)
    assert snap.counts["put"] == {"stored": 2, "conn_error": 1}


def test_a_reply_with_no_get_in_flight_is_a_protocol_error_for_a_consumer() -> None:
    link, transport, owner, recorder = consumer(pipeline=2)
    ours = MessageFormat(TAG, 1, 40).build(seq=4, sent_ns=0)
    link.data_received(value(ours) + b"END\r\nEND\r\n")
    assert [kind for kind, _ in owner.errors] == ["protocol_error"]
    assert transport.aborted
    assert (link.received, link.empties, link.inflight) == (1, 1, 0)
    assert (list(link.producers), list(link.seqs)) == ([1], [4])
    link.connection_lost(None)
    snap = recorder.cut("measure", 0, 0, 1)
    assert snap.counts["get"] == {"hit": 1, "miss": 1}
