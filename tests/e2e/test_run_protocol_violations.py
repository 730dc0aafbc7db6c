"""``kvbench run`` against a server that answers every request twice, on both drivers.

A reply that cannot belong to a request in flight (none in flight, more in one read than
in flight, a kind its request cannot get, another request's token or opaque) is a
protocol error: the connection is discarded, its requests end as ``protocol_error`` (their
own outcome, not ``conn_error``), no reply is attributed to another request, and a run
whose connections all break so fails (exit 1). Only a fake server doubles its replies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvbench.engine import fastpath
from tests.support import fake_servers, pump_oracle
from tests.support.cli import read_json, run_kvbench

pytestmark = pytest.mark.integration

SCHEMES = {
    "text": "memcached",
    "meta": "memcached+meta",
    "binary": "memcached+binary",
    "resp": "redis",
    # (a cluster's only master: its pump also reads each error reply for a redirect)
    "cluster": "redis+cluster",
}
# What a request may end as here: the server stores nothing and breaks every connection.
BROKEN = {"protocol_error", "conn_error"}


def run_doubled(protocol: str, driver: str, pipeline: int, tmp_path: Path) -> tuple[Any, Any]:
    if driver == "compiled":
        pump_oracle.require_compiled()
    out = tmp_path / "run.json"
    env = {fastpath.PURE_PYTHON_ENV: "1"} if driver == "python" else {}
    server = (
        fake_servers.doubling_cluster_node()
        if protocol == "cluster"
        else fake_servers.doubling(resp=protocol == "resp")
    )
    with server as port:
        result = run_kvbench(
            "run",
            f"{SCHEMES[protocol]}://127.0.0.1:{port}",
            *("--duration", "1s", "-c", "2", "-P", str(pipeline), "--processes", "1"),
            *("--no-save", "--json", str(out)),
            env=env,
        )
    assert "Traceback" not in result.stderr, result.stderr
    doc = read_json(out)
    assert doc["environment"]["driver"].startswith(driver), doc["environment"]["driver"]
    return result, doc


# Each protocol on both drivers, each driver at both depths: the pump's unit tests
# (test_pump_replies.py) hold the two drivers' classification alike reply by reply.
DOUBLED_CASES = [
    (protocol, driver, pipeline)
    for i, protocol in enumerate(SCHEMES)
    for driver, pipeline in (("compiled", 1 + 3 * (i % 2)), ("python", 4 - 3 * (i % 2)))
]


@pytest.mark.parametrize(("protocol", "driver", "pipeline"), DOUBLED_CASES)
def test_doubled_replies_are_protocol_errors_never_results_and_fail_the_run(
    protocol: str, driver: str, pipeline: int, tmp_path: Path
) -> None:
    result, doc = run_doubled(protocol, driver, pipeline, tmp_path)
    outcomes = {op: row["outcomes"] for op, row in doc["ops"].items()}
    # Nothing the server never did: no hit, miss, stored or not_stored from a reply that
    # answered another request.
    assert all(set(counts) <= BROKEN for counts in outcomes.values()), outcomes
    assert sum(counts.get("protocol_error", 0) for counts in outcomes.values()) > 0
    assert doc["status"] == "failed" and result.code == 1, result.stdout
    [status] = [line for line in result.stdout.splitlines() if line.startswith("status:")]
    assert "protocol_error" in status and "conn_error" not in status.split("(")[0]
    # The outcome table names them as such.
    assert "protocol_error" in result.stdout.split("status:")[0]
    # One request in flight, its reply twice in one read: the copy answers nothing, in
    # the same words on both drivers (meta's and binary's name the token or opaque that
    # matched no request; deeper, a copy may be of a kind the next request cannot get).
    if pipeline == 1 and protocol in ("text", "resp", "cluster"):
        assert "a reply arrived with no request pending" in result.stdout, result.stdout
    if protocol == "cluster":
        assert "Redis Cluster: 1 master (slots: " in result.stdout
