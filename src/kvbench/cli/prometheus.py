"""``--prometheus HOST:PORT``: the running figures over HTTP, for Prometheus to scrape.

The server (prometheus_client's, a daemon thread) binds only the address given and lives
as long as the live view that opens it (cli/live.py: a run, a whole sweep or comparison,
each step of a preset): ``GET /metrics`` answers with ``report.prometheus.LiveFigures``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.console import Console

from kvbench.config.cluster import split_listen_address
from kvbench.errors import ConfigError

if TYPE_CHECKING:
    from kvbench.report.prometheus import LiveFigures

# How long the command waits for the server thread once it is told to stop.
_JOIN_TIMEOUT_S = 5.0


@contextlib.contextmanager
def prometheus_server(address: str | None, console: Console) -> Iterator[LiveFigures | None]:
    """Serve a fresh ``LiveFigures`` on ``address`` (None: serve nothing) until the block ends.

    Raises:
        ConfigError: the address cannot be listened on (in use, not an address of this
            machine).
    """
    if address is None:
        yield None
        return
    from prometheus_client import CollectorRegistry, start_http_server

    from kvbench.report.prometheus import LiveFigures

    host, port = split_listen_address(address)
    figures = LiveFigures()
    registry = CollectorRegistry()
    registry.register(figures)
    try:
        server, thread = start_http_server(port, addr=host or "0.0.0.0", registry=registry)
    except OSError as exc:
        raise ConfigError("--prometheus", f"cannot listen on {address}: {exc.strerror}") from None
    bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    console.print(f"serving Prometheus metrics at http://{shown}:{bound_port}/metrics")
    try:
        yield figures
    finally:
        server.shutdown()
        server.server_close()
        thread.join(_JOIN_TIMEOUT_S)
