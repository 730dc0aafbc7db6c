"""Reading an HTML report back: the figures its tables show and the JSON it embeds."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any


class Figures(HTMLParser):
    """Collects every element carrying data-doc / data-value, and the embedded JSON.

    ``cells`` holds ``(pointer, value, visible text)``: the pointer is ``/RUN/path/in/doc``
    into the page's runs' result documents, the value the JSON number the cell claims.
    ``refs`` holds the same for ``data-ref`` pointers into the whole embedded JSON
    (``/sweep/levels/0/throughput_per_s``, ``/comparison/0/throughput_ratio``); ``marks``
    the attributes of every chart marker (``class="mark knee"``, ``data-x``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str, str, str]] = []
        self.refs: list[tuple[str, str, str]] = []
        self.marks: list[dict[str, str | None]] = []
        self.ratios: list[str] = []
        self.figures: list[dict[str, str | None]] = []  # attributes of every <figure>
        self.series_paths = 0
        self.data_text = ""
        self._open: list[list[str] | None] = []  # per open td/span: [kind, pointer, value, text]
        self._in_data = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "script" and a.get("id") == "kvbench-data":
            self._in_data = True
        if tag == "figure":
            self.figures.append(a)
        if tag == "path" and "series" in classes:
            self.series_paths += 1
        if "mark" in classes:
            self.marks.append(a)
        if "data-doc" in a or "data-ref" in a:
            kind = "doc" if "data-doc" in a else "ref"
            self._open.append([kind, a[f"data-{kind}"] or "", a["data-value"] or "", ""])
        elif tag in ("td", "span"):
            self._open.append(None)
        if "ratio" in classes and "data-doc" not in a:
            self.ratios.append(a["data-value"] or "")

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data_text += data
        for cell in self._open:
            if cell is not None:
                cell[3] += data

    def handle_endtag(self, tag: str) -> None:
        self._in_data = False
        if tag in ("td", "span") and self._open:
            cell = self._open.pop()
            if cell is not None:
                kind, pointer, value, text = cell
                (self.cells if kind == "doc" else self.refs).append((pointer, value, text.strip()))


def parse(html: str) -> Figures:
    parser = Figures()
    parser.feed(html)
    return parser


def resolve(docs: Any, pointer: str) -> Any:
    """The value a ``/RUN/a/b/0/c`` pointer names in ``docs`` (or ``/a/0/b`` in a dict)."""
    node: Any = docs
    for part in pointer.strip("/").split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node
