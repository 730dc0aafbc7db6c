"""A table of figures that fits the terminal it is printed on.

A figure that is folded across lines (``19,2`` / ``22``) or cut (``5,0…``) cannot be read,
so no figure is: at the width it is drawn at, a ``FittedTable`` shows the columns that fit
whole, chosen by priority (the most wanted first, e.g. op, ops/s, errors, p50, p99), and
one line under it names the columns it left out and where to see them. ``wide`` shows
every column at the table's natural width and lets the terminal wrap (``--wide``).
Pure: decided from the cells and the width rich renders at, nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

# Where every column of a run can be seen whatever the terminal's width.
SEE_EVERY_COLUMN = "--wide, the JSON (--json), or kvbench show RUN --wide"
# Columns shown or left out together: (the label that names them, their headers).
Group = tuple[str, Sequence[str]]


class FittedTable(Table):
    """A ``rich.table.Table`` that leaves out, at a narrow width, the columns that do not
    fit, by priority, rather than fold or cut a figure.

    Args:
        priority: column headers, the most wanted first; a column not named comes after
            them, in table order. The first column is always shown.
        wide: show every column, at the table's natural width (the terminal wraps).
        see: where the columns left out can be seen, for the line that names them.
        **kwargs: as ``Table``.
    """

    def __init__(
        self,
        *headers: Any,
        priority: Sequence[str | Group] = (),
        wide: bool = False,
        see: str = SEE_EVERY_COLUMN,
        **kwargs: Any,
    ) -> None:
        super().__init__(*headers, **kwargs)
        self.priority = tuple(priority)
        self.wide = wide
        self.see = see
        self.left_out: list[str] = []  # at the last width drawn

    def _units(self) -> list[tuple[str | None, list[int]]]:
        """Column indexes in the units they are shown or left out in, the most wanted
        first: a group (its label and columns) is all or nothing; the first column and
        any column not named come as units of one."""
        names = [str(column.header) for column in self.columns]
        units: list[tuple[str | None, list[int]]] = [(None, [0])] if names else []
        seen = {0}
        for item in self.priority:
            label, members = (None, (item,)) if isinstance(item, str) else item
            indexes = [names.index(n) for n in members if n in names and names.index(n) not in seen]
            if indexes:
                units.append((label, indexes))
                seen.update(indexes)
        units += [(None, [i]) for i in range(len(names)) if i not in seen]
        return units

    def only(self, keep: Iterable[int]) -> Table:
        """A plain table of these columns (indexes, shown in table order), rows as here."""
        chosen = sorted(set(keep))
        table = Table(
            title=self.title,
            caption=self.caption,
            box=self.box,
            show_header=self.show_header,
            show_edge=self.show_edge,
            pad_edge=self.pad_edge,
            padding=self.padding,
            title_justify=self.title_justify,
            caption_justify=self.caption_justify,
            title_style=self.title_style,
            caption_style=self.caption_style,
            header_style=self.header_style,
            collapse_padding=self.collapse_padding,
        )
        # A column of single figures never wraps; one of several (a round's rates) wraps
        # between them; a header is never broken. None is folded inside a figure unless
        # the table cannot fit its first column.
        table.columns = [
            dataclasses.replace(
                column,
                _index=position,
                no_wrap=not _spaced(column),
                min_width=_narrowest(column),
                overflow="fold",
            )
            for position, column in enumerate(self.columns[i] for i in chosen)
        ]
        table.rows = list(self.rows)
        return table

    def fit(self, console: Console, width: int) -> tuple[list[int], list[str]]:
        """The columns shown at ``width`` (each unit, by priority, that still fits with
        every figure whole: the table's narrowest, each column as wide as its widest
        figure) and the names of those left out (a group's by its label)."""
        options = console.options.update_width(10**5)
        keep: list[int] = []
        left_out: list[str] = []
        for label, indexes in self._units():
            trial = self.only([*keep, *indexes])
            if not keep or Measurement.get(console, options, trial).minimum <= width:
                keep += indexes
            else:
                names = [str(self.columns[i].header) for i in indexes]
                left_out += [label] if label else names
        return sorted(keep), left_out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.wide:
            every = self.only(range(len(self.columns)))
            natural = Measurement.get(console, options.update_width(10**5), every).maximum
            self.left_out = []
            yield from console.render(every, options.update_width(max(natural, 1)))
            return
        keep, self.left_out = self.fit(console, options.max_width)
        yield self.only(keep)
        if self.left_out:
            yield Text(  # wrapped between words even on a soft-wrapping console
                f"left out at {options.max_width} columns: {', '.join(self.left_out)}; "
                f"every column: {self.see}",
                style="dim",
                no_wrap=False,
                overflow="fold",
            )


def _spaced(column: Column) -> bool:
    """Some cell holds several figures (it may wrap between them); a column added with
    ``no_wrap=True`` holds one figure a cell, spaces and all (``27.2 KB/s``)."""
    return not column.no_wrap and any(" " in str(cell) for cell in column._cells)


def _narrowest(column: Column) -> int:
    """The narrowest the column can be with its header and every figure whole."""
    cells = [str(cell) for cell in column._cells]
    words = [w for cell in cells for w in cell.split()] if _spaced(column) else cells
    return max([cell_len(str(column.header)), *(cell_len(w) for w in words)])
