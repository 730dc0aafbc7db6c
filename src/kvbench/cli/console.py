"""The console every command prints to."""

from __future__ import annotations

import sys

from rich.console import Console

# Width used when stdout is a pipe or file: wide enough for the summary table, which rich
# would otherwise squeeze into 80 columns.
PIPE_WIDTH = 160


def make_console() -> Console:
    """A rich Console on stdout: the terminal's width, or PIPE_WIDTH when not a terminal."""
    width = None if sys.stdout.isatty() else PIPE_WIDTH
    return Console(highlight=False, soft_wrap=True, width=width)
