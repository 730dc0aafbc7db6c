"""The self-contained HTML report: stored runs in, one HTML page out (pure).

One run, several compared to the first (as ``kvbench compare`` does), or a sweep's levels
followed by each level's run. The page embeds each run's result document with its chart
series as JSON, and an inline script draws the charts as SVG from it; table figures are
rendered here from the same documents. Nothing is fetched: no CDN, no fonts. Everything
from a run (targets, errors, config) is escaped by the template engine.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup, escape

from kvbench import __version__
from kvbench.report.diff import differences
from kvbench.report.heatmap import MAX_COLUMNS as HEATMAP_COLUMNS
from kvbench.report.heatmap import run_heatmap
from kvbench.report.json_report import document
from kvbench.report.latency import PERCENTILES
from kvbench.report.levels import (
    KNEE_RULE,
    LevelRow,
    comparison,
    comparison_sentence,
    parse_slo,
    sweep_document,
    target_column,
)
from kvbench.report.series import (
    ALL_OPS,
    coarsen,
    coarsen_queue,
    run_spectrum,
    server_series,
    spectrum,
)
from kvbench.report.stats import MIN_CI_SAMPLES
from kvbench.report.summary import ReportModel, summarize
from kvbench.results.model import RunResult
from kvbench.units import format_byte_rate, format_duration_ns
from kvbench.units import format_us as units_format_us

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
        units=page_units,
        count=lambda n: f"{n:,}",
        rate=lambda v: DASH if v is None else f"{v:,.0f}",
        pct=lambda v: "" if v is None else f"{v:.1%}",
        byte_rate=format_byte_rate,
        ratio=lambda v: DASH if v is None else f"{v:.3f}{TIMES}",
        value=json.dumps,
        pretty=lambda v: json.dumps(v, indent=2),
        words=unbroken_words,
    )
    return env


def unbroken_words(text: str) -> Markup:
    """``text`` escaped, each word holding a hyphen kept on one line: a browser breaks
    after a hyphen, and a sweep's reason at 1280 px read "(--" and "max-error-rate)" on
    two lines, a flag no longer one to copy."""
    return Markup(" ").join(
        Markup('<span class="word">{}</span>').format(word) if "-" in word else escape(word)
        for word in text.split(" ")
    )


# A latency as the terminal writes it in a sentence (format_duration_ns: 25.43ms, 812ns),
# not inside a word or a longer number.
_TERMINAL_LATENCY = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(ns|us|ms)\b")


def page_units(text: str) -> str:
    """A sentence written for the terminal (a verdict, a step's or a level's reason) with
    its latencies as the page's tables write them: ``25.43ms`` as ``25.43 ms``, ``85.4us``
    as ``85.4 µs``, number and unit kept together (a no-break space). The page's table
    said ``1.62 ms`` and the reason beside it ``1.62ms``."""
    return _TERMINAL_LATENCY.sub(lambda m: f"{m[1]}\u00a0{'µs' if m[2] == 'us' else m[2]}", text)


def _asset(name: str) -> str:
    return (resources.files("kvbench.report") / _TEMPLATES / name).read_text(encoding="utf-8")


def format_us(value_us: float | None) -> str:
    """A latency for a table cell: ``266.0 µs``, ``1.71 ms``; ``n/a`` with too few samples."""
    if value_us is None:
        return "n/a"
    text = units_format_us(value_us)  # (the terminal's figure, with a space and µs)
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


def _page_model(run: RunResult, every: int) -> ReportModel:
    """The run's report model as the page shows it.

    ``server.intervals`` (raw per-interval samples) gives way to the derived server
    series; with ``every`` > 1, the intervals are those of the run with ``every``
    adjacent intervals merged.
    """
    coarse = run
    if every > 1:
        queue = run.queue
        if queue is not None:
            queue = dataclasses.replace(queue, intervals=coarsen_queue(queue.intervals, every))
        coarse = dataclasses.replace(run, intervals=coarsen(run.intervals, every), queue=queue)
    return summarize(run, intervals_of=coarse)


def _page_document(model: ReportModel) -> dict[str, Any]:
    """The run's result document as the page embeds it (``_page_model``'s)."""
    doc = document(model)
    doc["server"] = {k: v for k, v in doc["server"].items() if k != "intervals"}
    return doc


def _facts(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The settings a reader needs to place a run, as (label, value) pairs."""
    config = doc.get("config") or {}
    if doc.get("queue") is not None:
        return _queue_facts(doc)
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
        if load.get("busy_poll_ns"):  # (the client polled before sleeping: docs/options.md)
            facts.append(("busy poll", format_duration_ns(load["busy_poll_ns"])))
    facts.append(("window", f"{doc['window_s']:.2f} s"))
    trace = doc.get("trace")
    if trace is not None:  # a replay: its keys, values and mix are the trace's
        speed = trace["speed"]
        facts.append(
            ("trace", f"{trace['path']}, speed {speed if speed == 'max' else f'{speed:g}x'}")
        )
        if workload:  # the values' bytes are drawn from it
            facts.append(("seed", str(workload.get("seed"))))
        return facts
    if workload:
        ratio = workload.get("ratio") or {}
        mix = [f"{op}:{w}" for op, w in ratio.items()]
        mix += [f"'{c['command']}':{c['weight']}" for c in workload.get("commands") or []]
        facts.append(("ops", " ".join(mix)))
        # (a run stored before --op-order drew its ops at random)
        facts.append(("op order", str(workload.get("op_order", "random"))))
        low, high = workload.get("value_size_min_bytes"), workload.get("value_size_max_bytes")
        size = f"{low} B" if low == high else f"{low}{DASH}{high} B"
        keys = f"{workload.get('keys', 0):,}"
        facts.append(("keys", keys if low is None else f"{keys} {TIMES} {size}"))
        facts.append(("seed", str(workload.get("seed"))))
    return facts


def _queue_facts(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """A queue run's settings: its queue, producers and consumers, messages, pipeline."""
    queue, config = doc["queue"], doc["config"]
    return [
        ("mode", f"queue ({queue['backend']}, {queue['pop_command']})"),
        ("status", doc["status"]),
        ("queue", str(queue["name"])),
        (
            "agents",
            f"{queue['producers_count']} producer(s) {TIMES} {queue['consumers_count']} consumer(s)",
        ),
        ("messages", f"{queue['messages_planned']:,} {TIMES} {queue['message_size_bytes']} B"),
        ("pipeline", str(config.get("pipeline"))),
        ("window", f"{doc['window_s']:.2f} s"),
    ]


def _views(runs: Sequence[RunResult], labels: Sequence[str]) -> list[dict[str, Any]]:
    """Per run: its page document, facts and chart data, with intervals merged to fit."""
    budget = max(100, MAX_POINTS // max(1, len(runs)))
    views: list[dict[str, Any]] = []
    for index, (run, label) in enumerate(zip(runs, labels, strict=True)):
        every = max(1, math.ceil(len(run.intervals) / budget))
        model = _page_model(run, every)
        doc = _page_document(model)
        data = {
            "label": label,
            "document": doc,
            "spectrum": run_spectrum(run),
            "server": server_series(run, every),
            "interval_merge": every,
            "e2e_spectrum": spectrum(run.queue.e2e_total()) if run.queue is not None else [],
            "heatmap": run_heatmap(
                run, {v["id"] for v in doc["verdicts"]}, every, HEATMAP_COLUMNS // len(runs)
            ),
        }
        views.append(
            {
                "index": index,
                "label": label,
                "doc": doc,
                "model": model,
                "facts": _facts(doc),
                "merged": every,
                "data": data,
            }
        )
    return views


def _page(title: str, views: list[dict[str, Any]], **context: Any) -> str:
    """The page: ``context`` adds ``comparison``/``sentences`` or ``sweep`` sections."""
    page_data = {
        "generator": f"kvbench {__version__}",
        "runs": [v["data"] for v in views],
        **context.pop("data", {}),
    }
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            version=__version__,
            runs=views,
            comparison=context.pop("comparison", []),
            sentences=context.pop("sentences", []),
            sweep=context.pop("sweep", None),
            percentiles=[name for name, _ in PERCENTILES],
            min_ci_rounds=MIN_CI_SAMPLES,
            all_ops=ALL_OPS,
            data=script_json(page_data),
            style=Markup(_asset("report.css") + _asset("heatmap.css")),
            script=Markup(_asset("heatmap.js") + _asset("report.js")),
            **context,
        )
    )


def render(runs: Sequence[RunResult]) -> str:
    """The HTML report of one run, or of several side by side (compared to the first).

    Several runs are compared as ``kvbench compare`` compares its targets
    (``levels.comparison``): throughput and p99 ratios to the first run are the geometric
    means of the per-round ratios (rounds paired by index, complete ones only) with their
    95% CIs, and the page opens with the compare command's sentences.

    Raises:
        ValueError: no runs given.
    """
    if not runs:
        raise ValueError("a report needs at least one run")
    views = _views(runs, [f"#{i + 1}" for i in range(len(runs))])
    docs = [v["doc"] for v in views]
    if len(runs) == 1:
        title = f"kvbench {docs[0]['run_id']} {' '.join(t['url'] for t in docs[0]['targets'])}"
        return _page(title, views)
    rows = comparison([target_column(r, v["model"]) for r, v in zip(runs, views, strict=True)])
    caveats = [settings_caveat(runs[0], run, i + 2) for i, run in enumerate(runs[1:])]
    return _page(
        f"kvbench: {len(docs)} runs compared",
        views,
        comparison=rows,
        sentences=[comparison_sentence(r) for r in rows] + [c for c in caveats if c],
        data={"comparison": rows},
    )


# What decides a run's load and so whether two throughputs measure the same thing; the
# seed (new each run) is not a difference in kind.
_WORKLOAD_PREFIXES = ("config.workload.", "config.load.", "mode")
_NOT_A_DIFFERENCE = {"config.workload.seed"}
_MAX_NAMED = 6


def settings_caveat(first: RunResult, other: RunResult, number: int) -> str | None:
    """``#2 ran another workload than #1: workload.commands (...), ...`` when the settings
    that decide the load differ (as ``kvbench diff`` lists them), else None: a ratio of two
    throughputs of different workloads compares the workloads as much as the servers."""
    found = [
        (what.removeprefix("config."), a, b)
        for what, a, b in differences(first, other)
        if what.startswith(_WORKLOAD_PREFIXES) and what not in _NOT_A_DIFFERENCE
    ]
    if not found:
        return None
    named = ", ".join(f"{what} ({a} vs {b})" for what, a, b in found[:_MAX_NAMED])
    more = f" and {len(found) - _MAX_NAMED} more" if len(found) > _MAX_NAMED else ""
    return (
        f"#{number} ran another workload than #1, so its ratio compares the workloads too: "
        f"{named}{more} (kvbench diff lists every difference)"
    )


def render_sweep(
    axis: str,
    target: str,
    rows: Sequence[LevelRow],
    runs: Sequence[RunResult],
    slo: str | None = None,
) -> str:
    """The HTML report of a sweep: its levels, knee and SLO level, then each level's run.

    Args:
        axis: the swept axis (connections, pipeline, rate).
        target: the swept target's URL.
        rows: one per level, in the order swept (``levels.level_row``); failed ones too.
        runs: the levels' runs, matched to ``rows`` by run id.
        slo: the objective as given (``p99<1ms``), or None.
    """
    doc = sweep_document(axis, target, list(rows), slo)
    by_id = {run.run_id: run for run in runs}
    ran = [(r, by_id[r.run_id]) for r in rows if r.run_id is not None and r.run_id in by_id]
    views = _views([run for _, run in ran], [f"{axis} {r.level:g}" for r, _ in ran])
    index = {run.run_id: i for i, (_, run) in enumerate(ran)}
    objective = parse_slo(slo) if slo else None
    sweep = {
        "doc": doc,
        "axis": axis,
        "knee_rule": KNEE_RULE,
        "rows": [
            {"level": level, "run": index.get(row.run_id or ""), "label": f"{row.level:g}"}
            for row, level in zip(rows, doc["levels"], strict=True)
        ],
    }
    chart = {
        "slo_percentile": objective.percentile if objective else None,
        "slo_limit_us": objective.limit_us if objective else None,
    }
    return _page(
        f"kvbench sweep over {axis}: {target}",
        views,
        sweep=sweep,
        data={"sweep": doc, "sweep_chart": chart},
    )
