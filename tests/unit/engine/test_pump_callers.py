"""The compiled pump (engine/_pump.c) holds against its callers (issue 19, F).

A server can only send bytes; the pump's callers can do more: call the pump back from
inside its own refill or write, hand it a memoryview they released, call ``__init__``
again on a live object, give it buffers of any format. Each of these once read or wrote
freed memory or past a buffer. Some of these tests cannot fail under the normal build
(a read of freed memory there often reads what was there): ``make sanitize`` runs them
with the pump built under AddressSanitizer and UBSan, where they do. Each also asserts
what the pump now does instead: a RuntimeError for a call back into a busy pump or
stream, a ValueError for a released view, a RuntimeError for a second ``__init__``.
"""

from __future__ import annotations

import ctypes
import re
import time
from array import array
from typing import Any

import pytest

from kvbench.engine import fastpath
from kvbench.protocols.base import Op
from tests.support import pump_oracle

if not fastpath.compiled():
    pump_oracle.require_compiled(module=True)

from kvbench.engine import _pump  # type: ignore[attr-defined]

MAX = 1 << 20
TEXT, TEXT_FAMILIES = fastpath.PROTOCOLS["memcache-text"]
BINARY, BINARY_FAMILIES = fastpath.PROTOCOLS["memcache-binary"]
REENTRANT = "reentrant call"


def gets(first: int, n: int, key_bytes: int = 8) -> tuple[list[int], list[bytes], list[None], int]:
    """A list chunk of ``n`` gets of keys ``first``, ``first`` + 1, ... (``key_bytes``
    long, zero-padded)."""
    keys = [b"%0*d" % (key_bytes, first + i) for i in range(n)]
    return [int(Op.GET)] * n, keys, [None] * n, 0


class Calls:
    """Calls ``inner`` once from a refill (after the first ``quiet`` refills), and
    ``in_write`` once from a write, keeping what they raised; the refill then hands out
    ``chunk_of(i)`` (i: the refills before it)."""

    def __init__(self, chunk_of: Any, quiet: int = 1) -> None:
        self.chunk_of = chunk_of
        self.quiet = quiet
        self.refills = 0
        self.inner: Any = None
        self.in_write: Any = None
        self.raised: list[BaseException] = []
        self.written: list[bytes] = []

    def refill(self) -> Any:
        self.refills += 1
        if self.refills > self.quiet and self.inner is not None:
            inner, self.inner = self.inner, None  # once (a pump that took it would loop)
            self._call(inner)
        return self.chunk_of(self.refills - 1)

    def write(self, data: bytes) -> None:
        self.written.append(data)
        if self.in_write is not None:
            inner, self.in_write = self.in_write, None
            self._call(inner)

    def _call(self, inner: Any) -> None:
        try:
            inner()
        except Exception as exc:  # what the pump said to the call back into it
            self.raised.append(exc)


def closed_pump(calls: Calls, tally: Any = None) -> tuple[Any, Any, Any]:
    if tally is None:
        tally = _pump.Tally()
        tally.issuing = True
    stream = _pump.Stream(calls.refill, TEXT)
    return tally, stream, _pump.Pump(tally, stream, calls.write, TEXT, TEXT_FAMILIES, MAX)


# -- 18: a call back into a pump from its own refill or write -----------------------------


def test_a_refill_that_calls_its_pump_again_is_refused_and_the_send_goes_on() -> None:
    """Before: the inner issue() grew the pump's output buffer while the outer send was
    writing into it (heap-use-after-free in encode_text under make sanitize), and both
    wrote their requests into the same FIFO slots (the outer's were lost)."""
    calls = Calls(lambda i: gets(1000 * i, 2, key_bytes=64 if i >= 2 else 8))
    tally, _, p = closed_pump(calls)
    assert p.issue(1) == 0  # the output buffer exists now; stream: 1 of 2 left
    calls.inner = lambda: p.issue(200)  # 200 long keys: the buffer would have to grow
    assert p.issue(3) == 0  # the last of chunk 0, then chunk 1 (its refill calls in)
    assert len(calls.raised) == 1 and isinstance(calls.raised[0], RuntimeError)
    assert re.search(REENTRANT + r" to Pump\.issue\(\)", str(calls.raised[0]))
    assert calls.written == [
        b"get 00000000\r\n",
        b"get 00000001\r\nget 00001000\r\nget 00001001\r\n",
    ]
    assert p.inflight == 4 and tally.bytes_out == sum(map(len, calls.written))
    assert p.received(b"END\r\n" * 4) == 0  # every request accounted, in order
    assert tally.pending == 4 and p.inflight == 4  # and as many sent again


@pytest.mark.parametrize(
    "inner",
    ["received", "data_received", "issue", "drop", "expire", "init"],
)
def test_every_call_that_changes_a_pump_is_refused_inside_its_refill(inner: str) -> None:
    calls = Calls(lambda i: gets(10 * i, 2))
    tally, stream, p = closed_pump(calls)
    p.issue(2)
    calls.inner = {
        "received": lambda: p.received(b"END\r\n"),
        "data_received": lambda: p.data_received(b"END\r\n"),
        "issue": lambda: p.issue(1),
        "drop": p.drop,
        "expire": lambda: p.expire(time.monotonic_ns() + 10**12, 0),
        "init": lambda: p.__init__(tally, stream, calls.write, TEXT, TEXT_FAMILIES, MAX),
    }[inner]
    assert p.received(b"END\r\n") == 0  # one reply: one more request, from the next chunk
    assert len(calls.raised) == 1 and isinstance(calls.raised[0], RuntimeError)
    assert calls.written[-1] == b"get 00000010\r\n" and p.inflight == 2
    assert p.oldest_sent_ns() is not None  # a read of the pump is no change: it is allowed


def test_an_open_loops_refill_calling_back_is_refused_too() -> None:
    calls = Calls(lambda i: gets(10 * i, 2))
    tally = _pump.Tally()
    stream = _pump.Stream(calls.refill, TEXT)
    p = _pump.Pump(tally, stream, calls.write, TEXT, TEXT_FAMILIES, MAX, open_loop=True)
    now = time.monotonic_ns()
    p.issue_scheduled([now])
    calls.inner = lambda: p.issue_scheduled([now])
    p.issue_scheduled([now, now])
    assert [type(exc) for exc in calls.raised] == [RuntimeError]
    assert re.search(REENTRANT + r" to Pump\.issue_scheduled\(\)", str(calls.raised[0]))
    assert calls.written[-1] == b"get 00000001\r\nget 00000010\r\n" and p.inflight == 3
    assert tally.take_open()[3] == 3


def test_a_write_that_calls_its_pump_again_is_refused() -> None:
    """The transport's write is called with the pump's state settled, but a reply read
    from inside it would send from inside a send: refused as well."""
    calls = Calls(lambda i: gets(10 * i, 4))
    _, _, p = closed_pump(calls)
    calls.in_write = lambda: p.received(b"END\r\n")
    p.issue(2)
    assert [type(exc) for exc in calls.raised] == [RuntimeError]
    assert re.search(REENTRANT + r" to Pump\.received\(\)", str(calls.raised[0]))
    assert p.inflight == 2 and p.received(b"END\r\n") == 0 and p.inflight == 2


def test_a_streams_refill_that_draws_on_the_same_stream_is_refused() -> None:
    """Two pumps share a server's stream: one's refill making the other send would load a
    chunk inside the loading of another (and, packed, take buffers the outer load holds)."""
    calls = Calls(lambda i: gets(10 * i, 1))
    tally, stream, first = closed_pump(calls)
    second = _pump.Pump(tally, stream, calls.write, TEXT, TEXT_FAMILIES, MAX)
    calls.quiet = 0
    calls.inner = lambda: second.issue(1)
    first.issue(1)
    assert [type(exc) for exc in calls.raised] == [RuntimeError]
    assert re.search(REENTRANT + r" to the refill of a Stream", str(calls.raised[0]))
    calls.inner = lambda: stream.skip(1)
    first.issue(1)
    assert [type(exc) for exc in calls.raised] == [RuntimeError] * 2
    assert calls.written == [b"get 00000000\r\n", b"get 00000010\r\n"]
    assert first.inflight == 2 and second.inflight == 0


def test_pumps_sharing_a_tally_record_every_lag_whoever_sends_inside_whose_refill() -> None:
    """Before: a send reserved room for its lags in the shared tally, then called the
    refill, where another pump's send filled that room: the outer send's lags went past
    the buffer (heap-buffer-overflow under make sanitize)."""
    tally = _pump.Tally()
    now = time.monotonic_ns()
    other = Calls(lambda i: gets(0, 5000))
    other_stream = _pump.Stream(other.refill, TEXT)
    other_pump = _pump.Pump(
        tally, other_stream, other.write, TEXT, TEXT_FAMILIES, MAX, open_loop=True
    )
    calls = Calls(lambda i: gets(10 * i, 1), quiet=0)
    calls.inner = lambda: other_pump.issue_scheduled([now] * 4096)
    stream = _pump.Stream(calls.refill, TEXT)
    p = _pump.Pump(tally, stream, calls.write, TEXT, TEXT_FAMILIES, MAX, open_loop=True)
    p.issue_scheduled([now] * 3)  # its first refill sends 4096 on the other pump
    assert calls.raised == []
    _, lag, _, sent = tally.take_open()
    assert sent == 3 + 4096 and len(lag) == 8 * sent


def test_a_schedule_of_what_is_not_an_int_is_refused_before_any_python_runs() -> None:
    """An int subclass is an int; anything else (whose __index__ could run any code) is a
    TypeError, the requests before it sent."""

    class Index:
        def __index__(self) -> int:
            return 0

    calls = Calls(lambda i: gets(10 * i, 4))
    tally = _pump.Tally()
    stream = _pump.Stream(calls.refill, TEXT)
    p = _pump.Pump(tally, stream, calls.write, TEXT, TEXT_FAMILIES, MAX, open_loop=True)
    with pytest.raises(TypeError, match="intended times must be ints, not Index"):
        p.issue_scheduled([True, Index()])
    assert calls.written == [b"get 00000000\r\n"] and p.inflight == 1


def test_a_list_chunks_op_that_is_not_an_int_is_refused() -> None:
    class Index:
        def __index__(self) -> int:
            return int(Op.GET)

    chunk = ([int(Op.GET), Index()], [b"a", b"b"], [None, None], 0)
    calls = Calls(lambda i: chunk)
    _, stream, p = closed_pump(calls)
    with pytest.raises(TypeError, match="an op must be an int, not Index"):
        p.issue(2)
    assert calls.written == [b"get a\r\n"] and p.inflight == 1
    with pytest.raises(TypeError, match="an op must be an int, not Index"):
        stream.skip(1)


def test_a_list_chunk_cut_short_after_its_load_is_refused_never_read_past() -> None:
    """The stream holds the chunk's lists; their owner may still shorten them."""
    ops, keys, values, _ = gets(0, 4)
    calls = Calls(lambda i: (ops, keys, values, 0))
    _, stream, p = closed_pump(calls)
    p.issue(1)
    del keys[1:]
    with pytest.raises(ValueError, match="the chunk's lists were cut short after it was loaded"):
        p.issue(2)
    assert calls.written == [b"get 00000000\r\n"] and p.inflight == 1
    with pytest.raises(ValueError, match="cut short"):
        stream.skip(1)


# -- 19: a released memoryview ------------------------------------------------------------


def released(data: bytes) -> memoryview:
    view = memoryview(bytearray(data))  # the bytearray goes with the view's release
    view.release()
    return view


@pytest.mark.parametrize("where", ["key", "value", "multi-get key"])
def test_a_released_memoryview_is_a_value_error_and_nothing_of_it_is_sent(where: str) -> None:
    """Before: the pump read the freed bytes of the view's exporter (heap-use-after-free
    under make sanitize) and sent them."""
    ops = [int(Op.SET), int(Op.MGET) if where == "multi-get key" else int(Op.SET)]
    keys: list[Any] = [b"a", b"b"]
    values: list[Any] = [b"v", b"w" * 600]
    if where == "key":
        keys[1] = released(b"k" * 600)
    elif where == "value":
        values[1] = released(b"w" * 600)
    else:
        keys[1] = (b"x", released(b"y" * 600))
    calls = Calls(lambda i: (ops, keys, values, 0))
    _, _, p = closed_pump(calls)
    with pytest.raises(ValueError, match="released memoryview"):
        p.issue(2)
    assert calls.written == [b"set a 0 0 1\r\nv\r\n"] and p.inflight == 1
    for protocol in (TEXT, BINARY):
        with pytest.raises(ValueError, match="released memoryview"):
            _pump.encode(protocol, 0, 0, ops, keys, values, 1, 2)


def test_a_live_memoryview_is_sent_as_its_bytes() -> None:
    value = memoryview(b"hello world")[6:]
    assert _pump.encode(TEXT, 0, 0, [int(Op.SET)], [b"k"], [value], 0, 1) == (
        b"set k 0 0 5\r\nworld\r\n"
    )


# -- 20: __init__ on a live object, and what it is given ---------------------------------


def test_a_second_init_is_refused_and_changes_nothing() -> None:
    """Before: Stream.__init__ again changed the protocol under its bound pumps (and a
    refused ttl was kept: -1 went out as 4294967295 in binary requests); Pump.__init__
    again kept the old FIFO with another stream's protocol."""
    written: list[bytes] = []
    chunk = ([int(Op.SET)], [b"k"], [b"v"], 0)
    stream = _pump.Stream(lambda: chunk, BINARY, 60)
    tally = _pump.Tally()
    tally.issuing = True
    p = _pump.Pump(tally, stream, written.append, BINARY, BINARY_FAMILIES, MAX)
    with pytest.raises(RuntimeError, match=r"Stream\.__init__ was called already"):
        stream.__init__(lambda: chunk, BINARY, -1)
    with pytest.raises(RuntimeError, match=r"Stream\.__init__ was called already"):
        stream.__init__(lambda: chunk, TEXT)
    other = _pump.Stream(lambda: chunk, TEXT)
    with pytest.raises(RuntimeError, match=r"Pump\.__init__ was called already"):
        p.__init__(tally, other, written.append, TEXT, TEXT_FAMILIES, MAX)
    p.issue(1)
    assert written[0][28:32] == (60).to_bytes(4, "big")  # the binary set's expiration: 60


@pytest.mark.parametrize("name", fastpath.PROTOCOLS)
def test_a_negative_ttl_or_flags_is_refused_when_the_stream_is_made(name: str) -> None:
    number = fastpath.PROTOCOLS[name][0]
    with pytest.raises(ValueError, match=r"ttl -1: a ttl is 0 \(no expiry\) or more seconds"):
        _pump.Stream(lambda: None, number, -1)
    with pytest.raises(ValueError, match="flags -2: flags are 0 to 4294967295"):
        _pump.Stream(lambda: None, number, 0, -2)
    with pytest.raises(ValueError, match="ttl -1"):
        _pump.encode(number, -1, 0, [int(Op.GET)], [b"k"], [None], 0, 1)


def test_a_chunks_negative_ttl_is_refused_as_the_streams() -> None:
    calls = Calls(lambda i: ([int(Op.SET)], [b"k"], [b"v"], 0, -5))
    _, _, p = closed_pump(calls)
    with pytest.raises(ValueError, match="ttl -5"):
        p.issue(1)
    assert calls.written == []


def test_a_failed_first_init_leaves_an_object_that_can_still_be_initialised() -> None:
    stream = _pump.Stream.__new__(_pump.Stream)
    with pytest.raises(ValueError, match="ttl -1"):
        stream.__init__(lambda: None, TEXT, -1)
    with pytest.raises(RuntimeError, match=r"Stream\.__init__ was not called"):
        stream.skip(1)
    stream.__init__(lambda: None, TEXT, 0)
    assert stream.take_completed() == 0


class PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (Include/pybuffer.h)."""

    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_void_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


@pytest.mark.parametrize("format", [b"", b"@", b"="])
def test_an_offsets_column_of_a_one_byte_format_is_refused_never_read_past(
    format: bytes,
) -> None:
    """No Python type exports such a format; a C exporter may. Before: the format's check
    read the byte past its end (heap-buffer-overflow under make sanitize): the format
    here is a malloc'd string of exactly its size."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    text = libc.malloc(len(format) + 1)
    assert text
    ctypes.memmove(text, format + b"\0", len(format) + 1)
    data = (ctypes.c_uint32 * 3)(2, 5, 6)
    info = PyBuffer(ctypes.addressof(data), None, 12, 4, 1, 1, text, None, None, None, None)
    from_buffer = ctypes.pythonapi.PyMemoryView_FromBuffer
    from_buffer.restype = ctypes.py_object
    from_buffer.argtypes = [ctypes.POINTER(PyBuffer)]
    column = from_buffer(ctypes.byref(info))
    try:
        assert column.format == format.decode()
        ops, starts, zeros = bytes([int(Op.GET)] * 3), array("I", [0, 2, 5]), array("I", [0] * 3)
        with pytest.raises(ValueError, match="key_ends must be native uint32"):
            _pump.encode_packed(TEXT, 0, 0, ops, b"aabbbc", starts, column, b"", zeros, zeros, 0, 3)
    finally:
        column.release()
        libc.free(text)
