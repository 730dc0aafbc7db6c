"""An unknown flag is answered with the flag meant, other tools' names included."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kvbench.cli import cli


@pytest.mark.parametrize(
    ("command", "typed", "meant"),
    [
        ("run", "--wokers", "--processes"),  # click alone said --keys
        ("run", "--workers", "--processes"),
        ("run", "--concurrency", "--connections"),  # ab, hey
        ("run", "--conections", "--connections"),
        ("sweep", "--workers", "--processes"),
        ("compare", "--concurrency", "--connections"),
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


@pytest.mark.parametrize(
    ("command", "typed", "meant"),
    [
        # memtier_benchmark
        ("run", "--json-out-file", "use --json."),
        ("run", "--run-count", "use --rounds."),
        ("run", "-x", "use --rounds."),
        ("run", "--expiry-range", "use --ttl (a range is written 60-120 here)."),
        ("run", "--key-maximum", "use --keys (keys are numbered from 0 here)."),
        ("run", "--rate-limiting", "use --rate (memtier's rate is per connection"),
        ("run", "--hdr-file-prefix", "use --hdr-log."),  # the spelling guess: --key-prefix
        ("run", "--select-db", "use the URL's /DB: redis://HOST:6379/DB"),  # guess: --seed
        ("run", "--key-stddev", "use --key-pattern gaussian:MEAN,STDDEV"),  # guess: --key-size
        ("run", "--clients", "use --connections (kvbench's -c and -n are totals"),
        ("compare", "--clients", "use --connections (kvbench's -c and -n are totals"),
        ("run", "--test-time", "use --duration (with a unit: 60s)."),
        ("run", "--data-size", "use --value-size."),
        ("sweep", "--threads", "use --processes (kvbench's -c and -n are totals"),
        # redis-benchmark
        ("run", "-t", "use --processes or --command (memtier's -t is threads"),
        ("run", "-d", "redis-benchmark's name: use --value-size."),
        ("run", "-r", "redis-benchmark's name: use --keys (the keyspace size)."),
        ("run", "--dbnum", "use the URL's /DB"),
    ],
)
def test_other_tools_flags_name_ours_and_how_they_differ(
    command: str, typed: str, meant: str
) -> None:
    result = CliRunner().invoke(cli, [command, typed, "4"])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert f"No such option '{typed}'. {typed} is " in said
    assert meant in said
    assert "Did you mean" not in result.output


def test_another_tools_flag_whose_equivalent_this_command_lacks_gets_no_answer_of_it() -> None:
    result = CliRunner().invoke(cli, ["queue", "--threads", "4"])
    assert result.exit_code == 2
    assert "use --processes" not in result.output
