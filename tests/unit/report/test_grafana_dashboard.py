"""docs/grafana/kvbench-dashboard.json asks only for series and labels --prometheus serves."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kvbench.metrics.outcome import ERROR_OUTCOMES
from tests.unit.report.test_prometheus import TARGET, exposition, snapshot

DASHBOARD = Path(__file__).parents[3] / "docs" / "grafana" / "kvbench-dashboard.json"


def served() -> dict[str, set[str]]:
    """Every sample name an open-loop run's scrape has, with the labels it carries."""
    from kvbench.report.prometheus import LiveFigures

    figures = LiveFigures()
    figures.start_run(TARGET, "open", 8)
    figures.interval(snapshot(0, 2000, 100))
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(exposition(figures)):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def queries(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k in ("expr", "definition") and isinstance(v, str)]
        return found + [q for v in node.values() for q in queries(v)]
    if isinstance(node, list):
        return [q for v in node for q in queries(v)]
    return []


def test_every_query_names_a_served_series_and_its_labels() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = queries(dashboard)
    assert len(exprs) >= 8
    names = served()
    for expr in exprs:
        used = re.findall(r"\bkvbench_[a-z_]+", expr)
        assert used, expr
        for name in used:
            assert name in names, f"{name} is not served ({expr})"
        for selector in re.findall(r"kvbench_[a-z_]+\{([^}]*)\}", expr):
            for label in re.findall(r"(\w+)\s*[=!]~?", selector):
                assert any(label in names[n] for n in used), (label, expr)
        for grouping in re.findall(r"by \(([^)]*)\)", expr):
            for label in (g.strip() for g in grouping.split(",")):
                assert any(label in names[n] for n in used) or label == "le", (label, expr)


def test_the_error_panels_name_every_error_outcome() -> None:
    text = DASHBOARD.read_text()
    for outcome in ERROR_OUTCOMES:
        assert outcome.name.lower() in text


def test_the_open_loop_panel_draws_the_late_sends_beside_offered_and_achieved() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    [panel] = [p for p in dashboard["panels"] if "kvbench_offered_ops_per_second" in str(p)]
    exprs = queries(panel)
    assert any('note="late"' in e and "kvbench_ops_noted_total" in e for e in exprs), exprs
