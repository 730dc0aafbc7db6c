"""``rediss://``: TLS to a real redis-server with a self-signed certificate (conftest.py)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.support import servers
from tests.support.cli import read_json, run_kvbench

pytestmark = pytest.mark.integration


def tls_redis(cert: Path, key: Path) -> contextlib.AbstractContextManager[servers.Server]:
    port = servers.free_port()
    binary = servers.require_binary("redis-server", "redis-server")
    argv = [
        binary,
        "--port",
        "0",
        "--tls-port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--tls-cert-file",
        str(cert),
        "--tls-key-file",
        str(key),
        "--tls-ca-cert-file",
        str(cert),
        "--tls-auth-clients",
        "no",
        "--save",
        "",
        "--appendonly",
        "no",
        "--requirepass",
        "pw",
    ]
    return servers.running("redis-server", argv, port)


def test_tls_run_with_the_servers_ca(certificate: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = certificate
    out = tmp_path / "run.json"
    with tls_redis(cert, key) as server:
        url = f"rediss://:pw@{server.address}/0?ca={cert}"
        result = run_kvbench(
            "run",
            url,
            "--duration",
            "1s",
            "-c",
            "2",
            "--processes",
            "1",
            "--json",
            str(out),
            "--no-save",
        )
    assert result.code == 0, result.stderr
    doc = read_json(out)
    assert doc["totals"]["completed"] > 100 and doc["totals"]["errors"] == 0
    assert doc["targets"][0]["url"].startswith("rediss://***@")


def test_tls_without_trusting_the_certificate_is_refused(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    with tls_redis(cert, key) as server:
        result = run_kvbench(
            "run", f"rediss://:pw@{server.address}", "--duration", "1s", "--no-save"
        )
        insecure = run_kvbench(
            "run",
            f"rediss://:pw@{server.address}?insecure=1",
            "--duration",
            "1s",
            "-c",
            "1",
            "--processes",
            "1",
            "--no-save",
            "--no-live",
        )
    assert result.code == 3
    assert "TLS handshake failed" in result.stderr and "CERTIFICATE_VERIFY_FAILED" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert insecure.code == 0, insecure.stderr


def test_tls_options_need_rediss() -> None:
    result = run_kvbench("run", "redis://127.0.0.1:1?insecure=1")
    assert result.code == 2 and "need rediss://" in result.stderr
