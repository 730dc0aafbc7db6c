"""Reading a printed summary table back, to check it fits its terminal: every figure
printed whole (never folded across lines or cut with ``…``) and equal to the result
document's. Used by the unit tests (rich at a set width) and the end-to-end ones (a real
pseudo-terminal of each size)."""

from __future__ import annotations

import re
from typing import Any

from kvbench.units import format_byte_rate

# A summary cell's figure: ``309,512``, ``19.2%``, ``1.25ms``, ``35.2us``, ``812ns``, ``n/a``.
_UNITS_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_LATENCY = re.compile(r"^(\d+(?:\.\d+)?)(ns|us|ms|s)$")


def table_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The summary table's header and its body rows (cells stripped), from rich's box
    drawing (``┃`` header, ``│`` body); a line that is a cell's continuation (blank
    figures) is left out."""
    header: list[str] = []
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("┃") and not header:
            header = [cell.strip() for cell in line.strip().strip("┃").split("┃")]
        elif line.startswith("│") and header:
            cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
            if len(cells) == len(header) and any(cells[1:]):
                rows.append(cells)
    return header, rows


def latency_us(cell: str) -> float | None:
    if cell == "n/a":
        return None
    found = _LATENCY.match(cell)
    assert found, f"not a whole latency: {cell!r}"
    return float(found[1]) * _UNITS_US[found[2]]


def check_summary(text: str, doc: dict[str, Any], width: int | None) -> set[str]:
    """Assert the summary table in ``text`` fits ``width`` (None: any) with every figure
    whole and equal to ``doc``'s; the columns it shows.

    A latency is equal when within the printed rounding (3 significant digits); a rate
    and a count exactly, as printed to the op."""
    assert "…" not in text
    if width is not None:
        assert max(len(line) for line in text.splitlines()) <= width, text
    header, rows = table_rows(text)
    assert header[:1] == ["op"] and rows, text
    for must in ("op", "ops/s", "errors", "p50", "p99"):
        assert must in header, (must, header)
    for cells in rows:
        op = cells[0]
        entry = doc["totals"] if op == "total" else doc["ops"][op]
        for name, cell in zip(header[1:], cells[1:], strict=True):
            if name == "ops":
                assert int(cell.replace(",", "")) == entry.get("count", entry.get("ops"))
            elif name == "ops/s":
                assert int(cell.replace(",", "")) == round(entry["throughput_per_s"])
            elif name == "errors":
                assert int(cell.replace(",", "")) == entry["errors"]
            elif name == "hit %":
                if cell:
                    assert cell == f"{entry['hit_ratio']:.1%}"
            elif name in ("TX", "RX"):  # bytes per second, by op where the driver split them
                net = entry.get("network")
                key = "out_per_s" if name == "TX" else "in_per_s"
                assert cell == (format_byte_rate(net[key]) if net else ""), (name, cell, net)
            else:  # p50 ... p99.99, max, mean
                key = name.replace(".", "_")
                want = entry["latency_us"][key]
                got = latency_us(cell)
                if want is None or got is None:
                    assert want is got is None, (name, cell, want)
                else:
                    assert abs(got - want) <= max(0.051, 0.006 * want), (name, cell, want)
    return set(header)
