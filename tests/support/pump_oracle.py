"""The compiled pump against the Python one on the same hostile replies (STYLE §6a).

The oracle of the differential test (tests/unit/engine/test_pump_replies.py) and of the
atheris harness (fuzz/fuzz_pump.py): requests of every op the pump sends on the protocol
(a replay's gets, add, replace, append, prepend and cas besides a mix's, and
read-modify-writes: the Python side's codec wrapped in engine/rmw.py's) on a fresh
connection, the replies a hostile server may send them (tests/support/reply_grammar.py:
memcached text, binary and meta, RESP2, RESP3 with push messages between replies, and
HTTP to a memc gateway: every framing, interim responses, announced closes),
and a comparison of what the compiled ``Pump``
and the Python driver's ``PyPump`` (engine/py_pump.py, over the codec) make of them, call
for call: the same send, then the same reads in the same random pieces. Both must write
the same requests (opaques included), account the same reply codes, return the same
status from every call, and stop on a protocol error or neither (the exceptions are
listed in ``disagreement``, each with its reason). Half the exchanges send the requests
as an open loop does (``issue_scheduled``, intended times in the past): the same bytes
and codes, each reply's latency from its intended time. Half of those without a
multi-get reach the compiled pump as a packed chunk (``pack``: a replay's lane's form)
instead of lists: the same bytes again. Half of all exchanges verify (``--verify``): both
pumps check every get hit's value, and where they account the same replies they count the
same checks, mismatches and mismatched keys (the hostile values are mostly mismatches).

``require_compiled`` is how a test of the compiled pump says it cannot run here;
``examples`` how many examples its property tests draw.
"""

from __future__ import annotations

import os
import random
import time
from array import array
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from kvbench.engine import fastpath
from kvbench.engine.py_pump import PyPump, PyTally
from kvbench.engine.rmw import RmwCodec
from kvbench.engine.verify import Verifier, VerifyingCodec
from kvbench.errors import ProtocolError
from kvbench.metrics.outcome import Outcome as ReplyOutcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import CodecOptions, Op
from kvbench.protocols.commands import (
    DATA,
    KeySlot,
    Request,
    RequestTemplate,
    resp_template,
    text_template,
)
from kvbench.protocols.http1 import request_frame
from kvbench.protocols.registry import CODECS
from kvbench.workload.chunk import Cursor
from kvbench.workload.mix import RMW_CODE
from kvbench.workload.plan import FixedSource
from tests.support.reply_grammar import (
    Draw,
    key_for,
    mutate,
    pick,
    replies,
    seeded,
    some_bytes,
)

# Draw and seeded are the fuzz harness's way in, with the rest.
__all__ = [
    "OFFSET_KINDS",
    "OPS",
    "PROTOCOLS",
    "Draw",
    "Exchange",
    "check",
    "codec_outcome",
    "command_request",
    "examples",
    "exchange",
    "frame_args",
    "key_of",
    "ops_of",
    "pack",
    "seeded",
    "sent_ops",
    "stream_frame",
    "unverified",
]


def require_compiled(module: bool = False) -> None:
    """Skip, saying why, where the compiled pump is not built or switched off; under
    ``CI=true`` (.ci/run) fail instead: CI builds and tests it (STYLE 6a).

    Args:
        module: called at a test module's top level (skips or fails its collection).
    """
    if fastpath.compiled():
        return
    reason = (
        "the compiled pump (engine/_pump.c) is not built: install a C compiler and the "
        "Python headers (make deps), then reinstall"
        if not fastpath.built()
        else f"{fastpath.PURE_PYTHON_ENV} is set"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI builds and tests the compiled driver, but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=module)


# ``make sanitize`` (the pump built with AddressSanitizer and UBSan, Python allocating
# with malloc) runs the property tests at a quarter of their examples: each costs 2 to 3
# times more there, and fuzz/fuzz_pump.py's seeded runs that follow draw many more.
SANITIZED = bool(os.environ.get("KVBENCH_SANITIZED_PUMP"))


def examples(n: int) -> int:
    """How many examples a property test of the pump draws: ``n``, or a quarter of it
    under ``make sanitize``."""
    return max(10, n // 4) if SANITIZED else n


# The ops a compiled run of a workload mix sends (every protocol's pump encodes them).
OPS = (Op.GET, Op.SET, Op.DELETE, Op.INCR, Op.DECR, Op.MGET)
# The protocols the pump speaks, by their codec's name.
PROTOCOLS = ("memcache-text", "resp2", "memcache-binary", "memcache-meta", "resp3", "http-memc")
# The protocols whose codec's parser is hiredis (the exceptions below are theirs).
RESP = frozenset({"resp2", "resp3"})
# The ops whose request carries a value.
STORES = frozenset({Op.SET, Op.ADD, Op.REPLACE, Op.APPEND, Op.PREPEND, Op.CAS})
# A read-modify-write's code (a get and a set of one key, answered as one op: engine/rmw.py).
RMW = RMW_CODE
# The codes whose request is given a value: the stores', and an rmw's (its set's).
VALUED = STORES | {RMW}


def ops_of(protocol: str) -> tuple[Op, ...]:
    """The ops the pump encodes and scans on ``protocol`` (engine/fastpath.py's families):
    a workload mix's, and those a replay adds where the C side has them."""
    families = fastpath.PROTOCOLS[protocol][1]
    return tuple(op for op in Op if families[op])


def sent_ops(protocol: str) -> tuple[int, ...]:
    """The codes an exchange draws on ``protocol``: ``ops_of``'s and the rmw."""
    return (*ops_of(protocol), RMW)


# Arbitrary commands' templates (--command), as a run compiles them for RESP and for
# memcached text: with the key inside a word and a value (text: a storage command, its
# value the data block), with neither, with the key only.
_COMMANDS = {
    "resp": (
        resp_template([b"HSET", KeySlot(b"h:"), b"f", DATA]),
        resp_template([b"PING"]),
        resp_template([b"ZSCORE", KeySlot(b"z:", b":s"), b"m"]),
    ),
    "memcache-text": (
        text_template([b"set", KeySlot(b"c:"), b"0", b"60", DATA]),
        text_template([b"version"]),
        text_template([b"mg", KeySlot(b"", b":m"), b"v", b"t"]),
        text_template([b"touch", KeySlot(), b"60"]),
    ),
}


def templates_of(protocol: str) -> tuple[RequestTemplate, ...]:
    """The oracle's command templates for ``protocol`` (RESP2 and RESP3 share theirs)."""
    return _COMMANDS["resp" if protocol in RESP else protocol]


def command_request(key: bytes, data: bytes, protocol: str = "resp2") -> Request:
    """An arbitrary command's whole request (a chunk's key for ``Op.COMMAND``), rendered
    as a run renders it for ``protocol``: which of its templates by ``data``'s length."""
    compiled = templates_of(protocol)
    template = compiled[len(data) % len(compiled)]
    return template.render((key,) * template.keys, data)


def key_of(draw: Draw, op: int, protocol: str) -> Any:
    """A request's key: a multi-get's tuple of them, a command's whole request."""
    if op == Op.MGET:
        return tuple(key_for(draw) for _ in range(draw(1, 4)))
    if op == Op.COMMAND:
        return command_request(key_for(draw), some_bytes(draw, 8), protocol)
    return key_for(draw)


def unverified(ops: list[int]) -> bool:
    """The requests cannot be verified: config refuses ``--verify`` beside an rmw."""
    return RMW in ops


# -- packed chunks ---------------------------------------------------------------------

# The types a packed chunk's uint32 columns may have: a numpy array (a replay's spool),
# an array('I'), their bytes, or a memoryview cast to "I".
OFFSET_KINDS = ("numpy", "array", "bytes", "memoryview")


def _offsets(numbers: list[int], kind: str) -> Any:
    column = np.array(numbers, dtype=np.uint32)
    if kind == "numpy":
        return column
    if kind == "array":
        return array("I", numbers)
    if kind == "bytes":
        return column.tobytes()
    return memoryview(column.tobytes()).cast("I")


def pack(
    ops: list[int],
    keys: list[bytes],
    values: list[Any],
    start: int = 0,
    ttl: int = 0,
    kind: str = "numpy",
    layout: int = 0,
) -> tuple[Any, ...]:
    """The packed chunk of list-form requests (single-key ops; values bytes-like or None):
    ``(ops, keys, key_starts, key_ends, values, value_starts, value_ends, start, ttl)``
    as the Stream takes it. The keys go in one blob in an order and with gaps drawn from
    ``layout`` (a plain run's key table need not follow the requests); the stores' values are laid out in one blob in an
    order and with gaps drawn from ``layout`` (a spool's blob need not follow the
    requests), and the other ops' ranges are empty, anywhere in it.

    Args:
        kind: the uint32 columns' type (OFFSET_KINDS).
    """
    rng = random.Random(layout)
    stores = [i for i, op in enumerate(ops) if op in VALUED]
    rng.shuffle(stores)
    blob = bytearray()
    starts, ends = [0] * len(ops), [0] * len(ops)
    for i in stores:
        blob += bytes(rng.randrange(4))  # a gap
        starts[i] = len(blob)
        blob += bytes(values[i])
        ends[i] = len(blob)
    for i, op in enumerate(ops):
        if op not in VALUED:
            starts[i] = ends[i] = rng.randrange(len(blob) + 1)
    key_blob = bytearray()
    key_starts, key_ends = [0] * len(ops), [0] * len(ops)
    order = list(range(len(keys)))
    rng.shuffle(order)
    for i in order:
        key_blob += bytes(rng.randrange(3))  # a gap
        key_starts[i] = len(key_blob)
        key_blob += keys[i]
        key_ends[i] = len(key_blob)
    return (
        bytes(ops),
        bytes(key_blob),
        _offsets(key_starts, kind),
        _offsets(key_ends, kind),
        bytes(blob),
        _offsets(starts, kind),
        _offsets(ends, kind),
        start,
        ttl,
    )


# -- one exchange ----------------------------------------------------------------------


@dataclass
class Exchange:
    """Requests, the server's reply bytes, where the reads end, and the reply bound."""

    protocol: str  # one of PROTOCOLS
    ops: list[int]
    keys: list[Any]
    wire: bytes
    cuts: list[int]
    max_reply: int
    open_loop: bool = False  # the pump sends them as scheduled requests
    # The pump's stream takes the requests as a packed chunk (a replay's lane's form; no
    # multi-get), its offsets of this kind (OFFSET_KINDS) and values laid out by this
    # seed (``pack``); None: as lists.
    packed: tuple[str, int] | None = None
    # --verify: both pumps check every get hit's value (engine/verify.py's codec wrapper,
    # the pump's checks in C) and count the same checks, mismatches and keys.
    verify: bool = False

    @property
    def values(self) -> list[Any]:
        return [b"vvv" if op in VALUED else None for op in self.ops]


def exchange(draw: Draw, protocol: str | None = None) -> Exchange:
    """A random exchange: up to 8 requests, their replies (mutated, replaced by random
    bytes, or as the grammar wrote them), read in pieces."""
    if protocol is None:
        protocol = pick(draw, PROTOCOLS)
    ops = [int(pick(draw, sent_ops(protocol))) for _ in range(draw(1, 8))]
    keys = [key_of(draw, op, protocol) for op in ops]
    wire = replies(draw, protocol, ops, keys)
    if draw(0, 19) == 0:  # no grammar at all
        wire = some_bytes(draw, 64)
    elif draw(0, 3):
        wire = mutate(draw, wire)
    cuts = sorted({draw(1, max(1, len(wire) - 1)) for _ in range(draw(0, 5))} - {len(wire)})
    max_reply = pick(draw, (CodecOptions().max_reply_bytes, 64, 200))
    open_loop = draw(0, 1) == 1
    # (drawn last: a seed's earlier choices stay what they were before packed chunks)
    packed = None
    if draw(0, 1) and Op.MGET not in ops:
        packed = (pick(draw, OFFSET_KINDS), draw(0, 2**16))
    verify = draw(0, 1) == 1 and not unverified(ops)
    return Exchange(protocol, ops, keys, wire, cuts, max_reply, open_loop, packed, verify)


def pieces(ex: Exchange) -> list[bytes]:
    return [ex.wire[a:b] for a, b in zip([0, *ex.cuts], [*ex.cuts, len(ex.wire)], strict=True)]


@dataclass
class Outcome:
    """What a driver made of an exchange: the requests it wrote, the codes it accounted
    (``kind | keys << KEYS_SHIFT``, in reply order), the protocol error, if any, and what
    each call returned (the send's, then each read's; None: the codec alone, no pump)."""

    requests: bytes
    codes: list[int]
    error: str | None
    statuses: list[int] | None = None
    # The bytes by op (``take_bytes``, trailing zeros cut): of the requests, of the replies.
    # Compared by ``disagreement``, which knows where they may differ.
    tx: list[int] | None = field(default=None, compare=False)
    rx: list[int] | None = field(default=None, compare=False)
    # --verify: (get hits checked, mismatches, the mismatched keys named), when verifying.
    checks: tuple[int, int, list[str]] | None = field(default=None, compare=False)


def _codec(ex: Exchange, options: CodecOptions) -> Any:
    """The Python driver's codec for ``ex``: the protocol's, wrapped to send rmws if any."""
    codec = CODECS[ex.protocol].factory(options)
    return RmwCodec(codec) if RMW in ex.ops else codec


def python_outcome(ex: Exchange, as_driver: bool = False) -> Outcome:
    """The codec's ``encode_many`` and ``read_kinds``, fed the pieces (the Python driver).

    ``as_driver``: the codes the drivers account, not the codec's: after a protocol error
    none of the replies of the piece (the read) that held it, as both drivers do."""
    codec: Any = _codec(ex, CodecOptions(max_reply_bytes=ex.max_reply))
    requests = bytearray()
    codec.encode_many(ex.ops, ex.keys, ex.values, 0, len(ex.ops), requests)
    codes: list[int] = []
    settled = 0
    try:
        for piece in pieces(ex):
            settled = len(codes)
            codec.feed(piece)
            codec.read_kinds(codes)
    except ProtocolError as exc:
        return Outcome(bytes(requests), codes[:settled] if as_driver else codes, str(exc))
    return Outcome(bytes(requests), codes, None)


def codec_outcome(
    protocol: str | int, op: int, wire: bytes, max_reply: int = CodecOptions().max_reply_bytes
) -> tuple[list[int], str | None]:
    """The codec's codes for ``wire`` answering one ``op`` (a multi-get of keys ``a`` and
    ``b``) on a fresh connection, and its protocol error, if any.

    Args:
        protocol: the codec's name, or the pump's number for it (fastpath.PROTOCOLS).
    """
    if isinstance(protocol, int):
        protocol = next(name for name, (n, _) in fastpath.PROTOCOLS.items() if n == protocol)
    key: Any = (b"a", b"b") if op == Op.MGET else b"k"
    outcome = python_outcome(Exchange(protocol, [int(op)], [key], wire, [], max_reply))
    return outcome.codes, outcome.error


# How long before its send each scheduled request was due (open-loop exchanges).
BEHIND_NS = 1_000_000


def py_pump_outcome(ex: Exchange) -> Outcome:
    """A ``PyPump``'s (the Python driver), called as ``pump_outcome`` calls the compiled
    one: the same send, then the same reads, each call's status kept.

    Also checks what holds for it alone, as ``pump_outcome`` does: one write, the ops
    accounted are those sent, in order; in an open loop one lag per send and each reply's
    latency at least its service time plus how long before its send it was due.
    """
    options = CodecOptions(max_reply_bytes=ex.max_reply, keep_payload=ex.verify)
    codec: Any = _codec(ex, options)
    tally = PyTally()
    tally.issuing, tally.budget = True, len(ex.ops)  # exactly these requests, no more
    recorder = Recorder([*(op.name.lower() for op in Op), "rmw"])
    verifier = Verifier(recorder)
    if ex.verify:
        codec = VerifyingCodec(codec, verifier)
    written: list[bytes] = []
    # An exchange's requests as a pump's source: one chunk of lists, then nothing.
    cursor = Cursor(FixedSource(ex.ops, ex.keys, ex.values))
    shard: Any = SimpleNamespace(completed=0)
    pump = PyPump(
        tally, recorder, codec, cursor, shard, written.append, lambda now: None, ex.open_loop
    )
    if ex.open_loop:
        statuses = [pump.issue_scheduled([time.monotonic_ns() - BEHIND_NS] * len(ex.ops))]
    else:
        statuses = [pump.issue(len(ex.ops))]
    assert len(written) == 1, written
    for piece in pieces(ex):
        statuses.append(pump.received(piece))
        if statuses[-1] == 2:  # the pump is done: the connection closes and reopens
            break
    ops, codes, latency = (
        list(recorder.reply_ops),
        list(recorder.reply_codes),
        recorder.reply_latency_ns,
    )
    assert ops == ex.ops[: len(ops)], (ops, ex.ops)
    assert shard.completed == len(ops)
    service_ns = list(recorder.reply_service_ns)
    if ex.open_loop:
        assert recorder.stats.get("sent") == len(ex.ops) and len(recorder.lag_ns) == len(ex.ops)
        assert len(service_ns) == len(latency)
        assert all(t >= s + BEHIND_NS for t, s in zip(latency, service_ns, strict=True))
    else:
        assert "sent" not in recorder.stats and not service_ns
    # (RESP's reply sizes are recomputed from hiredis' values: on bytes Redis never sends,
    # they may add up to more than arrived)
    tx, rx = _check_bytes(ex, tally, written[0], ops, exact_rx=ex.protocol not in RESP)
    checks = None
    if ex.verify:
        mismatches = recorder.counts[int(Op.GET)][int(ReplyOutcome.MISMATCH)]
        checks = (int(recorder.stats.get("verified", 0)), mismatches, verifier.examples)
    return Outcome(written[0], codes, pump.error, statuses, tx, rx, checks)


def pump_outcome(ex: Exchange) -> Outcome:
    """A compiled pump's, sending the requests and then fed the pieces (the compiled driver).

    Also checks what holds for the pump alone: one write for the requests, the ops
    accounted are those sent, in order, and an error is a printable ``str``; in an open
    loop, one lag per send and each reply's latency at least its service time plus the
    time its request was due before it was sent.
    """
    from kvbench.engine import _pump  # type: ignore[attr-defined]

    number, families = fastpath.PROTOCOLS[ex.protocol]
    tally = _pump.Tally()
    tally.issuing, tally.budget = True, len(ex.ops)  # exactly these requests, no more
    chunk: tuple[Any, ...] = (ex.ops, ex.keys, ex.values, 0)
    if ex.packed is not None:
        kind, layout = ex.packed
        chunk = pack(ex.ops, ex.keys, ex.values, 0, 0, kind, layout)
    written: list[bytes] = []
    pump = _pump.Pump(
        tally,
        _pump.Stream(lambda: chunk, number, **stream_frame(ex.protocol)),
        written.append,
        number,
        families,
        ex.max_reply,
        open_loop=ex.open_loop,
        verify=int(ex.verify),
    )
    behind = BEHIND_NS
    if ex.open_loop:
        statuses = [pump.issue_scheduled([time.monotonic_ns() - behind] * len(ex.ops))]
    else:
        statuses = [pump.issue(len(ex.ops))]
    assert len(written) == 1, written
    for piece in pieces(ex):
        status = pump.received(piece)
        assert status in (0, 1, 2, 3), status  # (3: the server announced its close)
        statuses.append(status)
        if status == 2:  # the pump is done: the connection closes and reopens
            break
    ops, codes, latency = (memoryview(b).cast("q").tolist() for b in tally.take())
    assert ops == ex.ops[: len(ops)], (ops, ex.ops)
    service, lag, _, sent = tally.take_open()
    service_ns = memoryview(service).cast("q").tolist()
    if ex.open_loop:
        assert sent == len(ex.ops) and len(memoryview(lag).cast("q")) == sent
        assert len(service_ns) == len(latency)
        assert all(t >= s + behind for t, s in zip(latency, service_ns, strict=True))
    else:
        assert sent == 0 and not service_ns
    error = pump.error
    assert error is None or (isinstance(error, str) and error.isprintable()), repr(error)
    tx, rx = _check_bytes(ex, tally, written[0], ops)
    checks = None
    if ex.verify:
        checked, mismatches, named = tally.take_verified()
        checks = (checked, mismatches, [k.decode("utf-8", "backslashreplace") for k in named])
    return Outcome(written[0], codes, error, statuses, tx, rx, checks)


def stream_frame(protocol: str) -> dict[str, bytes]:
    """A Stream's HTTP request start and end (``target``, ``tail``) for ``protocol``'s
    codec made with its defaults, as fastpath.PumpFactory gives them; none for the rest."""
    if protocol != "http-memc":
        return {}
    target, tail = request_frame("memc", "localhost")  # (HttpMemcCodec's defaults)
    return {"target": target, "tail": tail}


def frame_args(protocol: str) -> tuple[bytes, bytes]:
    """``_pump.encode``'s and ``encode_packed``'s last two arguments (after the opaque)
    for ``protocol``: ``stream_frame``'s target and tail, empty for all but HTTP."""
    frame = stream_frame(protocol)
    return frame.get("target", b""), frame.get("tail", b"")


def _check_bytes(
    ex: Exchange, tally: Any, written: bytes, ops: list[int], exact_rx: bool = True
) -> tuple[list[int], list[int]]:
    """The bytes by op (take_bytes): the requests' add up to the write, the replies' are
    counted to the ops accounted only (none after a broken read: taken back), never more
    than arrived (``exact_rx``), and each reply at least a byte. Returned, trailing zeros
    cut."""
    tx, rx = (memoryview(b).cast("q").tolist() for b in tally.take_bytes())
    assert sum(tx) == len(written) and all(n > 0 for n in (tx[op] for op in ex.ops)), tx
    assert all(n >= 0 for n in rx) and len(ops) <= sum(rx), (rx, ops)
    assert sum(rx) <= len(ex.wire) or not exact_rx, (rx, ex.wire)
    assert {op for op, n in enumerate(rx) if n} == set(ops), (rx, ops)
    return _trimmed(tx), _trimmed(rx)


def _trimmed(counts: list[int]) -> list[int]:
    while counts and not counts[-1]:
        counts.pop()
    return counts


# Either pump, stopping on a protocol error, takes back the replies of the read that held
# it (none of them is attributed): ``check`` compares them call for call.
#
# Where the two drivers may part, each for a reason (the oracle's exceptions). The codes
# both accounted always agree; these are the ways one may stop while the other goes on.
#
# RESP2 and RESP3 (the codec's parser is hiredis; a RESP3 push message, which both skip,
# is held to RESP2's items in C):
# - the scanner refuses a reply at its head where the codec waits for the rest: an array
#   header answering a request no array answers, a non-bulk MGET element, bytes with no
#   request pending, a declared length past the reply bound. Equal codes, the codec
#   without an error yet (it refuses the same reply once it is complete or the bound is
#   crossed; or it stays incomplete and the request times out). The scanner takes back
#   the replies of the read that held that head; the codec, refusing the reply in a later
#   read or never, keeps them: its codes may run on past the scanner's, by that read's.
# - hiredis reads past what RESP2 allows, so the codec may count replies the scanner
#   refused: hiredis does not check the CRLF after a bulk string's data; it parses the
#   RESP3-only types ("(" "=" "~" "|" "#" "," "%" ">") on a RESP2 connection, some as
#   bulk strings or arrays, and on a RESP3 one in a reply or a push message, where the
#   scanner takes only the null "_" and the push ">" of them (no other answers these
#   commands; "|", an attribute, hiredis even returns as a reply of its own); and its
#   reply bound counts the bytes of one read without a
#   complete reply (resp.py), so a reply past the bound that arrives in one read passes.
#   The codec's codes then run on past the scanner's.
# - an arbitrary command's reply may be any value, and the scanner reads every RESP3 type
#   there (scan_value) but the attribute ("|"), which it refuses: hiredis returns an
#   attribute as a reply of its own, so the codec would take the attribute for the
#   command's reply and the described value for the next request's. And on RESP3, where
#   the scanner skips a push message (">") between replies, it refuses a null one (">-1",
#   which no push is); hiredis returns it as a null, which the codec takes for a reply.
#   The codec's codes run on past the scanner's.
#
# memcached text: the scanner keeps no keys in flight, so it cannot tell a VALUE for a key
# that was not asked for; the codec refuses it, the scanner may count it and run on.
#
# memcached binary: none.
RESP_WAITS = (
    "cannot answer",
    "a reply arrived with no request pending",
    "an MGET element is not a bulk string or null",
)
RESP_RUNS_ON = (
    "RESP3 attribute",
    "bad push message length",
    "bulk string not followed by CRLF",
    "unknown reply type",
    "larger than the reply bound",
)


def disagreement(ex: Exchange, py: Outcome, c: Outcome) -> str | None:
    """None when the two outcomes agree, else how they differ."""
    if py.requests != c.requests:
        return f"requests differ: python {py.requests!r}, compiled {c.requests!r}"
    if py.tx != c.tx:
        return f"request bytes by op differ: python {py.tx}, compiled {c.tx}"
    # The same replies accounted: the same bytes by op. (RESP's codec recomputes a reply's
    # size from hiredis' value, exact for what Redis sends but not for every byte string
    # the grammar allows: a status where a bulk string is expected, say. On memcached
    # binary a quiet packet that answers none of our requests, which the compiled driver
    # never asks for but a multi-get's getkq, counts in C with the reply after it; the
    # codec gives its bytes to no op (in a --noreply run such a packet is a quiet
    # request's failure, not the next reply's): there the codec's figures may be lower.)
    same_replies = py.codes == c.codes and py.error is None and c.error is None
    if same_replies and ex.protocol not in RESP and py.rx != c.rx:
        py_rx, c_rx = py.rx or [], c.rx or []
        lower = len(py_rx) <= len(c_rx) and all(a <= b for a, b in zip(py_rx, c_rx, strict=False))
        if not (ex.protocol == "memcache-binary" and lower):
            return f"reply bytes by op differ: python {py.rx}, compiled {c.rx}"
    # --verify: the same replies accounted, the same values checked (where a driver stopped
    # on an error, the codec checked the replies of the broken read as it went; the pump
    # counts none of them, as it accounts none).
    if same_replies and py.checks != c.checks:
        return f"--verify's checks differ: python {py.checks}, compiled {c.checks}"
    statuses = py.statuses is None or py.statuses == c.statuses
    if py.codes == c.codes and (py.error is None) == (c.error is None) and statuses:
        return None
    if excused(ex, py, c):
        return None
    return f"python {py}, compiled {c}"


def excused(ex: Exchange, py: Outcome, c: Outcome) -> bool:
    """The outcomes part in one of the ways listed above."""
    shared = min(len(py.codes), len(c.codes))
    if py.codes[:shared] != c.codes[:shared]:
        return False
    if ex.protocol == "memcache-text":
        keys = py.error is not None and py.error.startswith("VALUE for")
        return keys and len(c.codes) >= len(py.codes)
    if ex.protocol in ("memcache-binary", "memcache-meta") or c.error is None:
        return False
    if any(reason in c.error for reason in RESP_RUNS_ON):
        return len(py.codes) >= len(c.codes)
    # (the pump's codes stop before the read it refused; the codec's run on through it)
    waits = any(reason in c.error for reason in RESP_WAITS)
    return waits and len(py.codes) >= len(c.codes)


def check(ex: Exchange) -> None:
    """Assert that the two pumps agree on ``ex``, call for call (the oracle)."""
    py, c = py_pump_outcome(ex), pump_outcome(ex)
    problem = disagreement(ex, py, c)
    assert problem is None, f"{problem}\n{ex}"
