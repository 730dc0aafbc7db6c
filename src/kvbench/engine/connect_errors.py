"""One line for a failed connect (``connect_error_text``), for the workers' reconnects
and the coordinator's probe alike.

Standard library only, and not ``ssl`` or ``asyncio``: the coordinator, which probes
plain TCP targets, imports neither (about 8 MB of its memory during a run). A TLS
failure can only have been raised once ``ssl`` was imported, so it is looked up there.
"""

from __future__ import annotations

import sys

from kvbench.errors import SetupRefused


def connect_error_text(exc: BaseException) -> str:
    """One line for a failed connect: ``connection refused``, ``timed out``, ..."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError is TimeoutError (3.11)
        return "timed out"
    ssl = sys.modules.get("ssl")
    if ssl is not None and isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {getattr(exc, 'reason', None) or exc}"
    if isinstance(exc, SetupRefused):
        return f"the server refused the connection setup: {exc}"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return str(text).lower() if isinstance(exc, OSError) else str(text)
