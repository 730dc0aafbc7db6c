"""The self-contained HTML report: stored runs in, one HTML page out (pure).

The page embeds each run's result document (``json_report.document``) with the latency
spectrum and server series (``series``) as JSON, and a small inline script that draws
the charts as SVG from it; every figure of the tables is rendered here, on the server
side, from the same document. Nothing is fetched when the page opens: no CDN, no fonts.
Everything from a run (targets, errors, config) is escaped by the template engine.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Sequence
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from kvbench import __version__
from kvbench.report.json_report import document
from kvbench.report.series import ALL_OPS, coarsen, run_spectrum, server_series
from kvbench.report.summary import PERCENTILES, summarize
from kvbench.results.model import RunResult
from kvbench.units import format_duration_ns

# Intervals drawn per page, shared by its runs; a longer run has adjacent intervals
# merged (histograms merged, never averaged) to keep the file small (1 h of 1 s
# intervals is ~1 MB of JSON otherwise).
MAX_POINTS = 1500
_TEMPLATES = "templates"
DASH, TIMES = "\u2013", "\u00d7"  # typographic en dash and multiplication sign


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kvbench.report", _TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        us=format_us,
        count=lambda n: f"{n:,}",
        rate=lambda v: DASH if v is None else f"{v:,.0f}",
        pct=lambda v: "" if v is None else f"{v:.1%}",
        ratio=lambda v: DASH if v is None else f"{v:.3f}{TIMES}",
        value=json.dumps,
        pretty=lambda v: json.dumps(v, indent=2),
    )
    return env


def _asset(name: str) -> str:
    return (resources.files("kvbench.report") / _TEMPLATES / name).read_text(encoding="utf-8")


def format_us(value_us: float | None) -> str:
    """A latency for a table cell: ``266.0 µs``, ``1.71 ms``; ``n/a`` with too few samples."""
    if value_us is None:
        return "n/a"
    text = format_duration_ns(value_us * 1000)
    number = text.rstrip("nums")
    return f"{number} {text[len(number) :].replace('us', 'µs')}"


def script_json(data: Any) -> Markup:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&``.

    A target URL holding ``</script>`` would otherwise end the element early; escaped as
    ``\\u003c`` it stays a string for ``JSON.parse``.
    """
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


def _page_document(run: RunResult, every: int) -> dict[str, Any]:
    """The run's result document as the page embeds it.

    ``server.intervals`` (raw per-interval samples) gives way to the derived server
    series; with ``every`` > 1, the intervals are those of the run with ``every``
    adjacent intervals merged.
    """
    doc = document(summarize(run))
    doc["server"] = {k: v for k, v in doc["server"].items() if k != "intervals"}
    if every > 1:
        coarse = dataclasses.replace(run, intervals=coarsen(run.intervals, every))
        doc["intervals"] = document(summarize(coarse))["intervals"]
    return doc


def _facts(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The settings a reader needs to place a run, as (label, value) pairs."""
    config = doc.get("config") or {}
    load = config.get("load") or {}
    workload = config.get("workload") or {}
    facts = [("mode", f"{doc['mode']} loop"), ("status", doc["status"])]
    if load:
        facts.append(
            (
                "load",
                f"{load.get('connections')} conn {TIMES} pipeline {load.get('pipeline')}, "
                f"{load.get('processes')} process(es)",
            )
        )
        if load.get("rate_per_s"):
            facts.append(("rate", f"{load['rate_per_s']:,.0f}/s {load.get('arrival', '')}"))
        if load.get("rounds", 1) > 1:
            facts.append(("rounds", str(load["rounds"])))
        if load.get("warmup_ns"):
            facts.append(("warm-up", format_duration_ns(load["warmup_ns"])))
    facts.append(("window", f"{doc['window_s']:.2f} s"))
    if workload:
        ratio = workload.get("ratio") or {}
        facts.append(("ops", " ".join(f"{op}:{w}" for op, w in ratio.items())))
        low, high = workload.get("value_size_min_bytes"), workload.get("value_size_max_bytes")
        size = f"{low} B" if low == high else f"{low}{DASH}{high} B"
        keys = f"{workload.get('keys', 0):,}"
        facts.append(("keys", keys if low is None else f"{keys} {TIMES} {size}"))
        facts.append(("seed", str(workload.get("seed"))))
    return facts


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or not base:
        return None
    return round(value / base, 4)


def comparison(docs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per run: throughput and p99 of all ops, and their ratios to the first run's."""
    base = docs[0]["totals"]
    return [
        {
            "throughput_ratio": _ratio(d["totals"]["throughput_per_s"], base["throughput_per_s"]),
            "p99_ratio": _ratio(d["totals"]["latency_us"]["p99"], base["latency_us"]["p99"]),
        }
        for d in docs
    ]


def render(runs: Sequence[RunResult]) -> str:
    """The HTML report of one run, or of several side by side (compared to the first).

    Raises:
        ValueError: no runs given.
    """
    if not runs:
        raise ValueError("a report needs at least one run")
    budget = max(100, MAX_POINTS // len(runs))
    views: list[dict[str, Any]] = []
    for index, run in enumerate(runs):
        every = max(1, math.ceil(len(run.intervals) / budget))
        doc = _page_document(run, every)
        views.append(
            {
                "index": index,
                "label": f"#{index + 1}",
                "doc": doc,
                "facts": _facts(doc),
                "merged": every,
                "data": {
                    "label": f"#{index + 1}",
                    "document": doc,
                    "spectrum": run_spectrum(run),
                    "server": server_series(run, every),
                    "interval_merge": every,
                },
            }
        )
    docs = [v["doc"] for v in views]
    title = (
        f"kvbench {docs[0]['run_id']} {' '.join(t['url'] for t in docs[0]['targets'])}"
        if len(docs) == 1
        else f"kvbench: {len(docs)} runs compared"
    )
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            version=__version__,
            runs=views,
            comparison=comparison(docs) if len(docs) > 1 else [],
            percentiles=[name for name, _ in PERCENTILES],
            all_ops=ALL_OPS,
            data=script_json(
                {"generator": f"kvbench {__version__}", "runs": [v["data"] for v in views]}
            ),
            style=Markup(_asset("report.css")),
            script=Markup(_asset("report.js")),
        )
    )
