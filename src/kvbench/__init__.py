"""kvbench: a load generator and benchmark harness for cache and key-value servers.

The command line (``kvbench``) is the main interface; see README.md.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
