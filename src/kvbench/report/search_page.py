"""The HTML page of a capacity search (pure): its answer, its steps, and the curve.

The curve (p50 and p99 against the offered rate, each latency objective a dashed line,
the answer's interval shaded) is drawn here as inline SVG, so the page needs no script to
show it; the search's document is embedded as JSON beside it, as every kvbench page
embeds its figures. A page of its own (templates/search.html.j2), on the run pages' style.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

from kvbench import __version__
from kvbench.report.html import _asset, _environment, format_us, script_json
from kvbench.report.search import parse_objective
from kvbench.report.search_answer import status_words

# The chart's box, in SVG user units, and its margins (room for the axes' labels).
WIDTH, HEIGHT = 760, 340
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 16, 44
SERIES = (("p50", "var(--c0)"), ("p99", "var(--c1)"))
VERDICT_COLOURS = {"pass": "var(--ok)", "fail": "var(--bad)", "client": "var(--warn)"}


def _tick_us(value_us: float) -> str:
    """An axis tick's latency as the pages write one, its zeros trimmed (``100 µs``,
    ``1 ms``, ``2.5 ms``: the run page's axes, report.js's fmtUs)."""
    number, unit = format_us(value_us).split(" ")
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    return f"{number} {unit}"


def _log_ticks(lo: float, hi: float) -> list[float]:
    ticks = []
    for exp in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            t = m * 10.0**exp
            if lo <= t <= hi:
                ticks.append(t)
    return ticks


def _linear_ticks(hi: float, count: int = 6) -> list[float]:
    raw = hi / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if step * m >= raw)
    return [i * step for i in range(int(hi / step) + 1)]


def curve_svg(doc: dict[str, Any]) -> Markup:
    """p50 and p99 against the offered rate, the objectives' lines, the interval shaded."""
    steps = sorted((s for s in doc["steps"] if s.get("latency_us")), key=lambda s: s["rate_per_s"])
    limits = [_objective_limit_us(text) for text in doc["objectives"]]
    limits_us = [(text, v) for text, v in zip(doc["objectives"], limits, strict=True) if v]
    values = [
        v for s in steps for name, _ in SERIES if (v := s["latency_us"].get(name)) is not None
    ]
    values += [v for _, v in limits_us]
    if not steps or not values:
        return Markup('<p class="dim">no step has latency figures to draw</p>')
    x_hi = float(max(s["rate_per_s"] for s in steps)) * 1.05
    y_lo, y_hi = float(min(values)) / 1.5, float(max(values)) * 1.5
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(v: float) -> float:
        return LEFT + v / x_hi * inner_w

    def y(v: float) -> float:
        span = math.log10(y_hi) - math.log10(y_lo)
        return TOP + (math.log10(y_hi) - math.log10(v)) / span * inner_h

    parts = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" class="search-curve" '
        'aria-label="p50 and p99 latency against offered rate">'
    ]
    interval = (doc.get("answer") or {}).get("interval_per_s")
    if interval and interval[0] is not None:
        right = interval[1] if interval[1] is not None else x_hi
        parts.append(
            f'<rect class="interval" x="{x(interval[0]):.1f}" y="{TOP}" '
            f'width="{max(1.0, x(right) - x(interval[0])):.1f}" height="{inner_h}" '
            'fill="var(--ok-bg)"><title>the answer\'s interval</title></rect>'
        )
    for t in _log_ticks(y_lo, y_hi):
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(t):.1f}" y2="{y(t):.1f}" '
            f'stroke="var(--rule)"/><text x="{LEFT - 6}" y="{y(t) + 4:.1f}" '
            f'text-anchor="end" font-size="11">{escape(_tick_us(t))}</text>'
        )
    for t in _linear_ticks(x_hi):
        parts.append(
            f'<text x="{x(t):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
            f'font-size="11">{t:,.0f}</text>'
        )
    parts.append(
        f'<text x="{LEFT + inner_w / 2}" y="{HEIGHT - 6}" text-anchor="middle" '
        'font-size="12">offered rate (requests/s)</text>'
    )
    for text, limit in limits_us:
        parts.append(
            f'<line class="slo" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(limit):.1f}" '
            f'y2="{y(limit):.1f}" stroke="var(--bad)" stroke-dasharray="6 4"/>'
            f'<text x="{WIDTH - RIGHT - 4}" y="{y(limit) - 5:.1f}" text-anchor="end" '
            f'font-size="11" style="fill: var(--bad)">{escape(text)}</text>'
        )
    for name, colour in SERIES:
        points = [
            (x(s["rate_per_s"]), y(v), s)
            for s in steps
            if (v := s["latency_us"].get(name)) is not None
        ]
        if len(points) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in points)
            parts.append(
                f'<polyline class="series-{name}" points="{path}" fill="none" '
                f'stroke="{colour}" stroke-width="2"/>'
            )
        for px, py, s in points:
            fill = VERDICT_COLOURS.get(s["verdict"], "var(--faint)")
            tip = f"{s['rate_per_s']:,.0f}/s {name} {format_us(s['latency_us'][name])}: {s['verdict']}"
            parts.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{fill}" stroke="{colour}">'
                f"<title>{escape(tip)}</title></circle>"
            )
    parts.append(
        f'<text x="{LEFT + 8}" y="{TOP + 14}" font-size="12" style="fill: var(--c0)">p50</text>'
        f'<text x="{LEFT + 44}" y="{TOP + 14}" font-size="12" style="fill: var(--c1)">p99</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))


def _objective_limit_us(text: str) -> float | None:
    """A latency objective's limit in microseconds; None for the error rate."""
    objective = parse_objective(text)
    return objective.limit if objective.percentile is not None else None


def render_search(doc: dict[str, Any], run_ids: Sequence[str] = ()) -> str:
    """The page of a search document (report/search.py ``search_document``)."""
    del run_ids  # the steps name their runs; ``kvbench report RUN`` shows each
    return (
        _environment()
        .get_template("search.html.j2")
        .render(
            title=f"kvbench search {doc['search_id']} {doc['target']}",
            version=__version__,
            doc=doc,
            status=status_words(doc),
            curve=curve_svg(doc),
            data=script_json({"generator": f"kvbench {__version__}", "search": doc}),
            style=Markup(_asset("report.css")),
        )
    )
