"""Target URLs: the scheme picks the protocol.

``memcached://host:11211`` (text), ``memcached+binary://``, ``memcached+meta://``,
``redis://[user:pass@]host:6379/0`` (RESP2; ``?resp=3`` for RESP3), ``redis+cluster://host:7000``
(a seed node of a Redis Cluster; ``rediss+cluster://`` with TLS), ``http+memc://host:80/memc``
(an nginx memc gateway). ``+unix`` in a memcached or redis scheme connects to a Unix socket
instead: ``memcached+unix:///path/to.sock``, ``memcached+binary+unix:///...``,
``redis+unix:///path/to.sock?db=1``. IPv6 addresses go in brackets
(``memcached://[::1]:11211``). Credentials are kept apart from the masked URL that is
printed and stored. Everything a URL says is checked here, before any connection: the
port, the path, and every ?option against what the scheme takes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

from kvbench.config.model import TargetConfig, WorkloadConfig
from kvbench.config.names import suggestion
from kvbench.config.workload_fields import longest_key
from kvbench.errors import ConfigError

# scheme -> (codec name, default port)
SCHEMES: dict[str, tuple[str, int]] = {
    "memcached": ("memcache-text", 11211),
    "memcached+text": ("memcache-text", 11211),
    "memcached+binary": ("memcache-binary", 11211),
    "memcached+meta": ("memcache-meta", 11211),
    "redis": ("resp2", 6379),
    "rediss": ("resp2", 6379),
    # A seed node of a Redis Cluster: the run discovers the masters and routes by slot.
    "redis+cluster": ("resp2", 6379),
    "rediss+cluster": ("resp2", 6379),
    # Queues (``kvbench queue``): the path names the queue / list.
    "memcacheq": ("memcache-text", 22201),
    "redis-queue": ("resp2", 6379),
    # An HTTP gateway in front of memcached (nginx + memc): the path is its location.
    "http+memc": ("http-memc", 80),
}
# URL options of http+memc:// targets.
HTTP_OPTIONS = ("pipeline", "stats")
TLS_OPTIONS = ("ca", "insecure", "cert", "key")
# The ?options each scheme takes; any other is refused (a typo must not run with defaults).
URL_OPTIONS: dict[str, tuple[str, ...]] = {
    "redis": ("resp",),
    "rediss": ("resp", *TLS_OPTIONS),
    "redis+cluster": ("resp",),
    "rediss+cluster": ("resp", *TLS_OPTIONS),
    "redis-queue": ("resp", "block", "db"),
    "http+memc": HTTP_OPTIONS,
    # On a Unix socket the path is the socket's: the database is an option.
    "redis+unix": ("resp", "db"),
}
# The schemes that take ``+unix`` (in any place after the first part: ``memcached+unix+meta``
# and ``memcached+meta+unix`` are the same); TLS, queues and gateways do not.
UNIX_SCHEMES = ("memcached", "memcached+text", "memcached+binary", "memcached+meta", "redis")
# Schemes whose path is no database or name: memcached has neither.
PATHLESS_SCHEMES = ("memcached", "memcached+text", "memcached+binary", "memcached+meta")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
TLS_SCHEMES = ("rediss", "rediss+cluster")
_BOOLEANS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
# The longest key each server family takes: memcached's, 250 bytes (protocol.txt, "Keys"),
# in all its protocols and behind an HTTP gateway, which forwards keys to memcached; a
# Redis key is a string, up to 512 MB (redis.io, "Redis keys").
MAX_KEY_BYTES = {"memcache": 250, "http": 250, "redis": 512 * 1024 * 1024}
# The ops a memc gateway can send (memcached has no multi-get over it).
HTTP_OPS = ("get", "set", "delete", "incr")
# Characters a key may hold on an HTTP gateway, which does not URL-decode: the same set as
# protocols.http1.KEY_SAFE (config may not import protocols; a test keeps them equal).
HTTP_KEY_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:@!$'()*,;/"
)


def parse_target(url: str, where: str = "target") -> TargetConfig:
    """Parse a target URL.

    Raises:
        ConfigError: unknown scheme, bad port or db, missing host.
    """
    if "://" not in url:
        raise ConfigError(where, f"{url!r} is not a URL (example: memcached://127.0.0.1:11211)")
    parts = _split(url, where)
    scheme = parts.scheme.lower()
    base, unix = _base_scheme(scheme, url, where)
    protocol, default_port = SCHEMES[base]
    if base in CLUSTER_SCHEMES and "," in parts.netloc:
        raise ConfigError(
            where, f"{url!r}: give each seed node as a URL of its own ({scheme}://HOST:PORT ...)"
        )
    if unix:
        host, port, socket_path, path = "localhost", 0, _socket_path(parts, url, where), ""
    else:
        host, socket_path, path = _host(parts, url, where), None, parts.path.lstrip("/")
        port = _port(parts, default_port, url, where)
    if path and base in PATHLESS_SCHEMES:
        raise ConfigError(
            where, f"/{path}: memcached has no databases or paths; drop it from the URL"
        )
    query = _query(scheme, parts.query, where)
    db = 0
    if protocol.startswith("resp"):
        resp = query.get("resp", ["2"])[-1]
        if resp not in ("2", "3"):
            raise ConfigError(where, f"resp={resp}: the protocol version is 2 or 3")
        protocol = f"resp{resp}"
        if unix and "db" in query:
            path = query["db"][-1]
        if path and base != "redis-queue":  # there the path is the list's name
            if not path.isdigit():
                raise ConfigError(where, f"redis database must be a number, got {path!r}")
            db = int(path)
            if db and base in CLUSTER_SCHEMES:
                raise ConfigError(where, f"/{path}: a Redis Cluster has database 0 only")
    tls = _tls_options(base, query, where)
    http = _http_options(base, query, path, where)
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    if username is not None and password is None:
        # redis://:secret@host and redis://secret@host both mean a password alone.
        username, password = None, username
    return TargetConfig(
        url=mask_url(url),
        scheme=scheme,
        protocol=protocol,
        host=host,
        port=port,
        db=db,
        username=username or None,
        password=password,
        **tls,
        **http,
        path=path,
        socket_path=socket_path,
        cluster=base in CLUSTER_SCHEMES,
    )


def _split(url: str, where: str) -> SplitResult:
    """``urlsplit``, its complaints (an unclosed ``[``) as ConfigError."""
    try:
        return urlsplit(url)
    except ValueError as exc:
        raise ConfigError(where, f"{url!r}: {exc} (IPv6: memcached://[::1]:11211)") from None


def _base_scheme(scheme: str, url: str, where: str) -> tuple[str, bool]:
    """The scheme without ``+unix``, and whether it was there."""
    words = scheme.split("+")
    unix = "unix" in words[1:]
    base = "+".join(word for word in words if word != "unix") if unix else scheme
    if base not in SCHEMES:
        known = ", ".join(f"{name}://" for name in SCHEMES)
        raise ConfigError(
            where,
            f"unknown scheme {scheme + '://'!r} in {url!r} (known: {known}; "
            "memcached and redis take +unix)",
        )
    if unix and base not in UNIX_SCHEMES:
        raise ConfigError(
            where, f"{scheme}://: Unix sockets are for memcached and redis targets only"
        )
    return base, unix


def _socket_path(parts: SplitResult, url: str, where: str) -> str:
    """A ``+unix`` URL's socket path: absolute, after an empty host (three slashes)."""
    if parts.hostname or parts.port is not None:
        raise ConfigError(
            where, f"{url!r}: a Unix socket URL names no host (memcached+unix:///path/to.sock)"
        )
    path = unquote(parts.path)
    if not path.startswith("/") or path == "/":
        raise ConfigError(
            where, f"{url!r}: give the socket's absolute path (memcached+unix:///path/to.sock)"
        )
    return path


def _host(parts: SplitResult, url: str, where: str) -> str:
    """The host to connect to: a name, an IPv4 address, or an IPv6 address in brackets
    (returned without them, a zone's ``%25`` decoded: ``[fe80::1%25eth0]``)."""
    netloc = parts.netloc.rpartition("@")[2]
    if netloc.count(":") > 1 and not netloc.startswith("["):
        raise ConfigError(
            where, f"{url!r}: an IPv6 address goes in brackets (memcached://[::1]:11211)"
        )
    host = parts.hostname
    if not host:
        raise ConfigError(where, f"no host in {url!r}")
    return unquote(host)


def mask_url(url: str) -> str:
    """Replace the password in a URL with ``***`` (the user name is kept)."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    user = parts.username if parts.password is not None else None
    userinfo = f"{user}:***" if user else "***"
    netloc = f"{userinfo}@{parts.netloc.rpartition('@')[2]}"  # host and port as written
    return parts._replace(netloc=netloc).geturl()


def _port(parts: SplitResult, default_port: int, url: str, where: str) -> int:
    """The URL's port, or the scheme's default when it names none; 0 or ``host:`` refused."""
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(where, f"bad port in {url!r} (1-65535)") from None
    if port is None:
        if parts.netloc.endswith(":"):
            raise ConfigError(where, "an empty port after ':': give one or drop the ':'")
        return default_port
    if port == 0:
        raise ConfigError(where, "port 0: give the server's port (1-65535)")
    return port


def _query(scheme: str, text: str, where: str) -> dict[str, list[str]]:
    """The URL's ?options, every name checked against what ``scheme`` takes."""
    query = parse_qs(text, keep_blank_values=True)
    known = URL_OPTIONS.get(scheme, ())
    for name in query:
        if name in known:
            continue
        if name in TLS_OPTIONS and scheme in ("redis", "redis-queue", "redis+cluster"):
            tls_scheme = "rediss+cluster" if scheme == "redis+cluster" else "rediss"
            raise ConfigError(where, f"TLS options (ca, insecure, cert, key) need {tls_scheme}://")
        takes = f"takes {', '.join(known)}" if known else "takes no options"
        raise ConfigError(
            where, f"unknown option {name!r} ({scheme}:// {takes}){suggestion(name, known)}"
        )
    return query


def _flag(query: dict[str, list[str]], name: str, where: str) -> bool:
    """A yes/no URL option (``?insecure=1``); absent is no."""
    value = query.get(name, ["0"])[-1].lower()
    if value not in _BOOLEANS:
        raise ConfigError(where, f"{name}={value}: expected 1 or 0")
    return _BOOLEANS[value]


def _tls_options(scheme: str, query: dict[str, list[str]], where: str) -> dict[str, Any]:
    """TLS settings from a ``rediss://`` URL's query: ca, insecure, cert, key."""
    if scheme not in TLS_SCHEMES:
        return {}
    options: dict[str, Any] = {"tls": True}
    for name in ("ca", "cert", "key"):
        if name in query:
            path = query[name][-1]
            if not os.path.isfile(path):
                raise ConfigError(where, f"{name}={path}: no such file")
            options[f"tls_{name}"] = path
    options["tls_insecure"] = _flag(query, "insecure", where)
    if ("tls_cert" in options) != ("tls_key" in options):
        raise ConfigError(where, "give both cert= and key= for a client certificate")
    return options


def _http_options(
    scheme: str, query: dict[str, list[str]], path: str, where: str
) -> dict[str, Any]:
    """``http+memc://`` URL options: ``pipeline=1`` and ``stats=memcached://HOST:PORT``."""
    if scheme != "http+memc":
        return {}
    bad = sorted(set(path) - HTTP_KEY_SAFE - {"%"})
    if bad:
        raise ConfigError(where, f"path {path!r} holds {bad[0]!r}: percent-encode it")
    options: dict[str, Any] = {"pipelining": _flag(query, "pipeline", where)}
    if "stats" in query:
        stats_url = query["stats"][-1]
        backing = parse_target(stats_url, f"{where}: stats=")
        if backing.family != "memcache":
            raise ConfigError(
                where, f"stats={stats_url}: give the backing memcached (memcached://HOST:PORT)"
            )
        options["stats_url"] = stats_url
    return options


def check_key_limits(
    targets: tuple[TargetConfig, ...], workload: WorkloadConfig, origin: Callable[[str], str]
) -> None:
    """Refuse keys the targets' protocol does not take, before any socket opens.

    memcached (and an HTTP gateway, which forwards keys to it) takes keys of at most 250
    bytes without spaces or control characters; Redis takes any bytes. No target yet
    means the throwaway memcached.

    Args:
        origin: ``origin("workload.key_prefix")`` names where a setting came from.

    Raises:
        ConfigError: naming the key prefix or key size that makes keys too long.
    """
    families = {t.family for t in targets} or {"memcache"}
    longest, setting, made_of = longest_key(workload)
    for family in sorted(families):
        limit = MAX_KEY_BYTES[family]
        if longest > limit:
            server = {"redis": "Redis", "http": "the gateway's memcached"}.get(family, "memcached")
            raise ConfigError(
                origin(setting),
                f"keys would be up to {longest} bytes ({made_of}); {server} takes keys of at "
                f"most {limit:,} bytes",
            )
    if families & {"memcache", "http"} and any(
        b <= 32 or b == 127 for b in workload.key_prefix.encode()
    ):
        raise ConfigError(
            origin("workload.key_prefix"),
            f"{workload.key_prefix!r}: memcached keys may not hold spaces or control characters",
        )


def check_http_targets(
    targets: tuple[TargetConfig, ...],
    workload: WorkloadConfig,
    pipeline: int,
    origin: Callable[[str], str],
) -> None:
    """What an HTTP gateway target cannot take, refused before any socket opens.

    Args:
        targets: the run's targets.
        workload: the WorkloadConfig.
        pipeline: requests in flight per connection.
        origin: ``origin("load.pipeline")`` names where a setting came from (a flag or a
            scenario file key).

    Raises:
        ConfigError: ``--pipeline`` > 1 without ``?pipeline=1``, an op the gateway has no
            form for (mget), a key prefix with characters a URL would have to encode, or
            ``--verify`` without ``--ratio set-then-get`` (the gateway stores URL-safe
            translations of the values: only the value just set can be compared).
    """
    for target in targets:
        if target.family != "http":
            continue
        if pipeline > 1 and not target.pipelining:
            raise ConfigError(
                origin("load.pipeline"),
                f"--pipeline {pipeline}: HTTP/1.1 gateways take one request at a time per "
                "connection; use -P 1, or add ?pipeline=1 to the URL to pipeline anyway",
            )
        ops = sorted({op for op, _ in workload.ratio} - set(HTTP_OPS))
        if ops:
            raise ConfigError(
                origin("workload.ratio"),
                f"{ops[0]}: a memc gateway has no such request ({', '.join(HTTP_OPS)} only)",
            )
        bad = sorted(set(workload.key_prefix) - HTTP_KEY_SAFE)
        if bad:
            raise ConfigError(
                origin("workload.key_prefix"),
                f"{workload.key_prefix!r} holds {bad[0]!r}: an HTTP gateway does not "
                "URL-decode, so keys may hold only letters, digits and -._~:@!$'()*,;/",
            )
        if workload.verify and not workload.set_then_get:
            # A value derived from its key cannot be recomputed from its URL-safe form; the
            # value a set just sent can (engine/verify.py compares that form exactly).
            raise ConfigError(
                origin("workload.verify"),
                "an HTTP gateway stores values translated to URL-safe bytes: --verify "
                "checks them only with --ratio set-then-get (each get against the set before it)",
            )


def check_cluster_targets(
    targets: tuple[TargetConfig, ...], workload: WorkloadConfig, origin: Callable[[str], str]
) -> None:
    """What a Redis Cluster run cannot take, refused before any socket opens.

    ``redis+cluster://`` targets are seed nodes of one cluster: no other target may share
    the run. A multi-key command must name keys of one hash slot (CROSSSLOT otherwise), and
    kvbench's keys spread over every slot, so ``mget`` is refused unless the key prefix
    holds a hash tag (then every key is in one slot, on one master). ``set-then-get`` is
    refused: it gives each connection keys of its own, and a master holding fewer keys
    than connections (a hash tag puts every key on one) cannot share them, nor could a
    connection's keys follow a slot that moves.

    Raises:
        ConfigError: naming the target or the setting.
    """
    clusters = [t for t in targets if t.cluster]
    if not clusters:
        return
    if len(clusters) != len(targets):
        raise ConfigError(
            "target",
            "redis+cluster:// targets are seed nodes of one cluster: no other target can "
            "share the run",
        )
    if {t.scheme for t in targets} == set(CLUSTER_SCHEMES):
        raise ConfigError("target", "give every seed node with the same scheme (TLS or not)")
    prefix = workload.key_prefix.encode()
    # A prefix that holds a whole hash tag (hash_tag finds one) makes every key hash by it.
    if any(op == "mget" for op, _ in workload.ratio) and hash_tag(prefix) == prefix:
        raise ConfigError(
            origin("workload.ratio"),
            "mget: a Redis Cluster takes multi-key commands only for keys of one hash slot; "
            "drop mget, or give keys one hash tag (--key-prefix '{bench}:')",
        )
    if workload.set_then_get:
        raise ConfigError(
            origin("workload.ratio"),
            "set-then-get is not sent to a Redis Cluster (yet): give a --ratio of sets and gets",
        )


def hash_tag(key: bytes) -> bytes:
    """The part of ``key`` a Redis Cluster computes its slot from (``workload.slots``).

    The specification's rule: if the key holds a ``{``, and a ``}`` after it, with at least
    one byte between the first ``{`` and the first ``}`` after it, only those bytes are
    hashed; otherwise the whole key is (``foo{}{bar}`` hashes whole, ``foo{{bar}}`` hashes
    ``{bar``). Here, beside the cluster checks, so that the check of a multi-get's key
    prefix and the slots the workers place keys in read one rule (config imports no
    workload).
    """
    start = key.find(b"{")
    if start < 0:
        return key
    end = key.find(b"}", start + 1)
    if end <= start + 1:
        return key
    return key[start + 1 : end]
