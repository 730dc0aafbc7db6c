"""Every output of a run tells the same story: exit code, terminal, result document,
history row, ``show`` and the HTML report give one status, and the printed throughput is
the successes over the window, recomputed from the printed and JSON figures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvbench.results.store import Store
from tests.support.cli import Result, run_kvbench

# Replies that answer their op (docs/measurement.md, "The window and throughput").
SUCCESSES = {"hit", "miss", "stored", "not_stored", "exists", "not_found", "deleted"}
SUCCESSES |= {"touched", "ok", "value"}
EXIT_CODES = {"ok": 0, "failed": 1, "partial": 4, "interrupted": 130}


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The summary table's rows, by op: the cells as printed."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("│ "):
            cells = [c.strip() for c in line.strip("│").split("│")]
            rows[cells[0]] = cells
    return rows


def assert_outputs_agree(result: Result, doc: dict[str, Any], db: str, status: str) -> None:
    """The run behind ``result`` (its document ``doc``, stored in ``db``) is ``status``
    everywhere, and its throughput figures are its successes over its window."""
    assert result.code == EXIT_CODES[status], result.stderr
    assert "Traceback" not in result.stderr
    assert doc["status"] == status
    # terminal: the table's title and the last status line
    assert f"window, {status})" in result.stdout
    assert f"\nstatus: {status}" in result.stdout
    # the history row, and the run shown again from it
    with Store(db) as store:
        (row,) = [r for r in store.list_runs(last=100) if r["run_id"] == doc["run_id"]]
    assert row["status"] == status
    assert row["throughput_per_s"] == doc["totals"]["throughput_per_s"]
    listed = run_kvbench("history", "--db", db)
    (line,) = [line for line in listed.stdout.splitlines() if doc["run_id"] in line]
    assert f" {status} " in line
    shown = run_kvbench("show", doc["run_id"], "--db", db)
    assert f"window, {status})" in shown.stdout and f"\nstatus: {status}" in shown.stdout
    as_json = run_kvbench("show", doc["run_id"], "--db", db, "--json")
    assert json.loads(as_json.stdout)["status"] == status
    # throughput = successes / window, per op and in total, as printed and in the document
    window_s = doc["window_s"]
    printed = table_rows(result.stdout)
    total_succeeded = 0
    for name, op in doc["ops"].items():
        succeeded = sum(n for outcome, n in op["outcomes"].items() if outcome in SUCCESSES)
        errors = sum(
            n
            for outcome, n in op["outcomes"].items()
            if outcome in ("error_reply", "timeout", "conn_error", "dropped")
        )
        total_succeeded += succeeded
        assert op["succeeded"] == succeeded and op["errors"] == errors
        assert op["throughput_per_s"] == pytest.approx(succeeded / window_s, abs=0.1)
        assert printed[name][2] == f"{op['throughput_per_s']:,.0f}"
        assert printed[name][4] == f"{errors:,}"
    totals = doc["totals"]
    assert totals["succeeded"] == total_succeeded
    assert totals["throughput_per_s"] == pytest.approx(total_succeeded / window_s, abs=0.1)
    assert totals["errors"] == sum(totals["error_kinds"].values())
    assert totals["errors_per_s"] == pytest.approx(totals["errors"] / window_s, abs=0.1)
    if totals["ops"]:
        assert totals["error_rate"] == pytest.approx(totals["errors"] / totals["ops"], abs=1e-6)
    if len(doc["ops"]) > 1:
        assert printed["total"][2] == f"{totals['throughput_per_s']:,.0f}"
    # the interval series adds up to the same successes and errors
    series = sum(i["per_s"] * i["length_s"] for i in doc["intervals"])
    assert series == pytest.approx(total_succeeded, rel=0.01, abs=2)
    assert sum(i["errors"] for i in doc["intervals"]) == totals["errors"]


def html_status(db: str, run_id: str, path: str) -> str:
    """The status the HTML report of a stored run shows."""
    result = run_kvbench("report", run_id, "--db", db, "-o", path)
    assert result.code == 0, result.stderr
    with open(path, encoding="utf-8") as handle:
        html = handle.read()
    return html.split("<dt>status</dt><dd>", 1)[1].split("</dd>", 1)[0]
