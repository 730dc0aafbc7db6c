"""The run configuration: frozen, slotted dataclasses built once and passed down.

Field names equal TOML keys; sections mirror the packages: [target], [workload], [load],
[report]. Quantities carry their unit in their name. Nothing here reads the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvbench.config.replay import ReplayConfig

# The op names a workload may weight, in the order Op numbers them in protocols.base.
WORKLOAD_OPS = ("get", "set", "delete", "incr", "mget")
# A read-modify-write: a get of a key, then a set of it, on one connection, timed as one
# op (YCSB's READ-MODIFY-WRITE); weighted in the ratio like the ops above.
RMW = "rmw"
# The shortest snapshot period (--interval): each one is a message from every worker and a
# live line; shorter ones measure the tool, not the server.
MIN_INTERVAL_NS = 10_000_000


@dataclass(frozen=True, slots=True)
class TargetConfig:
    """One server to load, parsed from its URL.

    Attributes:
        url: the URL as given, credentials masked (safe to print and store).
        scheme: the URL scheme (``memcached``, ``memcached+binary``, ``redis`` ...).
        protocol: the codec registry name (``memcache-text``, ``resp2`` ...).
        host, port: where to connect (an IPv6 address without its URL brackets); for a
            Unix socket, ``localhost`` and 0.
        socket_path: the Unix socket to connect to (``memcached+unix:///path``), or None.
        db: Redis database number (SELECT), 0 by default.
        username, password: Redis AUTH credentials; never stored or printed.
        path: the rest of the URL path (queue name, HTTP path), without the leading slash.
        tls: connect with TLS (``rediss://``).
        tls_ca: CA bundle to verify the server with (``?ca=PATH``); None: system CAs.
        tls_insecure: do not verify the server's certificate (``?insecure=1``).
        tls_cert, tls_key: client certificate and key (``?cert=PATH&key=PATH``).
        stats_url: an HTTP gateway's backing memcached (``?stats=memcached://H:P``), whose
            stats stand in for the gateway's in samples and reconciliation; None: no stats.
        pipelining: an HTTP gateway may take ``--pipeline`` > 1 (``?pipeline=1``).
        cluster: a node of a Redis Cluster (``redis+cluster://``): keys go to the master
            serving their hash slot, redirects are followed.
    """

    url: str
    scheme: str
    protocol: str
    host: str
    port: int
    db: int = 0
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    path: str = ""
    tls: bool = False
    tls_ca: str | None = None
    tls_insecure: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None
    stats_url: str | None = None
    pipelining: bool = False
    cluster: bool = False
    socket_path: str | None = None

    @property
    def address(self) -> str:
        """Where the server listens, as people write it: ``host:port``, ``[::1]:11211``, or
        the socket's path."""
        if self.socket_path is not None:
            return self.socket_path
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def family(self) -> str:
        """``memcache``, ``redis`` or ``http``: which server's stats and key rules apply."""
        if self.protocol.startswith("resp"):
            return "redis"
        return "http" if self.protocol.startswith("http") else "memcache"


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """What requests to send.

    Attributes:
        keys: keyspace size: keys are ``key_prefix`` + a number in [0, keys).
        key_prefix: prepended to every key.
        key_pattern: how keys are picked: ``uniform``, ``sequential``, ``zipf`` or
            ``gaussian``.
        zipf_exponent: ``zipf``: P(rank r) is proportional to 1 / r**s over the keyspace.
        gaussian_mean, gaussian_stddev: ``gaussian``: in keys (absolute); None means
            keys / 2 and keys / 6.
        key_template: ``number`` (prefix + number), ``random`` (prefix + random URL-safe
            characters) or ``float-counter`` (prefix + str(random float) + number).
        key_size: every key is exactly this many bytes (``number``: zero-padded;
            ``random``: required), or None.
        key_size_model: ``fb-etc``: each key's size is drawn from Facebook's ETC model
            (workload/models.py), the key zero-padded to it; None: ``key_size`` rules.
        insert_keys: ``latest``: keys past ``keys`` that sets insert, newest first in
            the reads' favour (YCSB's workload D); ``keys`` are the records preloaded.
        insert_lag: ``latest``: requests between an insert and the first read that may
            pick its key (a worker's connections x pipeline: what it may have in flight).
        value_size_min_bytes, value_size_max_bytes: value sizes, uniform in the range.
        value_size_weights: (bytes, weight) pairs; when given, sizes follow these weights
            and min/max are the smallest and largest size.
        value_size_model: ``fb-etc``: sizes drawn from Facebook's ETC model, 0 to
            ``value_size_max_bytes``; None: the min/max/weights above.
        value_kind: ``random``, ``compressible`` or ``timestamp`` (8-byte big-endian ms).
        ratio: weight per op name (``get``, ``set``, ``delete``, ``incr``, ``mget``,
            ``rmw``).
        commands: (command template, weight) pairs (``--command``; config/commands.py),
            drawn in the same mix as ``ratio``'s ops; results are kept per command name.
        op_order: ``random``: each op drawn with its weight; ``cycle``: the ops of
            ``ratio`` and ``commands`` in turn, each its weight times in a row (1:10 is a
            set then ten gets), as memtier_benchmark sends them (workload/mix.py).
        multiget_keys: keys per ``mget`` op.
        ttl_s: expiry sent with stores (0: none); with ``ttl_max_s`` the low end of a
            range from which each connection draws its own ttl.
        ttl_max_s: the high end of the ttl range, or None (a fixed ``ttl_s``).
        preload: store every key once before measuring, so gets can hit.
        verify: values derived from (key, version); every get hit is checked.
        set_then_get: every op is a set of a key then a get of that same key on the same
            connection (``--ratio set-then-get``); each connection draws from keys of its
            own, so the get must return the set's value: a miss is an error, and under
            ``verify`` the value must be exactly the one just set.
        seed: the run's seed; worker i uses a seed derived from it and i.
        placement: how keys are placed on several servers: ``ketama`` (twemproxy) or
            ``modula-crc32`` (python-memcached).
        key_span: ``sequential``: each worker walks only this many keys from its start,
            wrapping (a preset's get step reads exactly the keys its set step wrote); None:
            the whole keyspace.
        verify_window_ms: ``--verify`` of timestamp values: a value must be a time in
            [low, high] ms since the epoch (when the set step ran); None: any time up to
            the check.
        allow_oversize: send values larger than the server stores (``--allow-oversize``):
            each such store is an error reply; without it such a run is refused
            (runner/limits.py).
    """

    keys: int = 100_000
    key_prefix: str = "kvbench:"
    key_pattern: str = "uniform"
    zipf_exponent: float = 0.99
    gaussian_mean: float | None = None
    gaussian_stddev: float | None = None
    key_template: str = "number"
    key_size: int | None = None
    key_size_model: str | None = None
    insert_keys: int = 0
    insert_lag: int = 0
    value_size_min_bytes: int = 100
    value_size_max_bytes: int = 100
    value_size_weights: tuple[tuple[int, int], ...] = ()
    value_size_model: str | None = None
    value_kind: str = "random"
    ratio: tuple[tuple[str, int], ...] = (("set", 1), ("get", 10))
    commands: tuple[tuple[str, int], ...] = ()
    op_order: str = "random"
    multiget_keys: int = 10
    ttl_s: int = 0
    ttl_max_s: int | None = None
    preload: bool = False
    verify: bool = False
    set_then_get: bool = False
    seed: int = 0
    placement: str = "ketama"
    key_span: int | None = None
    verify_window_ms: tuple[int, int] | None = None
    allow_oversize: bool = False

    @property
    def ttl_range(self) -> bool:
        """Each connection draws its own ttl (``--ttl low-high``, low < high)."""
        return self.ttl_max_s is not None and self.ttl_max_s != self.ttl_s

    @property
    def rmw(self) -> bool:
        """The ratio has read-modify-writes (``rmw``: a get and a set timed as one op)."""
        return any(name == RMW for name, _ in self.ratio)


@dataclass(frozen=True, slots=True)
class LoadConfig:
    """How hard, how long, and how requests are issued.

    Attributes:
        connections: total connections per target, shared out across processes.
        processes: worker processes (one event loop each).
        pipeline: requests in flight per connection (closed loop).
        duration_ns: measured window length; None when ``requests`` bounds the run.
        requests: exact number of requests to send in the measured phase, or None.
        warmup_ns: load before the window; excluded from every figure.
        timeout_ns: a request unanswered this long counts as ``timeout``.
        connect_timeout_ns: how long to wait for a connection to open.
        interval_ns: snapshot and live-line period.
        rate_per_s: open loop: requests per second offered in total (all processes and
            connections); None means closed loop.
        arrival: open loop: ``uniform`` (fixed gaps), ``poisson`` (exponential gaps) or
            ``fb-etc`` (generalized Pareto gaps of Facebook's ETC model, mean 1 / rate).
        max_lag_ns: open loop: a request this far behind its slot is dropped, not sent.
        busy_poll_ns: the compiled loop polls this long for events before it sleeps
            (``Poller.busy_poll_ns``; 0: it sleeps at once).
        rounds: how many times the measurement is repeated, each with fresh processes.
        max_error_rate: a run whose errors exceed this share of its ops is ``failed``
            (docs/measurement.md, "Status").
        cluster: ``tcp://HOST:PORT`` of a Dask scheduler: the load workers run on its
            workers (one per Dask worker process, at most ``processes``); None: local
            processes.
        cluster_listen: ``HOST:PORT`` the coordinator listens on for the Dask workers to
            connect back to; None: the interface facing the scheduler, a free port.
    """

    connections: int = 50
    processes: int = 1
    pipeline: int = 1
    duration_ns: int | None = 10 * 10**9
    requests: int | None = None
    warmup_ns: int = 0
    timeout_ns: int = 5 * 10**9
    connect_timeout_ns: int = 3 * 10**9
    interval_ns: int = 10**9
    rate_per_s: float | None = None
    arrival: str = "uniform"
    max_lag_ns: int = 10**9
    busy_poll_ns: int = 0
    rounds: int = 1
    max_error_rate: float = 0.01
    cluster: str | None = None
    cluster_listen: str | None = None

    @property
    def server_gone_ns(self) -> int:
        """How long a server may have no live connection, its reconnects failing, before
        it is taken for gone (engine/reconnect.py): ``SERVER_GONE_TIMEOUTS`` x ``timeout_ns``."""
        return SERVER_GONE_TIMEOUTS * self.timeout_ns


# A server none of whose connections has been live for this many --timeouts (10 s by
# default), every reconnect failing, is gone: the run is failed, and a run that ends when
# its work is done (a replay, --requests) or a preload ends then, instead of reconnecting
# for ever (docs/measurement.md, "How a run can end").
SERVER_GONE_TIMEOUTS = 2


@dataclass(frozen=True, slots=True)
class ReportConfig:
    """Where results go.

    Attributes:
        json_path: write the result document here, or None.
        db_path: the SQLite history database.
        save: store the run in the history.
        live: print a line per interval.
        wide: print every column of a table whatever the terminal's width, and let the
            terminal wrap (``--wide``); else the columns that fit, by priority.
        quiet: the summary is one line per op, the verdicts and the status (``-q``).
        prometheus: ``HOST:PORT`` to serve the running figures on for Prometheus to scrape
            (``--prometheus``), or None.
    """

    json_path: str | None = None
    db_path: str = ""
    save: bool = True
    live: bool = True
    wide: bool = False
    quiet: bool = False
    prometheus: str | None = None


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a run needs; ``to_dict()`` is stored with the result so it can be rerun."""

    targets: tuple[TargetConfig, ...]
    workload: WorkloadConfig = WorkloadConfig()
    load: LoadConfig = LoadConfig()
    report: ReportConfig = ReportConfig()
    # ``kvbench replay``: the trace and how it is replayed (None for every other run).
    replay: ReplayConfig | None = None

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict of the config, credentials left out."""
        from dataclasses import asdict

        data = asdict(self)
        for target in data["targets"]:
            target.pop("password", None)
            target.pop("username", None)
        data["workload"]["ratio"] = dict(self.workload.ratio)
        data["workload"]["commands"] = [
            {"command": text, "weight": weight} for text, weight in self.workload.commands
        ]
        return data
