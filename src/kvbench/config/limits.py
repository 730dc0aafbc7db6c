"""Limits a run must fit, known from the config alone: checked before the first byte.

What the client can schedule (an open-loop rate its dispatcher can send) and what a
protocol can carry (a value's length). The limits only a server or the host can tell
(memcached's ``item_size_max``, open files, memory) are runner/limits.py's. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from kvbench.config.model import RunConfig, TargetConfig
from kvbench.errors import ConfigError

# The open-loop dispatcher's ticks come at least this far apart (engine/open_loop.py
# takes it from here): each tick hands every connection at most its free pipeline slots.
DISPATCH_PERIOD_NS = 100_000
# The lowest rate per worker the uniform schedule represents: it counts in thousandths of
# a request per second (engine/pacing.py ``Schedule``).
MIN_RATE_PER_WORKER = 0.001
# The longest value each protocol can frame. memcached's text and meta protocols parse a
# value's length into a signed 32-bit int that must also hold the CRLF after it (memcached
# proto_text.c process_update_command: ``vlen += 2; if (vlen < 0 ...)``); the binary
# protocol's total body length is 32 bits and holds the extras (8 bytes for a set) and
# the key (memcached protocol_binary.h). A RESP bulk string's length is a signed 64-bit
# integer: the server's proto-max-bulk-len decides (runner/limits.py).
MAX_VALUE_BYTES = {
    "memcache-text": (1 << 31) - 3,
    "memcache-meta": (1 << 31) - 3,
    "memcache-binary": (1 << 32) - 1 - 8 - 250,
}


def max_connection_slots(config: RunConfig) -> int:
    """How many requests the run's connections can hold in flight at once: connections x
    pipeline. ``--connections`` is the total over every server (engine/worker.py shares
    each worker's among the targets of a sharded run); counting it once per server
    overstated the slots of a sharded run as many times, and the open files it needs."""
    return config.load.connections * config.load.pipeline


def connections_per_server(config: RunConfig) -> int:
    """The most connections one server address gets: a sharded run's are shared among its
    servers (rounded up); a single server or a Redis Cluster (whose connections go to
    masters the seeds name) may get them all."""
    targets = config.targets
    if len(targets) > 1 and not any(t.cluster for t in targets):
        return -(-config.load.connections // len(targets))
    return config.load.connections


def max_rate_per_s(config: RunConfig) -> float:
    """The highest rate the open-loop dispatcher can send: every tick (at most one per
    ``DISPATCH_PERIOD_NS``) fills each connection's free pipeline slots, no more."""
    return max_connection_slots(config) * 1e9 / DISPATCH_PERIOD_NS


def check_rate(config: RunConfig, origin: Callable[[str], str]) -> None:
    """Refuse an open-loop rate the client cannot schedule.

    Above ``max_rate_per_s`` even a server that answers at once leaves requests unsent
    every tick: the run would measure the client's dispatcher (its drops, and the CPU
    they cost), not the server. Below ``MIN_RATE_PER_WORKER`` per worker the schedule
    cannot count.

    Raises:
        ConfigError: naming --rate (or its file key), the bound and how to move it.
    """
    load = config.load
    rate = load.rate_per_s
    if rate is None:
        return
    highest = max_rate_per_s(config)
    if rate > highest:
        raise ConfigError(
            origin("load.rate"),
            f"{rate:,.0f}/s is more than the client can send with {load.connections:,} "
            f"connection(s) x pipeline {load.pipeline} (at most {highest:,.0f}/s: each "
            f"connection takes up to --pipeline requests per {DISPATCH_PERIOD_NS // 1000} us "
            "tick); raise --connections or --pipeline, or lower --rate",
        )
    if rate / load.processes < MIN_RATE_PER_WORKER:
        raise ConfigError(
            origin("load.rate"),
            f"{rate:g}/s over {load.processes} process(es) is below "
            f"{MIN_RATE_PER_WORKER:g}/s per process, the lowest rate the schedule counts",
        )


def check_value_protocol(
    targets: tuple[TargetConfig, ...], largest_bytes: int, origin: Callable[[str], str]
) -> None:
    """Refuse values longer than a target's protocol can frame (``MAX_VALUE_BYTES``; no
    target yet means the throwaway memcached, text protocol).

    Raises:
        ConfigError: naming --value-size (or its file key), the protocol and its limit.
    """
    protocols = {t.protocol for t in targets} or {"memcache-text"}
    for protocol in sorted(protocols):
        limit = MAX_VALUE_BYTES.get(protocol)
        if limit is not None and largest_bytes > limit:
            raise ConfigError(
                origin("workload.value_size"),
                f"values of up to {largest_bytes:,} bytes do not fit {protocol}, whose "
                f"length field takes at most {limit:,} bytes",
            )
