"""The read-modify-write codec wrapper: a get and a set sent together, one reply."""

from __future__ import annotations

from kvbench.config.model import WorkloadConfig
from kvbench.config.targets import parse_target
from kvbench.engine.codec_choice import connection_codec_factories
from kvbench.engine.rmw import RmwCodec
from kvbench.protocols.base import KIND_MASK, Op, ReplyKind
from kvbench.protocols.memcache_text import MemcacheTextCodec
from kvbench.protocols.resp import RespCodec
from kvbench.workload.mix import RMW_CODE

GET, SET = int(Op.GET), int(Op.SET)


def test_an_rmw_is_written_as_a_get_then_a_set_of_its_key() -> None:
    codec = RmwCodec(MemcacheTextCodec())
    out = bytearray()
    ops = [GET, RMW_CODE, SET]
    replies = codec.encode_many(ops, [b"a", b"b", b"c"], [None, b"xy", b"z"], 0, 3, out)
    assert replies == 3
    assert bytes(out) == b"get a\r\nget b\r\nset b 0 0 2\r\nxy\r\nset c 0 0 1\r\nz\r\n"
    assert codec.pending() == 3


def test_the_two_replies_fold_into_the_gets_outcome_and_may_arrive_apart() -> None:
    codec = RmwCodec(MemcacheTextCodec())
    out = bytearray()
    codec.encode_many([RMW_CODE, GET], [b"k", b"m"], [b"v", None], 0, 2, out)
    kinds: list[int] = []
    codec.feed(b"VALUE k 0 1\r\nv\r\nEND\r\n")  # the get's half only
    assert codec.read_kinds(kinds) == 0 and codec.pending() == 2
    codec.feed(b"STORED\r\nEND\r\n")
    assert codec.read_kinds(kinds) == 2
    assert [k & KIND_MASK for k in kinds] == [ReplyKind.HIT, ReplyKind.MISS]
    assert codec.pending() == 0


def test_an_error_in_either_half_makes_the_rmw_an_error_reply() -> None:
    codec = RmwCodec(RespCodec())
    out = bytearray()
    codec.encode_many([RMW_CODE, RMW_CODE], [b"k", b"j"], [b"v", b"w"], 0, 2, out)
    assert out.count(b"GET") == 2 and out.count(b"SET") == 2
    codec.feed(b"$-1\r\n-ERR no\r\n-ERR no\r\n+OK\r\n")
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 2
    assert [k & KIND_MASK for k in kinds] == [ReplyKind.ERROR_REPLY] * 2


def test_connections_get_the_wrapper_only_when_the_ratio_has_rmw() -> None:
    target = parse_target("memcached://127.0.0.1:11211", "t")
    plain = connection_codec_factories(target, WorkloadConfig(), [0], None)[0]()
    mixed = WorkloadConfig(ratio=(("get", 1), ("rmw", 1)))
    wrapped = connection_codec_factories(target, mixed, [0], None)[0]()
    assert not isinstance(plain, RmwCodec) and isinstance(wrapped, RmwCodec)


def cluster_pairs(n: int) -> RmwCodec:
    """A Redis Cluster codec's wrapper with ``n`` rmw pairs in flight (keys k0, k1, ...)."""
    codec = RmwCodec(RespCodec(cluster=True))
    keys = [b"k%d" % i for i in range(n)]
    codec.encode_many([RMW_CODE] * n, keys, [b"v"] * n, 0, n, bytearray())
    return codec


def test_a_pair_a_node_redirected_is_one_redirect_whichever_half_it_was() -> None:
    """Both halves MOVED: one redirect for the pair, the second's dropped from the
    codec's list (the driver takes one per redirect reply); a get served before its set
    was redirected, or a set after its get was: one redirect, the served half counted;
    an rmw answered whole between them is folded as ever."""
    codec = cluster_pairs(4)
    moved = b"-MOVED 1 127.0.0.1:7001\r\n"
    ask = b"-ASK 2 127.0.0.1:7002\r\n"
    codec.feed(moved + moved + b"$1\r\nv\r\n" + ask + b"$-1\r\n+OK\r\n" + ask + b"+OK\r\n")
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 4
    assert [k & KIND_MASK for k in kinds] == [
        ReplyKind.MOVED, ReplyKind.ASK, ReplyKind.MISS, ReplyKind.ASK,
    ]  # fmt: skip
    inner = codec._inner
    assert [(r.kind, r.port) for r in inner.redirects] == [  # type: ignore[attr-defined]
        (ReplyKind.MOVED, 7001), (ReplyKind.ASK, 7002), (ReplyKind.ASK, 7002),
    ]  # fmt: skip
    assert (codec.served_halves, codec.refused_halves) == (2, 1)
    assert codec.pending() == 0


def test_a_pair_whose_halves_arrive_in_two_reads_keeps_its_redirects_in_order() -> None:
    codec = cluster_pairs(2)
    codec.feed(b"-MOVED 1 127.0.0.1:7001\r\n")  # the first pair's get
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 0
    codec.feed(b"-MOVED 1 127.0.0.1:7001\r\n" + b"-MOVED 9 127.0.0.1:7009\r\n-MOVED 9 x:7009\r\n")
    assert codec.read_kinds(kinds) == 2
    ports = [r.port for r in codec._inner.redirects]  # type: ignore[attr-defined]
    assert ports == [7001, 7009] and codec.refused_halves == 2


def test_a_pair_sent_on_after_an_ask_has_asking_before_each_half() -> None:
    codec = RmwCodec(RespCodec(cluster=True))
    out = bytearray()
    assert codec.encode_pair(b"k", b"v", out, asking=True) == 1
    assert bytes(out).count(b"ASKING") == 2
    assert bytes(out).index(b"GET") < bytes(out).rindex(b"ASKING") < bytes(out).index(b"SET")
    codec.feed(b"+OK\r\n$1\r\nv\r\n+OK\r\n+OK\r\n")  # ASKING, GET, ASKING, SET
    kinds: list[int] = []
    assert codec.read_kinds(kinds) == 1 and kinds[0] & KIND_MASK == ReplyKind.HIT
