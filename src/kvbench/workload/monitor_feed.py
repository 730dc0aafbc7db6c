"""A MONITOR capture's replay: each captured client's commands, in order, on its own lane.

``MonitorPlanner`` walks the capture (workload/monitor.py) once and decides, per command,
what is sent on its client's connection:

- every client that sends anything gets a connection of its own (its index: the order
  clients first send), so a client's commands go in captured order and its connection
  state (the selected database, a transaction, WATCH) is its own;
- a command the replay does not send is counted by reason (``monitor.skip_reason``);
- the database: the capture writes each command's database; a connection whose client
  ran a command in another database than the connection's is sent ``SELECT db`` first
  (counted as ``selects_inserted``): a client that selected before the capture began,
  or an older server that wrote SELECT's line before running it. Captured SELECTs are
  sent as they are;
- MULTI ... EXEC (or DISCARD) is sent as captured, on its client's connection, so the
  server runs it as the unit it was (Redis 7 writes the queued commands when EXEC runs
  them, between MULTI and EXEC). An EXEC or DISCARD whose MULTI is not in the capture
  (or the slice) is skipped; a transaction the capture or slice cuts off (MULTI and no
  EXEC) is left out whole, its commands counted as skipped: queued and never executed,
  they would be replies without work;
- ``--value-size``: the value arguments of the writes in ``VALUE_ARGS`` are resent at
  that size (bytes of one seeded random blob); keys and every other argument as captured.

The planner runs in the CLI before the run (``scan_capture``: the clients and command
names, so the run opens one connection per client and records per name) and in each
worker process (``MonitorFeed.prepare``), which keeps only its share of the clients'
requests, rendered once by the arbitrary-command encoder (protocols/commands.py) into
whole RESP requests. The compiled pump sends them as they are, recorded by name, and
reads any RESP value in reply (engine/fastpath.py), as the Python driver does. Memory:
the requests of this worker's clients, about the size of their lines in the capture.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kvbench.config.replay import ReplayConfig
from kvbench.protocols.base import Op
from kvbench.protocols.commands import Request, resp_template
from kvbench.units import share_out
from kvbench.workload.chunk import Chunk, Held
from kvbench.workload.commands import COMMAND_BASE
from kvbench.workload.monitor import MonitorCommand, MonitorReader, skip_reason
from kvbench.workload.trace_profile import TraceProfile
from kvbench.workload.trace_source import ReplayCounts


def _every_other(first: int) -> Callable[[int], list[int]]:
    return lambda n: list(range(first, n, 2))


def _from(first: int) -> Callable[[int], list[int]]:
    return lambda n: list(range(first, n))


def _at(index: int) -> Callable[[int], list[int]]:
    return lambda n: [index] if n > index else []


# The value arguments of the writes whose values ``--value-size`` resizes, by the number of
# arguments (command name included) -> their indexes (redis.io command reference).
VALUE_ARGS: dict[bytes, Callable[[int], list[int]]] = {
    b"set": _at(2),
    b"setnx": _at(2),
    b"getset": _at(2),
    b"append": _at(2),
    b"setex": _at(3),
    b"psetex": _at(3),
    b"mset": _every_other(2),
    b"msetnx": _every_other(2),
    b"hset": _every_other(3),
    b"hmset": _every_other(3),
    b"hsetnx": _at(3),
    b"lpush": _from(2),
    b"rpush": _from(2),
    b"lpushx": _from(2),
    b"rpushx": _from(2),
    b"lset": _at(3),
    b"linsert": _at(4),
}
_SELECT = b"select"


@dataclass(slots=True)
class _Client:
    """One captured client as the planner follows it."""

    index: int
    db: int
    kept: bool
    sent: int = 0  # commands queued for it (kept or not)
    multi_at: int | None = None  # ``sent`` at its open transaction's MULTI, if any
    requests: list[Request] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    times_s: list[float] = field(default_factory=list)


@dataclass(slots=True)
class MonitorCounts(ReplayCounts):
    """What the planner did (the whole capture's, but ``requests``: the kept clients'): a
    replay's counts (a capture's keys and TTLs are sent as captured: none is clamped),
    with the capture's profile (rows by command name, per second, the value sizes of the
    writes) and what only a capture has."""

    profile: TraceProfile = field(default_factory=TraceProfile)
    selects_inserted: int = 0
    clients: int = 0
    truncated: int = 0
    by_script: Counter[str] = field(default_factory=Counter)


class MonitorPlanner:
    """Decides what a replay of a capture sends (the module docstring's rules).

    Args:
        config: the replay section (its slice and ``value_size_bytes``).
        names: the command names results are recorded under, in order (None: learn them:
            ``names`` then lists every name sent).
        keep: whether the requests of the client of this index are kept (this worker's).
        seed: seeds the blob resized values are cut from.
    """

    def __init__(
        self,
        config: ReplayConfig,
        names: tuple[str, ...] | None,
        keep: Callable[[int], bool],
        seed: int = 0,
    ) -> None:
        self.config = config
        self.names: list[str] = list(names or ())
        self._learn = names is None
        self._keep = keep
        self.clients: dict[bytes, _Client] = {}
        self.counts = MonitorCounts()
        self._names_of: dict[bytes, str] = {}  # a command word as captured -> its name
        self._codes: dict[bytes, int] = {}  # ... -> the code it is recorded under
        size = config.value_size_bytes
        self._value = random.Random(seed).randbytes(size) if size is not None else None

    def run(self, reader: MonitorReader) -> None:
        """Walk the capture's slice; ``clients`` then holds what each client sends."""
        config, counts = self.config, self.counts
        for command in reader.commands():
            if config.from_s is not None and command.time_s < config.from_s:
                continue
            if config.to_s is not None and command.time_s >= config.to_s:
                break
            if config.limit is not None and counts.rows >= config.limit:
                break
            self._add(command)
        counts.lines_read = reader.lines_read
        counts.truncated = reader.truncated
        for client in self.clients.values():
            if client.multi_at is not None:  # cut off: MULTI, and no EXEC in the slice
                dropped = client.sent - client.multi_at
                counts.skipped["in a transaction the capture cuts off"] += dropped
                if client.kept:
                    counts.requests -= dropped
                    del client.requests[client.multi_at :], client.codes[client.multi_at :]
                    del client.times_s[client.multi_at :]

    def _add(self, command: MonitorCommand) -> None:
        counts = self.counts
        counts.rows += 1
        word = command.argv[0]
        counts.profile.add_one(self._names_of.get(word) or self._name(word), command.time_s)
        reason = skip_reason(command)
        client = self.clients.get(command.client)
        name = word.lower()
        unopened = client is None or client.multi_at is None
        if reason is None and name in (b"exec", b"discard") and unopened:
            reason = f"{name.decode()} without its MULTI in the capture"
        if reason is not None:
            counts.skipped[reason] += 1
            if command.client == b"lua":  # the server runs it again, for the EVAL replayed
                counts.by_script[self._names_of[word]] += 1
            return
        if client is None:
            index = len(self.clients)
            client = _Client(index, 0, self._keep(index))
            self.clients[command.client] = client
            counts.clients += 1
        if name == _SELECT:
            client.db = _db(command)
        elif command.db != client.db:
            counts.selects_inserted += 1
            client.db = command.db
            self._send(client, (b"SELECT", b"%d" % command.db), command.time_s)
        if name == b"multi" and client.multi_at is None:
            client.multi_at = client.sent
        elif name in (b"exec", b"discard"):
            client.multi_at = None
        self._send(client, self._resized(command.argv), command.time_s)

    def _send(self, client: _Client, argv: tuple[bytes, ...], time_s: float) -> None:
        """Queue ``argv`` on ``client``'s connection (rendered only when kept)."""
        code = self._codes.get(argv[0])
        if code is None:
            code = self._code(argv[0])
        client.sent += 1
        if not client.kept:
            return
        self.counts.requests += 1
        client.requests.append(resp_template(argv).render((), None))
        client.codes.append(code)
        client.times_s.append(time_s)

    def _name(self, word: bytes) -> str:
        """The name results keep a command word under (lowercased), remembered."""
        name = self._names_of[word] = word.decode("ascii", "backslashreplace").lower()
        return name

    def _code(self, word: bytes) -> int:
        """The code a command word's requests are recorded under, remembered.

        Raises:
            RuntimeError: the names were given and this one is not among them.
        """
        name = self._names_of.get(word) or self._name(word)
        if name not in self.names:
            if not self._learn:
                raise RuntimeError(f"{name}: a command the scan before the run did not see")
            self.names.append(name)
        code = self._codes[word] = COMMAND_BASE + self.names.index(name)
        return code

    def _resized(self, argv: tuple[bytes, ...]) -> tuple[bytes, ...]:
        """``argv`` with its value arguments at ``--value-size`` (as captured without)."""
        where = VALUE_ARGS.get(argv[0].lower())
        if where is None:
            return argv
        indexes = where(len(argv))
        sizes = self.counts.profile.value_sizes
        for i in indexes:
            sizes[len(argv[i])] += 1
        if self._value is None or not indexes:
            return argv
        resized = list(argv)
        for i in indexes:
            resized[i] = self._value
        return tuple(resized)


def _db(command: MonitorCommand) -> int:
    """The database a SELECT line leaves its client in: its argument (an older server
    wrote the line before running it), or the line's database if that is no number."""
    try:
        return int(command.argv[1])
    except (IndexError, ValueError):
        return command.db


def scan_capture(config: ReplayConfig) -> MonitorPlanner:
    """The planner run over the whole capture keeping nothing: its ``names`` and
    ``counts.clients`` are the run's command names and connections.

    Raises:
        ConfigError: a bad line (its file and line number), or the file cannot be read.
    """
    planner = MonitorPlanner(config, None, lambda index: False)
    planner.run(MonitorReader(Path(config.path)))
    return planner


class MonitorLane:
    """One captured client's requests: a request source as a cache trace's ``Lane``
    (workload/trace_source.py), one chunk long."""

    def __init__(self, feed: MonitorFeed, index: int) -> None:
        self.feed = feed
        self.index = index
        self.taken = 0  # requests of the chunk before the current one (the last handed out)
        self._current_rows = 0
        self.holders: list[Held] = []
        self._offsets_ns: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._waiting: tuple[list[Request], list[int], npt.NDArray[np.int64]] | None = None

    @property
    def empty(self) -> bool:
        """Never: a lane ends instead (``next_chunk``)."""
        return False

    def load(
        self, requests: list[Request], codes: list[int], offsets_ns: npt.NDArray[np.int64]
    ) -> None:
        """Hold ``requests`` (recorded under ``codes``) to be sent (the feed, preparing)."""
        self._waiting = (requests, codes, offsets_ns)

    def hold(self, holder: Held) -> None:
        """``holder`` takes this lane's chunk (its unsent requests are pending)."""
        self.holders.append(holder)

    def pack(self) -> bool:
        """Lists only: a capture's requests are rendered whole, each a bytes object."""
        return False

    def pending(self) -> int:
        """Requests this lane holds and has not sent."""
        waiting = len(self._waiting[0]) if self._waiting is not None else 0
        return waiting + sum(holder.size - holder.pos for holder in self.holders)

    def next_chunk(self) -> Chunk | None:
        """The held requests, the first time; None once they have been handed out."""
        self.taken += self._current_rows
        self._current_rows = 0
        if self._waiting is None:
            return None
        requests, codes, self._offsets_ns = self._waiting
        self._waiting = None
        n = self._current_rows = len(requests)
        return Chunk(
            [int(Op.COMMAND)] * n, codes, requests, [None] * n, None, None, self._offsets_ns
        )

    def _offsets(self) -> npt.NDArray[np.int64]:
        return self._waiting[2] if self._waiting is not None else self._offsets_ns

    def offsets(self, first: int, stop: int) -> list[int]:
        """Timed replays: the send offsets of this lane's requests ``first .. stop - 1``
        (fewer at its end)."""
        out: list[int] = self._offsets()[first:stop].tolist()
        return out

    def due_count(self, offset_ns: int) -> int:
        """Timed replays: how many of this lane's requests are due by ``offset_ns``."""
        return int(np.searchsorted(self._offsets(), offset_ns, side="right"))


class MonitorFeed:
    """A capture's requests for one worker process, one lane per connection (the shape
    of ``ReplayFeed``: workload/trace_source.py).

    Args:
        config: the replay section (``commands`` and ``clients`` filled by the scan).
        worker_index, n_workers: this process's share of the clients (a block of them, as
            ``share_out`` shares the connections).
        n_lanes: this process's connections.
        seed: seeds resized values.
    """

    def __init__(
        self, config: ReplayConfig, worker_index: int, n_workers: int, n_lanes: int, seed: int
    ) -> None:
        self.config = config
        shares = share_out(config.clients, n_workers)
        self._first = sum(shares[:worker_index])
        if shares[worker_index] != n_lanes:
            raise ValueError(f"{n_lanes} connections for {shares[worker_index]} clients")
        self.lanes = [MonitorLane(self, i) for i in range(n_lanes)]
        self._worker_index = worker_index
        self._seed = seed
        self.counts = MonitorCounts()
        self.done = False

    def prepare(self) -> None:
        """Read the capture; load each of this worker's clients' requests in its lane.

        Raises:
            ConfigError: a bad line (nothing is sent).
        """
        first, stop = self._first, self._first + len(self.lanes)
        planner = MonitorPlanner(
            self.config, self.config.commands, lambda index: first <= index < stop, self._seed
        )
        planner.run(MonitorReader(Path(self.config.path)))
        self.counts = planner.counts
        t0 = (
            self.config.from_s if self.config.from_s is not None else planner.counts.profile.first_s
        )
        speed = self.config.speed
        for client in planner.clients.values():
            if not client.kept:
                continue
            offsets = np.zeros(0, dtype=np.int64)
            if speed is not None and t0 is not None:
                times = np.asarray(client.times_s, dtype=np.float64)
                offsets = np.round((times - t0) * (1e9 / speed)).astype(np.int64)
            self.lanes[client.index - first].load(client.requests, client.codes, offsets)
        self.done = True

    def close(self) -> None:
        """Nothing to remove (the requests are in memory)."""

    def remaining(self) -> int:
        """Requests in the lanes not sent yet."""
        return sum(lane.pending() for lane in self.lanes)

    def exhausted(self) -> bool:
        """Every request of the replay was handed out."""
        return self.done and not self.remaining()

    def report(self) -> dict[str, Any]:
        """What this worker's feed saw and did, in a cache trace's report shape
        (results/trace.py): the capture's figures from worker 0 alone (every worker reads
        the whole capture), the requests queued from each."""
        counts = self.counts
        if self._worker_index != 0:
            counts = MonitorCounts(requests=counts.requests)
        profile = counts.profile
        shown = {
            "rows": profile.rows,
            "ops": dict(profile.ops),
            "per_second": sorted(profile.per_second.items()),
            "key_sizes": [],
            "value_sizes": sorted(profile.value_sizes.items()),
            "ttls_s": [],
            "whole_seconds": False,
        }
        if profile.first_s is not None:
            shown["first_time_s"] = profile.first_s
            shown["last_time_s"] = profile.last_s
        return {
            "profile": shown,
            "counts": {
                **counts.to_dict(),
                "selects_inserted": counts.selects_inserted,
                "clients": counts.clients,
                "truncated_lines": counts.truncated,
                "by_script": dict(counts.by_script),
            },
            # Each command is sent as itself (the page lists a name sent as "skipped").
            "mapping": {name: name for name in self.config.commands},
        }
