"""The console every command prints to."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

# Width used when the output is a pipe or file: wide enough for the summary table, which
# rich would otherwise squeeze into 80 columns.
PIPE_WIDTH = 160


def make_console(stderr: bool = False) -> Console:
    """A rich Console on stdout (``stderr``: on stderr, when stdout holds a document,
    ``--json -``): the terminal's width, or PIPE_WIDTH when not a terminal.

    rich is imported here, on the first console, not with the command modules: ``kvbench
    --help`` and a mistyped flag never print through it.
    """
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else PIPE_WIDTH
    return Console(highlight=False, soft_wrap=True, width=width, stderr=stderr)
