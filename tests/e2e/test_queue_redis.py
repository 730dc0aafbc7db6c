"""``kvbench queue`` end to end against a real redis-server: LPUSH, then RPOP or BRPOP."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbench.config.model import ReportConfig
from kvbench.config.queue import build_queue_config
from kvbench.engine import clock
from kvbench.runner.queue_probe import server_backlog
from tests.support.cli import read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("query", ["", "?block=100ms"], ids=["rpop", "brpop"])
def test_two_producers_two_consumers_on_a_list(
    fresh_redis: Server, tmp_path: Path, query: str
) -> None:
    url = f"redis-queue://{fresh_redis.address}/jobs{query}"
    out = tmp_path / "queue.json"
    result = run_kvbench(
        "queue",
        url,
        "--producers",
        "2",
        "--consumers",
        "2",
        "--messages",
        "20000",
        "--message-size",
        "100",
        "-P",
        "4",
        "--json",
        str(out),
        "--no-save",
        timeout_s=180,
    )
    assert result.code == 0, result.stdout + result.stderr
    doc = read_json(out)
    queue = doc["queue"]
    assert queue["pop_command"] == ("brpop" if query else "rpop")
    assert (queue["produced"], queue["unique"], queue["received"]) == (20_000, 20_000, 20_000)
    assert (queue["lost"], queue["duplicated"], queue["out_of_order"]) == (0, 0, 0)
    assert doc["ops"]["put"]["outcomes"] == {"stored": 20_000}
    # The list is empty afterwards, by Redis's own count.
    assert server_backlog(build_queue_config(url, {}, ReportConfig())) == {"backlog": 0}
    assert queue["backlog"]["server_after"] == 0
    # each role's wait for its core, beside its CPU, where the kernel says (the verdict's)
    if clock.cpu_wait_ns() is not None:
        roles = doc["workers"]
        assert len(roles) == 4 and all(0 <= w["cpu_wait_s"] <= w["active_s"] for w in roles)
