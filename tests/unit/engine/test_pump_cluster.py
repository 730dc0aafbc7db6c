"""A Redis Cluster's compiled pump (``Pump(..., cluster=True)``): its -MOVED and -ASK
replies, read as protocols/resp_cluster.py's ``parse_redirect`` reads them, take their
requests out of the FIFO as written and hand them to ``on_redirect``; ``send_guest``
sends one on, after ASKING for an ASK, and its reply frees no pipeline slot there.

The router that decides where a request goes (engine/redirect.py) is the Python driver's
own, held in test_redirect.py; the whole path against a real cluster resharding under load
is tests/e2e/test_run_redis_cluster.py.
"""

from __future__ import annotations

import time
from typing import Any

import hiredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.engine import fastpath
from kvbench.protocols.base import KEYS_SHIFT, CodecOptions, Op, ReplyKind
from kvbench.protocols.resp_cluster import parse_redirect, redirect_of
from tests.support import pump_oracle

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

MAX = CodecOptions().max_reply_bytes
RESP, FAMILIES = fastpath.PROTOCOLS["resp2"]
GET, SET = int(Op.GET), int(Op.SET)
HIT = int(ReplyKind.HIT) | 1 << KEYS_SHIFT
ERROR = int(ReplyKind.ERROR_REPLY)
ASKING = b"*1\r\n$6\r\nASKING\r\n"


def get(key: bytes) -> bytes:
    return b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key)


class Node:
    """One cluster connection's pump: gets of k0, k1, ... (a set every ``set_every``), its
    writes, and the redirects it handed on."""

    def __init__(self, tally: Any, set_every: int = 0, open_loop: bool = False) -> None:
        self.drawn = 0
        self.set_every = set_every
        self.writes: list[bytes] = []
        self.redirected: list[tuple[Any, ...]] = []
        stream = _pump.Stream(self.refill, RESP)
        self.pump = _pump.Pump(
            tally, stream, self.writes.append, RESP, FAMILIES, MAX, open_loop=open_loop,
            cluster=True,
        )  # fmt: skip
        self.pump.on_redirect = self.redirected.extend

    def refill(self) -> tuple[list[int], list[bytes], list[bytes | None], int]:
        ops, keys, values = [], [], []
        for i in range(self.drawn, self.drawn + 4):
            is_set = self.set_every and i % self.set_every == self.set_every - 1
            ops.append(SET if is_set else GET)
            keys.append(b"k%d" % i)
            values.append(b"v%d" % i if is_set else None)
        self.drawn += 4
        return ops, keys, values, 0


def tally() -> Any:
    t = _pump.Tally()
    t.issuing = True
    return t


def replies(t: Any) -> list[tuple[int, int]]:
    ops, codes, _ = (memoryview(b).cast("q").tolist() for b in t.take())
    return list(zip(ops, codes, strict=True))


def test_a_moved_reply_hands_its_request_on_as_written_and_frees_its_slot() -> None:
    t = tally()
    node = Node(t, set_every=2)
    node.pump.issue(2)  # GET k0, SET k1 v1
    first_write = node.writes[0]
    sent = node.pump.oldest_sent_ns()
    assert node.pump.received(b"$2\r\nv0\r\n-MOVED 3999 127.0.0.1:7001\r\n") == 0
    assert replies(t) == [(GET, HIT)]  # the MOVED is no reply of the set's
    [item] = node.redirected
    kind, slot, host, port, op, keys, request, key, sent_ns, intended, hops = item
    assert redirect_of(kind, slot, host, port) == parse_redirect(b"MOVED 3999 127.0.0.1:7001")
    assert (op, keys, key, intended, hops) == (SET, 0, None, None, 0)
    assert first_write == get(b"k0") + request  # the bytes it was sent as
    assert request == b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$2\r\nv1\r\n"
    assert sent_ns >= sent
    # Both slots were freed: two more requests went, in one write.
    assert node.writes[1] == get(b"k2") + b"*3\r\n$3\r\nSET\r\n$2\r\nk3\r\n$2\r\nv3\r\n"
    assert node.pump.inflight == 2 and t.inflight == 2


def test_a_guest_after_asking_is_answered_at_its_first_send_time_and_frees_no_slot() -> None:
    t = tally()
    origin, there = Node(t), Node(t)
    origin.pump.issue(1)
    t.issuing = False  # the origin's freed slot sends nothing: what follows is the guest's
    origin.pump.received(b"-ASK 12 127.0.0.1:7002\r\n")
    [item] = origin.redirected
    _, _, _, _, op, keys, request, key, sent_ns, _, hops = item
    assert ReplyKind(item[0]) == ReplyKind.ASK
    there.pump.send_guest(request, op, keys, key, sent_ns, sent_ns, hops + 1, True)
    assert there.writes == [ASKING + get(b"k0")]
    assert there.pump.inflight == 1 and t.inflight == 1
    t.take()
    # ASKING's +OK answers no request; the guest's reply is its outcome, and frees no
    # slot here: nothing more is sent, and the worker is told it may be finished (1).
    assert there.pump.received(b"+OK\r\n") == 0 and there.pump.inflight == 1
    answered = time.monotonic_ns()
    assert there.pump.received(b"$1\r\nx\r\n") == 1
    ops, codes, latency = (memoryview(b).cast("q").tolist() for b in t.take())
    assert (ops, codes) == ([GET], [HIT])
    assert latency[0] >= answered - sent_ns  # from its first send, the redirect included
    assert there.writes == [ASKING + get(b"k0")] and t.inflight == 0


def test_a_guest_redirected_again_keeps_its_hops_and_is_sent_as_written() -> None:
    t = tally()
    a, b = Node(t), Node(t)
    a.pump.issue(1)
    a.pump.received(b"-MOVED 1 h:1\r\n")
    *_, request, key, sent_ns, _, hops = a.redirected[0]
    b.pump.send_guest(request, GET, 0, key, sent_ns, sent_ns, hops + 1, False)
    assert b.pump.received(b"-MOVED 1 h:2\r\n") == 1  # a guest's slot is not b's
    *_, again, _, again_sent, _, again_hops = b.redirected[0]
    assert (again, again_sent, again_hops) == (request, sent_ns, 1)
    assert b.writes == [request]


def test_asking_answered_otherwise_breaks_the_protocol() -> None:
    t = tally()
    node = Node(t)
    node.pump.send_guest(get(b"k"), GET, 0, None, 1, 1, 1, True)
    assert node.pump.received(b"-ERR unknown command 'ASKING'\r\n") == 2
    assert node.pump.error == "ASKING answered b\"-ERR unknown command 'ASKING'\\r\\n\""
    assert node.pump.drop() == bytes([GET])


def test_a_read_that_breaks_the_protocol_follows_none_of_its_redirects() -> None:
    t = tally()
    node = Node(t)
    node.pump.issue(3)
    t.issuing = False
    assert node.pump.received(b"$1\r\nx\r\n-MOVED 5 h:1\r\n?\r\n") == 2
    assert node.redirected == [] and t.pending == 0
    assert node.pump.drop() == bytes([GET] * 3)  # each ends as a protocol error


def test_an_open_loop_redirect_keeps_its_intended_time() -> None:
    t = tally()
    node = Node(t, open_loop=True)
    node.pump.issue_scheduled([123])
    node.pump.received(b"-MOVED 5 h:1\r\n")
    *_, intended, _ = node.redirected[0]
    assert intended == 123


def test_without_cluster_a_moved_is_an_error_reply_and_send_guest_is_refused() -> None:
    t = tally()
    writes: list[bytes] = []
    stream = _pump.Stream(Node(t).refill, RESP)
    plain = _pump.Pump(t, stream, writes.append, RESP, FAMILIES, MAX)
    plain.issue(1)
    t.issuing = False
    plain.received(b"-MOVED 5 h:1\r\n")
    assert replies(t)[-1] == (GET, ERROR)
    with pytest.raises(RuntimeError, match="no cluster"):
        plain.send_guest(get(b"k"), GET, 0, None, 1, 1, 1, False)
    with pytest.raises(ValueError, match="speaks RESP"):
        text, families = fastpath.PROTOCOLS["memcache-text"]
        _pump.Pump(t, _pump.Stream(list, text), writes.append, text, families, MAX, cluster=True)


@pytest.mark.parametrize(
    "args",
    [
        (b"", GET, 0, None, 1, 1, 1, False),  # nothing to send
        (get(b"k"), 60, 0, None, 1, 1, 1, False),  # an op the pump does not send
        (get(b"k"), GET, 0, None, 1, 1, 0, False),  # a guest was redirected at least once
        (get(b"k"), GET, 0, None, 1, 1, 256, False),
        (get(b"k"), GET, 0, "k", 1, 1, 1, False),  # a key is bytes
    ],
)
def test_send_guest_refuses_what_no_redirect_gives(args: tuple[Any, ...]) -> None:
    node = Node(tally())
    with pytest.raises(ValueError):
        node.pump.send_guest(*args)
    assert node.pump.inflight == 0 and node.writes == []


def test_a_redirect_with_no_one_to_take_it_raises() -> None:
    node = Node(tally())
    node.pump.on_redirect = None
    node.pump.issue(1)
    with pytest.raises(RuntimeError, match="no on_redirect"):
        node.pump.received(b"-MOVED 5 h:1\r\n")


# Error texts near a redirect's grammar: "<word> <slot> <host>:<port>" with each part
# varied (words, digit strings of any length, zeros in front, hosts with colons and
# brackets, whitespace where the parser strips it and where it does not), and loose pieces.
_SPACE = st.sampled_from(["", " ", "  ", "\t", " \x0b", "\x0c "])
_DIGITS = (
    st.tuples(st.sampled_from(["", "0", "00", "000"]), st.integers(0, 70000).map(str)).map("".join)
    | st.text("0123456789", max_size=7)
    | st.sampled_from(["16383", "16384", "65535", "65536"])
)
_STRUCTURED = st.tuples(
    st.sampled_from(["MOVED", "ASK", "MOVE", "ASKING", "moved", ""]),
    _SPACE, _DIGITS, _SPACE,
    st.sampled_from(["127.0.0.1", "", "::1", "[::1]", "?", "h", "a b"]),
    st.sampled_from([":", "", "::"]),
    _DIGITS, _SPACE,
).map("".join)  # fmt: skip
_PIECES = st.sampled_from(
    ["MOVED", "ASK", " ", "\t", ":", "::1", "[", "]", "0", "000", "16383", "65536", "x"]
)
TEXTS = _STRUCTURED | st.lists(_PIECES, max_size=8).map("".join)


@settings(max_examples=600, deadline=None)
@given(text=TEXTS)
def test_a_reply_is_a_redirect_exactly_where_parse_redirect_says(text: str) -> None:
    t = tally()
    node = Node(t)
    node.pump.issue(1)
    t.issuing = False
    data = text.encode()
    assert node.pump.received(b"-" + data + b"\r\n") in (0, 1)
    expected = parse_redirect(data)
    if expected is None:
        assert node.redirected == [] and replies(t) == [(GET, ERROR)]
    else:
        [item] = node.redirected
        assert redirect_of(*item[:4]) == expected and replies(t) == []


# -- a random exchange between two nodes' pumps ------------------------------------------


def commands(data: bytes) -> list[bytes]:
    """The requests in a write, each as its bytes (hiredis reads a request's array as it
    reads a reply's), ASKING's included."""
    reader = hiredis.Reader()
    reader.feed(data)
    found = []
    while (command := reader.gets()) is not False:
        found.append(
            b"".join(
                [b"*%d\r\n" % len(command), *(b"$%d\r\n%s\r\n" % (len(a), a) for a in command)]
            )
        )
    assert b"".join(found) == data
    return found


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_two_nodes_pass_requests_between_them_and_every_one_ends_once(data: st.DataObject) -> None:
    """Two cluster pumps issue, are answered (values, error replies, MOVED and ASK, in reads
    cut anywhere), and send each other's redirects on as guests, their FIFOs growing past
    their first size. Against a model of each FIFO: every redirect hands on the request at
    its head as it was written, every other reply is accounted once, and what is left in
    flight at the end is what drop() returns. (Under ``make sanitize`` this is the kept
    requests' ring and buffer under AddressSanitizer.)"""
    t = tally()
    nodes = [Node(t, set_every=3), Node(t, set_every=2)]
    # Each node's FIFO as the model sees it: (request bytes, hops, asked).
    fifo: list[list[tuple[bytes, int, bool]]] = [[], []]
    written = [0, 0]
    accounted = 0

    def sync_writes(i: int) -> None:
        """What node i wrote since the last look, taken into its model FIFO (guests are
        added where they are sent)."""
        for write in nodes[i].writes[written[i] :]:
            fifo[i].extend((request, 0, False) for request in commands(write))
        written[i] = len(nodes[i].writes)

    for _ in range(data.draw(st.integers(1, 25))):
        i = data.draw(st.integers(0, 1))
        node = nodes[i]
        if data.draw(st.booleans()) or not fifo[i]:
            node.pump.issue(data.draw(st.integers(1, 20)))
            sync_writes(i)
            continue
        # Replies for a prefix of the FIFO, the bytes cut anywhere.
        count = data.draw(st.integers(1, len(fifo[i])))
        kinds = [
            data.draw(st.sampled_from(["hit", "ok", "error", "moved", "ask"])) for _ in range(count)
        ]
        wire = b""
        for (request, _, asked), kind in zip(fifo[i], kinds, strict=False):
            wire += b"+OK\r\n" if asked else b""
            wire += {
                "hit": b"$1\r\nx\r\n" if b"GET" in request else b"+OK\r\n",
                "ok": b"+OK\r\n",
                "error": b"-ERR no\r\n",
                "moved": b"-MOVED 7 127.0.0.1:7001\r\n",
                "ask": b"-ASK 7 127.0.0.1:7001\r\n",
            }[kind]
        cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=4)))
        before = len(node.redirected)
        for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
            assert node.pump.received(wire[start:end]) in (0, 1)
        expected = [
            (r, h) for (r, h, _), k in zip(fifo[i], kinds, strict=False) if k in ("moved", "ask")
        ]
        handed = node.redirected[before:]
        assert [(item[6], item[10]) for item in handed] == expected
        accounted += sum(k not in ("moved", "ask") for k in kinds)
        del fifo[i][:count]
        sync_writes(i)  # (the slots freed sent more)
        for item in handed:
            to = data.draw(st.integers(0, 1))
            asking = ReplyKind(item[0]) == ReplyKind.ASK
            _, _, _, _, op, keys, request, key, sent_ns, _, hops = item
            sync_writes(to)  # (what it wrote before: the guest's write is taken here)
            nodes[to].pump.send_guest(request, op, keys, key, sent_ns, sent_ns, hops + 1, asking)
            assert nodes[to].writes[-1] == (ASKING if asking else b"") + request
            written[to] = len(nodes[to].writes)
            fifo[to].append((request, hops + 1, asking))
        assert [n.pump.inflight for n in nodes] == [len(f) for f in fifo]
        assert t.inflight == len(fifo[0]) + len(fifo[1])
    ops, _, _ = t.take()
    assert len(ops) // 8 == accounted
    for node, model in zip(nodes, fifo, strict=True):
        assert len(node.pump.drop()) == len(model)
    assert t.inflight == 0
