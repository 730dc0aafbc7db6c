"""Redis Cluster on the wire: redirects, and slot map replies recorded from a real cluster."""

from __future__ import annotations

from pathlib import Path

import hiredis
import pytest

from kvbench.errors import ProtocolError
from kvbench.protocols.base import NEED_DATA, Op, ReplyKind
from kvbench.protocols.resp import RespCodec
from kvbench.protocols.resp_cluster import (
    Master,
    Redirect,
    SlotsQuery,
    parse_cluster_shards,
    parse_cluster_slots,
    parse_redirect,
)

DATA = Path(__file__).parents[2] / "data" / "redis_cluster"


def recorded(name: str) -> object:
    reader = hiredis.Reader()
    reader.feed((DATA / name).read_bytes())
    reply = reader.gets()
    assert reply is not False and reader.gets() is False
    return reply


@pytest.mark.parametrize(
    ("text", "redirect"),
    [
        (b"MOVED 3999 127.0.0.1:6381", Redirect(ReplyKind.MOVED, 3999, "127.0.0.1", 6381)),
        (b"ASK 3999 127.0.0.1:6381", Redirect(ReplyKind.ASK, 3999, "127.0.0.1", 6381)),
        (b"MOVED 0 redis-7.example:6379", Redirect(ReplyKind.MOVED, 0, "redis-7.example", 6379)),
        # Redis 7: an unknown endpoint is empty or '?': the host that was asked.
        (b"MOVED 16383 :6380", Redirect(ReplyKind.MOVED, 16383, "", 6380)),
        (b"ASK 1 ?:6380", Redirect(ReplyKind.ASK, 1, "", 6380)),
        (b"MOVED 12 ::1:7000", Redirect(ReplyKind.MOVED, 12, "::1", 7000)),
    ],
)
def test_redirects_parse(text: bytes, redirect: Redirect) -> None:
    assert parse_redirect(text) == redirect


@pytest.mark.parametrize(
    "text",
    [
        b"ERR unknown command",
        b"MOVED",
        b"MOVED 16384 h:1",  # no such slot
        b"MOVED -1 h:1",
        b"MOVED 12 h:0",
        b"MOVED 12 h:65536",
        b"MOVED 12 h",
        b"ASK 12 h:99999999999999999999",
        b"MOVEDX 12 h:1",
        b"CROSSSLOT Keys in request don't hash to the same slot",
    ],
)
def test_anything_else_is_not_a_redirect(text: bytes) -> None:
    assert parse_redirect(text) is None


def test_codec_tells_redirects_only_in_cluster_mode() -> None:
    replies = b"-MOVED 12 10.0.0.2:7001\r\n-ASK 13 10.0.0.3:7002\r\n-ERR no\r\n$1\r\nv\r\n"
    for cluster, kinds in ((False, [20, 20, 20]), (True, [26, 27, 20])):
        codec = RespCodec(cluster=cluster)
        out = bytearray()
        for _ in range(4):
            codec.encode(Op.GET, b"k", None, out)
        codec.feed(replies)
        codes: list[int] = []
        assert codec.read_kinds(codes) == 4
        assert [c & 0xFF for c in codes[:3]] == kinds
        assert codes[3] == int(ReplyKind.HIT) | 1 << 8
        expected = [
            Redirect(ReplyKind.MOVED, 12, "10.0.0.2", 7001),
            Redirect(ReplyKind.ASK, 13, "10.0.0.3", 7002),
        ]
        assert codec.redirects == (expected if cluster else [])


def test_next_reply_gives_the_redirect_text() -> None:
    codec = RespCodec(cluster=True)
    codec.encode(Op.SET, b"k", b"v", bytearray())
    codec.feed(b"-MOVED 12 10.0.0.2:7001\r\n")
    reply = codec.next_reply()
    assert reply.kind == ReplyKind.MOVED  # type: ignore[union-attr]
    assert reply.payload == b"MOVED 12 10.0.0.2:7001"  # type: ignore[union-attr]


@pytest.mark.parametrize("batch", [False, True])
def test_askings_ok_is_consumed_by_the_codec(batch: bool) -> None:
    codec = RespCodec(cluster=True)
    out = bytearray()
    assert codec.encode_asking(out) == 0  # no reply for the caller's FIFO
    assert bytes(out) == b"*1\r\n$6\r\nASKING\r\n"
    codec.encode(Op.GET, b"k", None, out)
    codec.feed(b"+OK\r\n$1\r\nv\r\n")
    if batch:
        codes: list[int] = []
        assert codec.read_kinds(codes) == 1 and codes == [int(ReplyKind.HIT) | 1 << 8]
    else:
        assert codec.next_reply().kind == ReplyKind.HIT  # type: ignore[union-attr]
        assert codec.next_reply() is NEED_DATA


@pytest.mark.parametrize("batch", [False, True])
def test_askings_refusal_is_a_protocol_error(batch: bool) -> None:
    codec = RespCodec(cluster=True)
    out = bytearray()
    codec.encode_asking(out)
    codec.encode(Op.GET, b"k", None, out)
    codec.feed(b"-ERR This instance has cluster support disabled\r\n$-1\r\n")
    with pytest.raises(ProtocolError, match="ASKING answered"):
        codec.read_kinds([]) if batch else codec.next_reply()


def test_shards_reply_with_a_replica() -> None:
    assert parse_cluster_shards(recorded("shards_with_replica.resp")) == [
        Master("127.0.0.1", 44499, ((8192, 16383),)),
        Master("127.0.0.1", 39339, ((0, 8191),)),
    ]


def test_slots_reply_with_a_replica() -> None:
    assert parse_cluster_slots(recorded("slots_with_replica.resp")) == [
        Master("127.0.0.1", 39339, ((0, 8191),)),
        Master("127.0.0.1", 44499, ((8192, 16383),)),
    ]


def test_shards_reply_after_a_slot_moved_keeps_the_empty_master() -> None:
    assert parse_cluster_shards(recorded("shards_slot_moved.resp")) == [
        Master("127.0.0.1", 59637, ()),
        Master("127.0.0.1", 38847, ((0, 99), (101, 8191))),
        Master("127.0.0.1", 43047, ((100, 100), (8192, 16383))),
    ]


def test_slots_reply_after_a_slot_moved_groups_ranges_per_master() -> None:
    assert parse_cluster_slots(recorded("slots_slot_moved.resp")) == [
        Master("127.0.0.1", 38847, ((0, 99), (101, 8191))),
        Master("127.0.0.1", 43047, ((100, 100), (8192, 16383))),
    ]


def test_shards_prefers_the_tls_port_on_a_tls_connection() -> None:
    node = [b"id", b"x", b"port", 7000, b"tls-port", 8000, b"ip", b"10.0.0.1",
            b"endpoint", b"", b"role", b"master"]  # fmt: skip
    reply = [[b"slots", [0, 16383], b"nodes", [node]]]
    assert parse_cluster_shards(reply, tls=True) == [Master("10.0.0.1", 8000, ((0, 16383),))]
    assert parse_cluster_shards(reply) == [Master("10.0.0.1", 7000, ((0, 16383),))]


def test_slots_null_host_means_the_host_asked() -> None:
    assert parse_cluster_slots([[0, 16383, [None, 7000, b"id"]]]) == [
        Master("", 7000, ((0, 16383),))
    ]


@pytest.mark.parametrize(
    "reply",
    [
        b"OK",
        [[b"slots", [0], b"nodes", []]],
        [[b"slots", [5, 2], b"nodes", []]],
        [[b"slots", [0, 16384], b"nodes", []]],
        [[b"slots", [0, 1], b"nodes", [[b"role", b"master", b"port", 0, b"ip", b"h"]]]],
        [[b"slots", [0, 1], b"nodes", [[b"role", b"master", b"port"]]]],
        [[b"slots", [0, 1]]],
        [b"slots"],
    ],
)
def test_malformed_shards_replies_are_protocol_errors(reply: object) -> None:
    with pytest.raises(ProtocolError):
        parse_cluster_shards(reply)


@pytest.mark.parametrize(
    "reply",
    [b"OK", [[0, 1]], [[0, 1, [b"h"]]], [[0, 1, [b"h", b"7000"]]], [[1, 0, [b"h", 7000]]]],
)
def test_malformed_slots_replies_are_protocol_errors(reply: object) -> None:
    with pytest.raises(ProtocolError):
        parse_cluster_slots(reply)


def test_query_asks_shards_and_slots_at_once_after_auth() -> None:
    query = SlotsQuery(password="pw", username="me")
    assert query.request == (
        b"*3\r\n$4\r\nAUTH\r\n$2\r\nme\r\n$2\r\npw\r\n"
        b"*2\r\n$7\r\nCLUSTER\r\n$6\r\nSHARDS\r\n*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n"
    )
    shards = (DATA / "shards_with_replica.resp").read_bytes()
    slots = (DATA / "slots_with_replica.resp").read_bytes()
    stream = b"+OK\r\n" + shards + slots
    for i in range(len(stream) - 1):  # nothing before the last byte
        assert query.feed(stream[i : i + 1]) is None
    answer = query.feed(stream[-1:])
    assert answer is not None and answer.error is None
    assert answer.masters == parse_cluster_shards(recorded("shards_with_replica.resp"))


def test_query_falls_back_to_slots_before_redis_7() -> None:
    query = SlotsQuery()
    slots = (DATA / "slots_slot_moved.resp").read_bytes()
    answer = query.feed(b"-ERR unknown subcommand 'SHARDS'\r\n" + slots)
    assert answer is not None and answer.masters == parse_cluster_slots(
        recorded("slots_slot_moved.resp")
    )


def test_query_reports_the_servers_refusals() -> None:
    refused = SlotsQuery(password="bad").feed(b"-WRONGPASS invalid\r\n-NOAUTH x\r\n-NOAUTH x\r\n")
    assert refused is not None and refused.error == "AUTH: WRONGPASS invalid"
    disabled = b"-ERR This instance has cluster support disabled\r\n"
    answer = SlotsQuery().feed(disabled * 2)
    assert answer is not None and answer.error == "ERR This instance has cluster support disabled"


def test_query_refuses_garbage() -> None:
    with pytest.raises(ProtocolError):
        SlotsQuery().feed(b"!garbage\r\n")
