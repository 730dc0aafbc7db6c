"""The live view of a running measurement.

On a terminal: a rich Live display with a progress bar (rounds included, with ETA) over a
table of the latest intervals. Otherwise (a pipe, a file, CI): one plain line per
interval, so logs stay readable. With ``--prometheus`` it also serves them for scraping
(cli/prometheus.py) while it is open: a run, a whole sweep or comparison, a preset's step.
It only ever sees merged interval snapshots that the coordinator hands out; it never reads
the engine.
"""

from __future__ import annotations

import contextlib
from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from kvbench.cli.prometheus import prometheus_server
from kvbench.config import RunConfig
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.report.summary import Running, interval_row
from kvbench.report.tables import live_table
from kvbench.report.terminal import live_line

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
    """

    def __init__(self, console: Console, config: RunConfig, runs: int = 1) -> None:
        self._console = console
        self._config = config
        self._origins: dict[int, int] = {}
        self._rows: deque[dict[str, Any]] = deque(maxlen=LIVE_ROWS)
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
        self._served = contextlib.ExitStack()
        self._figures: LiveFigures | None = None
        self._running: RunConfig | None = None  # the run in progress, once it started

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

    def note(self, text: str) -> None:
        """A one-line event (preloading, next round, interrupted)."""
        if self._live is not None:
            self._live.console.print(text)
        else:
            self._console.print(text)

    def start(self, config: RunConfig) -> None:
        """A run starts (a sweep's level, a compared target's round): its own settings."""
        self._running = config
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
        origin = self._origins.setdefault(snap.round, snap.start_ns)
        if snap.index == 0:  # a run's (or round's) first interval: count from zero
            self._totals.restart()
        row = self._totals.add(interval_row(snap, origin))
        row["connections_asked"] = running.load.connections
        rounds = self._config.load.rounds
        self._progress.update(
            self._task,
            advance=row["length_s"] if self._by_time else snap.ops(),
            description=f"round {snap.round + 1}/{rounds}" if rounds > 1 else "measuring",
        )
        if self._live is not None:
            self._rows.append(row)
            self._live.update(self._render())
        elif self._config.report.live:
            prefix = f"round {snap.round + 1} " if rounds > 1 else ""
            self._console.print(prefix + live_line(row))

    def _render(self) -> Group:
        return Group(self._progress, live_table(list(self._rows)))
