"""The Python driver counts bytes by op as the compiled one does (issue 20 §6).

Each request's bytes go to its op (a batch is encoded one run of one op at a time), each
reply's wire bytes to the op it answers (``Reply.nbytes``, from the codec that found the
reply's end); a reply cut by a read counts when it completes, and the replies of a read
that broke the protocol count nowhere. The differential oracle (tests/support/
pump_oracle.py) holds these against the compiled pump on random exchanges; here the
figures are written out for each protocol the Python driver alone speaks too.
"""

from __future__ import annotations

from array import array

import pytest

from kvbench.engine.py_pump import PyTally
from kvbench.protocols.base import Op
from tests.support import pump_oracle
from tests.support.pump_oracle import Exchange

MAX = 1 << 20
GET, SET, DELETE, INCR = int(Op.GET), int(Op.SET), int(Op.DELETE), int(Op.INCR)


def by_op(counts: list[int] | None, op: int) -> int:
    assert counts is not None
    return counts[op] if op < len(counts) else 0


@pytest.mark.parametrize(
    ("protocol", "get", "set_", "hit", "miss", "stored"),
    [
        (
            "memcache-text",
            b"get k1\r\n",
            b"set k22 0 0 3\r\nvvv\r\n",
            b"VALUE k1 0 2\r\nxy\r\nEND\r\n",
            b"END\r\n",
            b"STORED\r\n",
        ),
        (
            "resp2",
            b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n",
            b"*3\r\n$3\r\nSET\r\n$3\r\nk22\r\n$3\r\nvvv\r\n",
            b"$2\r\nxy\r\n",
            b"$-1\r\n",
            b"+OK\r\n",
        ),
        (
            "resp3",
            b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n",
            b"*3\r\n$3\r\nSET\r\n$3\r\nk22\r\n$3\r\nvvv\r\n",
            b"$2\r\nxy\r\n",
            b"_\r\n",
            b"+OK\r\n",
        ),
    ],
)
def test_each_request_and_reply_counts_to_its_op(
    protocol: str, get: bytes, set_: bytes, hit: bytes, miss: bytes, stored: bytes
) -> None:
    """Gets and sets interleaved in one batch, the replies read in pieces that cut them."""
    wire = hit + stored + miss + stored
    ops = [GET, SET, GET, SET]
    ex = Exchange(protocol, ops, [b"k1", b"k22", b"k1", b"k22"], wire, [3, len(hit) + 2], MAX)
    outcome = pump_oracle.py_pump_outcome(ex)
    assert outcome.error is None and len(outcome.codes) == 4
    assert by_op(outcome.tx, GET) == 2 * len(get)
    assert by_op(outcome.tx, SET) == 2 * len(set_)
    assert by_op(outcome.rx, GET) == len(hit) + len(miss)
    assert by_op(outcome.rx, SET) == 2 * len(stored)


def test_http_replies_count_their_heads_and_bodies() -> None:
    """An HTTP gateway's response: status line, headers and body, all the get's."""
    hit = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nxy"
    miss = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
    ex = Exchange("http-memc", [GET, GET, GET], [b"k1", b"k2", b"k1"], hit + miss + hit, [7], MAX)
    outcome = pump_oracle.py_pump_outcome(ex)
    assert outcome.error is None and len(outcome.codes) == 3
    assert by_op(outcome.rx, GET) == 2 * len(hit) + len(miss)
    assert by_op(outcome.tx, GET) == len(outcome.requests)


def test_a_broken_read_counts_none_of_its_replies() -> None:
    """The read whose second reply breaks the protocol: its first reply's bytes are not
    counted either (which reply answered which request is no longer known)."""
    ex = Exchange("memcache-text", [SET, GET], [b"k", b"k"], b"STORED\r\nNONSENSE\r\n", [], MAX)
    outcome = pump_oracle.py_pump_outcome(ex)
    assert outcome.error is not None
    assert not any(outcome.rx or [])


def test_the_tally_hands_out_the_sums_and_empties() -> None:
    """take_bytes: int64 by op (as wide as the highest op either side saw), then empty."""
    tally = PyTally()
    tally.add_tx(3, 10)
    tally.add_tx(1, 4)
    tally.add_tx(3, 5)
    tally.rx_ops.extend([1, 5, 1])
    tally.rx_sizes.extend([7, 2, 3])
    tx, rx = (array("q", data).tolist() for data in tally.take_bytes())
    assert tx == [0, 4, 0, 15, 0, 0] and rx == [0, 10, 0, 0, 0, 2]
    assert [array("q", data).tolist() for data in tally.take_bytes()] == [[], []]
