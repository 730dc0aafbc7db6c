"""``--prometheus``: scraped over HTTP during a real run, and at its end the counters equal
the run's result document."""

from __future__ import annotations

import contextlib
import threading
import urllib.request
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvbench.cli import main
from tests.support.cli import read_json, run_kvbench
from tests.support.prometheus import bucket_of, histogram_of, histogram_quantile
from tests.support.servers import Server, free_port

pytestmark = pytest.mark.integration


def scrape(url: str) -> dict[str, list[Any]]:
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def ops_of(families: dict[str, list[Any]]) -> dict[str, dict[str, int]]:
    ops: dict[str, dict[str, int]] = {}
    for sample in families.get("kvbench_ops", []):
        if sample.name == "kvbench_ops_total":
            ops.setdefault(sample.labels["op"], {})[sample.labels["outcome"]] = int(sample.value)
    return ops


def total(families: dict[str, list[Any]], name: str) -> float:
    return sum(s.value for s in families.get(name, []) if s.name == f"{name}_total")


def test_scraped_during_the_run_and_equal_to_the_document_at_its_end(
    fresh_redis: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    scrapes: list[dict[str, list[Any]]] = []
    final: dict[str, list[Any]] = {}
    start_http_server = prometheus_client.start_http_server

    def start(*args: Any, **kwargs: Any) -> Any:
        # The real server; its last scrape taken as the command stops it.
        server, thread = start_http_server(*args, **kwargs)
        shutdown = server.shutdown

        def scrape_then_shutdown() -> None:
            final.update(scrape(url))
            shutdown()

        server.shutdown = scrape_then_shutdown  # type: ignore[method-assign]
        return server, thread

    monkeypatch.setattr(prometheus_client, "start_http_server", start)
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):  # not listening yet, or stopped
                scrapes.append(scrape(url))
            stop.wait(0.1)

    poller = threading.Thread(target=poll)
    poller.start()
    out = tmp_path / "run.json"
    try:
        with pytest.raises(SystemExit) as exited:
            main(
                [
                    "run", f"redis://{fresh_redis.address}", "--duration", "3s",
                    "--interval", "500ms", "-c", "4", "--processes", "2", "-P", "4",
                    "--ratio", "get=2", "--command", "HSET h:__key__ f __data__",
                    "--keys", "100", "--prometheus", f"127.0.0.1:{port}",
                    "--json", str(out), "--no-save", "--no-live",
                ]
            )  # fmt: skip
    finally:
        stop.set()
        poller.join()
    assert exited.value.code == 0
    doc = read_json(out)
    intervals = len(doc["intervals"])
    during = [s for s in scrapes if 0 < total(s, "kvbench_intervals") < intervals]
    assert during, f"no scrape saw the run in progress ({len(scrapes)} scrapes)"
    seen = [total(s, "kvbench_ops") for s in scrapes]
    assert seen == sorted(seen)  # counters only grow
    assert total(final, "kvbench_intervals") == intervals
    assert ops_of(final) == {op: row["outcomes"] for op, row in doc["ops"].items()}
    assert total(final, "kvbench_errors") == doc["totals"]["errors"]
    gauges = {s.labels["state"]: s.value for s in final["kvbench_connections"]}
    assert {s.labels["target"] for f in final.values() for s in f} == {
        f"redis://{fresh_redis.address}"
    }
    assert gauges == {"asked": 4, "live": doc["intervals"][-1]["connections_live"]}
    get = histogram_of(final, "get")
    assert get["count"] == sum(doc["ops"]["get"]["outcomes"].values())
    # and by outcome: each one's series counts its ops (a get's hits apart from its misses)
    for op, row in doc["ops"].items():
        for outcome, n in row["outcomes"].items():
            assert histogram_of(final, op, outcome=outcome)["count"] == n, (op, outcome)
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        exact = doc["ops"]["get"]["latency_us"][name] / 1e6
        assert bucket_of(histogram_quantile(q, get["buckets"])) == bucket_of(exact), name


def test_without_the_package_the_flag_is_refused_in_one_line(tmp_path: Path) -> None:
    # The child cannot import prometheus_client: a sitecustomize on its path blocks it
    # (a None in sys.modules makes import and find_spec fail, as a missing package does).
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['prometheus_client'] = None\n"
    )
    result = run_kvbench(
        "run", "redis://127.0.0.1:1", "--prometheus", "127.0.0.1:9464", "--no-save",
        env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert result.code == 2
    assert result.stderr.strip() == (
        "kvbench: error: --prometheus: needs prometheus-client: pip install 'kvbench[prometheus]'"
    )
