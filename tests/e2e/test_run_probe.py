"""``kvbench run`` against servers that give no stats, or no reply: a note, or one line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kvbench.cli import main
from tests.support import fake_servers
from tests.support.cli import read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration


def test_a_proxy_answering_error_to_stats_runs_with_a_note(
    memcached_server: Server, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    with fake_servers.stats_error(memcached_server.port) as port:
        url = f"memcached://127.0.0.1:{port}"
        result = run_kvbench(
            "run", url, "--duration", "1s", "-c", "2", "--processes", "1",
            "--timeout", "300ms", "--json", str(out), "--no-save", "--no-live",
        )  # fmt: skip
    assert result.code == 0, result.stderr
    note = f"{url} answered 'stats' with ERROR (a proxy?): no server-side stats for this run"
    assert note in result.stdout
    doc = read_json(out)
    assert doc["totals"]["ops"] > 0  # the load went through the proxy
    assert doc["targets"][0]["server_version"] == "unknown"


def test_a_server_that_never_answers_is_one_line_within_the_timeout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with fake_servers.silent() as port:
        url = f"memcached://127.0.0.1:{port}"
        started = time.monotonic()
        with pytest.raises(SystemExit) as exited:
            main(["run", url, "--timeout", "300ms", "--processes", "1", "--no-save", "--no-live"])
        waited = time.monotonic() - started
    assert exited.value.code == 3
    err = capsys.readouterr().err
    assert err == (
        f"kvbench: error: {url} accepted the connection but gave no reply to 'stats' within 300ms\n"
    )
    assert waited < 2.5  # --timeout governs the wait, not the probe's old fixed 3 s
