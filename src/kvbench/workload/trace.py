"""Cache traces: the Twitter cache-trace format and kvbench's CSV, read as a stream.

A trace is CSV rows ``timestamp, key, key_size, value_size, client_id, operation, ttl``
(twitter/cache-trace README: "Trace Format"), plain or zstd-compressed (recognised by the
zstd frame magic, not by the file name). The Twitter files have no header and whole-second
timestamps; kvbench's CSV starts with the header line ``KVBENCH_HEADER`` and may write
fractional seconds. ``TraceReader`` reads a bounded block of bytes at a time and hands out
``TraceRows``: the block's rows as columns (plain lists), so everything after it works a
block at a time. A row that is not a valid request raises ``ConfigError`` naming the file
and the line. No sockets, no clock: file reading only.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import zstandard

from kvbench.errors import ConfigError

# The operations of the Twitter traces, in this order: a row's op is its index here.
TRACE_OPS: tuple[str, ...] = (
    "get",
    "gets",
    "set",
    "add",
    "replace",
    "cas",
    "append",
    "prepend",
    "delete",
    "incr",
    "decr",
)
_OP_INDEX = {name.encode(): i for i, name in enumerate(TRACE_OPS)}
# Ops whose rows carry a value (value_size is the stored value's size).
WRITE_OPS = frozenset(
    TRACE_OPS.index(name) for name in ("set", "add", "replace", "cas", "append", "prepend")
)
COLUMNS = 7
KVBENCH_HEADER = b"timestamp_s,key,key_size,value_size,client_id,operation,ttl_s"
# zstd frame magic number (RFC 8878, 3.1.1): 0xFD2FB528 little-endian.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Compressed bytes decompressed at a time: CSV traces compress about 5-10:1, so this
# bounds a decompressed piece to a few hundred KB.
ZSTD_READ_BYTES = 1 << 15
# Bytes read per block: large enough that per-block costs vanish, small enough that a
# block's rows (~35k of the Twitter traces' ~30-byte rows) are a few MB of objects.
BLOCK_BYTES = 1 << 20
# The longest line accepted: memcached keys are at most 250 bytes, numbers short.
MAX_LINE_BYTES = 4096
# What a row may not contain: memcached's text protocol forbids control characters and
# spaces in keys (protocol.txt, "Keys"); a CSV row has no other place for them either.
_FORBIDDEN = re.compile(rb"[\x00-\x09\x0b-\x20\x7f]")
_FORBIDDEN_BYTES = bytes([*range(0x00, 0x0A), *range(0x0B, 0x21), 0x7F])
# Distinct number texts remembered per column kind before the cache starts over.
NUMBER_CACHE_SIZE = 1 << 16
# The largest TTL a row may carry: what every server's expiry field takes (memcached's
# binary protocol has 32 bits, Redis's EX a signed 64-bit number of milliseconds).
MAX_TTL_S = (1 << 31) - 1


@dataclass(slots=True)
class TraceRows:
    """One block of rows, as columns (index-aligned lists).

    Attributes:
        first_line: the file line number of the first row (1-based).
        times_s: request times in seconds (ints for the Twitter format).
        keys: the (anonymized) keys as written.
        key_sizes, value_sizes: the sizes the trace recorded, bytes.
        clients: the client ids as written.
        ops: index into ``TRACE_OPS``.
        ttls_s: time to live of writes (0 on reads).
    """

    first_line: int
    times_s: list[float] | list[int]
    keys: list[bytes]
    key_sizes: list[int]
    value_sizes: list[int]
    clients: list[bytes]
    ops: list[int]
    ttls_s: list[int]

    def __len__(self) -> int:
        return len(self.ops)

    def select(self, indexes: list[int]) -> TraceRows:
        """The rows at ``indexes`` (first_line is kept: it no longer names a row)."""
        pick = [
            self.times_s,
            self.keys,
            self.key_sizes,
            self.value_sizes,
            self.clients,
            self.ops,
            self.ttls_s,
        ]
        cols = [[col[i] for i in indexes] for col in pick]
        return TraceRows(self.first_line, *cols)  # type: ignore[arg-type]

    def head(self, n: int) -> TraceRows:
        """The first ``n`` rows."""
        return TraceRows(
            self.first_line,
            self.times_s[:n],
            self.keys[:n],
            self.key_sizes[:n],
            self.value_sizes[:n],
            self.clients[:n],
            self.ops[:n],
            self.ttls_s[:n],
        )


def open_trace(path: Path) -> BinaryIO:
    """Open ``path`` for reading.

    Raises:
        ConfigError: the file cannot be opened.
    """
    try:
        return path.open("rb")
    except OSError as exc:
        raise ConfigError(str(path), f"cannot open the trace: {exc.strerror or exc}") from None


def data_chunks(stream: BinaryIO, block_bytes: int) -> Iterator[bytes]:
    """The file's bytes in chunks of about ``block_bytes``, decompressed when it is zstd.

    zstd input is read ``ZSTD_READ_BYTES`` at a time and decompressed frame by frame
    (the Twitter files may hold several frames); a stream that ends inside a frame is an
    error, never a shorter trace.

    Raises:
        ConfigError: (raised by the caller from) ``zstandard.ZstdError`` or ``TruncatedTrace``.
    """
    head = stream.read(4)
    if head != ZSTD_MAGIC:
        data = head + stream.read(block_bytes)
        while data:
            yield data
            data = stream.read(block_bytes)
        return
    zstd = zstandard.ZstdDecompressor()
    decompressor = zstd.decompressobj()
    data = head + stream.read(ZSTD_READ_BYTES)
    fed = False  # the current frame's decompressor has had input
    while data:
        fed = True
        out = decompressor.decompress(data)
        data = b""
        if decompressor.eof:  # a frame ended: what follows is the next frame
            data = decompressor.unused_data
            decompressor = zstd.decompressobj()
            fed = False
        if out:
            yield out
        if not data:
            data = stream.read(ZSTD_READ_BYTES)
    if fed:
        raise TruncatedTrace("the zstd stream ends inside a frame (a truncated file?)")


class TruncatedTrace(Exception):
    """A zstd trace ends inside a frame."""


class TraceReader:
    """The rows of a trace file, a block at a time.

    Args:
        path: the trace (plain or zstd).
        block_bytes: bytes read per block.

    Attributes:
        kvbench_format: the file began with ``KVBENCH_HEADER``.
        lines_read: lines consumed so far (header included).
        max_buffered_bytes: the most bytes held at once (a block and a cut-off line).
    """

    def __init__(self, path: Path, block_bytes: int = BLOCK_BYTES) -> None:
        self.path = path
        self.name = str(path)
        self._block_bytes = block_bytes
        self.kvbench_format = False
        self.lines_read = 0
        self.max_buffered_bytes = 0
        self._last_time_s: float = 0.0
        self._cache_int: dict[bytes, int] = {}
        self._cache_float: dict[bytes, float] = {}
        self._time_type: type = int

    def __iter__(self) -> Iterator[TraceRows]:
        with open_trace(self.path) as stream:
            try:
                yield from self._blocks(data_chunks(stream, self._block_bytes))
            except (zstandard.ZstdError, TruncatedTrace) as exc:
                raise ConfigError(self.name, f"cannot decompress the trace: {exc}") from None
            except OSError as exc:
                raise ConfigError(self.name, f"cannot read the trace: {exc}") from None

    def _blocks(self, chunks: Iterator[bytes]) -> Iterator[TraceRows]:
        carry = b""
        first = True
        for data in chunks:
            block = carry + data if carry else data
            self.max_buffered_bytes = max(self.max_buffered_bytes, len(block))
            end = block.rfind(b"\n") + 1
            if end == 0:  # no line end in this block: the line goes on
                if len(block) > MAX_LINE_BYTES:
                    self._fail(self.lines_read + 1, f"a line longer than {MAX_LINE_BYTES} bytes")
                carry = block
                continue
            carry = block[end:]
            if len(carry) > MAX_LINE_BYTES:
                self._fail(
                    self.lines_read + block.count(b"\n") + 1,
                    f"a line longer than {MAX_LINE_BYTES} bytes",
                )
            lines = block[:end]
            if first:
                lines = self._header(lines)
                first = False
            if lines:
                yield self._parse(lines)
        if carry:  # the last line has no line end
            if first:
                carry = self._header(carry + b"\n")
            else:
                carry += b"\n"
            if carry:
                yield self._parse(carry)

    def _header(self, lines: bytes) -> bytes:
        """Skip kvbench's header line (and a UTF-8 byte order mark before it)."""
        if lines.startswith(b"\xef\xbb\xbf"):
            lines = lines[3:]
        eol = lines.find(b"\n")
        if lines[:eol].rstrip(b"\r") == KVBENCH_HEADER:
            self.kvbench_format = True
            self._time_type = float
            self.lines_read = 1
            return lines[eol + 1 :]
        return lines

    def _parse(self, block: bytes) -> TraceRows:
        """The rows of ``block`` (whole lines, each ending in a newline)."""
        if b"\r" in block:
            block = block.replace(b"\r\n", b"\n")
        first_line = self.lines_read + 1
        count = block.count(b"\n")
        try:
            rows = self._parse_fast(block, count, first_line)
        except (ValueError, KeyError):
            rows = None
        if rows is None:
            self._diagnose(block, first_line)
            raise AssertionError("unreachable: _diagnose raises")  # pragma: no cover
        self.lines_read += count
        return rows

    def _parse_fast(self, block: bytes, count: int, first_line: int) -> TraceRows | None:
        """Columns of a well-formed block; None (or ValueError/KeyError) if any row is not.

        The block is split once into fields; a row with a wrong number of fields shifts
        the columns after it, which the checks below see (an op column that holds no op,
        a number column that holds no number), so the slow path then names the line.
        Numbers go through ``self._numbers`` (a few distinct sizes and seconds recur:
        a dict lookup is a third of ``int()``'s cost).
        """
        if len(block.translate(None, _FORBIDDEN_BYTES)) != len(block):
            return None
        fields = block.replace(b"\n", b",").split(b",")
        fields.pop()  # after the last line end
        if len(fields) != COLUMNS * count:
            return None
        keys = fields[1::COLUMNS]
        if b"" in keys:
            return None
        numbers = self._numbers
        rows = TraceRows(
            first_line,
            numbers(fields[0::COLUMNS], self._time_type),
            keys,
            numbers(fields[2::COLUMNS], int),
            numbers(fields[3::COLUMNS], int),
            fields[4::COLUMNS],
            list(map(_OP_INDEX.__getitem__, fields[5::COLUMNS])),
            numbers(fields[6::COLUMNS], int),
        )
        ttls = rows.ttls_s
        if min(rows.key_sizes) < 1 or min(rows.value_sizes) < 0 or min(ttls) < 0:
            return None
        if max(ttls) > MAX_TTL_S:
            return None
        times = rows.times_s
        # In time order, from the last block's last time on; finite (float() takes "inf").
        if times[0] < self._last_time_s or times != sorted(times) or not math.isfinite(sum(times)):
            return None
        self._last_time_s = times[-1]
        return rows

    def _numbers(self, texts: list[bytes], kind: type) -> list[Any]:
        """``kind(text)`` for each of ``texts``, through a cache of the values seen.

        Raises:
            ValueError: a text is no number of that kind.
        """
        cache = self._cache_int if kind is int else self._cache_float
        try:
            return list(map(cache.__getitem__, texts))
        except KeyError:
            if len(cache) > NUMBER_CACHE_SIZE:
                cache.clear()
            for text in set(texts):
                if text not in cache:
                    cache[text] = kind(text)
            return list(map(cache.__getitem__, texts))

    def _diagnose(self, block: bytes, first_line: int) -> None:
        """Find the first bad row of ``block`` and raise for it."""
        convert = float if self.kvbench_format else int
        last = self._last_time_s
        for offset, line in enumerate(block.split(b"\n")[:-1]):
            number = first_line + offset
            fields = line.split(b",")
            if len(fields) != COLUMNS:
                self._fail(
                    number, f"expected {COLUMNS} comma-separated columns, found {len(fields)}"
                )
            problem = _row_problem(fields, convert)
            if problem is not None:
                self._fail(number, problem)
            time_s = convert(fields[0])
            if time_s < last:
                self._fail(
                    number,
                    f"timestamp {_show(fields[0])} is earlier than the row before's: "
                    "a trace must be in time order",
                )
            last = time_s
        raise AssertionError(f"{self.name}: a block failed to parse but every row is valid")

    def _fail(self, line: int, message: str) -> None:
        raise ConfigError(f"{self.name}:{line}", message)


def _row_problem(fields: list[bytes], convert: type) -> str | None:
    """What is wrong with one row's fields, or None."""
    time_text, key, key_size, value_size, _client, op, ttl = fields
    if not key:
        return "empty key"
    bad = _FORBIDDEN.search(b",".join(fields))
    if bad is not None:
        return f"a space or control character ({bad.group()!r}) in the row"
    try:
        time_s = convert(time_text)
        if not 0 <= time_s < math.inf:
            raise ValueError
    except ValueError:
        kind = "a number of seconds" if convert is float else "a whole number of seconds"
        return f"timestamp {_show(time_text)} is not {kind}"
    for name, text, low in (
        ("key_size", key_size, 1),
        ("value_size", value_size, 0),
        ("ttl", ttl, 0),
    ):
        try:
            if int(text) < low:
                raise ValueError
        except ValueError:
            return f"{name} {_show(text)} is not a whole number >= {low}"
    if int(ttl) > MAX_TTL_S:
        return f"ttl {_show(ttl)} is over {MAX_TTL_S:,} seconds"
    if op not in _OP_INDEX:
        return f"unknown operation {_show(op)} (one of {'/'.join(TRACE_OPS)})"
    return None


def _show(text: bytes) -> str:
    """A field for an error message: quoted, escaped, cut at 40 bytes."""
    return repr(text[:40].decode("utf-8", "backslashreplace"))


def check_trace(path: str) -> None:
    """Read the trace up to its first row: a missing file, one that is not a trace (its
    first rows), not zstd it claims to be, or with no row at all (empty, or kvbench's
    header alone) fails here, before any connection is opened.

    Raises:
        ConfigError: as ``TraceReader`` does; or the trace holds no row.
    """
    reader = TraceReader(Path(path))
    for rows in reader:
        if len(rows):
            return
    what = "kvbench's header line and no row" if reader.lines_read else "nothing"
    raise ConfigError(path, f"no rows to replay: the trace holds {what}")


def client_hashes(clients: list[bytes]) -> list[int]:
    """A stable 32-bit hash of each client id (CRC-32: the same in every process)."""
    return list(map(zlib.crc32, clients))
