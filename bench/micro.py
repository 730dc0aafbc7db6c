"""ns per op for each codec's encode and parse, the compiled driver's closed loop per
protocol (its stream fed lists, or packed chunks as a replay's lane feeds it), the
recorder's bulk fold, and open-loop dispatch (uniform vs Poisson arrivals, on the Python
driver and the compiled pumps).

    python bench/micro.py

Replies are prebuilt by encoding requests with one codec and answering them with the
bytes a server would send; parsing runs over 16-reply batches, as a pipelined read would.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable

import numpy as np

from kvbench.config import load_config
from kvbench.engine import fastpath
from kvbench.engine.open_loop import OpenLoopDispatcher
from kvbench.engine.pacing import Schedule
from kvbench.engine.setup import codec_factory_for
from kvbench.engine.worker import Worker, WorkerSpec
from kvbench.metrics.histogram import Histogram
from kvbench.protocols.base import NEED_DATA, ClientCodec, CodecOptions, Op
from kvbench.protocols.memcache_binary import HEADER
from kvbench.protocols.registry import CODECS

BATCH = 16
ROUNDS = 20_000
VALUE = b"x" * 100
KEY = b"kvbench:12345"

# One GET hit and one SET reply per protocol, as the server sends them.
REPLIES: dict[str, tuple[bytes, bytes]] = {
    "memcache-text": (b"VALUE kvbench:12345 0 100\r\n" + VALUE + b"\r\nEND\r\n", b"STORED\r\n"),
    "resp2": (b"$100\r\n" + VALUE + b"\r\n", b"+OK\r\n"),
}


def per_op_ns(fn: Callable[[], None], ops_per_call: int, rounds: int = ROUNDS) -> float:
    start = time.perf_counter_ns()
    for _ in range(rounds):
        fn()
    return (time.perf_counter_ns() - start) / (rounds * ops_per_call)


def bench_codec(name: str) -> None:
    codec = CODECS[name].factory(CodecOptions())
    out = bytearray()
    value = memoryview(VALUE)

    def encode() -> None:
        out.clear()
        for _ in range(BATCH):
            codec.encode(Op.GET, KEY, None, out)

    encode_ns = per_op_ns(encode, BATCH)
    hit, _ = REPLIES[name]
    stream = hit * BATCH
    fresh = CODECS[name].factory(CodecOptions())
    scratch = bytearray()

    def parse() -> None:
        for _ in range(BATCH):
            fresh.encode(Op.GET, KEY, None, scratch)
        scratch.clear()
        fresh.feed(stream)
        while fresh.next_reply() is not NEED_DATA:
            pass

    parse_ns = per_op_ns(parse, BATCH)
    set_out = bytearray()

    def encode_set() -> None:
        set_out.clear()
        for _ in range(BATCH):
            codec.encode(Op.SET, KEY, value, set_out)

    set_ns = per_op_ns(encode_set, BATCH)
    print(
        f"{name:15} encode get {encode_ns:6.0f} ns  encode set {set_ns:6.0f} ns  "
        f"encode+parse get hit {parse_ns:6.0f} ns"
    )


# Batch paths (encode_many, read_kinds): per protocol, the replies to the request with
# opaque number t, as (get hit, set success, get miss); protocols without opaques ignore t.
BATCH_REPLIES: dict[str, Callable[[int], tuple[bytes, bytes, bytes]]] = {
    "memcache-text": lambda t: (REPLIES["memcache-text"][0], b"STORED\r\n", b"END\r\n"),
    "memcache-meta": lambda t: (
        b"VA 100 O%d\r\n" % t + VALUE + b"\r\n",
        b"HD O%d\r\n" % t,
        b"EN O%d\r\n" % t,
    ),
    "resp2": lambda t: (REPLIES["resp2"][0], b"+OK\r\n", b"$-1\r\n"),
    "memcache-binary": lambda t: (
        binary_response(0x00, t, 0, b"\x00\x00\x00\x00" + VALUE),  # 4 bytes of flags
        binary_response(0x01, t, 0, b""),
        binary_response(0x00, t, 1, b"Not found"),
    ),
}


def binary_response(opcode: int, opaque: int, status: int, body: bytes) -> bytes:
    """A memcached binary response without key; a get hit's body starts with 4 extras bytes."""
    extras = 4 if opcode == 0x00 and status == 0 else 0
    return HEADER.pack(0x81, opcode, 0, extras, 0, status, len(body), opaque, 0) + body


def bench_encode_many(name: str) -> None:
    """encode_many over 16-request batches of GET and of SET (100-byte memoryview value)."""
    codec = CODECS[name].factory(CodecOptions())
    out = bytearray()
    keys = [KEY] * BATCH
    values = [memoryview(VALUE)] * BATCH
    row = []
    mixes = {"get": [Op.GET], "set": [Op.SET], "get/set": [Op.GET, Op.SET]}
    for label, mix in mixes.items():
        ops = [int(mix[i % len(mix)]) for i in range(BATCH)]

        def encode_many(ops: list[int] = ops) -> None:
            out.clear()
            codec.encode_many(ops, keys, values, 0, BATCH, out)

        row.append(f"encode_many {label} {per_op_ns(encode_many, BATCH):6.0f} ns")
    print(f"{name:15} " + "  ".join(row))


def feed_and_read_kinds(codec: ClientCodec, chunks: list[bytes]) -> Callable[[], None]:
    """One call per chunk: feed it and collect its replies with read_kinds."""
    stream = iter(chunks)
    kinds: list[int] = []

    def read() -> None:
        codec.feed(next(stream))
        codec.read_kinds(kinds)
        kinds.clear()

    return read


def bench_read_kinds(name: str, rounds: int = ROUNDS // 4) -> None:
    """feed + read_kinds over 16-reply batches: GET hits, SET successes, GET misses."""
    row = []
    for which, (shape, op) in enumerate(
        (("get hit", Op.GET), ("set", Op.SET), ("get miss", Op.GET))
    ):
        codec = CODECS[name].factory(CodecOptions())
        n = rounds * BATCH
        codec.encode_many([int(op)] * n, [KEY] * n, [memoryview(VALUE)] * n, 0, n, bytearray())
        reply = BATCH_REPLIES[name]
        chunks = [
            b"".join(reply(r * BATCH + i)[which] for i in range(BATCH)) for r in range(rounds)
        ]

        read = feed_and_read_kinds(codec, chunks)
        row.append(f"read_kinds {shape} {per_op_ns(read, BATCH, rounds):6.0f} ns")
    print(f"{name:15} " + "  ".join(row))


# A mixed stream, per 4 replies: get hit, get miss, get hit, set success.
MIXED = ((Op.GET, 0), (Op.GET, 2), (Op.GET, 0), (Op.SET, 1))


def bench_read_kinds_mixed(name: str, rounds: int = ROUNDS // 4) -> None:
    """feed + read_kinds over 16-reply batches mixing hits, misses and sets (no runs)."""
    codec = CODECS[name].factory(CodecOptions())
    n = rounds * BATCH
    ops = [int(MIXED[i % len(MIXED)][0]) for i in range(n)]
    codec.encode_many(ops, [KEY] * n, [memoryview(VALUE)] * n, 0, n, bytearray())
    reply = BATCH_REPLIES[name]
    chunks = [
        b"".join(reply(r * BATCH + i)[MIXED[(r * BATCH + i) % len(MIXED)][1]] for i in range(BATCH))
        for r in range(rounds)
    ]
    read = feed_and_read_kinds(codec, chunks)
    print(f"{name:15} read_kinds mixed hit/miss/hit/set {per_op_ns(read, BATCH, rounds):6.0f} ns")


def bench_fold() -> None:
    values = array("q", range(10_000, 110_000))
    hist = Histogram()
    ns = per_op_ns(lambda: hist.record_many(values), len(values), rounds=50)
    print(f"histogram record_many: {ns:.2f} ns per value (100k batch)")


def packed_chunk(ops: list[int]) -> tuple[object, ...]:
    """``ops`` on KEY with VALUE as a packed chunk (a replay's lane's form): one copy of
    the key per request, the stores' values one blob apart as a spool lays them out."""
    n = len(ops)
    key_starts = np.arange(n, dtype=np.uint32) * len(KEY)
    key_ends = key_starts + len(KEY)
    stores = np.array([op == Op.SET for op in ops])
    starts = (np.arange(n, dtype=np.uint32) * len(VALUE)).astype(np.uint32)
    ends = np.where(stores, starts + len(VALUE), starts).astype(np.uint32)
    return (bytes(ops), KEY * n, key_starts, key_ends, VALUE * n, starts, ends, 0, 0)


def bench_pump(name: str, mix: str, rounds: int = ROUNDS // 4, form: str = "lists") -> None:
    """The compiled driver: one read of 16 replies accounted and 16 requests encoded and
    written, per step (``mix``: 16 get hits, or set and get hit in turn as bench/peers.py
    runs them, 100-byte values). Replies carry the opaques the pump gave their requests.
    ``form``: the stream's chunks as lists (a workload's) or packed (a replay's lane's)."""
    if not fastpath.compiled():
        print(f"{name:15} pump: not built")
        return
    from kvbench.engine import _pump  # type: ignore[attr-defined]

    protocol, families = fastpath.PROTOCOLS[name]
    pattern = [Op.GET] if mix == "get" else [Op.SET, Op.GET]
    ops = [int(pattern[i % len(pattern)]) for i in range(4096)]
    chunk = (
        (ops, [KEY] * 4096, [memoryview(VALUE)] * 4096, 0) if form == "lists" else packed_chunk(ops)
    )
    tally = _pump.Tally()
    tally.issuing = True
    written: list[bytes] = []
    pump = _pump.Pump(
        tally, _pump.Stream(lambda: chunk, protocol), written.append, protocol, families, 1 << 20
    )
    reply = BATCH_REPLIES[name]
    # request i (opaque i) is ops[i % 4096]: a get hit or a set success
    reads = [
        b"".join(
            reply(i)[0 if ops[i % 4096] == Op.GET else 1] for i in range(r * BATCH, (r + 1) * BATCH)
        )
        for r in range(rounds)
    ]
    pump.issue(BATCH)
    step_reads = iter(reads)

    def step() -> None:  # the 16 replies free 16 slots: 16 requests go out
        pump.received(next(step_reads))
        written.clear()
        tally.take()

    ns = per_op_ns(step, BATCH, rounds)
    assert pump.error is None, pump.error
    print(f"{name:15} pump received+issue, 16 per read, {mix:7} {form:6} {ns:6.0f} ns")


class NullTransport:
    """Takes the writes of a connection that has no socket."""

    def write(self, data: bytes | bytearray) -> None:
        pass

    def abort(self) -> None:
        pass


def bench_open_loop(
    arrival: str, rate_per_s: int = 20_000, seconds: int = 4, compiled: bool = False
) -> float:
    """CPU per request of open-loop dispatch on a fake clock: a 1 ms tick sends what is due
    over 16 connections (memcached text gets), then every request is answered with a miss.
    Everything but the socket runs: schedule, dispatch, encode, parse, account, fold (and,
    ``compiled``, the pumps' buffers drained into the recorder as the worker does)."""
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "load.rate": (str(rate_per_s), "--rate"),
            "load.arrival": (arrival, "--arrival"),
            "workload.ratio": ("0:1", "--ratio"),
        },
        1,
    )
    worker = Worker(WorkerSpec(config, 0, 1, 16, None), lambda snap: None)
    if compiled:
        worker.tally = fastpath.new_tally(None, True)
        worker.pumps = fastpath.PumpFactory(worker.tally, 0, open_loop=True)
    factory = codec_factory_for(worker.target, CodecOptions())
    for _ in range(16):
        conn = worker.make_connection(factory, None, 64, worker.shards[0])
        conn.closed_loop = False
        conn.connection_made(NullTransport())  # type: ignore[arg-type]
        worker.connections.append(conn)
    dispatcher = OpenLoopDispatcher(
        worker,
        worker.tally,
        worker.recorder,
        worker.connections,
        worker.shards,
        Schedule(rate_per_s, 0, arrival, seed=1),
        10**9,
    )
    start = time.process_time_ns()
    for now in range(0, seconds * 1_000_000_000, 1_000_000):
        dispatcher.dispatch(now)
        for conn in worker.connections:
            if conn.inflight:
                conn.data_received(b"END\r\n" * conn.inflight)
        if now % 10_000_000 == 0:  # the worker folds replies every 10 ms
            fastpath.drain(worker.tally, worker.recorder)
            worker.recorder.fold()
    return (time.process_time_ns() - start) / dispatcher.next_index


def bench_open_loops() -> None:
    drivers = ("python", "compiled") if fastpath.compiled() else ("python",)
    for driver in drivers:
        uniform = bench_open_loop("uniform", compiled=driver == "compiled")
        poisson = bench_open_loop("poisson", compiled=driver == "compiled")
        print(
            f"open loop 20k/s, 16 connections, {driver:>8}: uniform {uniform:6.0f} ns/request"
            f"  poisson {poisson:6.0f} ns/request  (poisson / uniform {poisson / uniform:.2f})"
        )


if __name__ == "__main__":
    for name in BATCH_REPLIES:
        for mix in ("get", "set/get"):
            for form in ("lists", "packed"):
                bench_pump(name, mix, form=form)
    for name in REPLIES:
        bench_codec(name)
    for name in BATCH_REPLIES:
        bench_encode_many(name)
        bench_read_kinds(name)
        bench_read_kinds_mixed(name)
    bench_fold()
    bench_open_loops()
