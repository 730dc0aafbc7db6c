"""``kvbench search`` as a library function: run the steps, judge them, publish the answer.

runner/search.py decides which rate comes next; each step is a sweep level of rounds
(runner/levels.py ``run_sweep`` at one rate), judged by report/search.py. The steps' runs
and the search's document are stored in the history; --json, --report, --csv and
--hdr-log write the search's files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console

from kvbench.cli.live import LiveView
from kvbench.cli.outputs import Outputs, save_report, write_json_document, write_many
from kvbench.cli.session import save_runs
from kvbench.config import RunConfig
from kvbench.config.limits import max_connection_slots, max_rate_per_s
from kvbench.engine.connect_errors import connect_error_text
from kvbench.errors import StoreError, TargetUnreachable
from kvbench.report.search import Objective, StepJudgement, judge_step
from kvbench.report.search_answer import search_document, search_lines, step_line
from kvbench.report.search_page import render_search
from kvbench.results.model import RunResult
from kvbench.results.status import EXIT_CODES, INTERRUPTED
from kvbench.results.store import Store
from kvbench.runner import probe
from kvbench.runner.coordinator import new_run_id
from kvbench.runner.levels import run_sweep
from kvbench.runner.limits import check_limits
from kvbench.runner.search import SearchBounds, Step, search


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """What the search flags asked: the objectives, --precision and the bounds."""

    objectives: list[Objective]
    precision: float
    max_steps: int
    max_time_s: float


def _settings(config: RunConfig, plan: SearchPlan, highest: float) -> dict[str, Any]:
    load = config.load
    assert load.rate_per_s is not None and load.duration_ns is not None
    return {
        "start_rate_per_s": load.rate_per_s,
        "precision": plan.precision,
        "rounds": load.rounds,
        "duration_s": load.duration_ns / 1e9,
        "max_steps": plan.max_steps,
        "max_time_s": plan.max_time_s,
        "max_rate_per_s": highest,
        "connections": load.connections,
        "pipeline": load.pipeline,
        "processes": load.processes,
        "arrival": load.arrival,
    }


class StepRunner:
    """Runs the search's steps: each a sweep level at its rate, with a live view, judged
    and printed as it ends. ``runs`` and ``steps`` keep them in the order run."""

    def __init__(self, console: Console, config: RunConfig, objectives: list[Objective]) -> None:
        self._console = console
        self._config = config
        self._objectives = objectives
        self._slots = max_connection_slots(config)
        self.runs: list[RunResult] = []
        self.steps: list[dict[str, Any]] = []

    def measure(self, rate: float, phase: str) -> Step:
        """Run and judge one step (runner/search.py calls it)."""
        number = len(self.steps) + 1
        self._console.print(f"step {number} ({phase}): {rate:,.0f}/s", highlight=False)
        with LiveView(self._console, self._config) as view:
            view.sweeping("rate")

            def note(text: str) -> None:  # the sweep's "level 1/1" line: the step's, above
                if not text.startswith("level 1/1:"):
                    view.note(text)

            outcome = run_sweep(self._config, "rate", [rate], view.interval, note, view.start)[0]
        if outcome.result is not None:
            outcome.result.label = f"search {rate:,.0f}/s"
            self.runs.append(outcome.result)
        judged = judge_step(outcome.result, self._objectives, self._slots, outcome.reason)
        if outcome.interrupted and outcome.result is None:  # Ctrl-C before it measured
            judged = StepJudgement(INTERRUPTED, outcome.reason, {})
        step = {"number": number, "phase": phase, "rate_per_s": rate, "verdict": judged.verdict}
        self.steps.append({**step, "reason": judged.reason, **judged.figures})
        # (a terminal's width folds it between words, never inside a figure; a pipe or a
        # file keeps it one line, as the run's summary does)
        self._console.print(
            step_line(self.steps[-1]), highlight=False, soft_wrap=not self._console.is_terminal
        )
        return Step(rate, judged.verdict, judged.reason, phase)


def search_and_report(
    console: Console, config: RunConfig, plan: SearchPlan, outputs: Outputs
) -> int:
    """Search, print each step's verdict as it ends, then the curve and the answer; store
    the steps' runs and the search; write its files.

    Returns:
        The exit code of the search's status (report/search.py).
    """
    check_limits(config)  # the server's limits, and the first rate's
    _check_reachable(config)  # as a run does: one line and exit 3, no search of errors
    load = config.load
    assert load.rate_per_s is not None and load.duration_ns is not None  # cli/search.py
    highest = max_rate_per_s(config)
    texts = [o.text for o in plan.objectives]
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    console.print(
        f"kvbench search: {config.targets[0].url} for {' and '.join(texts)}, from "
        f"{load.rate_per_s:,.0f}/s, {load.rounds} round(s) of {load.duration_ns / 1e9:g} s "
        "per step",
        highlight=False,
    )
    stepper = StepRunner(console, config, plan.objectives)
    bounds = SearchBounds(load.rate_per_s, plan.precision, highest, plan.max_steps, plan.max_time_s)
    outcome = search(stepper.measure, bounds, time.monotonic)
    doc = search_document(
        "search-" + new_run_id(),
        started_at,
        config.targets[0].url,
        texts,
        stepper.steps,
        outcome.stop,
        _settings(config, plan, highest),
    )
    _publish(console, config, outputs, stepper.runs, doc)
    return EXIT_CODES[doc["status"]]


def _check_reachable(config: RunConfig) -> None:
    """Raises TargetUnreachable (``cannot connect to URL: connection refused``) when a
    target takes no connection: a search of it would be steps of errors and no answer."""
    timeout_s = config.load.connect_timeout_ns / 1e9
    for target in config.targets:
        try:
            probe.open_socket(target, timeout_s).close()
        except OSError as exc:
            raise TargetUnreachable(
                f"cannot connect to {target.url}: {connect_error_text(exc)}"
            ) from None


def _publish(
    console: Console,
    config: RunConfig,
    outputs: Outputs,
    runs: list[RunResult],
    doc: dict[str, Any],
) -> None:
    """Store the search and its runs, print the curve and the answer, write the files."""
    unsaved = _save(config, runs, doc)
    for line in search_lines(doc):
        console.print(line, highlight=False, soft_wrap=not console.is_terminal)
    if unsaved is None and config.report.save:
        console.print(
            f"saved as {doc['search_id']} in {config.report.db_path} "
            f"(kvbench show {doc['search_id']})",
            highlight=False,
        )
    elif unsaved is not None:
        console.print(f"warning: the search was not saved in the history: {unsaved}")
    write_json_document(outputs.json_path, doc, console)
    labelled = [(run.label, run) for run in runs]
    write_many(
        console, labelled, "step", csv_path=outputs.csv_path, hdr_log_path=outputs.hdr_log_path
    )
    if outputs.report_path:
        save_report(console, outputs.report_path, render_search(doc))


def _save(config: RunConfig, runs: list[RunResult], doc: dict[str, Any]) -> StoreError | None:
    """Store the steps' runs, then the search; the error when the history could not."""
    if not config.report.save:
        return None
    error = save_runs(config.report, runs)
    if error is not None:
        return error
    try:
        with Store(config.report.db_path) as store:
            store.save_search(doc)
    except StoreError as exc:
        return exc
    return None
