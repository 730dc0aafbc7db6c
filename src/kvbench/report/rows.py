"""The rows ``summary`` hands to every renderer: one interval, one round, one server.

TypedDicts, not classes, because each is a row of the result document as written
(``intervals``, ``rounds``, ``servers``, ``phases``, ``totals.network``): the terminal,
the live view and Prometheus read them, the document spreads them into its JSON, and the
history keeps that JSON. Keys marked ``NotRequired`` are a kind of run's or a view's own.
Types only: nothing here computes.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class OpInterval(TypedDict):
    """One op in one interval."""

    count: int  # every op that ended in it
    succeeded: int  # those answered with a reply that is not an error
    per_s: float  # succeeded / the interval's length (a queue run's get: messages)
    p50_us: float | None
    p99_us: float | None  # None: too few samples
    total: NotRequired[int]  # succeeded so far in the round (``Running``)
    avg_per_s: NotRequired[float]  # total / time since the round's window began


class Redirects(TypedDict):
    """A Redis Cluster run's redirects in one interval, by kind."""

    moved: int
    ask: int


class IntervalRow(TypedDict):
    """One measure interval: its rates, latencies per op, errors and the client's CPU."""

    round: int
    t_s: float  # its end, from its round's window start
    length_s: float
    ops: dict[str, OpInterval]
    errors: int  # error replies and connection failures
    errors_per_s: float
    per_s: float  # successes per second (a queue run's: puts and messages)
    cpu_s: float
    offered_per_s: float | None  # open loop: what the schedule offered
    late: int | None  # open loop: requests sent late (``late``), counted as they ended
    reconnects: int
    connection_errors: int
    connections_live: int | None  # the fewest open at once, where the workers counted
    redirects: NotRequired[Redirects]  # a Redis Cluster run's
    total: NotRequired[int]  # successes so far in the round (``Running``)
    avg_per_s: NotRequired[float]
    # A queue run's (report/queue_figures.py ``interval_fields``):
    puts: NotRequired[int]
    messages: NotRequired[int]
    empties: NotRequired[int]  # gets that found the queue empty
    puts_per_s: NotRequired[float]
    gets_per_s: NotRequired[float]
    backlog: NotRequired[int | None]  # as the client knows it
    server_backlog: NotRequired[int | None]  # as the server counts it
    e2e_p50_us: NotRequired[float | None]
    e2e_p99_us: NotRequired[float | None]
    e2e_clipped: NotRequired[int]  # ages beyond the histogram's range
    # The live view's own (cli/live.py), never in the document:
    connections_asked: NotRequired[int]
    level: NotRequired[str]  # a sweep's or comparison's level, as printed


class RoundRow(TypedDict):
    """One round's throughput (successes in its intervals / its window)."""

    round: int  # 1-based, as printed
    status: str  # its process status: ``ok`` for a complete round
    window_s: float
    completed: int
    succeeded: int
    throughput_per_s: float


class ServerShare(TypedDict):
    """A sharded run: one server's completions in the window and its share of them."""

    url: str
    completed: int
    share: float
    placement: str  # ketama, modulo, or a Redis Cluster's slots
    redirected: NotRequired[int]  # a Redis Cluster master's: what it sent elsewhere


class PhaseCounts(TypedDict):
    """A phase outside the figures (preload, warm-up, drain): what it did."""

    ops: int
    errors: int
    counts: dict[str, dict[str, int]]  # op -> outcome -> ops


class NetworkFigures(TypedDict):
    """The bytes on the wire in the window, and per second of it; a run's totals, where the
    ops' shares were counted, also the bytes no op was given (summary.network_figures)."""

    bytes_in: int
    bytes_out: int
    in_per_s: float
    out_per_s: float
    bytes_in_other: NotRequired[int]
    bytes_out_other: NotRequired[int]
