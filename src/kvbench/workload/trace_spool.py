"""A replay's prepared rows: segments of one lane's requests, as packed columns in a file.

A replay reads its slice of the trace once, before the clock starts (workload/
trace_source.py), and writes each lane's rows here as they are fanned out: a *segment* is
one lane's rows of one block that share one write TTL. While the replay runs, a lane
reads its segments back one at a time (one ``pread``) and hands them on as they are: the
compiled pump encodes straight from the columns (engine/_pump.c, "packed chunks"), and
the Python driver makes lists of them. So the measured window does no parsing, mapping or
fan-out, and the file, not memory, holds the trace (about the size of the CSV's rows).

A segment of ``n`` rows is, in this order (native byte order; each array 8-aligned):

- ``ops``: n bytes, each an ``Op`` value;
- ``key_starts``, ``key_ends``: n uint32 each: key i is ``keys[key_starts[i]:key_ends[i]]``
  (the keys are end to end: each starts where the one before ends);
- ``value_starts``, ``value_ends``: n uint32 each: the value of a store, as bounds in the
  replay's value blob (workload/trace_ops.py ``ValueBlob``); equal for other ops;
- ``offsets_ns``: n int64, timed replays only: each request's send time from the start;
- ``keys``: the keys, end to end.

The file is a nameless temporary file in the directory ``tempfile`` picks (``TMPDIR``),
closed when the worker's run ends (its space is freed then, or when the process ends). A
spool that cannot be made or written (no room, no such directory) is a ``ConfigError``
naming ``TMPDIR``: one line, before anything is sent. One that cannot be read back while
the replay runs (an I/O error, the file cut short under it) is ``SpoolUnreadable``: the
lane ends there and the worker ends the run as failed, with that line (engine/worker.py).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvbench.errors import ConfigError

_U32 = np.dtype(np.uint32)
_I64 = np.dtype(np.int64)


def _align(n: int) -> int:
    return (n + 7) & ~7


@dataclass(frozen=True, slots=True)
class Segment:
    """Where one segment is in the spool, and what it holds.

    Attributes:
        at: its first byte in the file.
        rows: its requests.
        key_bytes: the length of its keys, end to end.
        ttl_s: the TTL its writes carry (0: none).
        timed: it has send offsets.
        first_ns, last_ns: its first and last request's offsets (timed replays; else 0).
    """

    at: int
    rows: int
    key_bytes: int
    ttl_s: int
    timed: bool
    first_ns: int = 0
    last_ns: int = 0

    @property
    def _keys_at(self) -> int:
        columns = _align(_align(self.rows) + 16 * self.rows)
        return columns + (8 * self.rows if self.timed else 0)

    @property
    def length(self) -> int:
        """Its bytes in the file."""
        return self._keys_at + self.key_bytes


@dataclass(frozen=True, slots=True)
class Columns:
    """A segment read back (the arrays are views of one bytes object)."""

    ops: memoryview
    keys: memoryview
    key_starts: np.ndarray[Any, np.dtype[np.uint32]]
    key_ends: np.ndarray[Any, np.dtype[np.uint32]]
    value_starts: np.ndarray[Any, np.dtype[np.uint32]]
    value_ends: np.ndarray[Any, np.dtype[np.uint32]]
    offsets_ns: np.ndarray[Any, np.dtype[np.int64]] | None

    def key_list(self) -> list[bytes]:
        """The keys as bytes objects (the Python driver's lists)."""
        blob = bytes(self.keys)
        starts, ends = self.key_starts.tolist(), self.key_ends.tolist()
        return list(map(blob.__getitem__, map(slice, starts, ends)))


class SpoolUnreadable(OSError):
    """The spool could not be read back while the replay ran: the rows it held are not
    sent, and the run cannot be whole."""


class Spool:
    """Segments written once, then read back in any order (each by its ``Segment``)."""

    def __init__(self) -> None:
        try:  # (lives as the spool does: closed by ``close``)
            self._file = tempfile.TemporaryFile(prefix="kvbench-replay-")  # noqa: SIM115
        except OSError as exc:
            raise _unwritable(exc) from None
        self.size = 0  # bytes written
        self._flushed = True

    def write(
        self,
        ops: list[int],
        keys: list[bytes],
        value_starts: list[int],
        value_sizes: list[int],
        ttl_s: int,
        offsets_ns: list[int] | None,
    ) -> Segment:
        """Append one segment (index-aligned columns; ``value_sizes`` 0 where no value)."""
        n = len(ops)
        key_bounds = np.zeros(n + 1, dtype=_U32)
        np.cumsum(np.fromiter(map(len, keys), _U32, n), dtype=_U32, out=key_bounds[1:])
        starts = np.asarray(value_starts, dtype=_U32)
        ends = starts + np.asarray(value_sizes, dtype=_U32)
        head = bytes(ops).ljust(_align(n), b"\0")
        columns = b"".join(
            (
                head,
                key_bounds[:-1].tobytes(),
                key_bounds[1:].tobytes(),
                starts.tobytes(),
                ends.tobytes(),
            )
        )
        parts = [columns.ljust(_align(len(columns)), b"\0")]
        first = last = 0
        if offsets_ns is not None:
            parts.append(np.asarray(offsets_ns, dtype=_I64).tobytes())
            first, last = offsets_ns[0], offsets_ns[-1]
        key_blob = b"".join(keys)
        parts.append(key_blob)
        segment = Segment(
            self.size, n, len(key_blob), ttl_s, offsets_ns is not None, int(first), int(last)
        )
        try:
            self._file.writelines(parts)
        except OSError as exc:
            raise _unwritable(exc) from None
        self.size += segment.length
        self._flushed = False
        return segment

    def read(self, segment: Segment) -> Columns:
        """The columns of ``segment``."""
        where = tempfile.gettempdir()
        if not self._flushed:
            try:
                self._file.flush()
            except OSError as exc:
                raise SpoolUnreadable(_unwritable(exc).message) from None
            self._flushed = True
        try:
            data = os.pread(self._file.fileno(), segment.length, segment.at)
        except OSError as exc:
            raise SpoolUnreadable(
                f"cannot read the replay's spool in {where}: {exc.strerror or exc}"
            ) from None
        if len(data) != segment.length:
            raise SpoolUnreadable(
                f"the replay's spool in {where} was cut short while it ran: "
                f"{len(data):,} of a segment's {segment.length:,} bytes read back"
            )
        n = segment.rows
        at = _align(n)
        view = memoryview(data)
        timed = segment.timed
        return Columns(
            ops=view[:n],
            keys=view[segment._keys_at :],
            key_starts=np.frombuffer(data, _U32, n, at),
            key_ends=np.frombuffer(data, _U32, n, at + 4 * n),
            value_starts=np.frombuffer(data, _U32, n, at + 8 * n),
            value_ends=np.frombuffer(data, _U32, n, at + 12 * n),
            offsets_ns=np.frombuffer(data, _I64, n, _align(at + 16 * n)) if timed else None,
        )

    def close(self) -> None:
        self._file.close()


def _unwritable(exc: OSError) -> ConfigError:
    return ConfigError(
        "TMPDIR",
        f"cannot write the replay's spool in {tempfile.gettempdir()}: "
        f"{exc.strerror or exc} (TMPDIR picks a directory with room for about the trace's size)",
    )
