"""An unknown flag is answered with the flag meant, other tools' names included."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kvbench.cli import cli


@pytest.mark.parametrize(
    ("command", "typed", "meant"),
    [
        ("run", "--wokers", "--processes"),  # click alone said --keys
        ("run", "--threads", "--processes"),  # memtier, wrk
        ("run", "--workers", "--processes"),
        ("run", "--clients", "--connections"),  # memtier
        ("run", "--concurrency", "--connections"),  # ab, hey
        ("run", "--test-time", "--duration"),  # memtier
        ("run", "--data-size", "--value-size"),  # memtier
        ("run", "--conections", "--connections"),
        ("sweep", "--threads", "--processes"),
        ("compare", "--clients", "--connections"),
    ],
)
def test_unknown_flags_suggest_the_option_meant(command: str, typed: str, meant: str) -> None:
    result = CliRunner().invoke(cli, [command, typed, "4"])
    assert result.exit_code == 2
    assert f"No such option '{typed}'. Did you mean '{meant}'?" in result.output


def test_no_suggestion_when_nothing_is_close() -> None:
    result = CliRunner().invoke(cli, ["run", "--zzzzzzzz", "4"])
    assert result.exit_code == 2
    assert "Did you mean" not in result.output
