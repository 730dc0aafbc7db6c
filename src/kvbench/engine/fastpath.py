"""The compiled hot path: when a run uses it, and the glue between it and the worker.

``engine/_pump.c`` runs a connection's closed loop in C (classify replies, account them,
send the next requests in one write) for memcached text, binary and meta, for RESP2
and RESP3 (its HELLO 3 sent and answered before the pump has the connection) and for a
memc-style HTTP gateway (_pump_http.c: each stream is given its target's request start
and end, ``setup.http_frame``; a response that announces the connection's close stops
the pump with ``CLOSING``, as the Python pump's codec does), and its open loop: the dispatcher hands each pump the intended times of the requests it
may send (in C, from the compiled event loop's poll: engine/loop_dispatch.py; on the
transports, from Python: engine/open_loop.py); the pump encodes and writes them,
records each send's lag, and measures each reply from its intended time (service time
beside it), as ``Connection.issue_scheduled`` and ``_account`` do in Python.
The connections of a server share a ``Stream``: the workload's chunks of ops, keys and
values, which C encodes as the codecs would (tests compare the bytes); each pump numbers
its own opaques (binary, meta), as each connection's codec does. A replay's connection
has a ``Stream`` of its own, fed by its lane of the trace (workload/trace_source.py):
each segment hands the stream its writes' TTL, and a lane at its end makes its pump send
nothing more. Nothing of this needs a transport: a replay's pumps run on the compiled
event loop as a plain run's do (``loop_reason``).

A stream's refill returns None (nothing more: a lane at its end) or a chunk in one of
two forms, told apart by the tuple's length:

- lists, ``(ops, keys, values, start[, ttl])``: an int op, a bytes-like key (a multi-get:
  a tuple of them) and value (a store's; else anything) per request;
- a *packed chunk*, ``(ops, keys, key_starts, key_ends, values, value_starts, value_ends,
  start, ttl)``: what a replay's lane sends, a segment of its spool, and what a plain
  run's source draws when every request of its mix can go so (``RequestSource.pack``:
  bounds into its key and value tables), with no Python object per request. ``ops`` is n
  bytes (``Op`` codes; no multi-get); ``keys`` a blob holding request ``i``'s key at
  ``keys[key_starts[i]:key_ends[i]]``; ``values`` a blob holding its value at
  ``values[value_starts[i]:value_ends[i]]`` (read for stores only); ``ttl`` None keeps
  the stream's. Every column is a C-contiguous buffer; the four offset columns hold n
  native uint32 each (a numpy ``uint32`` array, an ``array('I')``, or 4n bytes). The
  stream checks the whole chunk when it loads it (every op one the protocol's pump
  encodes, keys non-empty and inside ``keys``, value ranges inside ``values``, ``0 <=
  start < n``, the TTL one the protocol carries) and a bad one is a ``ValueError`` naming
  what is wrong, none of it sent. It holds the columns' buffers until the next chunk:
  they must not be written meanwhile (a request changed since the load is a
  ``ValueError`` too, never a read outside them).
  ``_pump.encode_packed`` encodes one as ``_pump.encode`` does lists (for tests). A replay is compiled
where the C side encodes every op the protocol's trace mapping can send (memcached text
and meta: all eleven trace ops; binary: all but a tokenless cas, which a replay skips
there; RESP2: add and replace as SET NX/XX, append).
The worker's send state (issuing, budget, interval cut time, byte counts) lives in one
``Tally`` both paths read and write. A run's tally folds (``Tally(fold=True)``): each
read's replies are recorded in C into histograms in ``metrics.histogram``'s layout, by
op and reply kind (with the keys they returned, an open loop's service times and lags),
and ``drain`` hands them to the recorder at every interval cut as the interval's
histograms; everything after the fold is the same whichever path counted the replies
(tests/unit/engine/test_pump_fold.py holds the two drivers' intervals equal, bucket for
bucket). A tally made without ``fold`` buffers each reply instead (``take``), which the
recorder folds with numpy, as the Python driver's replies are.

``--verify`` runs in C as well (``pump_verify``): each pump keeps the keys of its gets in
flight and checks every get hit's value as it reads it (_pump_verify.c: the derived value
recomputed with SHAKE-128, or a timestamp checked against its window), and the tally
counts the checks, the mismatches and the first mismatched keys, which ``drain`` hands to
the worker's ``Verifier`` at the cuts.

Under ``--ratio set-then-get`` each connection has a cursor of its own (its own keys),
so its pump has a ``Stream`` of its own, as a replay's lane does; with ``--verify`` a get
right after the set of its key must return that set's value (``exact``: the pump keeps
the set's value header beside the get's key).

Under a ``--ttl`` range each connection's pump is given the ttl its connection drew
(engine/codec_choice.py), which its stores carry in place of the stream's.

A read-modify-write (``rmw`` in the ratio: ``OP_RMW``, workload.mix's ``RMW_CODE``) is
written by the pump as its get then its set (the bytes engine/rmw.py's wrapper writes)
in one pipeline slot; the pump scans the get's reply, keeps its code, and accounts the
pair as one op when the set's completes it, folded as ``rmw.fold`` folds them.

Against an HTTP gateway, which stores each value's bytes mapped to URL-safe ones, a get
right after the set of its key (``--ratio set-then-get``, the only ``--verify`` config
allows there) is checked against that set's value mapped so (``Pump.value_map``), and a
chunked hit's data is joined before it is checked.

Arbitrary commands (``--command`` on RESP and memcached text, and a MONITOR capture's
replay) go compiled too: the command codes (from ``COMMAND_BASE``) are given the family
``F_COMMAND`` (``PumpFactory``'s ``commands``), which the pump sends as ``Op.COMMAND``,
and whose reply is any RESP value (_pump_resp.c's ``scan_value``: every type hiredis
reads) or any memcached reply framed by its first line (_pump_text.c's
``text_command``); an error reply is ``error_reply``, anything else ``ok``, as the
codecs' ``_on_command`` and ``_parse_command`` have it. Where every
``--command`` template has one key at most, the source packs (``RequestSource.pack``
with ``renders``): a command goes as its entry's code (``COMMAND_BASE + i``) with its
drawn key and value, and the stream renders it from its template
(``RequestSource.command_table``: C's ``template_render``, the template's render's bytes) and
records it under its name's code. Otherwise (a command of two keys, a capture's
commands) the chunks are lists: a command's op is its name's code (``record_ops``), its
key the request rendered in Python, written as it is.

A Redis Cluster's pumps keep each request in flight as written (``cluster``): a
``-MOVED`` or ``-ASK`` reply (read as protocols/resp_cluster.py's ``parse_redirect``
reads it) takes its request out of the FIFO and hands it to the connection's
``on_redirect``, the worker's router (engine/redirect.py), which sends it on to a pump of
the node named (``send_guest``, after ASKING for an ASK).

Everything else stays in Python: an rmw or a replay on a Redis Cluster, more than 48
commands, and any build without a C compiler
(``KVBENCH_PURE_PYTHON=1`` forces that path too); ``python_reason`` names the reason,
and the run records it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kvbench.config.model import RMW, WorkloadConfig
from kvbench.config.replay import MONITOR_FORMAT
from kvbench.engine.pacing import LATE_NS
from kvbench.engine.py_pump import Pumped, PyTally, Write
from kvbench.engine.setup import http_frame
from kvbench.engine.spec import COMPILED_LOOP
from kvbench.engine.verify import Verifier
from kvbench.metrics.histogram import COUNTS_LEN, HIGHEST_TRACKABLE_NS, Histogram
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import CodecOptions, Op
from kvbench.workload.commands import COMMAND_BASE
from kvbench.workload.mix import WORKLOAD_TO_OP
from kvbench.workload.plan import RequestSource
from kvbench.workload.trace_ops import SKIPPED, OpMapping

if TYPE_CHECKING:
    from kvbench.config.model import RunConfig
    from kvbench.engine._pump import Pump, Stream, Tally
    from kvbench.engine.shards import Shard
    from kvbench.workload.chunk import Cursor

try:
    from kvbench.engine import _pump
except ImportError:  # built without a C compiler: the Python driver does everything
    _pump = None  # type: ignore[assignment]  # (typed by engine/_pump.pyi all the same)

PURE_PYTHON_ENV = "KVBENCH_PURE_PYTHON"
# The compiled pumps run on the compiled event loop (engine/loop.py, a ``Poller`` that owns
# the sockets) where the run allows (``loop_reason``); ``KVBENCH_DRIVER=transports`` keeps
# them on uvloop's transports instead (the path the loop replaced: tests and bench/ hold
# the two against each other).
DRIVER_ENV = "KVBENCH_DRIVER"
LOOP = "loop"
TRANSPORTS = "transports"
# loop_reason's answer when the run asked for the transports.
NOT_ASKED = f"{DRIVER_ENV}={TRANSPORTS}"


def _families(table: dict[Op, str]) -> bytes:
    """Op -> the reply family the C scanner checks (0: none; the op keeps the run in Python)."""
    if _pump is None:
        return b""
    return bytes(int(getattr(_pump, f"F_{table[op]}")) if op in table else 0 for op in Op)


# The ops a workload mix sends, by the reply family the C scanner checks for each; every
# protocol's C side encodes these.
_FAMILIES = {
    Op.GET: "GET",
    Op.MGET: "MGET",
    Op.SET: "STORE",
    Op.DELETE: "DELETE",
    Op.INCR: "ARITH",
    Op.DECR: "ARITH",
}
# The ops a replay adds (workload/trace_ops.py), where the C side encodes them: memcached
# text sends all of them (gets is answered as a get, the others as a set); Redis sends add
# and replace as SET NX/XX (answered as a SET) and append as APPEND (answered by a length).
# Any other op keeps a run on the Python driver.
_TEXT_FAMILIES = {
    **_FAMILIES,
    Op.GETS: "GET",
    Op.ADD: "STORE",
    Op.REPLACE: "STORE",
    Op.APPEND: "STORE",
    Op.PREPEND: "STORE",
    Op.CAS: "STORE",
}
# RESP sends a --command's request as its template rendered it (Op.COMMAND) and reads
# any value in reply (_pump_resp.c's scan_value).
_RESP2_FAMILIES = {
    **_FAMILIES,
    Op.ADD: "STORE",
    Op.REPLACE: "STORE",
    Op.APPEND: "APPEND",
    Op.COMMAND: "COMMAND",
}
# memcached meta sends them as text does (gets as "mg ... v c", the stores with their mode
# flag, cas as "C0"); binary all but cas (a replay skips a tokenless one there: CAS 0 is
# no check), each answered with the codec's per-op statuses.
_META_FAMILIES = _TEXT_FAMILIES
_BINARY_FAMILIES: dict[Op, str] = {op: f for op, f in _TEXT_FAMILIES.items() if op != Op.CAS}
# A memc gateway has no multi-get, gets or cas (protocols/http1.py); a replay's gets goes
# as a get there.
_HTTP_FAMILIES: dict[Op, str] = {
    op: f for op, f in _TEXT_FAMILIES.items() if op not in (Op.MGET, Op.GETS, Op.CAS)
}
# protocol name -> (the C side's protocol number, op -> family)
PROTOCOLS: dict[str, tuple[int, bytes]] = (
    {
        # (and a --command's request, its reply framed by its first line: _pump_text.c)
        "memcache-text": (int(_pump.TEXT), _families({**_TEXT_FAMILIES, Op.COMMAND: "COMMAND"})),
        "memcache-binary": (int(_pump.BINARY), _families(_BINARY_FAMILIES)),
        "memcache-meta": (int(_pump.META), _families(_META_FAMILIES)),
        "resp2": (int(_pump.RESP2), _families(_RESP2_FAMILIES)),
        # (the same requests and replies; push messages skipped: _pump_resp.c)
        "resp3": (int(_pump.RESP3), _families(_RESP2_FAMILIES)),
        "http-memc": (int(_pump.HTTP), _families(_HTTP_FAMILIES)),
    }
    if _pump is not None
    else {}
)


def built() -> bool:
    """The extension was built (a C compiler and the Python headers were there)."""
    return _pump is not None


def compiled() -> bool:
    """The extension is built and not switched off."""
    return built() and not os.environ.get(PURE_PYTHON_ENV)


def driver_name(python_reason: str | None, loop_reason: str | None = None) -> str:
    """``compiled loop`` (the compiled pumps on the compiled event loop), ``compiled
    (transports)`` (on uvloop's transports: asked for, or the run needs them: TLS;
    ``compiled (transports: <reason>)``) or ``python (<reason>)``: the driver, as runs
    record it."""
    if python_reason is not None:
        return f"python ({python_reason})"
    if loop_reason is None:
        return COMPILED_LOOP
    if loop_reason == NOT_ASKED:
        return "compiled (transports)"
    return f"compiled (transports: {loop_reason})"


def loop_reason(config: RunConfig) -> str | None:
    """Why a run on the compiled pumps does not run them on the compiled event loop
    (engine/loop.py), or None when it does. The loop takes plain TCP and Unix sockets,
    a run's own mix and a replay's lanes alike (a lane is a connection's own ``Stream``,
    its chunks' TTLs in it; its refill, Python, runs from the pump's send in C, inside
    the poll or the open-loop dispatcher's call, as on the transports). TLS keeps the
    asyncio transports: the poller reads and writes raw sockets."""
    if os.environ.get(DRIVER_ENV) == TRANSPORTS:
        return NOT_ASKED
    if any(target.tls for target in config.targets):
        return "TLS"
    return None


def python_reason(config: RunConfig) -> str | None:
    """Why ``config`` runs on the Python driver, or None when it runs on the compiled one."""
    if _pump is None:
        return "extension not built"
    if os.environ.get(PURE_PYTHON_ENV):
        return f"{PURE_PYTHON_ENV} is set"
    # A cluster pump hands its -MOVED/-ASK replies' requests to the router as written
    # (engine/redirect.py); an rmw is two requests answered as one: it stays on the Python
    # driver. (A replay sends to one server: cli/session.py refuses a cluster.)
    if config.workload.rmw and any(target.cluster for target in config.targets):
        return "an rmw on a Redis Cluster"
    if config.replay is not None and config.replay.format == MONITOR_FORMAT:
        # A capture's client per connection, its commands rendered whole (as --command's).
        return _command_reason(config, len(config.replay.commands), "a MONITOR capture")
    if config.replay is not None:
        # Each connection's pump sends its own lane of the trace (PumpFactory), each chunk
        # with its own TTL: compiled when the C side encodes every op the trace may send.
        return _replay_reason(config)
    if config.workload.commands:
        # (each command's code: its entry's in a packed chunk, its name's in the results)
        reason = _command_reason(config, len(config.workload.commands), "--command")
        if reason is not None:
            return reason
    for target in config.targets:
        if target.protocol not in PROTOCOLS:
            return f"{target.protocol} has no compiled scanner"
        families = PROTOCOLS[target.protocol][1]
        for op in config_ops(config):
            if not families[op]:
                return f"{op.name.lower()} on {target.protocol} has no compiled scanner"
    return None


def _command_reason(config: RunConfig, codes: int, what: str) -> str | None:
    """Why a run's arbitrary commands (``what``: ``--command``, a MONITOR capture; ``codes``
    of them: --command's entries, a capture's names) keep it on the Python driver: a
    target whose protocol's pump sends no commands (config allows them on memcached text
    and RESP only, which both send them), or more commands than a pump's op codes hold;
    None if they go compiled."""
    for target in config.targets:
        if target.protocol not in PROTOCOLS or not PROTOCOLS[target.protocol][1][Op.COMMAND]:
            return f"arbitrary commands ({what}) on {target.protocol}"
    if COMMAND_BASE + codes > _pump.MAX_OPS:
        return f"more than {_pump.MAX_OPS - COMMAND_BASE} commands ({what})"
    return None


def config_ops(config: RunConfig) -> list[Op]:
    """The ops a run's mix sends (an rmw: a get and a set)."""
    ops = [WORKLOAD_TO_OP[name] for name, _ in config.workload.ratio if name != RMW]
    if config.workload.rmw:
        ops += [Op.GET, Op.SET]
    return ops


def _replay_reason(config: RunConfig) -> str | None:
    """Why a replay runs on the Python driver: an op its protocol's mapping can send (known
    before the trace is read) that the C side does not encode; None if there is none."""
    for target in config.targets:
        if target.protocol not in PROTOCOLS:
            return f"{target.protocol} has no compiled scanner"
        families = PROTOCOLS[target.protocol][1]
        for op in replay_ops(target.protocol):
            if not families[op]:
                return f"a replay's {op.name.lower()} on {target.protocol} has no compiled scanner"
    return None


def replay_ops(protocol: str) -> list[Op]:
    """The ops a replay may send on ``protocol`` (its trace ops' mapping, skipped ones
    left out), in ``Op`` order."""
    return sorted({Op(code) for code in OpMapping(protocol).codes if code != SKIPPED})


# How a pump checks get hits (_pump.h's VERIFY_*): not, as values derived from their
# key, or as timestamps.
VERIFY_NONE, VERIFY_DERIVED, VERIFY_TIMESTAMP = 0, 1, 2
# A pump's --verify settings: (mode, a timestamp's window in ms or None, exact: a get
# right after the set of its key must return that set's value, as engine/verify.py's
# ``exact``).
Verify = tuple[int, tuple[int, int] | None, bool]
NO_VERIFY: Verify = (VERIFY_NONE, None, False)


def pump_verify(workload: WorkloadConfig) -> Verify:
    """How a run's pumps check the values its gets return (workload/verify.py's
    ``value_check``, in C; exactly under ``--ratio set-then-get``)."""
    if not workload.verify:
        return NO_VERIFY
    if workload.value_kind == "timestamp":
        return VERIFY_TIMESTAMP, workload.verify_window_ms, workload.set_then_get
    return VERIFY_DERIVED, None, workload.set_then_get


def folds() -> bool:
    """The compiled tally records replies in ``metrics.histogram``'s layout (its bucket
    layout and range are this build's ``Histogram``'s), so a compiled run folds in C."""
    return (
        _pump is not None
        and _pump.HDR_COUNTS_LEN == COUNTS_LEN
        and _pump.HDR_HIGHEST_TRACKABLE_NS == HIGHEST_TRACKABLE_NS
    )


def folding(tally: Tally | PyTally) -> bool:
    """The tally records its replies into histograms in C: draining it while the interval
    runs would only move its counters sooner (see ``drain``)."""
    return not isinstance(tally, PyTally) and tally.fold


def new_tally(on_cut: Callable[[int], None] | None, compiled_run: bool) -> Tally | PyTally:
    """A ``_pump.Tally`` for a compiled run (folding each reply into histograms in C where
    the layouts agree: ``folds``), else a ``PyTally`` (engine/py_pump.py)."""
    if compiled_run and _pump is not None:
        return _pump.Tally(on_cut, fold=folds())
    return PyTally()


class PumpFactory:
    """Builds each connection's pump. The connections of a shard share one ``Stream``,
    fed from their shared cursor over the shard's source (packed chunks where its mix
    allows: ``RequestSource.pack``); a connection with a cursor of its own (over a
    replay's ``Lane``) has a ``Stream`` of its own, kept across its reconnections: its
    segments go packed, each with its stores' TTL, and it sends nothing more once the
    lane is at its end (what the stream holds is still the lane's to send: it holds the
    lane).

    Args:
        tally: the worker's ``_pump.Tally``.
        ttl_s: the ttl requests carry (a chunk that says its own replaces it; a
            connection with a ttl of its own, ``Pumped.ttl_s``, sends that one).
        open_loop: the pumps send only what the open-loop dispatcher hands them.
        verify: how the pumps check get hits (``pump_verify``).
        derive_from: ``--verify``'s values are derived from their keys: the streams of
            the run's own sources derive each set's (from this version on, a version a
            set), so its chunks go packed (``RequestSource.pack``); None: they are not.
        commands: how many command codes the run has from ``COMMAND_BASE`` on (each
            sent as ``Op.COMMAND``, its reply any value): a packed chunk's are its
            ``--command`` entries', rendered by the stream from its source's
            ``command_table``; a list's are its names' (a MONITOR capture's too), each
            key the request rendered.
    """

    def __init__(
        self,
        tally: Tally,
        ttl_s: int,
        open_loop: bool = False,
        verify: Verify = NO_VERIFY,
        derive_from: int | None = None,
        commands: int = 0,
    ) -> None:
        assert _pump is not None
        self.tally = tally
        self._commands = bytes([_pump.F_COMMAND]) * commands
        self._open_loop = open_loop
        mode, window, exact = verify
        self._verify: dict[str, Any] = {"verify": mode, "exact": exact} if mode else {}
        if window is not None:
            self._verify["window_ms"] = window
        self._derive_from = derive_from
        self._ttl_s = ttl_s  # a replay's chunks carry theirs
        options = CodecOptions()
        self._flags = options.flags
        self._max_reply = options.max_reply_bytes
        # The streams by the cursor they draw on (id: cursors are not hashable), and each
        # shard's (one shared, or one per connection).
        self._by_cursor: dict[int, Stream] = {}
        self._of_shard: dict[int, list[Stream]] = {}

    def pump(self, conn: Pumped, write: Write) -> Pump:
        """A pump for ``conn`` writing with ``write`` (its transport's), fed from its
        cursor's stream: the shard's, shared, or one of its own (a replay's lane)."""
        assert _pump is not None
        shard, cursor = conn.shard, conn.cursor
        protocol, families = PROTOCOLS[shard.target.protocol]
        if self._commands:  # (the ops' families, then the command names' from COMMAND_BASE)
            families = families.ljust(COMMAND_BASE, b"\0") + self._commands
        stream = self._by_cursor.get(id(cursor))
        if stream is None:
            # Packed chunks where they can be (bounds into the source's tables); verified
            # values derived by the stream where the source packs them.
            source = cursor.source
            derive_from = -1
            commands = None
            if isinstance(source, RequestSource):
                commands = source.command_table()
                derives = self._derive_from is not None
                packs = source.pack(derives=derives, renders=commands is not None)
                if packs and self._derive_from is not None:
                    derive_from = self._derive_from
            else:
                source.pack()
            target, tail = (
                http_frame(shard.target) if shard.target.family == "http" else (None, None)
            )
            stream = self._by_cursor[id(cursor)] = _pump.Stream(
                _chunks(cursor),
                protocol,
                self._ttl_s,
                self._flags,
                derive_from=derive_from,
                target=target,
                tail=tail,
                commands=commands,
            )
            self._of_shard.setdefault(shard.index, []).append(stream)
            source.hold(stream)
        return _pump.Pump(
            self.tally,
            stream,
            write,
            protocol,
            families,
            self._max_reply,
            open_loop=self._open_loop,
            late_ns=LATE_NS,
            **self._verify,
            ttl=-1 if conn.ttl_s is None else conn.ttl_s,  # -1: the stream's
            cluster=shard.target.cluster,  # (its connection takes its redirects)
        )

    def restart(self, shard: Shard) -> None:
        """Drop the rest of the chunk each stream of ``shard`` holds: its source draws
        other keys from now on (a Redis Cluster slot moved: ``Shard.rekey``)."""
        for stream in self._of_shard.get(shard.index, ()):
            stream.restart()

    def skip(self, cursor: Cursor, n: int) -> bytes | None:
        """Take the next ``n`` requests of ``cursor``'s source unsent (the open loop's
        dropped ones): their ops; None when no pump has drawn from ``cursor`` yet."""
        stream = self._by_cursor.get(id(cursor))
        return bytes(stream.skip(n)) if stream is not None else None

    def completed(self, shard: Shard) -> int:
        """Replies the pumps of ``shard`` received since the last call."""
        return sum(int(stream.take_completed()) for stream in self._of_shard.get(shard.index, ()))


# What a stream's refill returns (the module docstring's two forms).
_Refilled = (
    tuple[Sequence[int], Sequence[Any], Sequence[Any], int]
    | tuple[Sequence[int], Sequence[Any], Sequence[Any], int, int]
    | tuple[Any, ...]
)


def _chunks(cursor: Cursor) -> Callable[[], _Refilled | None]:
    """A stream's refill: the rest of the cursor's chunk, then the source's next ones,
    with the TTL of the chunk's stores where it carries one (a replay's lane, whose
    segments go as packed chunks); None when the source has nothing more (a lane at the
    end of its rows)."""

    def refill() -> _Refilled | None:
        # (a Redis Cluster master's source is empty while it serves none of the keys)
        if cursor.pos >= cursor.size and (cursor.source.empty or not cursor.advance()):
            return None
        chunk = cursor.chunk
        start, cursor.pos = cursor.pos, cursor.size  # the stream takes it from here
        ttl = chunk.ttl_s
        if chunk.packed is not None:  # (a TTL of None: the stream's own)
            return (*chunk.packed, start, ttl)
        # A command goes as its name's code (what it is recorded as), which the pump's
        # families send as Op.COMMAND; the other ops as themselves (record_ops is ops).
        ops = chunk.record_ops
        if ttl is None:
            return ops, chunk.keys, chunk.values, start
        return ops, chunk.keys, chunk.values, start, ttl

    return refill


_LATE = int(Outcome.LATE)


def drain(tally: Tally | PyTally, recorder: Recorder, verifier: Verifier | None = None) -> None:
    """Move the replies the pumps accounted into the recorder's reply buffers, and an open
    loop's service times, lags, late sends and send count where the Python driver puts
    them (``Connection._account`` and ``issue_scheduled``); the bytes by op into stats.

    A folding tally's histograms (each reply recorded in C: ``take_folded``) go to the
    recorder as they are, with the event loop's hiccups and requests-in-flight samples
    where its poller ticks (engine/loop.py). Copying out and merging a histogram's
    counters costs ~0.1 ms whatever the replies, so a folding tally is drained at the
    interval's cuts only (``folding``), a buffering one every few ms as well.

    ``--verify``'s checks in C go to ``verifier``, the worker's (the Python driver's codecs
    count theirs there as they read).
    """
    if not isinstance(tally, PyTally):
        _drain_folded(tally, recorder)
        if verifier is not None:
            verifier.absorb(*tally.take_verified())
    ops, codes, latency = tally.take()
    service, lag, late, sent = tally.take_open()
    by_op = tally.take_bytes()
    if by_op is not None:  # bytes_out.get, bytes_in.get ...: the totals' share by op
        names = recorder.op_names
        for direction, data in zip(("bytes_out", "bytes_in"), by_op, strict=True):
            counts = np.frombuffer(data, dtype=np.int64)
            for op in np.flatnonzero(counts).tolist():
                recorder.add_stat(f"{direction}.{names[op]}", int(counts[op]))
    if ops:
        recorder.reply_ops.frombytes(ops)
        recorder.reply_codes.frombytes(codes)
        recorder.reply_latency_ns.frombytes(latency)
        recorder.reply_service_ns.frombytes(service)
    if sent:
        recorder.lag_ns.frombytes(lag)
        recorder.add_stat("sent", sent)
        late_by_op = np.frombuffer(late, dtype=np.int64)
        for op in np.flatnonzero(late_by_op).tolist():
            recorder.counts[op][_LATE] += int(late_by_op[op])


def _histogram(parts: tuple[bytes, bytes, int, int, int, int, int]) -> Histogram:
    return Histogram.from_buckets(*parts)


def _drain_folded(tally: Tally, recorder: Recorder) -> None:
    """A folding tally's histograms into the recorder (``drain``'s ``cut``)."""
    replies, service, lag, hiccups, inflight_sum, samples = tally.take_folded()
    for op, kind, hits, latency in replies:
        recorder.add_replies(op, kind, hits, _histogram(latency))
    for op, times in service:
        recorder.add_service(op, _histogram(times))
    if lag is not None:
        recorder.add_lag(_histogram(lag))
    if hiccups is not None:
        recorder.add_hiccups(_histogram(hiccups))
    if samples:
        recorder.add_stat("inflight_sum", inflight_sum)
        recorder.add_stat("inflight_samples", samples)
