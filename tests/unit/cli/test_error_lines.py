"""An error is one line, folded between words on a terminal (was: the terminal folded it
at its edge, inside a word or a figure: ``... under the address-space l`` / ``imit``)."""

from __future__ import annotations

import io

import pytest

from kvbench.cli.console import fitted, fold

MESSAGE = (
    "kvbench: error: --keys: 14,000,000 keys take 934.6 MiB to build the key table in each "
    "worker process; 872.8 MiB is left to one process under the address-space limit "
    "(ulimit -v)"
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_an_error_on_a_terminal_folds_between_words_at_every_width() -> None:
    for width in (80, 100, 120):
        lines = fold(MESSAGE, width).split("\n")
        assert all(len(line) <= width for line in lines), (width, lines)
        assert " ".join(line.strip() for line in lines) == MESSAGE  # every word, whole
        assert all(line.startswith("  ") for line in lines[1:])
    assert fold(MESSAGE, 80).split("\n")[1].startswith("  each worker process; 872.8 MiB")


def test_an_error_to_a_pipe_or_file_stays_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the width shutil.get_terminal_size reports
    assert fitted(MESSAGE, io.StringIO()) == MESSAGE
    assert fitted(MESSAGE, Terminal()) == fold(MESSAGE, 80) != MESSAGE


def test_a_word_longer_than_the_width_is_never_broken() -> None:
    path = "/tmp/" + "x" * 120
    lines = fold(f"kvbench: error: cannot read {path}", 80).split("\n")
    assert lines[-1].strip() == path
