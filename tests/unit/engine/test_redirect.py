"""Redis Cluster redirects in the driver, against scripted in-memory transports.

Two masters (127.0.0.1:1 serves slots 0-8191, 127.0.0.1:2 the rest); each test reads what
the connections wrote, answers it, and checks the FIFOs, the pipelines and the counts.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
import pytest

from kvbench.config import load_config
from kvbench.engine.redirect import MAX_REDIRECTS, ClusterConnection, InFlight
from kvbench.engine.setup import codec_factory_for
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.protocols.resp_cluster import Master
from kvbench.workload.slots import SlotMap, key_slot

NEVER = 2**63 - 1
MAP = SlotMap.from_masters(
    [Master("127.0.0.1", 1, ((0, 8191),)), Master("127.0.0.1", 2, ((8192, 16383),))], ""
)


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()

    def write(self, data: Any) -> None:
        self.written += data

    def abort(self) -> None:
        pass

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def take(self) -> list[list[bytes]]:
        """The commands written so far, consumed."""
        reader = hiredis.Reader()
        reader.feed(bytes(self.written))
        self.written.clear()
        commands = []
        while (command := reader.gets()) is not False:
            commands.append(command)
        return commands


@pytest.fixture
def cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Worker, list[ClusterConnection], list[Transport]]:
    config = load_config(
        None,
        {
            "target.urls": (["redis+cluster://127.0.0.1:1", "redis+cluster://127.0.0.1:2"], "T"),
            "load.pipeline": ("2", "-P"),
            "load.connections": ("2", "-c"),
            "workload.ratio": ("0:1", "--ratio"),
            "workload.keys": ("1000", "--keys"),
            "workload.seed": (3, "--seed"),
        },
        1,
    )
    worker = Worker(WorkerSpec(config, 0, 1, 2, None, MAP), lambda snap: None)
    # No event loop here: a map refresh after a MOVED is not what these tests look at.
    monkeypatch.setattr(worker.router, "_schedule_refresh", lambda node, slot: None)
    worker.issuing = True
    worker.next_cut_ns = NEVER
    conns, transports = [], []
    for shard in worker.shards:
        conn = worker.make_connection(codec_factory_for(shard.target), None, 2, shard)
        assert isinstance(conn, ClusterConnection)
        conns.append(conn)
    worker.connections = list(conns)
    for conn in conns:
        transports.append(Transport())
        conn.connection_made(transports[-1])  # live: it fills its pipeline
    return worker, conns, transports


def cut(worker: Worker) -> IntervalSnapshot:
    worker._shard_stats()
    return worker.recorder.cut("measure", 0, 0, 1)


def test_each_connection_sends_only_keys_its_master_serves(cluster: Any) -> None:
    _, conns, transports = cluster
    for index, transport in enumerate(transports):
        commands = transport.take()
        assert len(commands) == 2 and conns[index].inflight == 2
        assert all(MAP.owners[key_slot(c[1])] == index for c in commands)


def redirect_first(cluster: Any, kind: bytes) -> tuple[list[bytes], int]:
    """Answer the first request on master 0 with ``kind`` (MOVED or ASK) to master 1;
    the request and its slot. What both connections sent before is consumed."""
    _, (a, _b), (ta, tb) = cluster
    first, _ = ta.take()
    tb.take()
    slot = key_slot(first[1])
    a.data_received(b"-%s %d 127.0.0.1:2\r\n" % (kind, slot))
    return first, slot


def test_moved_sends_the_request_on_and_moves_the_slot(cluster: Any) -> None:
    worker, (a, b), (ta, tb) = cluster
    first, slot = redirect_first(cluster, b"MOVED")
    # Sent on to the other master, as a guest: its pipeline holds one more for now.
    assert tb.take() == [first]
    assert b.inflight == 3
    assert a.inflight == 2 and len(ta.take()) == 1  # the slot it held is refilled here
    assert worker.router.placement.owner(slot) == 1
    keys_a = set(worker.shards[0].plan.key_table)
    assert first[1] not in keys_a and first[1] in worker.shards[1].plan.key_table
    b.data_received(b"$-1\r\n$-1\r\n$-1\r\n")
    assert b.inflight == 2  # the guest's answer frees nothing: 2 own answered, 2 sent
    assert len(tb.take()) == 2
    snap = cut(worker)
    assert snap.counts == {"get": {"miss": 3}}  # the redirect itself is no outcome
    assert snap.stats["redirect_moved"] == 1 and snap.stats["redirect_ask"] == 0
    assert snap.stats["server0_redirected"] == 1
    assert snap.stats["server0_completed"] == 0 and snap.stats["server1_completed"] == 3


def test_ask_sends_asking_first_and_leaves_the_map(cluster: Any) -> None:
    worker, (_a, b), (_ta, tb) = cluster
    first, slot = redirect_first(cluster, b"ASK")
    assert tb.take() == [[b"ASKING"], first]
    assert worker.router.placement.owner(slot) == 0
    b.data_received(b"$-1\r\n$-1\r\n+OK\r\n$1\r\nv\r\n")  # its two, ASKING's OK, the guest's
    assert b.inflight == 2
    assert cut(worker).counts == {"get": {"miss": 2, "hit": 1}}


def test_a_guests_latency_runs_from_its_first_send(cluster: Any) -> None:
    _worker, (a, b), (ta, _tb) = cluster
    first, _ = ta.take()
    sent_ns = a.oldest_sent_ns()
    assert sent_ns is not None
    a.data_received(b"-ASK %d 127.0.0.1:2\r\n" % key_slot(first[1]))
    pump: Any = b.pump
    guest = pump._sent_ns[-1]
    assert guest == sent_ns and pump._sent_hops[-1] == 1


def test_redirects_beyond_the_bound_end_as_an_error_reply(cluster: Any) -> None:
    worker, (_a, b), (ta, tb) = cluster
    ta.take()
    tb.take()
    # A request redirected for the 16th time is a guest here; one more is too many.
    entry = InFlight(0, b"kvbench:1", None, 0, None, MAX_REDIRECTS - 1)
    b.send_guest(entry, asking=False)
    b.data_received(b"$-1\r\n$-1\r\n-MOVED 1 127.0.0.1:1\r\n")
    assert ta.take() == []  # not sent on
    snap = cut(worker)
    assert snap.counts == {"get": {"miss": 2, "error_reply": 1}}
    assert "redirected 17 times" in (worker.last_error or "")


def test_a_redirect_to_an_unknown_node_is_an_error_reply(cluster: Any) -> None:
    worker, (a, _b), (ta, _tb) = cluster
    first, _ = ta.take()
    a.data_received(b"-MOVED %d 10.9.9.9:7000\r\n" % key_slot(first[1]))
    assert cut(worker).counts == {"get": {"error_reply": 1}}
    assert "10.9.9.9:7000: a node this run did not find" in (worker.last_error or "")


def test_a_master_left_without_slots_sends_nothing_until_one_comes_back(cluster: Any) -> None:
    worker, (a, _b), (ta, tb) = cluster
    router = worker.router
    ta.take()
    tb.take()
    everything_on_b = SlotMap(MAP.nodes, (1,) * 16384)
    assert router.apply(everything_on_b) == 8192
    assert worker.shards[0].source.empty and not worker.shards[0].plan.key_table
    a.data_received(b"$-1\r\n$-1\r\n")
    assert ta.take() == [] and a.inflight == 0  # nothing left to send from there
    assert router.apply(MAP) == 8192  # back again: its connections start at once
    assert len(ta.take()) == 2 and a.inflight == 2


def test_apply_keeps_slots_of_masters_the_run_does_not_know(cluster: Any) -> None:
    worker, _, _ = cluster
    stranger = SlotMap.from_masters(
        [Master("127.0.0.1", 1, ((0, 99),)), Master("10.0.0.7", 9, ((100, 16383),))], ""
    )
    assert worker.router.apply(stranger) == 0  # 0-99 are node 0's already; the rest unknown
    assert worker.router.placement.owner(5000) == 0 and worker.router.placement.owner(9000) == 1


def test_a_map_refresh_follows_only_a_moved_that_changed_the_map(
    cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, (a, _b), (ta, tb) = cluster
    asked: list[tuple[int, int]] = []
    monkeypatch.setattr(worker.router, "_schedule_refresh", lambda n, s: asked.append((n, s)))
    ta.take()
    tb.take()
    # Slot 9000 is master 1's already: a request sent to master 0 for it (an incr counter
    # placed there on purpose, engine/shards.py) is moved where the map says it is.
    a.data_received(b"-MOVED 9000 127.0.0.1:2\r\n")
    assert worker.router.moved == 1 and asked == []
    a.data_received(b"-MOVED 100 127.0.0.1:2\r\n")  # slot 100 moved: the map changed
    assert asked == [(1, 100)] and worker.router.placement.owner(100) == 1
