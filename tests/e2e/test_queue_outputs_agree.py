"""A queue run is a run: its terminal summary, ``--json``, ``show``, ``show --json``,
``export --json``, the HTML report and ``diff`` carry the same figures.

Against the memcacheq STAND-IN (tests/support/memcacheq_standin.py; memcacheq is not
packaged): a clean run, and one whose server loses every 500th message. Before queue runs
were runs, ``report`` showed the puts over the whole window (26.7k/s where the terminal
printed 43.1k), ``export --json`` had no queue section and the wrong verdicts, ``diff``
counted empty answers as gets, and a run that lost messages was "ok" in the report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvbench.report.terminal import fmt_us
from kvbench.units import format_rate
from tests.support.cli import read_json, run_kvbench
from tests.support.memcacheq_standin import MemcacheqStandin
from tests.support.report_page import parse, resolve

pytestmark = pytest.mark.integration

SHAPE = ("--producers", "2", "--consumers", "2", "--messages", "2000", "-P", "4")


@pytest.fixture
def servers() -> Iterator[tuple[MemcacheqStandin, MemcacheqStandin]]:
    clean, lossy = MemcacheqStandin(), MemcacheqStandin(drop_every=100)
    clean.start()
    lossy.start()
    yield clean, lossy
    clean.stop()
    lossy.stop()


def figures(doc: dict[str, Any]) -> dict[str, Any]:
    """The figures every output must agree on."""
    queue = doc["queue"]
    return {
        "puts_per_s": queue["puts_per_s"],
        "gets_per_s": queue["gets_per_s"],
        "put_throughput": doc["ops"]["put"]["throughput_per_s"],
        "get_throughput": doc["ops"]["get"]["throughput_per_s"],
        "lost": queue["lost"],
        "duplicated": queue["duplicated"],
        "e2e_p50_us": queue["e2e_latency_us"]["p50"],
        "e2e_p99_us": queue["e2e_latency_us"]["p99"],
        "backlog_peak": queue["backlog"]["peak"],
        "status": doc["status"],
    }


def queue_run(server: MemcacheqStandin, tmp_path: Path, name: str) -> tuple[int, str, Path]:
    out = tmp_path / f"{name}.json"
    result = run_kvbench(
        "queue",
        f"memcacheq://127.0.0.1:{server.port}/q",
        *SHAPE,
        "--json",
        str(out),
        "--report",
        str(tmp_path / f"{name}.html"),
        "--db",
        str(tmp_path / "history.db"),
        "--no-live",
        timeout_s=180,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result.code, result.stdout, out


def test_every_output_of_a_queue_run_gives_the_same_figures(
    servers: tuple[MemcacheqStandin, MemcacheqStandin], tmp_path: Path
) -> None:
    clean, lossy = servers
    db = str(tmp_path / "history.db")
    runs = {}
    for name, server in (("clean", clean), ("lossy", lossy)):
        code, stdout, out = queue_run(server, tmp_path, name)
        runs[name] = (code, stdout, read_json(out))
    code, _, doc = runs["lossy"]
    assert code == 1 and doc["status"] == "failed"  # a lost message fails the run
    assert doc["queue"]["lost"] == len(lossy.dropped) == 20  # the server's own count
    assert runs["clean"][0] == 0 and runs["clean"][2]["queue"]["lost"] == 0

    for name, (_, stdout, doc) in runs.items():
        run_id, expected = doc["run_id"], figures(doc)
        assert expected["put_throughput"] == expected["puts_per_s"]  # one figure, not two
        assert expected["get_throughput"] == expected["gets_per_s"]
        # show --json and export --json: the same document
        shown = json.loads(run_kvbench("show", run_id, "--db", db, "--json").stdout)
        exported_path = tmp_path / f"{name}.export.json"
        run_kvbench("export", run_id, "--db", db, "--json", str(exported_path))
        exported = read_json(exported_path)
        assert figures(shown) == figures(exported) == expected, name
        assert shown == exported == doc
        # show: the terminal summary the run printed, the same text
        summary = run_kvbench("show", run_id, "--db", db).stdout
        assert summary and summary in stdout, name
        _assert_terminal(summary, expected)
        # the HTML reports (--report, and kvbench report from the history)
        page_path = tmp_path / f"{name}.report.html"
        run_kvbench("report", run_id, "--db", db, "-o", str(page_path))
        for html in (tmp_path / f"{name}.html", page_path):
            _assert_page(html.read_text(), doc, expected)

    # diff: each side's rates, delivery, e2e latency and backlog, and each run's status
    a, b = runs["clean"][2], runs["lossy"][2]
    compared = json.loads(
        run_kvbench("diff", a["run_id"], b["run_id"], "--db", db, "--json").stdout
    )
    assert compared["status"] == {"a": "ok", "b": "failed"}
    changes = {(c["metric"], c["op"]): c for c in compared["changes"]}
    for side, doc in (("a", a), ("b", b)):
        expected = figures(doc)
        assert changes["throughput_per_s", "put"][side] == expected["puts_per_s"]
        assert changes["throughput_per_s", "get"][side] == expected["gets_per_s"]
        assert changes["lost", "delivery"][side] == expected["lost"]
        assert changes["duplicated", "delivery"][side] == expected["duplicated"]
        assert changes["e2e_p50_us", "end to end"][side] == expected["e2e_p50_us"]
        assert changes["e2e_p99_us", "end to end"][side] == expected["e2e_p99_us"]
        assert changes["backlog_peak", "backlog"][side] == expected["backlog_peak"]


def _assert_terminal(text: str, expected: dict[str, Any]) -> None:
    assert f"puts {format_rate(expected['puts_per_s'])}/s over" in text
    assert f"gets {format_rate(expected['gets_per_s'])}/s over" in text
    assert f"lost {expected['lost']:,}, duplicated {expected['duplicated']:,}" in text
    assert f"backlog peak {expected['backlog_peak']:,}" in text
    assert f"\nstatus: {expected['status']}" in text
    (e2e_row,) = [line for line in text.splitlines() if "end to end" in line]
    cells = [cell.strip() for cell in e2e_row.split("│")]
    assert cells[3] == format_rate(expected["gets_per_s"])
    assert cells[4] == fmt_us(expected["e2e_p50_us"]) and cells[6] == fmt_us(expected["e2e_p99_us"])


def _assert_page(html: str, doc: dict[str, Any], expected: dict[str, Any]) -> None:
    page = parse(html)
    embedded = json.loads(page.data_text)["runs"][0]["document"]
    assert figures(embedded) == expected
    shown = {pointer: json.loads(value) for pointer, value, _ in page.cells}
    for pointer, value in shown.items():  # every figure on the page is the document's
        assert value == resolve([doc], pointer), pointer
    assert shown["/0/queue/puts_per_s"] == expected["puts_per_s"]
    assert shown["/0/queue/gets_per_s"] == expected["gets_per_s"]
    assert shown["/0/ops/put/throughput_per_s"] == expected["puts_per_s"]
    assert shown["/0/queue/lost"] == expected["lost"]
    assert shown["/0/queue/duplicated"] == expected["duplicated"]
    assert shown["/0/queue/e2e_latency_us/p50"] == expected["e2e_p50_us"]
    assert shown["/0/queue/e2e_latency_us/p99"] == expected["e2e_p99_us"]
    assert shown["/0/queue/backlog/peak"] == expected["backlog_peak"]
    assert f"<dd>{expected['status']}</dd>" in html
