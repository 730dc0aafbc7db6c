"""The run options, declared once: ``--command``/``--command-weight`` pair up in the order
given, whichever command takes them."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from kvbench.cli import main
from kvbench.cli.outputs import Outputs
from kvbench.config import Settings

session = importlib.import_module("kvbench.cli.session")  # what ``kvbench run`` calls


def test_a_weight_weighs_the_command_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Settings] = []

    def fake_run_once(console: Any, settings: Settings, config: Any, outputs: Outputs) -> int:
        seen.append(settings)
        return 0

    monkeypatch.setattr(session, "run_once", fake_run_once)
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "run", "redis://127.0.0.1:1", "--command", "HSET __key__ f __data__",
                "--command", "LPUSH __key__ __data__", "--command-weight", "3",
                "--prometheus", "127.0.0.1:0", "--command", "PING", "--command-weight", "2",
            ]
        )  # fmt: skip
    assert exited.value.code == 0
    assert seen[0]["workload.commands"] == (
        [("HSET __key__ f __data__", "1"), ("LPUSH __key__ __data__", "3"), ("PING", "2")],
        "--command",
    )
    assert seen[0]["report.prometheus"] == ("127.0.0.1:0", "--prometheus")


def test_without_commands_there_is_no_command_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Settings] = []
    monkeypatch.setattr(session, "run_once", lambda console, s, c, o: seen.append(s) or 0)
    with pytest.raises(SystemExit):
        main(["run", "redis://127.0.0.1:1"])
    assert "workload.commands" not in seen[0] and "report.prometheus" not in seen[0]


def test_two_weights_for_one_command_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["sweep", "redis://127.0.0.1:1", "--connections", "1,2", "--command", "PING",
              "--command-weight", "2", "--command-weight", "3"])  # fmt: skip
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "kvbench: error: --command-weight: two weights for --command 'PING'"
    )
