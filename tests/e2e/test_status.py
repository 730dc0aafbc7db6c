"""A run's status follows what happened, against real servers whose faults are real: a
memcached refusing values above its item size, and one killed before the window. Exit
code, terminal, document, history, ``show`` and HTML agree; throughput is successes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from kvbench.config.targets import parse_target
from kvbench.runner.probe import fetch_stats
from tests.support import servers
from tests.support.agreement import assert_outputs_agree, html_status
from tests.support.cli import Result, kvbench_argv, read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration

# A memcached storing items of 1 KiB at most (the slab chunk must shrink with -I); every
# set of a 2,000-byte value is refused with SERVER_ERROR object too large for cache.
SMALL_ITEMS = ("-I", "1k", "-o", "slab_chunk_max=512")


def too_large_run(server: Server, tmp_path: Path, *extra: str) -> tuple[Result, dict, str]:
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    result = run_kvbench(
        "run", f"memcached://{server.address}", "--duration", "1s", "-c", "2",
        "--processes", "1", "--value-size", "2000", "--allow-oversize", "--ratio", "1:1",
        "--json", str(out),
        "--db", db, "--no-live", *extra,
    )  # fmt: skip
    return result, read_json(out), db


def test_a_server_refusing_every_set_fails_the_run(tmp_path: Path) -> None:
    with servers.memcached(*SMALL_ITEMS) as server:
        result, doc, db = too_large_run(server, tmp_path)
        stats = fetch_stats(parse_target(f"memcached://{server.address}"))
    set_ = doc["ops"]["set"]
    assert set_["outcomes"]["error_reply"] == set_["count"] > 1000
    assert set_["throughput_per_s"] == 0.0 and set_["succeeded"] == 0
    assert doc["ops"]["get"]["outcomes"]["miss"] > 1000  # gets still answer: nothing stored
    assert int(stats["cmd_set"]) == 0  # the server stored none of them
    assert_outputs_agree(result, doc, db, "failed")
    assert doc["totals"]["error_kinds"] == {"error_reply": set_["count"]}
    (verdict,) = [v for v in doc["verdicts"] if v["id"] == "errors.rate"]
    assert verdict["level"] == "error"
    assert f"(error_reply {set_['count']:,}); above the 1% allowed" in verdict["message"]
    assert html_status(db, doc["run_id"], str(tmp_path / "r.html")) == "failed"
    # refused sets may or may not reach a server counter: no false reconciliation alarm
    assert all(r["matches"] for r in doc["server"]["reconciliation"])


def test_a_higher_max_error_rate_accepts_the_same_run(tmp_path: Path) -> None:
    with servers.memcached(*SMALL_ITEMS) as server:
        result, doc, db = too_large_run(server, tmp_path, "--max-error-rate", "60%")
    assert 0.45 < doc["totals"]["error_rate"] < 0.55
    assert doc["config"]["load"]["max_error_rate"] == 0.6
    assert_outputs_agree(result, doc, db, "ok")
    (verdict,) = [v for v in doc["verdicts"] if v["id"] == "errors.rate"]
    assert verdict["level"] == "info" and "within the 60% allowed" in verdict["message"]


def test_a_server_gone_before_the_window_is_no_success(tmp_path: Path) -> None:
    """memcached killed during warm-up: every reconnect in the window is refused."""
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    with servers.memcached() as server:
        proc = subprocess.Popen(
            kvbench_argv(
                "run", f"memcached://{server.address}", "--warmup", "3s", "--duration", "1s",
                "-c", "2", "--processes", "1", "--timeout", "200ms", "--json", str(out),
                "--db", db, "--no-live",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        target = parse_target(f"memcached://{server.address}")
        deadline = time.monotonic() + 60
        while int(fetch_stats(target).get("cmd_get", 0)) == 0:  # warm-up load has begun
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        server.proc.kill()
        stdout, stderr = proc.communicate(timeout=120)
    doc = read_json(out)
    assert doc["phases"]["warmup"]["ops"] > 0  # it had been answering
    assert doc["totals"]["succeeded"] == 0
    assert_outputs_agree(Result(proc.returncode, stdout, stderr), doc, db, "failed")
    assert doc["status_reasons"][0].startswith("no op succeeded")
    assert [v["id"] for v in doc["verdicts"] if v["level"] == "error"] == ["ops.none"]


def test_a_clean_run_is_ok_everywhere(memcached_server: Server, tmp_path: Path) -> None:
    out, db = tmp_path / "run.json", str(tmp_path / "h.db")
    result = run_kvbench(
        "run", f"memcached://{memcached_server.address}", "--duration", "1s", "-c", "2",
        "--processes", "1", "--json", str(out), "--db", db, "--no-live",
    )  # fmt: skip
    doc = read_json(out)
    assert doc["totals"]["errors"] == 0 and doc["status_reasons"] == []
    assert_outputs_agree(result, doc, db, "ok")
