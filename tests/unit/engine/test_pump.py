"""The compiled pump (engine/_pump.c): one connection's closed and open loop in C.

Its FIFO, budget, writes and timeouts, the open loop's scheduled sends (lags, late sends,
latency from the intended time), the opaques it numbers and checks (binary, meta),
how it fails (grammar errors quoted as the codec quotes them, refills and encodings that
raise, types used before their __init__). The scanners and encoders are held to the
Python codecs in test_pump_replies.py and test_pump_requests.py. Under ``CI=true`` a pump
that is not built fails these tests instead of skipping them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from kvbench.engine import fastpath
from kvbench.protocols.base import KEYS_SHIFT, CodecOptions, Op, ReplyKind
from kvbench.protocols.registry import CODECS
from tests.support import pump_oracle
from tests.support.reply_grammar import packet

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

MAX = CodecOptions().max_reply_bytes
TEXT, TEXT_FAMILIES = fastpath.PROTOCOLS["memcache-text"]


# -- the pump ----------------------------------------------------------------------------


class Pieces:
    """A stream refill serving chunks of gets (k0, k1, ...), and a write collector."""

    def __init__(self, per_piece: int) -> None:
        self.per_piece = per_piece
        self.served = 0
        self.writes: list[bytes] = []

    def refill(self) -> tuple[list[int], list[bytes], list[None], int]:
        names = [b"k%d" % (self.served + i) for i in range(self.per_piece)]
        self.served += self.per_piece
        return [int(Op.GET)] * len(names), names, [None] * len(names), 0


def pump(per_piece: int = 3, budget: int = -1) -> tuple[Any, Any, Pieces]:
    pieces = Pieces(per_piece)
    tally = _pump.Tally()
    tally.issuing, tally.budget = True, budget
    stream = _pump.Stream(pieces.refill, TEXT)
    return tally, _pump.Pump(tally, stream, pieces.writes.append, TEXT, TEXT_FAMILIES, MAX), pieces


def test_a_write_spanning_pieces_is_one_write_in_request_order() -> None:
    tally, p, pieces = pump(per_piece=3)
    assert p.issue(7) == 0
    assert pieces.writes == [b"".join(b"get k%d\r\n" % i for i in range(7))]
    assert p.inflight == 7 and tally.bytes_out == len(pieces.writes[0])


def test_replies_are_accounted_in_order_and_answered_with_as_many_requests() -> None:
    tally, p, pieces = pump()
    p.issue(2)
    hit = b"VALUE k0 0 1\r\nx\r\nEND\r\n"
    assert p.received(hit[:5]) == 0 and tally.pending == 0  # incomplete: kept
    assert p.received(hit[5:] + b"END\r\n") == 0
    ops, codes, latency = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert ops == [int(Op.GET)] * 2
    assert codes == [int(ReplyKind.HIT) | 1 << KEYS_SHIFT, int(ReplyKind.MISS)]
    assert all(ns >= 0 for ns in latency)
    assert pieces.writes[-1] == b"get k2\r\nget k3\r\n" and p.inflight == 2


def test_the_budget_is_never_exceeded_and_then_the_pump_reports_idle() -> None:
    tally, p, pieces = pump(budget=3)
    assert p.issue(2) == 0
    assert p.received(b"END\r\nEND\r\n") == 0  # only one more may go
    assert tally.budget == 0 and p.inflight == 1
    assert p.received(b"END\r\n") == 1
    assert sum(w.count(b"get ") for w in pieces.writes) == 3


def test_a_grammar_error_stops_the_pump_and_attributes_none_of_its_read() -> None:
    tally, p, _ = pump()
    p.issue(3)
    tally.issuing = False  # nothing more is sent: the FIFO shows what was taken back
    assert p.received(b"END\r\n") == 1
    assert tally.pending == 1 and p.inflight == 2
    assert p.received(b"END\r\nNONSENSE\r\nEND\r\n") == 2
    assert p.error == "unexpected reply to get: b'NONSENSE'"
    # The earlier read's reply stays counted; the END read with the garbage is taken back:
    # its request is in flight again, with the rest, for the driver to fail.
    assert tally.pending == 1 and p.inflight == 2
    assert p.received(b"END\r\n") == 2  # unusable from now on
    assert p.drop() == bytes([int(Op.GET)] * 2)


def test_expired_requests_leave_the_fifo_oldest_first() -> None:
    _, p, _ = pump()
    p.issue(2)
    sent = p.oldest_sent_ns()
    assert p.expire(sent + 10, 11) == (b"", b"")
    ops, late_by = p.expire(sent + 11, 11)
    assert ops == bytes([int(Op.GET)] * 2)
    assert memoryview(late_by).cast("q").tolist() == [0, 0]  # a closed loop sends on time
    assert p.inflight == 0 and p.oldest_sent_ns() is None


def test_the_tally_counts_what_every_pump_has_in_flight() -> None:
    """``Tally.inflight`` is the pumps' ``inflight`` added up, through sends, replies, a
    broken read taken back, expiry, drop and a pump's end (the worker samples it for
    Little's law instead of asking each of its connections)."""
    tally, a, _ = pump()
    b = _pump.Pump(tally, _pump.Stream(Pieces(2).refill, TEXT), [].append, TEXT, TEXT_FAMILIES, MAX)
    a.issue(3)
    b.issue(4)
    assert tally.inflight == a.inflight + b.inflight == 7
    tally.issuing = False
    assert a.received(b"END\r\n") == 1
    assert tally.inflight == 6
    assert a.received(b"END\r\nNONSENSE\r\n") == 2  # the END is taken back
    assert a.inflight == 2 and tally.inflight == 6
    assert len(a.drop()) == 2 and tally.inflight == 4
    sent = b.oldest_sent_ns()
    assert len(b.expire(sent + 1, 1)[0]) == 4 and tally.inflight == 0
    b.issue(1)
    tally.issuing = True
    b.issue(2)
    assert tally.inflight == 2
    del b  # a pump that ends takes its requests out of the count
    assert tally.inflight == 0


def test_the_interval_cut_runs_before_the_read_is_accounted() -> None:
    seen: list[tuple[int, int]] = []
    pieces = Pieces(4)
    tally = _pump.Tally(lambda now: seen.append((now, tally.pending)))
    tally.issuing, tally.next_cut_ns = True, 0
    p = _pump.Pump(
        tally, _pump.Stream(pieces.refill, TEXT), pieces.writes.append, TEXT, TEXT_FAMILIES, MAX
    )
    p.issue(1)
    p.received(b"END\r\n")
    assert len(seen) == 1 and seen[0][1] == 0 and tally.pending == 1


# -- the open loop --------------------------------------------------------------------

LATE_NS = 2_000_000


def open_pump(
    name: str = "memcache-text", ops: list[int] | None = None
) -> tuple[Any, Any, list[bytes]]:
    """An open-loop pump of protocol ``name`` sending ``ops`` (gets) on key ``k``."""
    ops = ops or [int(Op.GET)]
    number, families = fastpath.PROTOCOLS[name]
    chunk = (ops, [b"k"] * len(ops), [b"v"] * len(ops), 0)
    written: list[bytes] = []
    tally = _pump.Tally()
    tally.issuing = True
    stream = _pump.Stream(lambda: chunk, number, **pump_oracle.stream_frame(name))
    p = _pump.Pump(
        tally, stream, written.append, number, families, MAX, open_loop=True, late_ns=LATE_NS
    )
    return tally, p, written


@pytest.mark.parametrize("name", fastpath.PROTOCOLS)
def test_scheduled_requests_are_the_codecs_bytes_in_one_write(name: str) -> None:
    """One request per intended time, encoded as the closed loop and the codec encode them
    (opaques numbered on from the last request)."""
    ops = [int(Op.SET), int(Op.GET), int(Op.DELETE), int(Op.INCR)]
    _, p, written = open_pump(name, ops)
    now = time.monotonic_ns()
    assert p.issue_scheduled([now] * 3) == 0 and p.issue_scheduled([now] * 2) == 0
    expected = bytearray()
    reference = codec(name)
    reference.encode_many(ops, [b"k"] * 4, [b"v"] * 4, 0, 4, expected)
    reference.encode_many(ops, [b"k"] * 4, [b"v"] * 4, 0, 1, expected)
    assert len(written) == 2 and b"".join(written) == bytes(expected)
    assert p.inflight == 5


def test_scheduled_sends_record_their_lag_and_count_the_late_ones_by_op() -> None:
    tally, p, _ = open_pump(ops=[int(Op.GET), int(Op.SET)])
    now = time.monotonic_ns()
    p.issue_scheduled([now - 50_000_000, now - 40_000_000, now + 10**9])
    _, lag, late, sent = tally.take_open()
    lags = memoryview(lag).cast("q").tolist()
    assert sent == 3 and len(lags) == 3
    assert lags[0] >= 50_000_000 and lags[1] >= 40_000_000 and lags[2] < 0
    by_op = memoryview(late).cast("q").tolist()
    assert by_op[int(Op.GET)] == 1 and by_op[int(Op.SET)] == 1 and sum(by_op) == 2
    assert tally.take_open()[3] == 0  # taken: emptied
    assert tally.budget == -1  # the dispatcher draws the budget down, not the pump


def test_open_loop_replies_are_measured_from_the_intended_time_and_send_nothing() -> None:
    tally, p, written = open_pump()
    now = time.monotonic_ns()
    p.issue_scheduled([now - 30_000_000, now])
    assert p.received(b"END\r\nEND\r\n") == 0 and len(written) == 1  # nothing more sent
    ops, _, latency = (memoryview(b).cast("q").tolist() for b in tally.take())
    service = memoryview(tally.take_open()[0]).cast("q").tolist()
    assert ops == [int(Op.GET)] * 2 and len(service) == 2
    assert latency[0] >= 30_000_000 > service[0] >= 0  # queued 30 ms behind its slot
    assert latency[0] - service[0] >= 30_000_000 and latency[1] >= service[1]
    assert p.issue(5) == 1 and len(written) == 1  # only the schedule sends
    p.issue_scheduled([now])
    tally.budget = 0  # the schedule is done: the last reply says "maybe finished"
    assert p.received(b"END\r\n") == 1


def test_timed_out_open_loop_requests_say_how_late_they_were_sent() -> None:
    _, p, _ = open_pump()
    now = time.monotonic_ns()
    p.issue_scheduled([now - 7_000_000])
    ops, late_by = p.expire(p.oldest_sent_ns() + 5, 5)
    assert ops == bytes([int(Op.GET)])
    assert memoryview(late_by).cast("q").tolist()[0] >= 7_000_000


def test_scheduled_sends_refuse_what_is_not_a_schedule() -> None:
    _, p, written = open_pump()
    with pytest.raises(TypeError, match="list of ints"):
        p.issue_scheduled((1, 2))
    now = time.monotonic_ns()
    with pytest.raises(TypeError):
        p.issue_scheduled([now, "soon", now])
    assert p.inflight == 1 and len(written) == 1  # the request before it went out
    _, closed, _ = pump()
    with pytest.raises(RuntimeError, match="closed-loop pump"):
        closed.issue_scheduled([now])


def test_skipped_requests_leave_the_stream_unsent_across_chunks() -> None:
    """The open loop's dropped requests: taken from the stream, never written."""
    pieces = Pieces(3)
    tally = _pump.Tally()
    tally.issuing = True
    stream = _pump.Stream(pieces.refill, TEXT)
    sender = _pump.Pump(tally, stream, pieces.writes.append, TEXT, TEXT_FAMILIES, MAX)
    sender.issue(2)
    assert stream.skip(5) == bytes([int(Op.GET)] * 5)  # k2 .. k6, over two refills
    sender.issue(1)
    assert pieces.writes == [b"get k0\r\nget k1\r\n", b"get k7\r\n"]
    assert stream.skip(0) == b""
    with pytest.raises(ValueError, match=">= 0"):
        stream.skip(-1)


# -- opaques (binary, meta) ------------------------------------------------------------


def codec(name: str) -> Any:
    return CODECS[name].factory(CodecOptions())


def looping_pump(name: str, ops: list[int], names: list[Any]) -> tuple[Any, Any, list[bytes]]:
    """A pump of protocol ``name`` sending ``ops`` on ``names`` over and over, issuing
    without a budget; and its writes."""
    number, families = fastpath.PROTOCOLS[name]
    chunk = (ops, names, [b"v"] * len(ops), 0)
    written: list[bytes] = []
    tally = _pump.Tally()
    tally.issuing = True
    stream = _pump.Stream(lambda: chunk, number, **pump_oracle.stream_frame(name))
    return tally, _pump.Pump(tally, stream, written.append, number, families, MAX), written


def miss(name: str, opaque: int) -> bytes:
    return (
        packet(0x00, opaque, 1, value=b"Not found")
        if name == BINARY_NAME
        else b"EN O%d\r\n" % opaque
    )


BINARY_NAME, META_NAME = "memcache-binary", "memcache-meta"


@pytest.mark.parametrize("name", [BINARY_NAME, META_NAME])
def test_each_pump_numbers_its_opaques_and_checks_them_across_reads(name: str) -> None:
    tally, p, written = looping_pump(name, [int(Op.GET)], [b"k"])
    p.issue(2)
    reference = codec(name)
    expected = bytearray()
    reference.encode_many([0, 0], [b"k", b"k"], [None] * 2, 0, 2, expected)
    assert written == [bytes(expected)]  # opaques 0 and 1
    assert p.received(miss(name, 0)) == 0
    reply = miss(name, 1)
    assert p.received(reply[:5]) == 0 and p.received(reply[5:]) == 0  # split: one reply
    for sent in written[1:]:  # then opaques 2 and 3, one write each
        expected.clear()
        reference.encode_many([0], [b"k"], [None], 0, 1, expected)
        assert sent == bytes(expected)
    assert len(written) == 3
    assert p.received(miss(name, 3)) == 2  # 2 is pending: 3 answers out of order
    assert "out of order" in p.error or "opaque mismatch: expected O2" in p.error
    _, codes, _ = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert codes == [int(ReplyKind.MISS)] * 2


@pytest.mark.parametrize(
    ("name", "parts", "stale", "message"),
    [
        (  # getkq hits for keys 0 and 2, the noop (3) last; then a getkq of the answered 1
            BINARY_NAME,
            [
                packet(0x0D, 0, key=b"a", extras=b"\0" * 4, value=b"x"),
                packet(0x0D, 2, key=b"c"),
                packet(0x0A, 3),
            ],
            packet(0x0D, 1, key=b"b"),
            "opaque 1 out of order (oldest pending 7)",
        ),
        (
            META_NAME,
            [b"VA 1 O0\r\nx\r\n", b"VA 0 O2\r\n\r\n", b"MN\r\n"],
            b"VA 1 O1\r\nx\r\n",
            "VA with a token not in this multi-get: b'O1'",
        ),
    ],
)
def test_a_multi_get_answered_over_many_reads_counts_its_hits_once(
    name: str, parts: list[bytes], stale: bytes, message: str
) -> None:
    tally, p, written = looping_pump(name, [int(Op.MGET)], [(b"a", b"b", b"c")])
    p.issue(1)
    wire = b"".join(parts)
    for i in range(0, len(wire), 7):  # 7 bytes a read, cutting headers and lines
        assert p.received(wire[i : i + 7]) == 0
    _, codes, _ = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert codes == [int(ReplyKind.HIT) | 2 << KEYS_SHIFT] and len(written) == 2
    assert p.received(stale) == 2 and message in p.error  # answered before: not again


@pytest.mark.parametrize("name", [BINARY_NAME, META_NAME])
def test_the_fifo_keeps_each_requests_opaque_as_its_ring_wraps_and_grows(name: str) -> None:
    tally, p, _ = looping_pump(name, [int(Op.GET)], [b"k"])
    tally.budget = 200
    p.issue(50)
    assert p.received(b"".join(miss(name, o) for o in range(30))) == 0  # 30 more sent
    p.issue(150)  # past the ring's first entries and its doublings, from its middle
    assert p.inflight == 170 and tally.budget == 0
    assert p.received(b"".join(miss(name, o) for o in range(30, 200))) == 1  # all answered
    assert p.error is None and tally.pending == 200 and p.inflight == 0


def test_a_pump_speaks_its_streams_protocol() -> None:
    binary, _ = fastpath.PROTOCOLS[BINARY_NAME]
    meta, meta_families = fastpath.PROTOCOLS[META_NAME]
    with pytest.raises(ValueError, match="the stream encodes protocol 3, not 4"):
        _pump.Pump(_pump.Tally(), _pump.Stream(list, binary), print, meta, meta_families, MAX)
    with pytest.raises(ValueError, match="unknown protocol 9"):
        _pump.Stream(list, 9)


# -- hostile bytes (issue "The answer is right", B) ----------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b"\xff\xfe garbage",
        b"x" * 47 + "\u20ac".encode(),  # a 3-byte character cut at byte 48
        b"x" * 63 + b"\xc3\xa9" + b"tail",  # ... and at byte 64, where the codec cuts
        b"NUL\x00 and \x1b[31m escapes",
    ],
)
def test_error_text_quotes_reply_bytes_escaped_as_the_codec_does(line: bytes) -> None:
    wire = line + b"\r\n"
    _, expected = pump_oracle.codec_outcome(TEXT, Op.GET, wire)
    assert expected is not None
    codes, consumed, error = _pump.scan_replies(TEXT, TEXT_FAMILIES, bytes([Op.GET]), wire, MAX)
    assert (codes, consumed, error) == ([], 0, expected)
    assert error.isprintable()  # every byte that is not printable ASCII is escaped
    tally, p, _ = pump()
    p.issue(2)
    assert p.received(b"END\r\n" + wire) == 2  # a grammar error, not an exception
    assert p.error == expected and tally.pending == 0  # none of the read is attributed


UNINITIALIZED = """
from kvbench.engine import _pump
calls = {
    "Pump.issue": lambda: _pump.Pump.__new__(_pump.Pump).issue(1),
    "Pump.received": lambda: _pump.Pump.__new__(_pump.Pump).received(b"END\\r\\n"),
    "Pump.expire": lambda: _pump.Pump.__new__(_pump.Pump).expire(0, 0),
    "Pump.drop": lambda: _pump.Pump.__new__(_pump.Pump).drop(),
    "Pump.oldest_sent_ns": lambda: _pump.Pump.__new__(_pump.Pump).oldest_sent_ns(),
    "Tally.take": lambda: _pump.Tally.__new__(_pump.Tally).take(),
    "Stream.take_completed": lambda: _pump.Stream.__new__(_pump.Stream).take_completed(),
    "Pump(uninitialized Tally)": lambda: _pump.Pump(
        _pump.Tally.__new__(_pump.Tally), _pump.Stream(list, 1), print, 1, b"", 64
    ),
    "Pump(uninitialized Stream)": lambda: _pump.Pump(
        _pump.Tally(), _pump.Stream.__new__(_pump.Stream), print, 1, b"", 64
    ),
}
for name, call in calls.items():
    try:
        call()
    except RuntimeError as exc:
        print(name, "refused:", exc)
    else:
        print(name, "ran")
"""


def test_types_refuse_to_work_before_their_init_ran() -> None:
    """In a child process: before the fix, the first call was a segfault."""
    child = subprocess.run(
        [sys.executable, "-c", UNINITIALIZED], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert len(lines) == 9 and all("refused: " in line for line in lines), lines
    assert "Pump.issue refused: Pump.__init__ was not called" in lines


MEMBER_TYPES = {  # structmember type -> the C declaration it reads and writes
    "T_BOOL": "char",
    "T_INT": "int",
    "T_LONGLONG": "long long",
    "T_PYSSIZET": "Py_ssize_t",
    "T_OBJECT": "PyObject *",
}


def struct_fields(source: str, struct: str) -> dict[str, str]:
    """The fields of ``typedef struct {...} <struct>;`` in C source: name -> declared type."""
    body = re.search(r"typedef struct \{([^{}]*)\} " + struct + ";", source)
    assert body is not None, struct
    code = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S).replace("PyObject_HEAD", "")
    fields = {}
    declarator = r"\s*(\**)\s*(\w+)\s*(?:\[\w*\])?\s*"
    for statement in filter(str.strip, code.split(";")):
        # "long long a, b" / "PyObject *ops, *keys" / "unsigned char family[MAX_OPS]"
        first, *more = statement.split(",")
        head = re.fullmatch(r"\s*(.*?)" + declarator, first, re.S)
        assert head is not None, statement
        base, *named = head.groups()
        for stars, name in [named, *(re.findall(declarator, d)[0] for d in more)]:
            fields[name] = f"{base} {stars}" if stars else base
    return fields


def test_every_member_describes_the_c_type_of_its_field() -> None:
    """A T_BOOL over an int reads and writes one byte of it (the wrong one on big-endian)."""
    source = (Path(fastpath.__file__).parent / "_pump.c").read_text()
    members = re.findall(r"\{\"\w+\", (T_\w+), offsetof\((\w+), (\w+)\)", source)
    assert len(members) >= 8
    for member_type, struct_name, field in members:
        declared = struct_fields(source, struct_name)[field]
        assert declared == MEMBER_TYPES[member_type], (struct_name, field, declared)


def test_issuing_is_a_bool_that_round_trips() -> None:
    tally = _pump.Tally()
    assert tally.issuing is False
    tally.issuing = True
    assert tally.issuing is True
    with pytest.raises(TypeError):
        tally.issuing = 1


def test_requests_taken_before_a_failed_refill_are_sent_not_lost() -> None:
    """A refill that raises mid-batch: what was taken goes out, then the error is raised."""
    pieces = Pieces(3)
    served = 0

    def refill() -> tuple[list[int], list[bytes], list[None], int]:
        nonlocal served
        served += 1
        if served == 2:
            raise MemoryError("the workload could not draw its next chunk")
        return pieces.refill()

    tally = _pump.Tally()
    tally.issuing, tally.budget = True, 10
    stream = _pump.Stream(refill, TEXT)
    p = _pump.Pump(tally, stream, pieces.writes.append, TEXT, TEXT_FAMILIES, MAX)
    with pytest.raises(MemoryError, match="next chunk"):
        p.issue(5)
    assert pieces.writes == [b"get k0\r\nget k1\r\nget k2\r\n"]
    assert p.inflight == 3 and tally.budget == 7 and stream.pos == 3
    assert tally.bytes_out == len(pieces.writes[0])
    # the next issue goes on from the next chunk; the replies of all are accounted
    assert p.received(b"END\r\n" * 3) == 0
    assert pieces.writes[1] == b"get k3\r\nget k4\r\nget k5\r\n"
    assert tally.pending == 3 and p.inflight == 3


@pytest.mark.parametrize("name", pump_oracle.PROTOCOLS)
def test_an_encoding_failure_mid_batch_sends_what_was_encoded_first(name: str) -> None:
    """The requests before it go out with the opaques the codec gives them; the one that
    failed takes none."""
    ops, names = [int(Op.GET), int(Op.GET), int(Op.NOOP)], [b"a", b"b", b"c"]
    tally, p, written = looping_pump(name, ops, names)
    with pytest.raises(ValueError, match="no compiled encoding"):
        p.issue(3)
    first_two = bytearray()
    codec(name).encode_many(ops, names, [None] * 3, 0, 2, first_two)
    assert written == [bytes(first_two)] and p.inflight == 2 and tally.budget == -1


# -- a stream of one connection's own (a replay's lane) ----------------------------------


class LaneChunks:
    """A refill as a replay's lane gives chunks: each with its stores' TTL, and None while
    the lane has no rows (``rows`` appends the next chunk)."""

    def __init__(self) -> None:
        self.waiting: list[tuple[list[int], list[bytes], list[Any], int, int]] = []
        self.writes: list[bytes] = []

    def rows(self, ttl: int, *requests: tuple[Op, bytes]) -> None:
        ops = [int(op) for op, _ in requests]
        values = [b"v" if op in pump_oracle.STORES else None for op, _ in requests]
        self.waiting.append((ops, [key for _, key in requests], values, 0, ttl))

    def refill(self) -> tuple[list[int], list[bytes], list[Any], int, int] | None:
        return self.waiting.pop(0) if self.waiting else None


def lane_pump(name: str = "memcache-text") -> tuple[Any, Any, LaneChunks]:
    lane = LaneChunks()
    number, families = fastpath.PROTOCOLS[name]
    tally = _pump.Tally()
    tally.issuing = True
    stream = _pump.Stream(lane.refill, number, 5, **pump_oracle.stream_frame(name))
    return tally, _pump.Pump(tally, stream, lane.writes.append, number, families, MAX), lane


def test_a_stream_with_no_rows_now_sends_nothing_then_what_arrives() -> None:
    """A lane with nothing now: issue() writes nothing, says idle and raises nothing;
    replies in flight are still accounted (and send nothing); rows that arrive go out at
    the next issue(), as the worker calls it when it is told the lane got rows."""
    tally, p, lane = lane_pump()
    assert p.issue(4) == 1 and lane.writes == [] and p.inflight == 0
    lane.rows(0, (Op.GET, b"a"), (Op.GETS, b"b"))
    assert p.issue(4) == 0  # two sent, then the lane ran dry: no error
    assert lane.writes == [b"get a\r\ngets b\r\n"] and p.inflight == 2
    assert p.received(b"END\r\nEND\r\n") == 1  # accounted; nothing to send: idle
    assert p.inflight == 0 and tally.pending == 2 and len(lane.writes) == 1
    lane.rows(0, (Op.DELETE, b"c"))
    assert p.issue(1) == 0 and lane.writes[1] == b"delete c\r\n"
    ops, codes, _ = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert ops == [int(Op.GET), int(Op.GETS)] and codes == [int(ReplyKind.MISS)] * 2


def test_each_chunk_writes_its_stores_with_its_own_ttl() -> None:
    """The stream's ttl until a chunk says its own; then each chunk's, as the Python driver
    sets it on the codec per chunk."""
    _, p, lane = lane_pump()
    lane.rows(60, (Op.SET, b"a"), (Op.ADD, b"b"))
    lane.rows(0, (Op.CAS, b"c"), (Op.APPEND, b"d"))
    lane.rows(3600, (Op.GET, b"e"), (Op.PREPEND, b"f"), (Op.REPLACE, b"g"))
    assert p.issue(10) == 0
    assert lane.writes == [
        b"set a 0 60 1\r\nv\r\nadd b 0 60 1\r\nv\r\n"
        b"cas c 0 0 1 0\r\nv\r\nappend d 0 0 1\r\nv\r\n"
        b"get e\r\nprepend f 0 3600 1\r\nv\r\nreplace g 0 3600 1\r\nv\r\n"
    ]


def test_a_chunks_ttl_the_protocol_cannot_carry_is_refused_as_the_stream_s() -> None:
    _, p, lane = lane_pump("memcache-binary")
    lane.rows(2**32, (Op.SET, b"a"))
    with pytest.raises(ValueError, match="ttl and flags from 0 to 4294967295"):
        p.issue(1)


def test_a_scheduled_or_skipped_request_must_be_in_the_lane() -> None:
    """The open loop only hands a pump requests its lane holds: none there is a bug."""
    number, families = fastpath.PROTOCOLS["memcache-text"]
    lane = LaneChunks()
    tally = _pump.Tally()
    stream = _pump.Stream(lane.refill, number)
    p = _pump.Pump(tally, stream, lane.writes.append, number, families, MAX, open_loop=True)
    with pytest.raises(RuntimeError, match="not in its source"):
        p.issue_scheduled([time.monotonic_ns()])
    with pytest.raises(RuntimeError, match="not in its source"):
        stream.skip(1)


def _bytes_by_op(tally: Any) -> tuple[list[int], list[int]]:
    tx, rx = tally.take_bytes()
    return memoryview(tx).cast("q").tolist(), memoryview(rx).cast("q").tolist()


def test_bytes_are_counted_by_op_each_request_and_reply_its_own() -> None:
    """take_bytes: a write's bytes by the op of each request in it (adding up to
    bytes_out), a read's by the op each complete reply answers; a reply cut by the read
    counts when it completes, and a read that broke the protocol has its replies' bytes
    taken back with them."""
    get, set_ = int(Op.GET), int(Op.SET)
    chunk = ([get, set_, get, set_], [b"k1", b"k22", b"k1", b"k22"], [None, b"vvv", None, b"v"], 0)
    tally = _pump.Tally()
    tally.issuing = True
    written: list[bytes] = []
    stream = _pump.Stream(lambda: chunk, TEXT)
    p = _pump.Pump(tally, stream, written.append, TEXT, TEXT_FAMILIES, MAX)
    assert p.issue(4) == 0
    tx, rx = _bytes_by_op(tally)
    assert tx[get] == 2 * len(b"get k1\r\n")
    assert tx[set_] == len(b"set k22 0 0 3\r\nvvv\r\n") + len(b"set k22 0 0 1\r\nv\r\n")
    assert sum(tx) == tally.bytes_out == len(written[0]) and sum(rx) == 0
    tally.issuing = False
    hit = b"VALUE k1 0 2\r\nxy\r\nEND\r\n"
    assert p.received(hit + b"STO") == 1  # (nothing sent) the stored reply is cut: not yet
    assert _bytes_by_op(tally)[1][get] == len(hit)
    assert p.received(b"RED\r\nEND\r\n") == 1
    tx, rx = _bytes_by_op(tally)
    assert rx[set_] == len(b"STORED\r\n") and rx[get] == len(b"END\r\n") and sum(tx) == 0
    # one more request, then a read whose second reply breaks the protocol: the first
    # reply's bytes are taken back with it
    tally.issuing = True
    assert p.issue(2) == 0
    _bytes_by_op(tally)
    assert p.received(b"STORED\r\nNONSENSE\r\n") == 2  # (the 4th request, a set, first)
    assert p.error == "unexpected reply to get: b'NONSENSE'"
    assert _bytes_by_op(tally)[1] == [0] * len(rx)


def test_a_connection_at_pipeline_1_holds_a_small_request_buffer_and_ring() -> None:
    """Kept per connection: 10,000 connections held a 4 KiB request buffer and a 64-entry
    ring (2 KiB) each from their first request, 6 of the ~15 KB each cost its worker.
    Both start small and double as a deeper pipeline needs (the ring test above)."""
    pumps = [pump() for _ in range(200)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _, p, _ in pumps:
            assert p.issue(1) == 0
        grown = (tracemalloc.get_traced_memory()[0] - before) / len(pumps)
    finally:
        tracemalloc.stop()
    assert grown < 1024, f"{grown:.0f} bytes per connection"


def rmw_pump() -> tuple[Any, Any, list[bytes]]:
    """A text pump whose stream serves read-modify-writes of k0, k1, ..."""
    served = [0]

    def refill() -> tuple[list[int], list[bytes], list[bytes], int]:
        names = [b"k%d" % (served[0] + i) for i in range(4)]
        served[0] += 4
        return [_pump.OP_RMW] * 4, names, [b"v"] * 4, 0

    tally = _pump.Tally()
    tally.issuing = True
    writes: list[bytes] = []
    stream = _pump.Stream(refill, TEXT)
    return tally, _pump.Pump(tally, stream, writes.append, TEXT, TEXT_FAMILIES, MAX), writes


def test_an_rmw_is_its_get_and_its_set_in_one_slot_and_one_reply() -> None:
    """Its get's reply is kept until its set's completes it, across reads; the two are
    one op, of both replies' bytes, with the get's outcome (engine/rmw.py's fold)."""
    tally, p, writes = rmw_pump()
    assert p.issue(1) == 0 and p.inflight == 1
    assert writes == [b"get k0\r\nset k0 0 0 1\r\nv\r\n"]
    hit = b"VALUE k0 0 1\r\nx\r\nEND\r\n"
    assert p.received(hit) == 0 and p.inflight == 1 and len(writes) == 1  # half: no send
    assert p.received(b"STORED\r\n") == 0 and p.inflight == 1  # one op done, one sent
    assert writes[-1] == b"get k1\r\nset k1 0 0 1\r\nv\r\n"
    assert p.received(b"END\r\nSERVER_ERROR out of memory\r\n") == 0  # a miss, set refused
    ops, codes, _ = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert ops == [_pump.OP_RMW] * 2
    assert codes == [int(ReplyKind.HIT) | 1 << KEYS_SHIFT, int(ReplyKind.ERROR_REPLY)]
    _, rx = (memoryview(b).cast("q").tolist() for b in tally.take_bytes())
    assert rx[_pump.OP_RMW] == len(hit) + len(b"STORED\r\n") + len(
        b"END\r\nSERVER_ERROR out of memory\r\n"
    )


def test_a_dropped_rmw_whose_get_was_answered_leaves_no_half_behind() -> None:
    """drop() (the connection ends) forgets the get's reply it held: the next
    connection's first rmw starts from its own get."""
    tally, p, _ = rmw_pump()
    p.issue(1)
    assert p.received(b"END\r\n") == 0 and p.inflight == 1
    assert p.drop() == bytes([_pump.OP_RMW])
    p.issue(1)
    assert p.received(b"VALUE k1 0 1\r\nx\r\nEND\r\nSTORED\r\n") == 0
    _, codes, _ = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert codes == [int(ReplyKind.HIT) | 1 << KEYS_SHIFT]
