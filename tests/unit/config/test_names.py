from __future__ import annotations

import pytest

from kvbench.config.names import did_you_mean

FLAGS = ["--processes", "--connections", "--duration", "--value-size", "--keys", "--key-size"]
KEYS = ["load.processes", "load.connections", "load.duration", "workload.value_size",
        "workload.keys", "target.urls"]  # fmt: skip


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("--wokers", "--processes"),
        ("--threads", "--processes"),
        ("--Test_Time", "--duration"),
        ("--data-size", "--value-size"),
        ("--kyes", "--keys"),
    ],
)
def test_flags(typed: str, meant: str) -> None:
    assert did_you_mean(typed, FLAGS, "--") == meant


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("load.threads", "load.processes"),
        ("load.clients", "load.connections"),
        ("load.test_time", "load.duration"),
        ("workload.data_size", "workload.value_size"),
        ("load.keys", "workload.keys"),  # the right key in the wrong section
        ("lod.duration", "load.duration"),
        ("urls", "target.urls"),
    ],
)
def test_scenario_keys(typed: str, meant: str) -> None:
    assert did_you_mean(typed, KEYS, ".") == meant


def test_other_tools_names_only_for_options_the_command_has() -> None:
    assert did_you_mean("--threads", ["--producers", "--consumers"], "--") is None


def test_plain_names() -> None:
    assert did_you_mean("rsp", ["resp"]) == "resp"
    assert did_you_mean("pasword", ["resp"]) is None
