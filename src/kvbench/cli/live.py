"""The live view of a running measurement.

On a terminal: a rich Live display with a progress bar (rounds included, with ETA) over a
table of the latest intervals. Otherwise (a pipe, a file, CI): one plain line per
interval, so logs stay readable. With ``--prometheus`` it also serves them for scraping
(cli/prometheus.py) while it is open: a run, a whole sweep or comparison, a preset's step.
It only ever sees merged interval snapshots that the coordinator hands out; it never reads
the engine. Each run's clock and counts start at its measurement's start (after the
warm-up), whether a round, a level or a compared target; in a sweep every line names its
level.
"""

from __future__ import annotations

import contextlib
from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn
from rich.segment import Segment

from kvbench.cli.prometheus import prometheus_server
from kvbench.config import RunConfig
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.rows import IntervalRow
from kvbench.report.summary import Running, interval_row
from kvbench.report.tables import live_table
from kvbench.report.terminal import live_line, unit_rates_line

if TYPE_CHECKING:
    from kvbench.report.prometheus import LiveFigures

# Intervals kept on screen.
LIVE_ROWS = 10


class LiveView:
    """Shows intervals as they arrive; a context manager around one run.

    Args:
        console: where to draw.
        config: the run's config (for the progress total and labels).
        runs: how many such runs the progress bar covers (sweep levels, compared targets).
        unit_rates: each line gives the interval's ops and the run's so far, and the rate
            per second, per minute and per hour (the single-key-readers preset's report).
    """

    def __init__(
        self, console: Console, config: RunConfig, runs: int = 1, unit_rates: bool = False
    ) -> None:
        self._console = console
        self._config = config
        self._unit_rates = unit_rates
        self._origins: dict[int, int] = {}
        self._sweep_axis: str | None = None  # a sweep's axis (``sweeping``)
        self._level: float | None = None  # the level of the run in progress
        self._rows: deque[IntervalRow] = deque(maxlen=LIVE_ROWS)
        self._totals = Running()  # cumulative ops and the running average, per round
        self._interactive = console.is_terminal and config.report.live
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        load = config.load
        if load.duration_ns is not None:
            total, unit = runs * load.rounds * load.duration_ns / 1e9, "s"
        else:
            total, unit = float(runs * load.rounds * (load.requests or 0)), "requests"
        self._by_time = unit == "s"
        self._task = self._progress.add_task("measuring", total=total or None)
        self._live: Live | None = None
        self._table: _Drawn | None = None  # the rows' table, drawn once per interval
        self._served = contextlib.ExitStack()
        self._figures: LiveFigures | None = None
        self._running: RunConfig | None = None  # the run in progress, once it started
        self._round: int | None = None  # a comparison's round in progress (its runs have one)

    def __enter__(self) -> LiveView:
        config = self._config
        self._figures = self._served.enter_context(
            prometheus_server(config.report.prometheus, self._console)
        )
        if self._interactive:
            self._live = Live(self._render(), console=self._console, refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(kind, exc, tb)
            self._live = None
        self._served.close()

    def start_level(self, axis: str, level: float) -> None:
        """A comparison's next level (of ``axis``): its lines say so."""
        self._level = level

    def sweeping(self, axis: str) -> None:
        """Each run ``start`` announces is a level of ``axis``: its lines say which."""
        self._sweep_axis = axis

    def note(self, text: str) -> None:
        """A one-line event (preloading, next round, interrupted)."""
        if self._live is not None:
            self._live.console.print(text)
        else:
            self._console.print(text)

    def start(self, config: RunConfig, round_index: int | None = None) -> None:
        """A run starts (a sweep's level, a compared target's round): its own settings;
        ``round_index``: the comparison's round it is (its lines name that round)."""
        self._running = config
        self._round = round_index
        if self._sweep_axis is not None:
            load = config.load
            value = {"connections": load.connections, "pipeline": load.pipeline}
            self._level = value.get(self._sweep_axis, load.rate_per_s or self._level)
        if self._figures is not None:
            mode = "open" if config.load.rate_per_s else "closed"
            self._figures.start_run(config.targets[0].url, mode, config.load.connections)

    def interval(self, snap: IntervalSnapshot) -> None:
        """Show one merged interval (and serve it)."""
        running = self._running
        if running is None:  # a single run: the view's own config
            self.start(running := self._config)
        if self._figures is not None:
            self._figures.interval(snap)
        if snap.index == 0:  # a run's (round's, level's, target's) first interval
            self._origins[snap.round] = snap.start_ns  # its clock starts at zero
            self._totals.restart()  # and so does its count
        origin = self._origins.setdefault(snap.round, snap.start_ns)
        row = self._totals.add(interval_row(snap, origin))
        if self._round is not None:  # a compared target's round: a run of one round
            row["round"] = self._round
        row["connections_asked"] = running.load.connections
        if self._level is not None:
            row["level"] = f"{self._level:g}"
        rounds = self._config.load.rounds
        self._progress.update(
            self._task,
            advance=row["length_s"] if self._by_time else snap.ops(),
            description=f"round {row['round'] + 1}/{rounds}" if rounds > 1 else "measuring",
        )
        if self._live is not None:
            self._rows.append(row)
            self._table = _Drawn(self._console, self._table_of_rows())
            self._live.update(self._render())
        elif self._config.report.live:
            prefix = f"level {row['level']} " if "level" in row else ""
            prefix += f"round {row['round'] + 1} " if rounds > 1 else ""
            width = None if self._config.report.wide else self._console.width - len(prefix)
            line = unit_rates_line(row) if self._unit_rates else live_line(row, width)
            self._console.print(prefix + line)

    def _table_of_rows(self) -> RenderableType:
        return live_table(list(self._rows), self._unit_rates, self._config.report.wide)

    def _render(self) -> Group:
        if self._table is None:
            self._table = _Drawn(self._console, self._table_of_rows())
        return Group(self._progress, self._table)


class _Drawn:
    """A renderable drawn once, its lines kept: the live table changes once an interval,
    but the display redraws four times a second (for the progress bar's clock), and laying
    the table out again each time cost the coordinator about 12% of a core, which it took
    from the worker beside it (``make run``: the worker waited 12% of the window)."""

    def __init__(self, console: Console, renderable: RenderableType) -> None:
        self._lines = console.render_lines(renderable, console.options, pad=False)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self._lines:
            yield from line
            yield Segment.line()
