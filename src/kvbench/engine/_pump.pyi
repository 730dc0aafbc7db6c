# The compiled hot path's interface (engine/_pump.c), for mypy: every class, method,
# attribute and constant the extension exports. tests/unit/engine/test_pump_stub.py
# checks this names exactly what the built module has.

from collections.abc import Callable
from typing import Any, final

from typing_extensions import Buffer

# Protocols (a Stream's and a Pump's ``protocol``).
TEXT: int
RESP2: int
RESP3: int
BINARY: int
META: int
HTTP: int
# Reply families (a Pump's ``families``: one per op; 0 keeps the op in Python).
F_GET: int
F_MGET: int
F_STORE: int
F_DELETE: int
F_ARITH: int
F_APPEND: int
# An arbitrary command's (--command): any value; its code is sent as OP_COMMAND.
F_COMMAND: int
# Reply kinds (the codes' low bits: protocols.base.ReplyKind's values).
K_HIT: int
K_MISS: int
K_STORED: int
K_NOT_STORED: int
K_EXISTS: int
K_NOT_FOUND: int
K_DELETED: int
K_OK: int
K_VALUE: int
K_ERROR_REPLY: int
KEYS_SHIFT: int
MAX_OPS: int
OP_RMW: int
OP_COMMAND: int
COMMAND_BASE: int
# metrics.histogram's layout, as a folding Tally records it (a test holds them together).
HDR_SUB_BUCKET_HALF_COUNT_MAGNITUDE: int
HDR_COUNTS_LEN: int
HDR_HIGHEST_TRACKABLE_NS: int
# How many of a timed replay's lane's times a Poller asks its feed for at a time.
LANE_FEED: int

# A histogram as a folding Tally hands it over: (indexes, counts, total, min, max, sum,
# out_of_range), its non-empty buckets as native int64s, indexes ascending.
_Hdr = tuple[bytes, bytes, int, int, int, int, int]

# What a Stream's refill returns: None (nothing now), lists ``(ops, keys, values, start[,
# ttl])`` or a packed chunk ``(ops, keys, key_starts, key_ends, values, value_starts,
# value_ends, start, ttl)`` (engine/fastpath.py).
_Refill = Callable[[], tuple[Any, ...] | None]

@final
class Tally:
    """A worker's send state and reply buffers, shared by its pumps."""

    issuing: bool
    budget: int
    next_cut_ns: int
    bytes_in: int
    bytes_out: int
    @property
    def pending(self) -> int: ...
    @property
    def inflight(self) -> int: ...
    @property
    def fold(self) -> bool: ...
    def __init__(
        self, on_cut: Callable[[int], object] | None = None, fold: bool = False
    ) -> None: ...
    def take(self) -> tuple[bytes, bytes, bytes]: ...
    def take_open(self) -> tuple[bytes, bytes, bytes, int]: ...
    def take_bytes(self) -> tuple[bytes, bytes]: ...
    def take_folded(
        self,
    ) -> tuple[
        list[tuple[int, int, int, _Hdr]], list[tuple[int, _Hdr]], _Hdr | None, _Hdr | None, int, int
    ]: ...
    def take_verified(self) -> tuple[int, int, list[bytes]]: ...
    def take_said(self) -> tuple[int, bytes] | None: ...

# --command's templates for a Stream to render (RESP): per entry (its code COMMAND_BASE
# + i), the code its requests are recorded under and its pieces: literal bytes, a key's
# (prefix, suffix), or None for the value.
_Commands = tuple[tuple[int, tuple[bytes | tuple[bytes, bytes] | None, ...]], ...]

@final
class Stream:
    """The requests of a server's pumps, or of one pump (a replay's lane)."""

    @property
    def pos(self) -> int: ...
    @property
    def size(self) -> int: ...
    def __init__(
        self,
        refill: _Refill,
        protocol: int,
        ttl: int = 0,
        flags: int = 0,
        *,
        derive_from: int = -1,
        target: bytes | None = None,
        tail: bytes | None = None,
        commands: _Commands | None = None,
    ) -> None: ...
    def take_completed(self) -> int: ...
    def skip(self, n: int, /) -> bytes: ...
    def restart(self) -> None: ...

# A cluster pump's redirected request (``Pump.on_redirect``'s items): kind (ReplyKind.MOVED
# or ASK), slot, host (as the reply spells it), port, op, keys, the request as written,
# a --verify'd get's key, sent_ns, intended_ns (None: closed loop), hops.
_Redirected = tuple[int, int, bytes, int, int, int, bytes, bytes | None, int, int | None, int]

@final
class Pump:
    """One connection's closed or open loop."""

    on_stopped: Callable[[int], object] | None
    on_redirect: Callable[[list[_Redirected]], object] | None
    @property
    def error(self) -> str | None: ...
    @property
    def inflight(self) -> int: ...
    def __init__(
        self,
        tally: Tally,
        stream: Stream,
        write: Callable[[bytes], object],
        protocol: int,
        families: Buffer,
        max_reply: int,
        open_loop: bool = False,
        late_ns: int = 0,
        verify: int = 0,
        window_ms: tuple[int, int] = ...,
        exact: bool = False,
        ttl: int = -1,
        cluster: bool = False,
    ) -> None: ...
    def received(self, data: bytes, /) -> int: ...
    def data_received(self, data: bytes, /) -> None: ...
    def issue(self, n: int, /) -> int: ...
    def issue_scheduled(self, intended_ns: list[int], /) -> int: ...
    def oldest_sent_ns(self) -> int | None: ...
    def expire(self, now: int, timeout_ns: int, /) -> tuple[bytes, bytes]: ...
    def drop(self) -> bytes: ...
    def send_guest(
        self,
        request: Buffer,
        op: int,
        keys: int,
        key: bytes | None,
        sent_ns: int,
        intended_ns: int,
        hops: int,
        asking: bool,
    ) -> None: ...

def encode(
    protocol: int,
    ttl: int,
    flags: int,
    ops: list[int],
    keys: list[Any],
    values: list[Any],
    start: int,
    stop: int,
    opaque: int = 0,
    target: bytes = b"",
    tail: bytes = b"",
    /,
) -> bytes: ...
def hdr_fold(values: Buffer, /) -> _Hdr | None: ...
def _set_clock(ns: int | None, /) -> None: ...
def check_value(key: Buffer, value: Buffer, /) -> bool: ...
def derive_value(key: Buffer, version: int, size: int, /) -> bytes: ...
def encode_packed(
    protocol: int,
    ttl: int,
    flags: int,
    ops: Buffer,
    keys: Buffer,
    key_starts: Buffer,
    key_ends: Buffer,
    values: Buffer,
    value_starts: Buffer,
    value_ends: Buffer,
    start: int,
    stop: int,
    opaque: int = 0,
    target: bytes = b"",
    tail: bytes = b"",
    commands: _Commands | None = None,
    /,
) -> bytes: ...
def scan_replies(
    protocol: int,
    families: Buffer,
    ops: Buffer,
    data: Buffer,
    max_reply: int,
    keys: Buffer = b"",
    /,
) -> tuple[list[int], int, str | None]: ...

@final
class Poller:
    """A worker's connections' sockets in an epoll set, serviced in C (engine/loop.py)."""

    @property
    def live(self) -> int: ...
    @property
    def ticks(self) -> int: ...
    def __init__(self, on_end: Callable[[int, int], object] | None = None) -> None: ...
    def add(self, fd: int, reader: Callable[[bytes], object], /) -> int: ...
    def set_pump(self, handle: int, pump: Pump | None, /) -> None: ...
    def set_reader(self, handle: int, reader: Callable[[bytes], object], /) -> None: ...
    def write(self, handle: int, data: Buffer, /) -> None: ...
    def close(self, handle: int, /) -> None: ...
    def poll(self) -> int: ...
    def wait(self, timeout_ms: int, /) -> int: ...
    def wake_on(self, fd: int, /) -> None: ...
    busy_poll_ns: int
    def fileno(self) -> int: ...
    def shutdown(self) -> None: ...
    def start_ticks(self, tally: Tally, period_ns: int, sample_every: int, /) -> None: ...
    def stop_ticks(self) -> None: ...
    @property
    def scheduled(self) -> int: ...
    @property
    def scheduling(self) -> bool: ...
    def schedule(
        self,
        tally: Tally,
        lanes: int,
        # (first, count); per_lane: (lane, first, count)
        feed: Callable[..., Buffer],
        # (now, next); per_lane: (lane, now, next)
        on_behind: Callable[..., tuple[int, bool]],
        on_stop: Callable[[BaseException | None], object],
        max_lag_ns: int,
        period_ns: int,
        tick_ns: int,
        /,
        per_lane: bool = False,
    ) -> None: ...
    def set_lane(self, index: int, pump: Pump | None, pipeline: int, /) -> None: ...
    def scheduled_of(self, index: int, /) -> int: ...
    def unschedule(self) -> None: ...
    def overdue(self, before_ns: int, /) -> list[int]: ...
