"""Which driver a run gets, and that the compiled one is built where the tests run."""

from __future__ import annotations

import os
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from kvbench.config import load_config
from kvbench.config.model import RunConfig
from kvbench.config.replay import ReplayConfig
from kvbench.engine import fastpath
from kvbench.engine.rmw import RmwCodec
from kvbench.engine.setup import codec_factory_for
from kvbench.engine.shards import build_shards
from kvbench.protocols.base import CodecOptions, Op
from kvbench.workload.commands import COMMAND_BASE
from tests.support import pump_oracle


def config(url: str = "memcached://127.0.0.1:1", **settings: Any) -> RunConfig:
    overrides = {"target.urls": ([url], "TARGET")}
    overrides.update({name: (value, "--" + name) for name, value in settings.items()})
    return load_config(None, overrides, 1)


def test_the_compiled_pump_is_built_here() -> None:
    """Fails where the extension did not build; under CI=true also when it is switched off
    (every test of it would skip)."""
    assert fastpath.built(), (
        "engine/_pump.c did not build: install a C compiler and the Python headers "
        f"(make deps), or set {fastpath.PURE_PYTHON_ENV}=1 to test the Python driver only"
    )
    if os.environ.get(fastpath.PURE_PYTHON_ENV):
        if os.environ.get("CI"):
            pytest.fail(f"CI tests the compiled driver: unset {fastpath.PURE_PYTHON_ENV}")
        pytest.skip(f"{fastpath.PURE_PYTHON_ENV} is set: only the Python driver is tested")


@pytest.mark.parametrize(
    ("url", "settings", "reason"),
    [
        ("memcached://127.0.0.1:1", {}, None),
        ("redis://127.0.0.1:1/0", {"workload.ratio": "set=1,get=1,delete=1,incr=1,mget=1"}, None),
        ("memcached://127.0.0.1:1", {"load.rate": "1000"}, None),
        ("memcached://127.0.0.1:1", {"workload.verify": True}, None),
        ("memcached://127.0.0.1:1", {"workload.ratio": "set-then-get"}, None),
        (
            "memcached://127.0.0.1:1",
            {"workload.verify": True, "workload.ratio": "set-then-get"},
            None,
        ),
        ("memcached://127.0.0.1:1", {"workload.ttl_s": "10-20"}, None),  # each pump its ttl
        ("memcached://127.0.0.1:1", {"workload.ttl_s": "10"}, None),
        # memcached text's: any reply framed by its first line, in C too
        ("memcached://127.0.0.1:1", {"workload.commands": ["touch __key__ 1"]}, None),
        # RESP's pump sends a command's rendered request and reads any value in reply
        ("redis://127.0.0.1:1", {"workload.commands": ["PING"], "workload.ratio": "1:1"}, None),
        ("redis://127.0.0.1:1/0?resp=3", {"workload.commands": ["HGETALL __key__"]}, None),
        (
            "redis://127.0.0.1:1",
            {"workload.commands": [f"C{i} __key__" for i in range(49)]},
            "more than 48 commands (--command)",
        ),
        ("memcached+binary://127.0.0.1:1", {}, None),
        ("memcached+meta://127.0.0.1:1", {}, None),
        (
            "memcached+binary://127.0.0.1:1",
            {"workload.ratio": "set=1,delete=1,incr=1,mget=1"},
            None,
        ),
        ("memcached+meta://127.0.0.1:1", {"workload.ratio": "set=1,get=1,incr=1,mget=1"}, None),
        ("memcached+meta://127.0.0.1:1", {"load.rate": "1000"}, None),
        ("redis://127.0.0.1:1/0", {"load.rate": "1000", "load.arrival": "poisson"}, None),
        ("memcached+binary://127.0.0.1:1", {"load.rate": "1000"}, None),
        ("redis://127.0.0.1:1/0?resp=3", {}, None),
        # a read-modify-write: its get and set written, its replies folded, in C
        ("memcached://127.0.0.1:1", {"workload.ratio": "get=1,rmw=1"}, None),
        ("memcached+binary://127.0.0.1:1", {"workload.ratio": "rmw=1"}, None),
        ("redis://127.0.0.1:1/0?resp=3", {"workload.ratio": "set=1,rmw=1", "load.rate": "9"}, None),
        # a cluster's pumps hand their redirects to the router; an rmw stays in Python
        ("redis+cluster://127.0.0.1:1?resp=3", {}, None),
        ("redis+cluster://127.0.0.1:1", {"load.rate": "1000"}, None),
        (
            "redis+cluster://127.0.0.1:1",
            {"workload.ratio": "get=1,rmw=1"},
            "an rmw on a Redis Cluster",
        ),
        ("http+memc://127.0.0.1:1/memc", {}, None),
        (
            "http+memc://127.0.0.1:1/memc",
            {"workload.ratio": "set-then-get", "workload.verify": True},
            None,
        ),
    ],
)
def test_python_reason_names_what_keeps_a_run_off_the_compiled_driver(
    url: str, settings: dict[str, Any], reason: str | None
) -> None:
    pump_oracle.require_compiled()
    run = config(url, **settings)
    assert fastpath.python_reason(run) == reason
    assert fastpath.driver_name(reason) == (
        "compiled loop" if reason is None else f"python ({reason})"
    )


def test_the_switch_forces_the_python_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fastpath.PURE_PYTHON_ENV, "1")
    assert not fastpath.compiled()
    reason = fastpath.python_reason(config())
    # (without the extension the run says that first)
    expected = f"{fastpath.PURE_PYTHON_ENV} is set" if fastpath.built() else "extension not built"
    assert reason == expected


@pytest.mark.parametrize("replay", [None, "max", "2"], ids=["run", "replay-max", "replay-timed"])
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("memcached://127.0.0.1:1", None),
        ("redis://127.0.0.1:1/0", None),
        ("memcached+unix:///tmp/memcached.sock", None),
        ("memcached+binary://127.0.0.1:1", None),
        ("rediss://127.0.0.1:1/0", "TLS"),
    ],
)
def test_the_loop_is_taken_unless_the_transports_are_asked_for_or_the_run_needs_them(
    monkeypatch: pytest.MonkeyPatch, url: str, reason: str | None, replay: str | None
) -> None:
    """A plain run and a replay (its lanes, at --speed max or timed) alike: only TLS
    keeps the transports."""
    run = config(url)
    if replay is not None:
        speed = None if replay == "max" else float(replay)
        run = replace(run, replay=ReplayConfig("trace.csv", speed=speed))
    monkeypatch.setenv(fastpath.DRIVER_ENV, fastpath.TRANSPORTS)
    assert fastpath.loop_reason(run) == fastpath.NOT_ASKED
    assert fastpath.driver_name(None, fastpath.NOT_ASKED) == "compiled (transports)"
    for value in (None, fastpath.LOOP):  # the default, or asked for by name
        if value is None:
            monkeypatch.delenv(fastpath.DRIVER_ENV)
        else:
            monkeypatch.setenv(fastpath.DRIVER_ENV, value)
        assert fastpath.loop_reason(run) == reason
        expected = "compiled loop" if reason is None else f"compiled (transports: {reason})"
        assert fastpath.driver_name(None, reason) == expected
        assert fastpath.driver_name("rmw", reason) == "python (rmw)"


@pytest.mark.parametrize(
    ("url", "ttl_bytes"),
    [
        ("memcached://127.0.0.1:1", b" 0 30 "),
        ("redis://127.0.0.1:1/0", b"$2\r\n30\r\n"),
        ("memcached+binary://127.0.0.1:1", b"\0\0\0\0\0\0\0\x1e"),  # flags, ttl
        ("memcached+meta://127.0.0.1:1", b" T30 F0 "),
    ],
)
@pytest.mark.parametrize("ratio", ["set=2,get=1,mget=1,incr=1", "set=1,get=1,rmw=2"])
def test_a_pump_sends_what_the_connections_codec_would(
    url: str, ttl_bytes: bytes, ratio: str
) -> None:
    """The glue passes the run's ttl (and the codecs' flags) to the C encoder, and a pump
    numbers opaques as a fresh codec does; an rmw is the get and the set the Python
    driver's wrapper (engine/rmw.py) writes, from a packed chunk."""
    pump_oracle.require_compiled()
    from kvbench.engine import _pump  # type: ignore[attr-defined]

    run = config(url, **{"workload.ttl_s": "30", "workload.ratio": ratio})
    ours, reference = build_shards(run, 0, 1)[0], build_shards(run, 0, 1)[0]
    written: list[bytes] = []
    tally = _pump.Tally()
    tally.issuing = True
    conn: Any = SimpleNamespace(shard=ours, cursor=ours.cursor, ttl_s=None)
    pump = fastpath.PumpFactory(tally, run.workload.ttl_s).pump(conn, written.append)
    pump.issue(3000)  # across a chunk boundary
    expected = codec_writes(reference, CodecOptions(ttl_s=30), len(written[0]), "rmw" in ratio)
    assert written[0] == expected
    assert ttl_bytes in written[0]
    assert ours.source.can_pack() == ("mget" not in ratio)


def codec_writes(shard: Any, options: CodecOptions, size: int, rmw: bool = False) -> bytes:
    """The first ``size`` bytes a fresh codec writes for ``shard``'s source (``rmw``:
    wrapped as a run with read-modify-writes wraps it)."""
    codec: Any = codec_factory_for(shard.target, options)()
    if rmw:
        codec = RmwCodec(codec)
    expected = bytearray()
    while len(expected) < size:
        chunk = shard.source.next_chunk()
        codec.encode_many(chunk.ops, chunk.keys, chunk.values, 0, chunk.size, expected)
    return bytes(expected[:size])


def test_under_a_ttl_range_each_connections_pump_sends_the_ttl_it_drew() -> None:
    """The glue gives a pump its connection's own ttl (engine/codec_choice.py's draw), and
    the stores of two connections on the shard's one stream carry theirs."""
    pump_oracle.require_compiled()
    from kvbench.engine import _pump  # type: ignore[attr-defined]

    run = config(**{"workload.ttl_s": "30-60", "workload.ratio": "set=1,get=1"})
    assert run.workload.ttl_range and fastpath.python_reason(run) is None
    ours, reference = build_shards(run, 0, 1)[0], build_shards(run, 0, 1)[0]
    tally = _pump.Tally()
    tally.issuing = True
    factory = fastpath.PumpFactory(tally, run.workload.ttl_s)
    writes: list[bytes] = []
    for ttl in (45, 59):
        conn: Any = SimpleNamespace(shard=ours, cursor=ours.cursor, ttl_s=ttl)
        written: list[bytes] = []
        factory.pump(conn, written.append).issue(500)
        assert b" 0 %d " % ttl in written[0] and b" 0 30 " not in written[0]
        writes.append(written[0])
    # The first pump's requests, byte for byte, are those of a codec with its ttl.
    expected = codec_writes(reference, CodecOptions(ttl_s=45), len(writes[0]))
    assert writes[0] == expected


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("memcached://127.0.0.1:1", None),
        ("redis://127.0.0.1:1/0", None),
        ("memcached+binary://127.0.0.1:1", None),
        ("memcached+meta://127.0.0.1:1", None),
        ("redis://127.0.0.1:1/0?resp=3", None),
    ],
)
def test_a_replay_is_compiled_where_the_pump_sends_every_op_its_mapping_can(
    url: str, reason: str | None
) -> None:
    """Decided from the protocol's op mapping before the trace is read: memcached text and
    meta send all eleven trace ops compiled, binary the ten it has (a tokenless cas is
    skipped there), Redis the eight it has."""
    pump_oracle.require_compiled()
    run = replace(config(url), replay=ReplayConfig("trace.csv"))
    assert fastpath.python_reason(run) == reason
    for protocol, count in [("memcache-text", 11), ("memcache-meta", 11), ("memcache-binary", 10)]:
        families = fastpath.PROTOCOLS[protocol][1]
        assert all(families[op] for op in fastpath.replay_ops(protocol))
        assert len(fastpath.replay_ops(protocol)) == count
    assert [op.name for op in fastpath.replay_ops("resp2")] == [
        "GET", "SET", "DELETE", "INCR", "DECR", "ADD", "REPLACE", "APPEND"
    ]  # fmt: skip


def test_a_replay_op_the_pump_lacks_keeps_the_replay_in_python_and_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were the C side without an op the mapping sends, the replay would run on the
    Python driver, the reason naming the op and the protocol."""
    pump_oracle.require_compiled()
    number, families = fastpath.PROTOCOLS["memcache-binary"]
    without = bytearray(families)
    without[Op.APPEND] = 0
    monkeypatch.setitem(fastpath.PROTOCOLS, "memcache-binary", (number, bytes(without)))
    run = replace(config("memcached+binary://127.0.0.1:1"), replay=ReplayConfig("t.csv"))
    reason = fastpath.python_reason(run)
    assert reason == "a replay's append on memcache-binary has no compiled scanner"
    assert fastpath.python_reason(config("memcached+binary://127.0.0.1:1")) is None


def test_pumps_check_get_hits_as_the_workload_s_values_are_checked() -> None:
    """Derived values by their key, timestamps against the set phase's window if any;
    under set-then-get, exactly the value of the set before the get."""
    assert fastpath.pump_verify(config().workload) == fastpath.NO_VERIFY
    assert fastpath.pump_verify(config(**{"workload.verify": True}).workload) == (
        fastpath.VERIFY_DERIVED,
        None,
        False,
    )
    pairs = config(**{"workload.verify": True, "workload.ratio": "set-then-get"}).workload
    assert fastpath.pump_verify(pairs) == (fastpath.VERIFY_DERIVED, None, True)
    for window in [None, (5, 9)]:
        stamps = SimpleNamespace(
            verify=True, value_kind="timestamp", verify_window_ms=window, set_then_get=False
        )
        assert fastpath.pump_verify(stamps) == (fastpath.VERIFY_TIMESTAMP, window, False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("commands", "packed"),
    [
        # one key at most each: packed chunks, each command rendered by the stream in C
        (["HSET h:__key__ f __data__", "hset h:__key__ g x", "PING", "GET __key__"], True),
        # a command of two keys draws its second per request: lists, rendered in Python
        (["HSET h:__key__ f __data__", "EXISTS __key__ h:__key__"], False),
    ],
)
def test_a_pump_sends_a_runs_commands_as_the_connections_codec_would(
    commands: list[str], packed: bool
) -> None:
    """RESP's --command on the compiled pump: the same requests, byte for byte, as the
    Python driver's codec writes for the same draws; each recorded under its name's code
    (two templates of one name add up), a dropped one too (Stream.skip)."""
    pump_oracle.require_compiled()
    from kvbench.engine import _pump  # type: ignore[attr-defined]

    run = config("redis://127.0.0.1:1/0", **{"workload.commands": commands})
    assert fastpath.python_reason(run) is None
    ours, reference = build_shards(run, 0, 1)[0], build_shards(run, 0, 1)[0]
    written: list[bytes] = []
    tally = _pump.Tally()
    tally.issuing = True
    conn: Any = SimpleNamespace(shard=ours, cursor=ours.cursor, ttl_s=None)
    factory = fastpath.PumpFactory(tally, 0, commands=len(commands))
    pump = factory.pump(conn, written.append)
    assert ours.source.can_pack() == packed
    pump.issue(3000)  # across a chunk boundary
    assert written[0] == codec_writes(reference, CodecOptions(), len(written[0]))
    # every reply an integer: each request recorded under its name's code
    names = ours.plan.commands.names
    pump.received(b":1\r\n" * 3000)
    recorded = memoryview(tally.take()[0]).cast("q").tolist()
    assert len(recorded) == 3000
    assert set(recorded) == {COMMAND_BASE + j for j in range(len(names))}
    skipped = factory.skip(ours.cursor, 50)
    assert skipped is not None and set(skipped) <= set(recorded)
