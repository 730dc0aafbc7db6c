"""Limits of the host and the server a run must fit, checked before its load starts.

Open files (``RLIMIT_NOFILE``: the soft limit is raised to the hard one when the
connections need it, in this process, which every local worker inherits), local ports
to one server, memory for what every worker builds (the value blob, the key table), and
the largest value the server stores (memcached ``item_size_max``, Redis
``proto-max-bulk-len``, asked on a side connection). Each limit a run cannot fit is one
``ConfigError`` naming the flag and the limit, before any worker starts. The limits the
config alone tells are config/limits.py's.
"""

from __future__ import annotations

import contextlib
import math
import resource
from collections.abc import Callable
from pathlib import Path

import psutil

from kvbench.config.limits import check_rate, connections_per_server, max_connection_slots
from kvbench.config.model import RunConfig, TargetConfig
from kvbench.config.workload_fields import longest_key
from kvbench.errors import ConfigError, TargetUnreachable
from kvbench.runner import probe

# Files a worker holds beside its connections: its pipes to the coordinator, the event
# loop's epoll and self-pipe, the timerfd, the stats side connection, the interpreter's
# own (a few dozen in all; measured: 23 in a worker with no connection).
WORKER_SPARE_FILES = 64
# Files the coordinator holds per worker (its two pipe ends, the process sentinel).
COORDINATOR_FILES_PER_WORKER = 4
# The value blob every worker builds is twice the largest value plus one slice table
# (workload/values.py ``build_value_table``: ``max_bytes * 2 + VALUE_TABLE_SIZE``), and
# numpy's array of it is copied into bytes while it is built: two blobs at the peak.
VALUE_TABLE_SIZE = 1024
BLOB_COPIES = 2
# A key while the table is built, at its peak (workload/keys.py ``KeyTable.packed``):
# its bytes twice (a block's join, then the whole blob's) and the lengths and
# bounds (int64 while they are worked out, uint32 kept): 70 bytes a key of 16, measured
# (so 38 beside the two copies).
# Random and float-counter keys are made as bytes objects in a list first (and a set, to
# draw again on a collision): 146 bytes a key of 16, measured.
KEY_BUILD_BYTES = 38
KEY_OBJECTS_BUILD_BYTES = 114
# What a worker takes beside its tables, measured at 2 workers and 100,000 keys
# (bench/rss.py, docs/benchmarks.md): its private memory, 18 MB of which 2.4 MB were the
# key table (the rest is its share of the interpreter, numpy, uvloop and the engine); and
# per connection, its worker's RSS grew 8.5 KiB (bench/connections.py, 50 -> 10,000).
WORKER_BASE_BYTES = 20 << 20
CONNECTION_BYTES = 9 << 10
# A worker maps this much more address space than the coordinator it is forked like
# (VmSize 272 MB against 117 MB: uvloop, asyncio and the engine, thread stacks, malloc's
# arenas): under ``ulimit -v`` that is gone before its tables (was: 13,000,000 keys passed
# the check, then the worker ran out of memory building its table).
WORKER_EXTRA_ADDRESS_BYTES = 160 << 20
# The least each server may be configured to store (memcached.c
# ITEM_SIZE_MAX_LOWER_LIMIT; Redis config.c proto-max-bulk-len's minimum): values up to
# this need no question to the server, and most runs ask none.
SMALLEST_VALUE_LIMIT = {"memcache": 1024, "redis": 1024 * 1024}
# Redis's bulk string limit when CONFIG GET is refused: its default (redis.conf,
# proto-max-bulk-len 512mb).
REDIS_DEFAULT_MAX_BULK_BYTES = 512 * 1024 * 1024
# Where cgroups are mounted, and a limit this large is none (cgroup v1 says "no limit" as
# the largest page-aligned 64-bit number).
CGROUP_ROOT = Path("/sys/fs/cgroup")
UNLIMITED_CGROUP_BYTES = 1 << 62
# (limit, usage, the inactive file cache's line in memory.stat) per cgroup version
_CGROUP_V2_FILES = ("memory.max", "memory.current", "inactive_file")
_CGROUP_V1_FILES = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
# The local port range Linux hands out to connect() (net.ipv4.ip_local_port_range).
PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")

FLAGS = {
    "load.rate": "--rate",
    "load.connections": "--connections",
    "load.processes": "--processes",
    "workload.value_size": "--value-size",
    "workload.keys": "--keys",
}


def _flag(key: str) -> str:
    return FLAGS.get(key, key)


def check_limits(config: RunConfig, *, server: bool = True) -> None:
    """Everything a run must fit before it starts: the rate (again: a sweep's levels
    change it), open files, local ports, memory, and (``server``) the servers' value
    limits.

    Raises:
        ConfigError: one line naming the flag, the limit and how to move it.
    """
    check_rate(config, _flag)
    if config.load.cluster is None:  # Dask workers run on other hosts, with their limits
        raise_open_files(open_files_needed(config), config.load.processes)
        check_memory(config, *memory_room(), process_room=address_space_room())
    check_local_ports(config, local_port_range())
    if server:
        check_server_values(config)


# -- open files ------------------------------------------------------------------------


def open_files_needed(config: RunConfig) -> int:
    """Open files the busiest local process of the run needs: a worker's share of the
    connections and its own files, or the coordinator's, whichever is more."""
    load = config.load
    coordinator = WORKER_SPARE_FILES + COORDINATOR_FILES_PER_WORKER * load.processes
    return max(worker_connections(config) + WORKER_SPARE_FILES, coordinator)


def worker_connections(config: RunConfig) -> int:
    """The connections the busiest worker opens: its share of every server's."""
    connections = max_connection_slots(config) // config.load.pipeline
    return math.ceil(connections / config.load.processes)


def raise_open_files(needed: int, processes: int) -> None:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit when ``needed`` is
    above it (workers started after this inherit it).

    Raises:
        ConfigError: ``needed`` is above the hard limit too.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if needed <= soft or soft == resource.RLIM_INFINITY:
        return
    if hard == resource.RLIM_INFINITY or needed <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return
    raise ConfigError(
        "--connections",
        f"each of the {processes} worker process(es) would hold {needed - WORKER_SPARE_FILES:,} "
        f"connections ({needed:,} open files with its own), above this shell's limit of "
        f"{hard:,} open files (ulimit -Hn): raise it (ulimit -n {needed}, as root or in "
        "/etc/security/limits.conf or systemd's LimitNOFILE=), or give more --processes or "
        "fewer --connections",
    )


# -- local ports -----------------------------------------------------------------------


def local_port_range() -> tuple[int, int] | None:
    """The local ports connect() picks from (Linux), or None where it cannot be read."""
    try:
        low, high = PORT_RANGE_FILE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return None


def check_local_ports(config: RunConfig, ports: tuple[int, int] | None) -> None:
    """Each connection to one server takes a local port of its own (a TCP connection is
    its four addresses; connections to other servers may reuse the port): more
    connections to one server than the range holds cannot open.

    Raises:
        ConfigError: naming --connections, the range and how to widen it.
    """
    if ports is None or not any(t.socket_path is None for t in config.targets):
        return
    count = ports[1] - ports[0] + 1
    per_server = connections_per_server(config)
    if per_server > count:
        raise ConfigError(
            "--connections",
            f"{per_server:,} connections to one server need as many local "
            f"ports; this host gives {count:,} (net.ipv4.ip_local_port_range {ports[0]} "
            f"{ports[1]}): widen it (sysctl -w net.ipv4.ip_local_port_range='1024 65535'), "
            "share them over more server addresses (127.0.0.2, another port), "
            "or give fewer --connections",
        )


# -- memory ----------------------------------------------------------------------------


def worker_memory_bytes(config: RunConfig) -> tuple[int, int]:
    """What one worker allocates before its first request: (value blob at its peak, key
    table while it is built)."""
    workload = config.workload
    blob = BLOB_COPIES * (2 * workload.value_size_max_bytes + VALUE_TABLE_SIZE)
    # (``latest`` adds room for the keys its sets insert past the records)
    count = workload.keys + workload.insert_keys
    per_key = KEY_BUILD_BYTES if workload.key_template == "number" else KEY_OBJECTS_BUILD_BYTES
    keys = count * (2 * longest_key(workload)[0] + per_key)
    return blob, keys


def check_memory(
    config: RunConfig,
    available_bytes: int,
    where: str = "of memory is available",
    process_room: int | None = None,
) -> None:
    """Refuse a run whose workers would allocate more than the host has available (all
    of them together), or than one process may map (``process_room``).

    Args:
        available_bytes: what the workers may take together (``memory_room``), ``where``
            saying what sets it.
        process_room: what one worker may still map under its address-space limit
            (``address_space_room``), or None: no such limit.

    Raises:
        ConfigError: naming --value-size or --keys (the larger part), or --processes
            where each worker's own memory is the larger.
    """
    blob, keys = worker_memory_bytes(config)
    processes = config.load.processes
    own = WORKER_BASE_BYTES + worker_connections(config) * CONNECTION_BYTES
    needed = (blob + keys + own) * processes
    if process_room is not None and blob + keys > process_room:
        # (one worker alone does not fit: how many there are changes nothing)
        each, room = "in each worker process", f"{_size(process_room)} is left to one process"
        room += " under the address-space limit (ulimit -v)"
    elif needed <= available_bytes:
        return
    elif own >= blob + keys:  # (the tables are small: how many workers there are)
        raise ConfigError(
            _flag("load.processes"),
            f"{processes} worker process(es) need {_size(needed)} in all (each about "
            f"{_size(WORKER_BASE_BYTES)} of its own, {_size(CONNECTION_BYTES)} per "
            f"connection, and its tables); {_size(available_bytes)} {where}",
        )
    else:
        each = f"in each of {processes} worker process(es) ({_size(needed)} in all"
        each += " while built" if blob >= keys else ""
        each += f", with each worker's own {_size(own)})"
        room = f"{_size(available_bytes)} {where}"
    if blob >= keys:
        largest = config.workload.value_size_max_bytes
        raise ConfigError(
            _flag("workload.value_size"),
            f"values of up to {_size(largest)} need a {_size(blob // BLOB_COPIES)} value blob "
            f"{each}; {room}",
        )
    raise ConfigError(
        _flag("workload.keys"),
        f"{config.workload.keys:,} keys take {_size(keys)} to build the key table {each}; {room}",
    )


def memory_room() -> tuple[int, str]:
    """What the run's workers may take together, and what sets it: the host's available
    memory, or less left under this process's cgroup memory limit (a container's: there
    the host's figure is not the one the kernel's out-of-memory killer holds it to)."""
    available = psutil.virtual_memory().available
    left = cgroup_memory_left()
    if left is not None and left < available:
        return left, "is left under the cgroup's memory limit"
    return available, "of memory is available"


def cgroup_memory_left(
    proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = CGROUP_ROOT
) -> int | None:
    """What this process's cgroup may still charge before its memory limit, the least over
    the group and its ancestors (a parent's limit holds its children too), by cgroup v2
    (``memory.max``) or v1 (``memory.limit_in_bytes``); None when no limit can be read.

    Its usage is counted as the kernel's out-of-memory killer sees it, without the inactive
    file cache it reclaims first (``memory.stat``; the working set docker and the kubelet
    show): counted whole, a container's page cache refused runs that fit."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    lefts: list[int] = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":
            files, base = _CGROUP_V2_FILES, root
        elif "memory" in controllers.split(","):
            files, base = _CGROUP_V1_FILES, root / "memory"
        else:
            continue
        group = base / path.lstrip("/")
        if not group.is_dir():  # a cgroup namespace: the group is the mount's root
            group = base
        while True:
            left = _cgroup_left(group, *files)
            if left is not None:
                lefts.append(left)
            if group == base or group == group.parent:
                break
            group = group.parent
    return min(lefts) if lefts else None


def _cgroup_left(group: Path, limit_file: str, usage_file: str, inactive: str) -> int | None:
    """``group``'s limit less its working set (usage less inactive file cache), or None:
    no limit, or none readable."""
    try:
        limit = (group / limit_file).read_text().strip()
        if limit == "max" or int(limit) >= UNLIMITED_CGROUP_BYTES:
            return None
        usage = int((group / usage_file).read_text())
    except (OSError, ValueError):
        return None
    cache = 0
    with contextlib.suppress(OSError, ValueError):
        for line in (group / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == inactive:
                cache = int(value)
                break
    return max(0, int(limit) - max(0, usage - cache))


def address_space_room() -> int | None:
    """What one worker may still map for its tables under the address-space limit
    (``ulimit -v``): the limit less this process's mappings now (a worker is forked with
    the same modules) and what a worker maps beyond them (``WORKER_EXTRA_ADDRESS_BYTES``);
    None when there is no such limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    mapped = int(psutil.Process().memory_info().vms) + WORKER_EXTRA_ADDRESS_BYTES
    return max(0, soft - mapped)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,} bytes"


# -- the server's own limits -----------------------------------------------------------


def check_server_values(config: RunConfig) -> None:
    """Refuse values larger than a server stores: memcached's ``item_size_max`` (``-I``;
    a larger item is ``SERVER_ERROR object too large for cache``), Redis's
    ``proto-max-bulk-len`` (its default when CONFIG GET is refused). Only values above
    the least a server may be set to store (``SMALLEST_VALUE_LIMIT``) are asked about. A
    server that gives no settings (a proxy) is not checked; an unreachable one is the
    preflight's to report. ``--allow-oversize`` lets them through: the server's
    refusals are then what is measured.

    Raises:
        ConfigError: naming --value-size, the server and its limit.
    """
    largest = config.workload.value_size_max_bytes
    if config.workload.allow_oversize:  # the refusals are the experiment
        return
    timeout_s = config.load.timeout_ns / 1e9
    for target in config.targets:
        if largest <= SMALLEST_VALUE_LIMIT.get(target.family, 0):
            continue
        limit = _value_limit(target, timeout_s)
        if limit is not None and largest > limit[0]:
            raise ConfigError(
                _flag("workload.value_size"),
                f"values of up to {largest:,} bytes are larger than {target.url} stores: "
                f"{limit[1]} is {limit[0]:,} bytes (--allow-oversize sends them anyway, "
                "each an error reply)",
            )


def _value_limit(target: TargetConfig, timeout_s: float) -> tuple[int, str] | None:
    """(the largest value ``target`` stores, what says so), or None when unknown."""
    if target.family not in SMALLEST_VALUE_LIMIT or target.cluster:
        return None
    try:
        settings = probe.fetch_settings(target, timeout_s)
    except TargetUnreachable:
        return None
    read: Callable[[str], int | None] = lambda name: _number(settings.get(name))  # noqa: E731
    if target.family == "memcache":
        size = read("item_size_max")
        return (size, "its item_size_max (memcached -I)") if size else None
    size = read("proto-max-bulk-len")
    if size:
        return size, "its proto-max-bulk-len"
    if "config_error" in settings:
        return REDIS_DEFAULT_MAX_BULK_BYTES, "Redis's default proto-max-bulk-len (CONFIG refused)"
    return None


def _number(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
