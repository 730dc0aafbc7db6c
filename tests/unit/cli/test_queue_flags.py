"""Every flag of ``kvbench queue`` and of ``--preset queue-producer-consumer``: applied in
every phase (visible in the config each phase runs with), or refused by name, exit 2.

The phases are not run: ``measure_queue_phase`` is replaced by one that keeps the config
it was given, so this checks what would run, before any connection.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

import pytest

from kvbench.cli import main, preset_runs, session
from kvbench.config.queue import QueueConfig
from tests.support.cli import offered_connections

PRESET = "queue-producer-consumer"


class Captured(Exception):
    """Raised by the stand-in phase once it has kept its config."""


@pytest.fixture
def phases(monkeypatch: pytest.MonkeyPatch) -> list[QueueConfig]:
    """The config of every phase the preset would run (each phase is then skipped)."""
    configs: list[QueueConfig] = []

    def phase(console: Any, config: QueueConfig, carry: Any) -> Any:
        configs.append(config)
        raise Captured

    def in_steps(run: Any, measure_step: Any) -> int:
        for step in run.preset.steps:
            with contextlib.suppress(Captured):
                measure_step(step)
        return 0

    monkeypatch.setattr(preset_runs, "measure_queue_phase", phase)
    monkeypatch.setattr(preset_runs, "_in_steps", in_steps)
    monkeypatch.setattr(preset_runs, "queue_phases_table", lambda *a: "")
    return configs


@pytest.fixture
def single(monkeypatch: pytest.MonkeyPatch) -> list[QueueConfig]:
    """The config ``kvbench queue`` would run with (the run is then skipped)."""
    configs: list[QueueConfig] = []

    def once(console: Any, config: QueueConfig, outputs: Any) -> int:
        configs.append(config)
        return 0

    monkeypatch.setattr(session, "queue_once", once)
    return configs


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    _, err = capsys.readouterr()
    return int(exited.value.code or 0), err


# (flags, what the config of every phase shows)
PRESET_APPLIED = [
    (["-n", "5000"], lambda c: c.messages == 5000),
    (["--requests", "5000"], lambda c: c.messages == 5000),
    (["-P", "4"], lambda c: c.pipeline == 4),
    (["--timeout", "30s"], lambda c: c.timeout_ns == 30_000_000_000),
    (["--interval", "2s"], lambda c: c.interval_ns == 2_000_000_000),
    (["--duration", "1m"], lambda c: c.duration_ns == 60_000_000_000),
    (["-q"], lambda c: c.report.live is False and c.report.quiet is True),
    (["--no-live"], lambda c: c.report.live is False and c.report.quiet is False),
    (["--wide"], lambda c: c.report.wide is True),
    (["--no-save"], lambda c: c.report.save is False),
    (["--db", "{tmp}/other.db"], lambda c: c.report.db_path.endswith("other.db")),
    (["--data-dir", "{tmp}"], lambda c: c.data_dir is not None),
]


@pytest.mark.parametrize(("flags", "applied"), PRESET_APPLIED)
def test_a_flag_the_queue_preset_takes_is_applied_in_every_phase(
    phases: list[QueueConfig],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    flags: list[str],
    applied: Any,
) -> None:
    args = [f.format(tmp=tmp_path) for f in flags]
    code, err = cli(capsys, "run", "--preset", PRESET, "memcacheq://127.0.0.1:1/q", *args)
    assert code == 0, err
    assert [c.producers for c in phases] == [2, 0, 2]  # write, drain, mixed
    assert all(applied(c) for c in phases), phases


def test_n_scales_the_mixed_phase_start(phases: list[QueueConfig], capsys: Any) -> None:
    code, err = cli(capsys, "run", "--preset", PRESET, "memcacheq://127.0.0.1:1/q", "-n", "5000")
    assert code == 0, err
    assert phases[2].consumers_start_after == 500  # 100,000 of 1,000,000


PRESET_REFUSED = [
    ["--connections", "4"],
    ["--processes", "2"],
    ["--ratio", "1:1"],
    ["--keys", "10"],
    ["--rate", "100"],
    ["--seed", "1"],
    ["--value-size", "10"],
    ["--warmup", "1s"],
    ["--rounds", "2"],
    ["--max-error-rate", "1%"],
    ["--max-lag", "1s"],
    ["--arrival", "poisson"],
    ["--ttl", "5"],
    ["--multiget", "2"],
    ["--key-prefix", "x"],
    ["--key-size", "10"],
    ["--key-template", "random:8"],
    ["--value-kind", "compressible"],
    ["--verify"],
    ["--preload"],
    ["--prometheus", "127.0.0.1:0"],
]


@pytest.mark.parametrize("flags", PRESET_REFUSED, ids=lambda f: f[0])
def test_a_flag_the_queue_preset_does_not_take_is_refused_by_name(
    listener: socket.socket,
    phases: list[QueueConfig],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    flags: list[str],
) -> None:
    url = f"memcacheq://127.0.0.1:{listener.getsockname()[1]}/q"
    code, err = cli(capsys, "run", "--preset", PRESET, url, "--no-save", *flags)
    assert code == 2, err
    assert err.startswith(f"kvbench: error: {flags[0]}: preset {PRESET} does not take"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert phases == [] and offered_connections(listener) == 0


def test_a_config_file_is_refused_by_the_queue_preset(
    phases: list[QueueConfig], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "load.toml"
    path.write_text("[load]\nconnections = 4\n")
    code, err = cli(capsys, "run", "--preset", PRESET, "memcacheq://127.0.0.1:1/q", "--config",
                    str(path), "--no-save")  # fmt: skip
    assert code == 2 and err.startswith("kvbench: error: --config: preset"), err
    assert phases == []


QUEUE_APPLIED = [
    (["--producers", "3"], lambda c: c.producers == 3),
    (["--consumers", "0"], lambda c: c.consumers == 0),
    (["-n", "77"], lambda c: c.messages == 77),
    (["--message-size", "64"], lambda c: c.message_size_bytes == 64),
    (["-P", "8"], lambda c: c.pipeline == 8),
    (["--consumers-start-after", "5"], lambda c: c.consumers_start_after == 5),
    (["--duration", "3s"], lambda c: c.duration_ns == 3_000_000_000),
    (["--grace", "2s"], lambda c: c.grace_ns == 2_000_000_000),
    (["--poll-interval", "5ms"], lambda c: c.poll_interval_ns == 5_000_000),
    (["--timeout", "30s"], lambda c: c.timeout_ns == 30_000_000_000),
    (["--interval", "2s"], lambda c: c.interval_ns == 2_000_000_000),
    (["--data-dir", "{tmp}"], lambda c: c.data_dir is not None),
    (["--json", "{tmp}/q.json"], lambda c: c.report.json_path.endswith("q.json")),
    (["--db", "{tmp}/h.db"], lambda c: c.report.db_path.endswith("h.db")),
    (["--no-save"], lambda c: c.report.save is False),
    (["-q"], lambda c: c.report.live is False),
]


@pytest.mark.parametrize(
    ("flags", "applied"), QUEUE_APPLIED, ids=[" ".join(flags) for flags, _ in QUEUE_APPLIED]
)
def test_every_flag_of_kvbench_queue_is_applied(
    single: list[QueueConfig],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    flags: list[str],
    applied: Any,
) -> None:
    args = [f.format(tmp=tmp_path) for f in flags]
    code, err = cli(capsys, "queue", "memcacheq://127.0.0.1:1/q", *args)
    assert code == 0, err
    (config,) = single
    assert applied(config), config


@pytest.mark.parametrize("flags", [["-c", "4"], ["--processes", "2"], ["--rate", "10"]])
def test_kvbench_queue_refuses_a_flag_it_does_not_take(
    single: list[QueueConfig], capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    code, err = cli(capsys, "queue", "memcacheq://127.0.0.1:1/q", *flags)
    assert code == 2 and flags[0] in err and "Traceback" not in err, err
    assert single == []
