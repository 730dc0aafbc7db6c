"""Bad settings are refused by ``kvbench run`` before any connection: one line, exit 2.

Each case points the run at a listening socket that counts the connections it was
offered: a refusal must leave it untouched (no preflight, no worker, no throwaway
memcached).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kvbench.cli import main
from tests.support.cli import offered_connections


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["run", *args])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


FLAG_CASES = [
    (["--interval", "0"], "--interval: must be at least 10ms, got '0'"),
    (["--duration", "0"], "--duration: must be above 0, got '0'"),
    (["--duration", "0s"], "--duration: must be above 0, got '0s'"),
    (["--timeout", "0"], "--timeout: must be above 0, got '0'"),
    (["--max-lag", "0"], "--max-lag: must be above 0, got '0'"),
    (["--ttl", "-5"], "--ttl: '-5': a ttl cannot be negative"),
    (["--value-size", "-3"], "--value-size: '-3': a value size cannot be negative"),
    (["--key-prefix", "k" * 246], "--key-prefix: keys would be up to 251 bytes"),
    (
        ["--key-prefix", "k" * 239, "--ratio", "set=1,incr=1"],
        "--key-prefix: keys would be up to 251 bytes (incr's counter keys",
    ),
]


@pytest.mark.parametrize(("flags", "message"), FLAG_CASES)
def test_bad_flags_are_refused_before_any_connection(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    flags: list[str],
    message: str,
) -> None:
    port = listener.getsockname()[1]
    code, _, err = run_cli(
        capsys, f"memcached://127.0.0.1:{port}", "--db", str(tmp_path / "h.db"), *flags
    )
    assert code == 2
    assert err.startswith(f"kvbench: error: {message}"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert offered_connections(listener) == 0
    assert not (tmp_path / "h.db").exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://127.0.0.1:{port}?rsp=3&pasword=x", "unknown option 'rsp'"),
        ("redis://127.0.0.1:{port}?resp=4", "resp=4: the protocol version is 2 or 3"),
        ("memcached://127.0.0.1:{port}/3", "/3: memcached has no databases or paths"),
        ("memcacheq://127.0.0.1:{port}/q", "a queue URL: use kvbench queue"),
        ("redis-queue://127.0.0.1:{port}/jobs", "a queue URL: use kvbench queue"),
        ("memcached://127.0.0.1:0", "port 0"),
        ("memcached://127.0.0.1:", "an empty port"),
    ],
)
def test_bad_urls_are_refused_before_any_connection(
    listener: socket.socket, capsys: pytest.CaptureFixture[str], url: str, message: str
) -> None:
    port = listener.getsockname()[1]
    code, _, err = run_cli(capsys, url.format(port=port), "--no-save")
    assert code == 2
    assert message in err and err.count("\n") == 1, err
    assert offered_connections(listener) == 0


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        # no target at all would start a throwaway memcached: an empty list must not
        ("[target]\nurls = []\n", "target.urls in {path}: an empty list"),
        (
            '[target]\nurls = ["memcached://127.0.0.1:1"]\n[load]\nthreads = 4\n',
            "load.threads in {path}: unknown setting; did you mean load.processes?",
        ),
    ],
)
def test_scenario_files_are_refused_before_anything_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, toml: str, message: str
) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(toml)
    code, out, err = run_cli(capsys, "--config", str(scenario), "--no-save")
    assert code == 2
    assert "throwaway" not in out
    assert err.startswith("kvbench: error: " + message.format(path=scenario)), err
