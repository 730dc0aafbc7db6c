"""Put/get batches: the old per-thread memcached client, request by request.

The ``put-get-batches`` preset reproduces a Python benchmark whose N threads each had a
client of their own connected to every server (client-side hashing): a thread set
``test_key0`` .. ``test_key{R-1}`` one request at a time, then got the same R keys. Here a
*client* is that thread: a connection to every server, one request in flight, each key
sent to the server its placement (workload/placement.py, the one the sharded load run
uses) names. A client's get batch starts when its own set batch has ended (a barrier per
client, not across clients, as the threads were independent). All clients run on one
event loop, as the threads shared one interpreter. A connection is a ``Link``
(engine/link.py), opened like a load run's (TCP, a Unix socket, TLS, AUTH/SELECT).

Every value is derived from its key alone (workload/verify.py, version 0), so whichever
client set a key last, a get must return exactly that value: a hit with any other value
counts ``mismatch``, and a miss is a miss (none is expected: every client set every key
before getting it). Each batch is timed from its first request sent to its last reply
received, per client and across all of them; the replies go into one recorder per batch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kvbench.config.model import RunConfig, TargetConfig
from kvbench.engine.link import Link
from kvbench.engine.reconnect import backoff, connect_error_text, open_link
from kvbench.engine.setup import codec_factory_for, setup_for, ssl_context_for
from kvbench.errors import ProtocolError, SetupRefused, TargetUnreachable
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import NEED_DATA, OP_NAMES, CodecOptions, Op, Reply, ReplyKind
from kvbench.workload.keys import build_key_table
from kvbench.workload.placement import placement_for
from kvbench.workload.plan import RequestSource, compile_plan
from kvbench.workload.verify import check_value

_now = time.monotonic_ns
BATCHES = ("set", "get")


@dataclass(slots=True)
class BatchTimes:
    """When a batch's first request went out and its last reply came back (monotonic ns)."""

    first_sent_ns: int = 0
    last_reply_ns: int = 0

    def widen(self, other: BatchTimes) -> None:
        """Cover ``other`` too (the batch across clients)."""
        if other.first_sent_ns and (
            not self.first_sent_ns or other.first_sent_ns < self.first_sent_ns
        ):
            self.first_sent_ns = other.first_sent_ns
        self.last_reply_ns = max(self.last_reply_ns, other.last_reply_ns)

    @property
    def seconds(self) -> float:
        return max(0, self.last_reply_ns - self.first_sent_ns) / 1e9


@dataclass(slots=True)
class BatchRun:
    """What the clients did: a recorder per batch, the times, the servers' shares."""

    recorders: dict[str, Recorder]
    times: dict[str, BatchTimes] = field(default_factory=lambda: {b: BatchTimes() for b in BATCHES})
    client_times: list[dict[str, BatchTimes]] = field(default_factory=list)
    client_ops: list[int] = field(default_factory=list)  # replies each client had
    server_ops: dict[str, list[int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    mismatch_keys: list[str] = field(default_factory=list)
    interrupted: bool = False


class _Quiet:
    """The ``LinkHost`` of a batch run's links: a client counts its own failures."""

    def connection_opened(self) -> None:
        pass

    def connection_ready(self, link: Link) -> None:
        pass

    def connection_broken(self, link: Link, announced: bool, was_live: bool, refused: bool) -> None:
        pass

    def note_error(self, kind: str, text: str) -> None:
        pass

    def maybe_finished(self) -> None:
        pass


_QUIET = _Quiet()


class _BatchLink(Link):
    """One client's connection to one server: one request in flight, its reply awaited."""

    def __init__(self, target: TargetConfig) -> None:
        super().__init__(
            _QUIET,
            target,
            ssl_context_for(target),
            codec_factory_for(target, CodecOptions(keep_payload=True)),
            setup_for(target),
        )
        self._waiter: asyncio.Future[Reply] | None = None

    @property
    def inflight(self) -> int:
        return int(self._waiter is not None)

    def fill(self) -> None:
        """A client sends when its loop says (``request``), never on its own."""

    def _fail_inflight(self, outcome: int) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionResetError(f"{self.target.url} closed the connection"))

    def _clear(self) -> None:
        self._waiter = None

    def request(
        self, op: Op, key: bytes, value: bytes | memoryview | None
    ) -> asyncio.Future[Reply]:
        """Send one request; the future is its reply."""
        assert self._transport is not None and self._waiter is None
        out = bytearray()
        self._codec.encode(op, key, value, out)
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(out)
        return self._waiter

    def data_received(self, data: bytes) -> None:
        if self._watching:
            self._watch_read(data)
        try:
            self._codec.feed(data)
            if self._setup_left:
                self._receive_setup()
                return
            reply = self._codec.next_reply()
        except ProtocolError as exc:
            waiter, self._waiter = self._waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
            self._abort()
            return
        if reply is NEED_DATA:
            return
        waiter, self._waiter = self._waiter, None
        if waiter is None:  # a reply nobody asked for: the stream is out of step
            self._abort()
        elif not waiter.done():
            waiter.set_result(reply)


class _Server:
    """A client's link to one server, reopened when it breaks (after a backoff: requests to
    a server that could not be reached fail at once until then)."""

    def __init__(self, target: TargetConfig, connect_timeout_ns: int) -> None:
        self.target = target
        self._connect_timeout_ns = connect_timeout_ns
        self._link = _BatchLink(target)
        self._retry_ns = 0  # the backoff after a failed connect (0: none failed)
        self._down_until_ns = 0

    async def open(self) -> None:
        """Connect (again) and set up; raises TargetUnreachable when that fails.

        After a failed connect the server is down for a backoff (engine/reconnect.py's):
        requests to it fail at once, without a connect, as python-memcached marks a
        server dead for a while, so a stopped server costs the run no more than that.
        """
        self.close()
        now = _now()
        if now < self._down_until_ns:
            raise TargetUnreachable(f"{self.target.url} is down (connect failed; retrying)")
        self._link = _BatchLink(self.target)
        try:
            await open_link(self._link, self._connect_timeout_ns)
        except (OSError, TimeoutError, SetupRefused) as exc:
            self._link.close()
            self._retry_ns = backoff(self._retry_ns)
            self._down_until_ns = _now() + self._retry_ns
            reason = connect_error_text(exc)
            raise TargetUnreachable(f"cannot connect to {self.target.url}: {reason}") from None
        self._retry_ns = 0

    def close(self) -> None:
        self._link.close()

    async def request(
        self, op: Op, key: bytes, value: bytes | memoryview | None
    ) -> tuple[Reply, int, int]:
        """Send one request and wait for its reply: (reply, sent_ns, received_ns)."""
        if not self._link.live:
            await self.open()
        sent = _now()
        reply = await self._link.request(op, key, value)
        return reply, sent, _now()


class BatchClient:
    """One client (the original's thread): a connection per server, one request at a time."""

    def __init__(
        self,
        config: RunConfig,
        keys: Sequence[bytes],
        values: Sequence[bytes | memoryview],
        servers: Sequence[int],
        run: BatchRun,
    ) -> None:
        timeout_s = config.load.timeout_ns / 1e9
        self._timeout_s = timeout_s
        self._servers = [_Server(t, config.load.connect_timeout_ns) for t in config.targets]
        self._keys, self._values, self._placed = keys, values, servers
        self._run = run
        self.times = {b: BatchTimes() for b in BATCHES}
        self.ops = 0  # replies received

    async def connect(self) -> None:
        for server in self._servers:
            await server.open()

    def close(self) -> None:
        for server in self._servers:
            server.close()

    async def run(self, stopped: Callable[[], bool]) -> None:
        """The set batch over every key, then the get batch over the same keys."""
        for batch, op in (("set", Op.SET), ("get", Op.GET)):
            recorder = self._run.recorders[batch]
            shares = self._run.server_ops[batch]
            times = self.times[batch]
            for key, value, server in zip(self._keys, self._values, self._placed, strict=True):
                if stopped():
                    return
                done = await self._one(recorder, op, key, value if op == Op.SET else None, server)
                if done is not None:
                    sent, received = done
                    times.first_sent_ns = times.first_sent_ns or sent
                    times.last_reply_ns = received
                    shares[server] += 1
                    self.ops += 1

    async def _one(
        self, recorder: Recorder, op: Op, key: bytes, value: bytes | memoryview | None, index: int
    ) -> tuple[int, int] | None:
        """One request, recorded; (sent, received) when it got a reply, else None."""
        server = self._servers[index]
        try:
            async with asyncio.timeout(self._timeout_s):  # no Task per request (wait_for's)
                reply, sent, received = await server.request(op, key, value)
        except TimeoutError:
            self._failed(recorder, op, Outcome.TIMEOUT, f"{server.target.url}: no reply")
            server.close()
            return None
        except (OSError, ProtocolError, TargetUnreachable) as exc:
            self._failed(recorder, op, Outcome.CONN_ERROR, f"{server.target.url}: {exc}")
            server.close()  # reopened by the next request
            return None
        kind = int(reply.kind)
        recorder.reply_ops.append(int(op))
        recorder.reply_codes.append(kind | reply.keys << 8)
        recorder.reply_latency_ns.append(received - sent)
        if op == Op.GET and kind == ReplyKind.HIT:
            recorder.add_stat("verified", 1)
            if reply.payload is None or not check_value(key, reply.payload):
                recorder.counts[int(op)][int(Outcome.MISMATCH)] += 1
                text = key.decode("utf-8", "backslashreplace")
                if len(self._run.mismatch_keys) < 10 and text not in self._run.mismatch_keys:
                    self._run.mismatch_keys.append(text)
        return sent, received

    def _failed(self, recorder: Recorder, op: Op, outcome: Outcome, text: str) -> None:
        recorder.counts[int(op)][int(outcome)] += 1
        if len(self._run.errors) < 5:
            self._run.errors.append(text)


def batch_workload(config: RunConfig) -> tuple[list[bytes], list[bytes | memoryview], list[int]]:
    """The keys (``<prefix>0`` .. ``<prefix>{keys-1}``), their values (derived from the key:
    the same for every client) and the server each key is placed on."""
    workload = config.workload
    keys = list(build_key_table(workload.key_prefix, workload.keys))
    plan = compile_plan(workload, 0, 1)
    verified = replace(plan, config=replace(workload, verify=True), key_table=keys)
    values = RequestSource(verified).preload_values(range(len(keys)))
    names = [f"{t.host}:{t.port}" for t in config.targets]
    placement = placement_for(workload.placement, names)
    return keys, values, [placement.server_for(key) for key in keys]


async def run_batches(config: RunConfig, clients: int, stopped: Callable[[], bool]) -> BatchRun:
    """``clients`` clients, each a set batch then a get batch over every key.

    Raises:
        TargetUnreachable: a client could not open its connections.
    """
    keys, values, placed = batch_workload(config)
    run = BatchRun(recorders={b: Recorder(OP_NAMES) for b in BATCHES})
    run.server_ops = {b: [0] * len(config.targets) for b in BATCHES}
    team = [BatchClient(config, keys, values, placed, run) for _ in range(clients)]
    try:
        for client in team:
            await client.connect()
        await asyncio.gather(*(client.run(stopped) for client in team))
    finally:
        for client in team:
            client.close()
    run.interrupted = stopped()
    for client in team:
        run.client_times.append(client.times)
        run.client_ops.append(client.ops)
        for batch in BATCHES:
            run.times[batch].widen(client.times[batch])
    return run
