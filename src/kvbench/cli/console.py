"""The console every command prints to."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from typing import TYPE_CHECKING, TextIO

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

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """The reader went away (``kvbench run ... | head``): print nothing more, and
            let the run go on to be written and stored with its own status. (rich's own
            exits 1 then, from wherever the print was: the run was lost, unsaid.)"""
            self.quiet = True
            try:  # (the stream's buffer, flushed at exit, goes nowhere either)
                fd = self.file.fileno()
            except (AttributeError, OSError, ValueError):  # not a file: quiet is enough
                fd = None
            if fd is not None:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, fd)
                os.close(devnull)
            if not stderr:
                _said_closed()

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else PIPE_WIDTH
    return _Console(highlight=False, soft_wrap=True, width=width, stderr=stderr)


def fitted(message: str, stream: TextIO | None = None) -> str:
    """``message`` as one line, or, on a terminal, folded between words to its width (a
    terminal folds a long line at its edge, inside a word or a figure: ``872.8 MiB is
    left to one process under the address-space l`` / ``imit``). The lines after the
    first are indented two spaces; a word longer than the width stays whole."""
    stream = stream if stream is not None else sys.stderr
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # (a closed or stand-in stream)
        terminal = False
    if not terminal:
        return message
    return fold(message, _columns(stream))


def _columns(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to (``COLUMNS`` first, as
    ``shutil.get_terminal_size``; stdout may be a pipe while stderr is the terminal)."""
    if not os.environ.get("COLUMNS"):
        try:
            return os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            pass
    return shutil.get_terminal_size().columns


def fold(message: str, width: int) -> str:
    """``message`` folded between words to ``width`` columns, later lines indented two."""
    return (
        "\n".join(
            textwrap.wrap(
                message,
                width=max(width, 20),
                subsequent_indent="  ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
        or message
    )


_closed_said = False


def _said_closed() -> None:
    """One line on stderr, once, that stdout was closed."""
    global _closed_said
    if not _closed_said:
        _closed_said = True
        print(
            "kvbench: the output was closed (broken pipe): the run goes on without printing it",
            file=sys.stderr,
        )
