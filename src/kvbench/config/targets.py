"""Target URLs: the scheme picks the protocol.

``memcached://host:11211`` (text), ``memcached+binary://``, ``memcached+meta://``,
``redis://[user:pass@]host:6379/0`` (RESP2; ``?resp=3`` for RESP3). Credentials are kept
apart from the masked URL that is printed and stored.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from kvbench.config.model import TargetConfig
from kvbench.errors import ConfigError

# scheme -> (codec name, default port)
SCHEMES: dict[str, tuple[str, int]] = {
    "memcached": ("memcache-text", 11211),
    "memcached+text": ("memcache-text", 11211),
    "memcached+binary": ("memcache-binary", 11211),
    "memcached+meta": ("memcache-meta", 11211),
    "redis": ("resp2", 6379),
    "rediss": ("resp2", 6379),
}


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
        if path:
            if not path.isdigit():
                raise ConfigError(where, f"redis database must be a number, got {path!r}")
            db = int(path)
    tls = _tls_options(scheme, parse_qs(parts.query), where)
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
