"""Reading an HTML report back: the figures its tables show and the JSON it embeds."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any


class Figures(HTMLParser):
    """Collects every element carrying data-doc / data-value, and the embedded JSON.

    ``cells`` holds ``(pointer, value, visible text)``: the pointer is ``/RUN/path/in/doc``
    into the page's runs' result documents, the value the JSON number the cell claims.
    """

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str, str, str]] = []
        self.ratios: list[str] = []
        self.figures: list[dict[str, str | None]] = []  # attributes of every <figure>
        self.series_paths = 0
        self.data_text = ""
        self._open: list[list[str]] = []
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
        if "data-doc" in a:
            self._open.append([a["data-doc"] or "", a["data-value"] or "", ""])
        elif "ratio" in classes:
            self.ratios.append(a["data-value"] or "")

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data_text += data
        for cell in self._open:
            cell[2] += data

    def handle_endtag(self, tag: str) -> None:
        self._in_data = False
        if tag in ("td", "span") and self._open:
            pointer, value, text = self._open.pop()
            self.cells.append((pointer, value, text.strip()))


def parse(html: str) -> Figures:
    parser = Figures()
    parser.feed(html)
    return parser


def resolve(docs: list[dict[str, Any]], pointer: str) -> Any:
    """The value a ``/RUN/a/b/0/c`` pointer names in ``docs``."""
    parts = pointer.strip("/").split("/")
    node: Any = docs[int(parts[0])]
    for part in parts[1:]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node
