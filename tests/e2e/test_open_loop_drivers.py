"""The open loop on both drivers: the Python one (the reference) and the compiled pumps.

The same schedule (rate, arrival, seed, request count) runs through each driver against
its own fresh real server, memcached (text, binary, meta) and Redis: every op's count by
reply outcome is identical (one connection, so the server sees the same sequence), the
server's own counters agree, and latency is measured from the intended send times on both
(service time from the actual send beside it, every send's lag recorded). How late the
sends were is the machine's doing, not the driver's, so ``late`` is left out of the
comparison; nothing may be dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from kvbench.engine import fastpath
from tests.support import servers
from tests.support.cli import outcomes_but_late, read_json, run_kvbench
from tests.support.servers import Server

pytestmark = pytest.mark.integration

REQUESTS = 1500  # half a second at --rate 3000: hundreds of each op and outcome to compare
# (scheme, server, mix): Redis answers INCR of a non-number with an error; no incr there.
CASES = [
    ("memcached", servers.memcached, "set=2,get=3,delete=1,incr=1,mget=1"),
    ("memcached+binary", servers.memcached, "set=2,get=3,delete=1,incr=1,mget=1"),
    ("memcached+meta", servers.memcached, "set=2,get=3,delete=1,incr=1,mget=1"),
    ("redis", servers.redis, "set=2,get=3,delete=1,mget=1"),
]


def run_open_loop(
    tmp_path: Path,
    scheme: str,
    server: Callable[[], AbstractContextManager[Server]],
    mix: str,
    pure: bool,
    arrival: str,
) -> dict[str, Any]:
    out = tmp_path / f"{'python' if pure else 'compiled'}.json"
    with server() as live:
        url = f"{scheme}://{live.address}" + ("/0" if scheme == "redis" else "")
        result = run_kvbench(
            "run",
            url,
            "--rate",
            "3000",
            "--arrival",
            arrival,
            "--requests",
            str(REQUESTS),
            "--max-lag",
            "10s",
            "-c",
            "1",
            "-P",
            "32",
            "--processes",
            "1",
            "--ratio",
            mix,
            "--multiget",
            "3",
            "--keys",
            "300",
            "--seed",
            "11",
            "--json",
            str(out),
            "--no-save",
            "--no-live",
            env={fastpath.PURE_PYTHON_ENV: "1"} if pure else {},
        )
        assert result.code == 0, result.stderr
    return read_json(out)


# Every protocol with uniform arrivals; Poisson (the same dispatch, other times) on two.
RUNS = [(*case, "uniform") for case in CASES] + [
    (*case, "poisson") for case in CASES if case[0] in ("memcached", "redis")
]


@pytest.mark.parametrize(
    ("scheme", "server", "mix", "arrival"), RUNS, ids=[f"{r[0]}-{r[3]}" for r in RUNS]
)
def test_both_drivers_count_the_same_schedule_alike(
    tmp_path: Path,
    scheme: str,
    server: Callable[[], AbstractContextManager[Server]],
    mix: str,
    arrival: str,
) -> None:
    if not fastpath.compiled():
        pytest.skip("the compiled pump is not built")
    python = run_open_loop(tmp_path, scheme, server, mix, True, arrival)
    compiled = run_open_loop(tmp_path, scheme, server, mix, False, arrival)
    assert python["environment"]["driver"] == "python (KVBENCH_PURE_PYTHON is set)"
    assert compiled["environment"]["driver"] == "compiled loop"
    assert outcomes_but_late(compiled) == outcomes_but_late(python)
    for doc in (python, compiled):
        assert doc["mode"] == "open"
        assert doc["totals"]["ops"] == REQUESTS and doc["totals"]["errors"] == 0
        rows = doc["server"]["reconciliation"]
        assert rows and all(row["matches"] for row in rows), rows
        for op, row in doc["ops"].items():
            # from the intended time: the service time plus how late the send went
            assert row["latency_us"]["mean"] >= row["service_time_us"]["mean"], op
            assert row["service_time_us"]["p50"] > 0
