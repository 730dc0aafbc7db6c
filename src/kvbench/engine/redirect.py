"""Redis Cluster redirects: a request a node sends elsewhere is sent on, and completes there.

A ``ClusterConnection`` is a load connection that keeps each request while it is in
flight: its key and value (the Python driver's ``ClusterPyPump``), or its bytes as written
(the compiled ``Pump`` made with ``cluster``). When a reply is ``MOVED`` or ``ASK`` (the
Redis Cluster specification, "Redirection and resharding"; the codec in cluster mode, or
the pump reading it as the codec does), the request is taken out of this connection's
FIFO and the worker's ``ClusterRouter`` sends it on to a connection of the node the reply
names, preceded by ASKING for an ASK: the Python pump encodes it again (an ``InFlight``),
the compiled one writes the bytes it was sent as (a ``Resent``, from the pump's
``on_redirect``). There it joins the
FIFO as a *guest*: its latency is still measured from its first send (so it includes the
redirect), its reply is its outcome, and its completion frees no pipeline slot there (the
slot it held was freed where it was first sent). A MOVED also updates the worker's slot
placement at once (the keys of that slot move to the new master's request source) and,
when that changed it, asks the new master for the whole map in the background, so a
resharding of many slots is learned from one redirect. A request redirected more than ``MAX_REDIRECTS`` times, or to a
node the run does not know, ends as an error reply.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from kvbench.config.model import TargetConfig
from kvbench.engine.connection import Connection, ConnectionArgs, DriverHost
from kvbench.engine.py_pump import IDLE, PyPump, Write
from kvbench.engine.rmw import RmwCodec
from kvbench.engine.shards import Shard, placed_plan
from kvbench.errors import ProtocolError
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import KIND_MASK, Op, ReplyKind
from kvbench.protocols.resp_cluster import Master, Redirect, SlotsQuery, redirect_of
from kvbench.workload.mix import RMW_CODE
from kvbench.workload.plan import WorkloadPlan
from kvbench.workload.slots import NO_NODE, SlotMap, SlotPlacement

if TYPE_CHECKING:
    from kvbench.engine._pump import _Redirected
    from kvbench.workload.chunk import Chunk

_now = time.monotonic_ns
_MOVED = int(ReplyKind.MOVED)
_ASK = int(ReplyKind.ASK)
_ERROR_REPLY = int(ReplyKind.ERROR_REPLY)
_CONN_ERROR = int(Outcome.CONN_ERROR)
_COUNTERS = (int(Op.INCR), int(Op.DECR))
# How many times one request may be redirected before it counts as an error: redis-py's
# RedisCluster gives a request 16 (RedisClusterRequestTTL); a loop between two nodes
# whose views disagree ends there.
MAX_REDIRECTS = 16
# A MOVED asks the new master for the whole map this long after (once at a time): a
# resharding moves slots one after another, and the first redirect should learn them all.
REFRESH_DELAY_S = 0.05


class InFlight(NamedTuple):
    """A request taken out of a FIFO to be sent on: what to send and when it was first due.

    Attributes:
        hops: how many times it was redirected before (0: sent where it was drawn).
        intended_ns: open loop: its slot in the schedule; closed loop: None.
    """

    op: int
    key: Any
    value: Any
    sent_ns: int
    intended_ns: int | None
    hops: int


class Resent(NamedTuple):
    """A compiled cluster pump's request taken out of its FIFO to be sent on: the bytes it
    was written as, and what its reply is read by.

    Attributes:
        keys: a multi-get's key count.
        key: a ``--verify``'d get's key (its hit is checked on the connection it goes to),
            else None.
        intended_ns: open loop: its slot in the schedule; closed loop: None.
        hops: how many times it was redirected before (0: sent where it was drawn).
    """

    op: int
    request: bytes
    keys: int
    key: bytes | None
    sent_ns: int
    intended_ns: int | None
    hops: int


class ClusterConnection(Connection):
    """A load connection to one master of a Redis Cluster: its pump a ``ClusterPyPump``
    (the Python driver) or a compiled ``Pump`` made with ``cluster``, whose redirects it
    takes (``on_redirect``).

    Args:
        router: the worker's cluster state.
        connection: ``Connection``'s arguments, in its order.
    """

    def __init__(self, router: ClusterRouter, *connection: *ConnectionArgs) -> None:
        self._router = router
        super().__init__(*connection)
        router.add(self)

    @property
    def pipeline(self) -> int:
        """Requests kept in flight: none while its master serves none of the keys (the
        open-loop dispatcher then hands it nothing either)."""
        return 0 if self.cursor.source.empty else self._depth

    @pipeline.setter
    def pipeline(self, depth: int) -> None:
        self._depth = depth

    def python_driver(self, write: Write | None) -> ClusterPyPump:
        return ClusterPyPump(
            self,
            self._host,
            self._router,
            *self._driver_parts(write),
            open_loop=not self.closed_loop,
        )

    def issue(self, n: int) -> None:
        if self.cursor.source.empty:  # its master serves none of the keys: nothing to send
            self._host.maybe_finished()
            return
        super().issue(n)

    def attach(self) -> None:
        super().attach()
        pump = self.pump
        if not isinstance(pump, PyPump):  # compiled: its redirects come here
            pump.on_redirect = self._redirected

    def _transport_gone(self) -> None:
        pump = self.pump
        if not isinstance(pump, PyPump):
            pump.on_redirect = None  # (a cycle: self -> pump -> self)
        super()._transport_gone()

    def _redirected(self, items: list[_Redirected]) -> None:
        """The compiled pump's redirects of one read, oldest first: each sent on."""
        now = _now()
        router = self._router
        for kind, slot, host, port, op, keys, request, key, sent, intended, hops in items:
            entry = Resent(op, request, keys, key, sent, intended, hops)
            router.redirect(self, entry, redirect_of(kind, slot, host, port), now)

    def takes(self, entry: InFlight | Resent) -> bool:
        """Whether this connection's pump can send ``entry`` on: the Python pump encodes an
        ``InFlight`` again, the compiled one writes a ``Resent``'s bytes (a connection
        between the two, not yet attached, takes neither kind from the other)."""
        return isinstance(self.pump, ClusterPyPump) == isinstance(entry, InFlight)

    def send_guest(self, entry: InFlight | Resent, asking: bool) -> None:
        """Send a request redirected here (after ASKING for an ASK), as a guest."""
        pump = self.pump
        if isinstance(entry, InFlight):
            assert isinstance(pump, ClusterPyPump), "an InFlight goes to a Python pump"
            pump.send_guest(entry, asking)
            return
        assert not isinstance(pump, PyPump), "a Resent goes to a compiled pump"
        due = entry.sent_ns if entry.intended_ns is None else entry.intended_ns
        pump.send_guest(
            entry.request,
            entry.op,
            entry.keys,
            entry.key,
            entry.sent_ns,
            due,
            entry.hops + 1,
            asking,
        )

    def keys_changed(self, wake: bool) -> None:
        """Its master's keys changed (a slot moved): the open-loop dispatcher reads its
        pipeline again; ``wake``: it had nothing to send, and may now (closed loop)."""
        self._lane_changed()
        if wake and self.live and self.closed_loop:
            self.fill()


class ClusterPyPump(PyPump):
    """A cluster connection's pump: it keeps each request's key and value while it is in
    flight, and sends on the ones a node redirects.

    Beside the in-flight ops and send times it keeps each request's key, value and
    redirect count (``hops``; guests, sent on from another connection, have hops > 0),
    aligned with them. While neither a guest is in flight nor a redirect was read, replies
    are accounted in bulk as on any connection; otherwise one at a time.

    Args:
        conn: the connection it pumps for (the origin of its redirects).
        host: the worker (told when a phase may be over).
        router: the worker's cluster state.
        pump: ``PyPump``'s arguments.
    """

    def __init__(
        self,
        conn: ClusterConnection,
        host: DriverHost,
        router: ClusterRouter,
        *pump: Any,
        **options: Any,
    ) -> None:
        super().__init__(*pump, **options)
        self._conn = conn
        self._host = host
        self._router = router
        self._sent_keys: list[Any] = []
        self._sent_values: list[Any] = []
        self._sent_hops: list[int] = []
        self._fifo = (*self._fifo, self._sent_keys, self._sent_values, self._sent_hops)
        self._kept = self._keep
        self._guests = 0
        # Read-modify-writes in the mix (engine/rmw.py): each is two calls at its master.
        self._pairs = isinstance(self._codec, RmwCodec)

    def _keep(self, chunk: Chunk, start: int, stop: int) -> None:
        """Note the keys and values of requests ``start:stop`` of ``chunk``."""
        self._sent_keys.extend(chunk.keys[start:stop])
        self._sent_values.extend(chunk.values[start:stop])
        self._sent_hops.extend(repeat(0, stop - start))

    def issue(self, n: int) -> int:
        if self.cursor.source.empty:  # its master serves none of the keys: nothing to send
            return IDLE
        return super().issue(n)

    def drop(self) -> list[int]:
        self._guests = 0
        return super().drop()

    def _account(self, now: int) -> int:
        """Account the replies just read; redirects are sent on.

        Returns:
            How many pipeline slots of this connection were freed: its own requests that
            were answered or sent elsewhere (a guest's slot is its first connection's).
        """
        codec: Any = self._codec
        if not self._guests and not codec.redirects:
            return self._completed(now)
        if self._pairs:  # an rmw's halves its node executed or refused, the pair sent on
            self.shard.extra_calls += codec.served_halves
            self.shard.extra_rejected += codec.refused_halves
            codec.served_halves = codec.refused_halves = 0
        batch = self._codes[:]
        self._codes.clear()
        freed = 0
        for position, code in enumerate(batch):
            head = self._head
            if head >= len(self._sent_ops):  # more replies than requests: the base says so
                self._codes.extend(batch[position:])
                return freed + self._completed(now)
            hops = self._sent_hops[head]
            if hops:
                self._guests -= 1
            if code & KIND_MASK in (_MOVED, _ASK):
                entry = self._take_entry()
                freed += 0 if hops else 1
                self._router.redirect(self._conn, entry, codec.redirects.pop(0), now)
                continue
            self._codes.append(code)
            done = self._completed(now)
            freed += 0 if hops else done
        # A guest answered or a request went elsewhere frees nothing here: the worker
        # may still be done (a phase whose last request was a guest).
        self._host.maybe_finished()
        return freed

    def _completed(self, now: int) -> int:
        """``PyPump._account`` of the replies read, each completing its request here; an
        rmw's second call counted at this master."""
        if self._pairs:
            head, stop = self._head, self._head + len(self._codes)
            if stop <= len(self._sent_ops):  # (more: a protocol error, nothing counted)
                self.shard.extra_calls += self._sent_ops[head:stop].count(RMW_CODE)
        return super()._account(now)

    def _take_entry(self) -> InFlight:
        """The request at the FIFO's head, taken out of it (it is sent on elsewhere)."""
        head = self._head
        intended = self._intended_ns[head] if self.open_loop else None
        entry = InFlight(
            self._sent_ops[head],
            self._sent_keys[head],
            self._sent_values[head],
            self._sent_ns[head],
            intended,
            self._sent_hops[head],
        )
        self._head = head + 1
        return entry

    def send_guest(self, entry: InFlight, asking: bool) -> None:
        """Send a request redirected here (after ASKING for an ASK), as a guest."""
        write = self._write
        assert write is not None
        out = bytearray()
        codec: Any = self._codec
        if entry.op == RMW_CODE:  # its get and its set, each after ASKING for an ASK
            codec.encode_pair(entry.key, entry.value, out, asking)
        else:
            if asking:
                codec.encode_asking(out)
            arg = 1 if entry.op in _COUNTERS else 0
            codec.encode(Op(entry.op), entry.key, entry.value, out, arg)
        self._sent_ops.append(entry.op)
        self._sent_ns.append(entry.sent_ns)
        if self.open_loop:  # open loop: due when first due (sent, if it was not paced)
            due = entry.intended_ns
            self._intended_ns.append(entry.sent_ns if due is None else due)
        self._sent_keys.append(entry.key)
        self._sent_values.append(entry.value)
        self._sent_hops.append(entry.hops + 1)
        self._guests += 1
        self._tally.bytes_out += len(out)
        if self._bytes_tally is not None:
            self._bytes_tally.add_tx(entry.op, len(out))
        write(out)


class RouterHost(DriverHost, Protocol):
    """What the router reads of its worker besides a load connection's host: the shards
    (one per master, in the slot placement's node order), the recorder (where requests a
    redirect could not complete are counted), and whether connections may send now."""

    shards: list[Shard]
    recorder: Recorder

    @property
    def issuing(self) -> bool: ...


class ClusterRouter:
    """One worker's Redis Cluster: which master serves each slot now, and the redirects.

    Args:
        host: the worker (errors are noted there, requests a redirect could not complete
            are counted on its recorder; it is told when a phase may be over).
        placement: the worker's live slot placement (engine/shards.py ``cluster_shards``).
        plan: the worker's whole plan, which each master's plan is cut from.
        timeout_s: the longest wait of a background map refresh.
    """

    def __init__(
        self, host: RouterHost, placement: SlotPlacement, plan: WorkloadPlan, timeout_s: float
    ) -> None:
        self._host = host
        self.placement = placement
        self._plan = plan
        self._timeout_s = timeout_s
        # The worker's shards and connections, one list per master (``placement.nodes``).
        self.shards = host.shards
        self.connections: list[list[ClusterConnection]] = [[] for _ in self.shards]
        # Counted since the last interval cut (``take_stats``).
        self.moved = 0
        self.ask = 0
        self.refreshes = 0
        self._refresh: asyncio.Task[None] | None = None

    def add(self, conn: ClusterConnection) -> None:
        self.connections[conn.shard.index].append(conn)

    # -- redirects -----------------------------------------------------------------------

    def redirect(
        self, origin: ClusterConnection, entry: InFlight | Resent, redirect: Redirect, now: int
    ) -> None:
        """Send ``entry`` on where ``redirect`` (read on ``origin``) says."""
        origin.shard.redirected += 1
        if redirect.kind == ReplyKind.MOVED:
            self.moved += 1
        else:
            self.ask += 1
        host = redirect.host or origin.target.host
        node = self.placement.node_index(host, redirect.port)
        what = f"{redirect.kind.name} {redirect.slot} {host}:{redirect.port}"
        if node is None:
            self._give_up(origin, entry, now, f"{what}: a node this run did not find at its start")
            return
        if entry.hops >= MAX_REDIRECTS:
            self._give_up(origin, entry, now, f"{what}: redirected {entry.hops + 1} times")
            return
        # A MOVED to the master the map names already (an incr counter placed on another
        # master on purpose: engine/shards.py) teaches nothing: no refresh for it.
        if redirect.kind == ReplyKind.MOVED and self.move(redirect.slot, node):
            self._schedule_refresh(node, redirect.slot)
        conn = self._connection_to(node, entry)
        if conn is None:  # every connection to it is down: the request is lost with them
            self._host.recorder.counts[entry.op][_CONN_ERROR] += 1
            self._host.note_error("redirect", f"{what}: no connection to it is open")
            return
        conn.send_guest(entry, asking=redirect.kind == ReplyKind.ASK)

    def _give_up(
        self, origin: ClusterConnection, entry: InFlight | Resent, now: int, text: str
    ) -> None:
        """End a request whose redirect cannot be followed: an error reply, at its latency."""
        recorder = self._host.recorder
        recorder.reply_ops.append(entry.op)
        recorder.reply_codes.append(_ERROR_REPLY)
        if entry.intended_ns is None:
            recorder.reply_latency_ns.append(now - entry.sent_ns)
        else:
            recorder.reply_latency_ns.append(now - entry.intended_ns)
            recorder.reply_service_ns.append(now - entry.sent_ns)
        origin.shard.completed += 1
        origin.shard.extra_calls -= 1  # (refused there: a rejected call, not a call)
        self._host.note_error("redirect", text)

    def _connection_to(self, node: int, entry: InFlight | Resent) -> ClusterConnection | None:
        """The live connection to ``node`` with the fewest requests in flight whose pump
        can send ``entry``."""
        live = [c for c in self.connections[node] if c.live and c.connected and c.takes(entry)]
        return min(live, key=lambda c: c.inflight) if live else None

    # -- the slot map --------------------------------------------------------------------

    def move(self, slot: int, node: int) -> bool:
        """``slot`` is served by ``node`` now: its keys go to that master's source.

        Returns:
            Whether that changed the map (False: ``node`` served it already).
        """
        before = self.placement.move(slot, node)
        if before == node:
            return False
        self._replace({before, node} - {NO_NODE})
        return True

    def apply(self, fresh: SlotMap) -> int:
        """Take every slot of a freshly asked map that a master this run knows serves.

        Returns:
            How many slots changed master.
        """
        unknown = -2
        mapping = [self.placement.node_index(host, port) for host, port in fresh.nodes]
        # The last entry answers NO_NODE (-1): a slot nobody serves is left as it was.
        ours = np.array([unknown if m is None else m for m in mapping] + [unknown])
        proposed = ours[np.array(fresh.owners, dtype=np.int64)]
        owners = self.placement.owners
        changed = (proposed != unknown) & (proposed != owners)
        if not changed.any():
            return 0
        nodes = set(owners[changed].tolist()) | set(proposed[changed].tolist())
        owners[changed] = proposed[changed]
        self._replace(nodes - {NO_NODE})
        return int(changed.sum())

    def _replace(self, nodes: set[int]) -> None:
        """Cut new plans for ``nodes``' shards; wake connections that had nothing to send."""
        for index in sorted(nodes):
            shard = self.shards[index]
            idle = shard.source.empty
            shard.rekey(placed_plan(self._plan, self.placement, index))
            self._host.pumps.restart(shard)
            for conn in self.connections[index]:
                conn.keys_changed(idle and self._host.issuing)

    def _schedule_refresh(self, node: int, slot: int) -> None:
        """Ask ``node`` for the whole map soon, unless a refresh is already on its way."""
        if self._refresh is not None and not self._refresh.done():
            return
        self._refresh = asyncio.get_running_loop().create_task(self._refresh_from(node, slot))

    async def _refresh_from(self, node: int, slot: int) -> None:
        """Ask ``node`` for the map and apply it, unless it is older than what a MOVED said
        (it does not give ``slot`` to the node serving it now)."""
        await asyncio.sleep(REFRESH_DELAY_S)
        shard = self.shards[node]
        try:
            masters = await asyncio.wait_for(
                fetch_masters(shard.target, shard.ssl), self._timeout_s
            )
            fresh = SlotMap.from_masters(masters, shard.target.host)
        except (OSError, TimeoutError, ProtocolError, ValueError) as exc:
            self._host.note_error("cluster_refresh", f"{shard.target.url}: {exc}")
            return
        owner = fresh.owners[slot]
        serving = self.placement.owner(slot)
        if owner == NO_NODE or fresh.nodes[owner] != self.placement.nodes[serving]:
            return
        self.refreshes += 1
        self.apply(fresh)

    def close(self) -> None:
        """Stop a refresh on its way (the run is over)."""
        if self._refresh is not None:
            self._refresh.cancel()

    def take_stats(self, recorder: Recorder) -> None:
        """Add the interval's redirect figures to ``recorder``'s stats and start again."""
        recorder.add_stat("redirect_moved", self.moved)
        recorder.add_stat("redirect_ask", self.ask)
        recorder.add_stat("slot_map_refreshes", self.refreshes)
        for shard in self.shards:
            recorder.add_stat(f"server{shard.index}_redirected", shard.redirected)
            recorder.add_stat(f"server{shard.index}_extra_calls", shard.extra_calls)
            recorder.add_stat(f"server{shard.index}_extra_rejected", shard.extra_rejected)
            shard.redirected = shard.extra_calls = shard.extra_rejected = 0
        self.moved = self.ask = self.refreshes = 0


async def fetch_masters(target: TargetConfig, context: ssl.SSLContext | None) -> list[Master]:
    """Ask ``target`` (a cluster node) for the masters and their slots, on a connection of
    its own (engine side; the preflight asks the same over a blocking socket).

    Raises:
        ProtocolError: the node answered with an error or broke the protocol.
        OSError: the connection failed or closed first.
    """
    reader, writer = await asyncio.open_connection(
        target.host, target.port, ssl=context, server_hostname=target.host if context else None
    )
    try:
        query = SlotsQuery(target.password, target.username, target.tls)
        writer.write(query.request)
        while True:
            data = await reader.read(1 << 16)
            if not data:
                raise ConnectionError("the node closed the connection")
            answer = query.feed(data)
            if answer is not None:
                break
    finally:
        writer.close()
    if answer.masters is None:
        raise ProtocolError(f"the node refused: {answer.error}")
    return answer.masters
