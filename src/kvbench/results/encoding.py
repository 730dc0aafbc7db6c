"""How a stored run's histograms are written: the HdrHistogram V2 encoding (base64), plus
the exact scalars that encoding does not carry (min, max, sum, out of range).

A stored run's histograms merge exactly as a live one's, and other HdrHistogram tools can
read them. Used by the store for every interval's latencies and by a queue run's section
(results/queue.py) for its end-to-end latencies.
"""

from __future__ import annotations

import json
from typing import Any

from kvbench.metrics.histogram import Histogram


def histogram_to_json(hist: Histogram) -> dict[str, Any]:
    """A histogram as a JSON-ready dict: ``hdr`` (V2, base64) and its exact scalars."""
    return {
        "hdr": hist.encode_base64(),
        "min_ns": hist.min_ns,
        "max_ns": hist.max_ns,
        "sum_ns": hist.sum_ns,
        "out_of_range": hist.out_of_range,
    }


def histogram_from_json(data: dict[str, Any] | str) -> Histogram:
    """``histogram_to_json`` read back (a bare base64 string: written before the exact
    scalars were kept)."""
    if isinstance(data, str):
        return Histogram.decode(data.encode())
    hist = Histogram.decode(data["hdr"].encode())
    if hist.total_count:
        hist.min_ns, hist.max_ns = int(data["min_ns"]), int(data["max_ns"])
        hist.sum_ns, hist.out_of_range = int(data["sum_ns"]), int(data["out_of_range"])
    return hist


def histograms_to_text(hists: dict[str, Histogram]) -> str:
    """Op -> histogram, as JSON text."""
    return json.dumps({op: histogram_to_json(h) for op, h in hists.items()})


def histograms_from_text(text: str) -> dict[str, Histogram]:
    return {op: histogram_from_json(data) for op, data in json.loads(text).items()}
