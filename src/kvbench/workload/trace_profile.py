"""A trace's own profile: its op mix, request rate over time and size distributions.

Built as the trace is read (``TraceProfile.add`` per block of rows) and handed on as
plain JSON data (``to_dict``): the processes' profiles are merged by counter addition in
the run's trace section (results/trace.py), and the figures a report shows are computed
from that (report/trace_figures.py). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvbench.workload.trace import TRACE_OPS, WRITE_OPS, TraceRows


@dataclass(slots=True)
class TraceProfile:
    """Counts over the rows a replay read (its slice of the trace).

    Attributes:
        rows: rows counted.
        ops: rows per trace op name.
        per_second: rows per whole second of trace time (the timestamp's floor).
        key_sizes: rows per key size (the trace's ``key_size``).
        value_sizes: writes per value size (reads record no value: their sizes are 0).
        ttls_s: writes per TTL.
        first_s, last_s: the first and the last row's time (None: no rows yet).
        whole_seconds: every time was a whole number of seconds (the Twitter format): a
            row's second is its span; else (kvbench's fractional times) the trace spans
            from the first row's time to the last's.
    """

    rows: int = 0
    ops: Counter[str] = field(default_factory=Counter)
    per_second: Counter[int] = field(default_factory=Counter)
    key_sizes: Counter[int] = field(default_factory=Counter)
    value_sizes: Counter[int] = field(default_factory=Counter)
    ttls_s: Counter[int] = field(default_factory=Counter)
    first_s: float | None = None
    last_s: float | None = None
    whole_seconds: bool = True

    def add_one(self, op: str, time_s: float) -> None:
        """Count one row: a capture's command, named ``op``, at ``time_s`` (a MONITOR
        capture's profile, read line by line: workload/monitor_feed.py)."""
        self.rows += 1
        self.ops[op] += 1
        self.per_second[int(time_s)] += 1
        if self.first_s is None:
            self.first_s = time_s
        self.last_s = time_s

    def add(self, rows: TraceRows) -> None:
        """Count one block of rows."""
        if not len(rows):
            return
        self.rows += len(rows)
        for index, n in Counter(rows.ops).items():
            self.ops[TRACE_OPS[index]] += n
        times = rows.times_s
        if self.first_s is None:
            self.first_s = times[0]
        self.last_s = times[-1]
        self.whole_seconds = self.whole_seconds and isinstance(times[0], int)
        seconds: list[int] = times if isinstance(times[0], int) else list(map(int, times))  # type: ignore[assignment]
        self.per_second.update(seconds)
        self.key_sizes.update(rows.key_sizes)
        ops = np.array(rows.ops, dtype=np.int8)
        writes = np.isin(ops, _WRITE_CODES)
        if writes.any():
            self.value_sizes.update(np.array(rows.value_sizes)[writes].tolist())
            self.ttls_s.update(np.array(rows.ttls_s)[writes].tolist())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (counter keys as strings, as JSON needs)."""
        return {
            "rows": self.rows,
            "ops": {name: self.ops[name] for name in TRACE_OPS if self.ops[name]},
            "per_second": _pairs(self.per_second),
            "key_sizes": _pairs(self.key_sizes),
            "value_sizes": _pairs(self.value_sizes),
            "ttls_s": _pairs(self.ttls_s),
            **(
                {}
                if self.first_s is None
                else {
                    "first_time_s": self.first_s,
                    "last_time_s": self.last_s,
                    "whole_seconds": self.whole_seconds,
                }
            ),
        }


_WRITE_CODES = np.array(sorted(WRITE_OPS), dtype=np.int8)


def _pairs(counter: Counter[int]) -> list[list[int]]:
    return [[k, v] for k, v in sorted(counter.items())]
