"""The ``--cluster`` settings: a Dask scheduler's address and the coordinator's listener.

Syntax only, plus one check that the optional Dask support is installed; nothing here
opens a socket.
"""

from __future__ import annotations

import importlib.util
from typing import Any
from urllib.parse import urlsplit

from kvbench.errors import ConfigError

DEFAULT_SCHEDULER_PORT = 8786
INSTALL_HINT = "Dask support is not installed: pip install 'kvbench[cluster]'"


def installed(module: str) -> bool:
    """Whether an optional package can be imported (it is not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def dask_installed() -> bool:
    """Whether the optional ``distributed`` package can be imported (it is not imported)."""
    return installed("distributed")


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_scheduler_url(value: Any, where: str) -> str:
    """``tcp://HOST[:8786]`` (or ``HOST[:PORT]``) -> ``tcp://HOST:PORT``.

    Raises:
        ConfigError: not a tcp:// address, no host, a bad port, or Dask not installed.
    """
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            where, f"expected a scheduler address like tcp://HOST:8786, got {value!r}"
        )
    text = value.strip()
    parts = urlsplit(text if "://" in text else f"tcp://{text}")
    if parts.scheme != "tcp":
        raise ConfigError(
            where, f"{text!r}: only tcp://HOST:PORT scheduler addresses are supported"
        )
    try:
        port = parts.port or DEFAULT_SCHEDULER_PORT
    except ValueError:
        raise ConfigError(where, f"bad port in {text!r}") from None
    if not parts.hostname or parts.path.strip("/") or parts.query:
        raise ConfigError(
            where, f"{text!r} is not a scheduler address (example: tcp://10.0.0.1:8786)"
        )
    if not dask_installed():
        raise ConfigError(where, INSTALL_HINT)
    return f"tcp://{_join(parts.hostname, port)}"


def parse_listen_address(value: Any, where: str) -> str:
    """``HOST:PORT``, ``:PORT`` or ``HOST`` (any free port) -> ``HOST:PORT`` (HOST may be empty).

    Raises:
        ConfigError: a bad port.
    """
    text = str(value).strip()
    host, colon, port_text = text.rpartition(":")
    if not colon:
        host, port_text = text, "0"
    host = host.strip("[]")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(where, f"{text!r}: expected HOST:PORT, :PORT or HOST (port 0-65535)")
    return _join(host, int(port_text)) if host else f":{int(port_text)}"


def split_listen_address(text: str) -> tuple[str, int]:
    """A validated ``HOST:PORT`` (HOST may be empty) -> (host, port)."""
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)
