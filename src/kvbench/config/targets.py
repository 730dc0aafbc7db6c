"""Target URLs: the scheme picks the protocol.

``memcached://host:11211`` (text), ``memcached+binary://``, ``memcached+meta://``,
``redis://[user:pass@]host:6379/0`` (RESP2; ``?resp=3`` for RESP3), ``http+memc://host:80/memc``
(an nginx memc gateway). Credentials are kept apart from the masked URL that is printed
and stored.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from kvbench.config.model import TargetConfig, WorkloadConfig
from kvbench.errors import ConfigError

# scheme -> (codec name, default port)
SCHEMES: dict[str, tuple[str, int]] = {
    "memcached": ("memcache-text", 11211),
    "memcached+text": ("memcache-text", 11211),
    "memcached+binary": ("memcache-binary", 11211),
    "memcached+meta": ("memcache-meta", 11211),
    "redis": ("resp2", 6379),
    "rediss": ("resp2", 6379),
    # Queues (``kvbench queue``): the path names the queue / list.
    "memcacheq": ("memcache-text", 22201),
    "redis-queue": ("resp2", 6379),
    # An HTTP gateway in front of memcached (nginx + memc): the path is its location.
    "http+memc": ("http-memc", 80),
}
# URL options of http+memc:// targets.
HTTP_OPTIONS = ("pipeline", "stats")
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
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        known = ", ".join(f"{name}://" for name in SCHEMES)
        raise ConfigError(where, f"unknown scheme {scheme + '://'!r} in {url!r} (known: {known})")
    protocol, default_port = SCHEMES[scheme]
    try:
        port = parts.port or default_port
    except ValueError:
        raise ConfigError(where, f"bad port in {url!r}") from None
    host = parts.hostname
    if not host:
        raise ConfigError(where, f"no host in {url!r}")
    path = parts.path.lstrip("/")
    db = 0
    if protocol.startswith("resp"):
        query = parse_qs(parts.query)
        if query.get("resp", ["2"])[-1] == "3":
            protocol = "resp3"
        if path and scheme != "redis-queue":  # there the path is the list's name
            if not path.isdigit():
                raise ConfigError(where, f"redis database must be a number, got {path!r}")
            db = int(path)
    tls = _tls_options(scheme, parse_qs(parts.query), where)
    http = _http_options(scheme, parts.query, path, where)
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
    )


def mask_url(url: str) -> str:
    """Replace the password in a URL with ``***`` (the user name is kept)."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    user = parts.username if parts.password is not None else None
    userinfo = f"{user}:***" if user else "***"
    netloc = f"{userinfo}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def _tls_options(scheme: str, query: dict[str, list[str]], where: str) -> dict[str, Any]:
    """TLS settings from a ``rediss://`` URL's query: ca, insecure, cert, key."""
    if scheme != "rediss":
        if any(k in query for k in ("ca", "insecure", "cert", "key")):
            raise ConfigError(where, "TLS options (ca, insecure, cert, key) need rediss://")
        return {}
    options: dict[str, Any] = {"tls": True}
    for name in ("ca", "cert", "key"):
        if name in query:
            path = query[name][-1]
            if not os.path.isfile(path):
                raise ConfigError(where, f"{name}={path}: no such file")
            options[f"tls_{name}"] = path
    options["tls_insecure"] = query.get("insecure", ["0"])[-1] in ("1", "true", "yes")
    if ("tls_cert" in options) != ("tls_key" in options):
        raise ConfigError(where, "give both cert= and key= for a client certificate")
    return options


def _http_options(scheme: str, query_text: str, path: str, where: str) -> dict[str, Any]:
    """``http+memc://`` URL options: ``pipeline=1`` and ``stats=memcached://HOST:PORT``."""
    if scheme != "http+memc":
        return {}
    query = parse_qs(query_text, keep_blank_values=True)
    unknown = sorted(set(query) - set(HTTP_OPTIONS))
    if unknown:
        raise ConfigError(
            where, f"unknown option {unknown[0]!r} (http+memc:// takes pipeline=1, stats=URL)"
        )
    bad = sorted(set(path) - HTTP_KEY_SAFE - {"%"})
    if bad:
        raise ConfigError(where, f"path {path!r} holds {bad[0]!r}: percent-encode it")
    options: dict[str, Any] = {
        "pipelining": query.get("pipeline", ["0"])[-1] in ("1", "true", "yes")
    }
    if "stats" in query:
        stats_url = query["stats"][-1]
        backing = parse_target(stats_url, f"{where}: stats=")
        if backing.family != "memcache":
            raise ConfigError(
                where, f"stats={stats_url}: give the backing memcached (memcached://HOST:PORT)"
            )
        options["stats_url"] = stats_url
    return options


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
            ``--verify`` (the gateway stores URL-safe translations of the values).
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
        if workload.verify:
            raise ConfigError(
                origin("workload.verify"),
                "an HTTP gateway stores values translated to URL-safe bytes: --verify "
                "cannot check them",
            )
