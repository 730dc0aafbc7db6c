"""The ``--prometheus HOST:PORT`` setting: where the running figures are served.

Syntax only, plus one check that the optional ``prometheus-client`` is installed; nothing
here opens a socket (cli/prometheus.py does, and binds only the address given).
"""

from __future__ import annotations

from typing import Any

from kvbench.config.cluster import installed, parse_listen_address
from kvbench.errors import ConfigError

INSTALL_HINT = "needs prometheus-client: pip install 'kvbench[prometheus]'"


def prometheus_installed() -> bool:
    """Whether ``prometheus_client`` can be imported (it is not imported)."""
    return installed("prometheus_client")


def parse_prometheus_address(value: Any, where: str) -> str:
    """``HOST:PORT`` (``:PORT``: every interface; port 0: any free one) -> ``HOST:PORT``.

    Raises:
        ConfigError: no port, a bad port, or prometheus-client not installed.
    """
    text = str(value).strip()
    if ":" not in text:
        raise ConfigError(where, f"{text!r}: expected HOST:PORT, e.g. 127.0.0.1:9100")
    address = parse_listen_address(text, where)
    if not prometheus_installed():
        raise ConfigError(where, INSTALL_HINT)
    return address
