"""A run's status, decided once: ``ok``, ``failed``, ``partial`` or ``interrupted``.

Pure functions of a stored run (and of the max error rate in its config). Every output —
terminal, result document, history, ``show``, ``export``, ``diff``, HTML, exit code —
reads ``run_status``; nothing else decides whether a run answered the question
(docs/measurement.md, "Status"). The errors of a window are counted here, in ``tally``,
and nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kvbench.config.model import SERVER_GONE_TIMEOUTS, LoadConfig
from kvbench.metrics.outcome import ERROR_OUTCOMES
from kvbench.metrics.snapshot import IntervalSnapshot
from kvbench.results.model import RunResult
from kvbench.results.queue import QueueSection

OK, FAILED, PARTIAL, INTERRUPTED = "ok", "failed", "partial", "interrupted"
# When several apply, the first wins: an interrupted run's figures are cut short whatever
# else happened; a failed run's figures are not an answer; a partial run lost a worker.
PRECEDENCE = (INTERRUPTED, FAILED, PARTIAL, OK)
# The CLI's exit code for each status (cli/__init__.py lists them all).
EXIT_CODES = {OK: 0, FAILED: 1, PARTIAL: 4, INTERRUPTED: 130}
# Errors above this share of the attempted ops make a run failed (DESIGN.md §3), unless
# its config (--max-error-rate, load.max_error_rate) says otherwise.
DEFAULT_MAX_ERROR_RATE = 0.01
# A window this close to its planned length was measured whole (its end is a timer's).
WHOLE_WINDOW_SLACK_NS = 1_000_000
# Error kinds named in a status reason or verdict; the rest are summed as "others".
NAMED_KINDS = 3

_ERROR_NAMES = tuple(o.name.lower() for o in sorted(ERROR_OUTCOMES))
# Get outcomes that are errors of a set-then-get run (``tally``).
_PAIR_ERRORS = ("miss", "mismatch")
# Worker stats that are errors of their interval too: connect attempts refused or timed
# out, connections the server refused right after accepting them (the engine counts them
# per interval; report/connections.py on the branch that adds them).
CONNECTION_FAILURE_STATS = ("connect_failures", "connect_resets")
# Connections the server refused right after accepting them (over its connection limit),
# before the run's start and during it.
REFUSAL_STATS = ("connect_resets", "connect_resets_before")
# The server settings that say its connection limit (runner/probe.py's fetch_settings):
# memcached's ``stats settings``, Redis's CONFIG GET.
LIMIT_SETTINGS = ("maxconns", "maxclients")


@dataclass(frozen=True, slots=True)
class Tally:
    """What became of the ops of a window.

    Attributes:
        attempted: ops that ended in the window, whatever their outcome, and failed
            connection attempts.
        succeeded: ops answered with a reply that is not an error (throughput counts them).
        errors: ops that ended in an error (``kinds`` says which).
        kinds: error kind -> count, the largest first; only kinds that occurred.
    """

    attempted: int
    succeeded: int
    errors: int
    kinds: dict[str, int]

    @property
    def error_rate(self) -> float:
        """Errors / attempted ops (0 when nothing was attempted)."""
        return self.errors / self.attempted if self.attempted else 0.0


def tally(total: IntervalSnapshot | None, set_then_get: bool = False) -> Tally:
    """The window's ops by fate, from its intervals merged (``RunResult.total()``).

    The one place a window's errors are counted: a new kind of error joins ``kinds`` here
    and every figure, verdict and status follows. ``set_then_get``: every get follows the
    set of its key on the same connection, so a get ``miss`` (and a ``mismatch``: not the
    value just set) is an error, not an outcome of the workload.
    """
    if total is None:
        return Tally(0, 0, 0, {})
    kinds: dict[str, int] = {}
    names = _ERROR_NAMES + (_PAIR_ERRORS if set_then_get else ())
    for op, outcomes in total.counts.items():
        for name in names:
            if outcomes.get(name) and (name in _ERROR_NAMES or op == "get"):
                kinds[name] = kinds.get(name, 0) + outcomes[name]
    failed_connects = 0
    for name in CONNECTION_FAILURE_STATS:
        if total.stats.get(name):
            kinds[name] = int(total.stats[name])
            failed_connects += kinds[name]
    ordered = dict(sorted(kinds.items(), key=lambda item: (-item[1], item[0])))
    attempted = total.ops() + failed_connects  # a connect attempt is an attempt too
    # A pair's get miss left the server's answer a success; here it is an error instead.
    wrong = sum(kinds.get(name, 0) for name in _PAIR_ERRORS) if set_then_get else 0
    return Tally(attempted, total.succeeded() - wrong, sum(kinds.values()), ordered)


def describe_kinds(kinds: dict[str, int]) -> str:
    """``error_reply 94,717, timeout 12`` (the largest kinds first, the rest summed)."""
    items = list(kinds.items())
    named = [f"{name} {n:,}" for name, n in items[:NAMED_KINDS]]
    rest = sum(n for _, n in items[NAMED_KINDS:])
    return ", ".join(named + ([f"others {rest:,}"] if rest else []))


def format_error_rate(rate: float) -> str:
    """The share of a window's ops that failed, written one way wherever it is printed
    (the errors line, the ``errors.rate`` verdict, the status): two decimals, ``54.19%``;
    a share that is not none but below them ``<0.01%`` (it was 54.19% on one line and
    54.2% on the next, and 18 errors in 383,248 ops 0.00% and 0.0%)."""
    if 0 < rate < 0.00005:
        return "<0.01%"
    return f"{rate:.2%}"


def format_share(share: float) -> str:
    """A limit as typed: ``1%``, ``0.5%``, ``0%``."""
    return f"{share * 100:g}%"


@dataclass(frozen=True, slots=True)
class Status:
    """A run's status and why.

    Attributes:
        name: ``ok``, ``failed``, ``partial`` or ``interrupted``.
        reasons: one line per thing that made it so (empty when ``ok``).
    """

    name: str
    reasons: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.name]


def judge(
    process_status: str,
    counts: Tally,
    max_error_rate: float | None,
    delivery_problem: str | None = None,
    connection_problem: str | None = None,
    window_whole: bool = False,
) -> Status:
    """The status from what happened to the processes, to the ops and to the messages.

    Args:
        process_status: the coordinator's ``ok``, ``partial`` (a worker failed) or
            ``interrupted`` (Ctrl-C, SIGTERM, SIGHUP).
        counts: the window's ops (``tally``).
        max_error_rate: the largest error share still ``ok``; None: not judged (queue runs,
            whose failures are lost or duplicated messages).
        delivery_problem: a queue run's lost or duplicated messages, in words, or None.
        connection_problem: the connections the run asked for and could not keep open
            (``connection_shortfall``), in words, or None.
        window_whole: the planned window was measured to its end (``window_whole``): an
            interruption cut the drain, not the window.
    """
    found: dict[str, list[str]] = {}
    if process_status == INTERRUPTED:
        found.setdefault(INTERRUPTED, []).append(
            "interrupted (Ctrl-C, SIGTERM or SIGHUP) in the drain: the window was measured whole"
            if window_whole
            else "interrupted (Ctrl-C, SIGTERM or SIGHUP): the window was cut short"
        )
    elif process_status != OK:
        found.setdefault(PARTIAL, []).append("a worker failed: its share of the load is missing")
    if counts.succeeded == 0 and max_error_rate is not None:
        what = (
            f"{counts.attempted:,} attempts, all failed: {describe_kinds(counts.kinds)}"
            if counts.attempted
            else "no op ended in the window"
        )
        found.setdefault(FAILED, []).append(f"no op succeeded ({what})")
    elif max_error_rate is not None and counts.error_rate > max_error_rate:
        found.setdefault(FAILED, []).append(
            f"errors were {format_error_rate(counts.error_rate)} of {counts.attempted:,} ops, "
            "above the "
            f"{format_share(max_error_rate)} allowed (--max-error-rate): "
            f"{describe_kinds(counts.kinds)}"
        )
    if delivery_problem:
        found.setdefault(FAILED, []).append(delivery_problem)
    if connection_problem:
        found.setdefault(FAILED, []).append(connection_problem)
    name = next((s for s in PRECEDENCE if s in found), OK)
    reasons = tuple(reason for status in PRECEDENCE for reason in found.get(status, []))
    return Status(name, reasons)


def max_error_rate(config: dict[str, Any]) -> float:
    """The run's ``load.max_error_rate`` (runs stored before it existed: the default)."""
    value = (config.get("load") or {}).get("max_error_rate")
    return DEFAULT_MAX_ERROR_RATE if value is None else float(value)


def set_then_get(config: dict[str, Any]) -> bool:
    """The run sent set-then-get pairs (``--ratio set-then-get``)."""
    return bool((config.get("workload") or {}).get("set_then_get"))


def delivery_problem(queue: QueueSection, errors: Sequence[str] = ()) -> str | None:
    """A queue run's duplicated messages, lost ones in a run that drained the queue, or
    every put refused (with the server's words from ``errors``, the run's error lines),
    in words; None when delivery was right. Messages not received when a limit or Ctrl-C
    ended the run may still be queued: not a failure."""
    totals = queue.delivery.totals()
    problems = []
    own = queue.delivery.producers[queue.carried_producers :]
    sent = sum(row.sent for row in own)
    if sent and not any(row.produced for row in own):
        said = next((line for line in errors if "a put was" in line), None)
        problems.append(
            f"every put was refused ({sent:,} sent, none stored)" + (f": {said}" if said else "")
        )
    lost = queue.fates()[0]  # unknown fate (gets never answered) is no loss
    if lost:
        problems.append(f"{lost:,} acknowledged messages were never received")
    if totals["duplicated"]:
        problems.append(f"{totals['duplicated']:,} messages were received twice or more")
    return "; ".join(problems) or None


def connection_shortfall(run: RunResult) -> str | None:
    """A load run whose server refused connections right after accepting them, so that
    fewer were live than asked (at the fewest moment of its window), in words with the
    server's limit when its settings say it; None otherwise. Such a run measured a lighter
    load than it was asked for: a failure, not a warning (a connection lost and reopened
    is not one: only the server's refusals count)."""
    asked = int((run.config.get("load") or {}).get("connections") or 0)
    snaps = [*run.intervals, *run.phases.values()]
    refused = int(sum(s.stats.get(name, 0) for s in snaps for name in REFUSAL_STATS))
    lows = [
        s.stats["connections_live_min"] for s in run.intervals if "connections_live_min" in s.stats
    ]
    if run.queue is not None or not asked or not refused or not lows or min(lows) >= asked:
        return None
    return f"only {int(min(lows)):,} of the {asked:,} connections asked for were live: " + refusers(
        run, refused
    )


def refusers(run: RunResult, refused: int) -> str:
    """Who refused ``refused`` connections right after accepting them, in words: ``the
    server refused 461 right after accepting them (its limit: maxconns 64)``. A run of
    several servers names each that refused (``server<i>_refused``: engine/reconnect.py);
    the limit is said only of the first server, whose settings the run asked for."""
    urls = [str(t.get("url", "")) for t in run.config.get("targets") or []]
    settings = run.server.get("settings") or {}
    limit = next(
        (f"{name} {settings[name]}" for name in LIMIT_SETTINGS if settings.get(name)), None
    )
    known = f" (its limit: {limit})" if limit else " (over its connection limit?)"
    unknown = " (over its connection limit?)"
    if len(urls) <= 1:
        return f"the server refused {refused:,} right after accepting them{known}"
    snaps = [*run.intervals, *run.phases.values()]
    by_server = [
        (i, n)
        for i, url in enumerate(urls)
        if (n := int(sum(s.stats.get(f"server{i}_refused", 0) for s in snaps)))
    ]
    if not by_server:  # (a run stored before servers' refusals were counted apart)
        return f"the servers refused {refused:,} right after accepting them"
    return ", ".join(
        f"{urls[i]} refused {n:,} right after accepting them{known if i == 0 else unknown}"
        for i, n in by_server
    )


# A worker gave up on server <i> (the run's i-th target): gone for good (engine/worker.py).
_LOST = re.compile(r"server(\d+)_lost")


def _lost_indices(run: RunResult) -> set[int]:
    """The indices of the servers a worker gave up on (``server<i>_lost``)."""
    snaps = [*run.intervals, *run.phases.values()]
    return {
        int(match.group(1))
        for snap in snaps
        for name, n in snap.stats.items()
        if n and (match := _LOST.fullmatch(name))
    }


def lost_servers(run: RunResult) -> str | None:
    """A run during which a server was gone (no connection to it live for twice
    ``--timeout``, every reconnect failing; a replay, a ``--requests`` run and a preload
    end then), in words naming the servers; None otherwise. What it measured is kept,
    but it did not measure the server it was asked to for all of its run: failed."""
    lost = sorted(_lost_indices(run))
    if not lost:
        return None
    urls = [str(t.get("url", "")) for t in run.config.get("targets") or []]
    names = ", ".join(urls[i] if i < len(urls) else f"server {i}" for i in lost)
    timeout_ns = (run.config.get("load") or {}).get("timeout_ns") or LoadConfig().timeout_ns
    gone_s = SERVER_GONE_TIMEOUTS * int(timeout_ns) / 1e9
    return (
        # (the rule's span, not how long it was down: a worker's line says that, "no
        # connection to it for 4.6s", and "live for 4s" beside it read as one figure)
        f"{names} went away: none of its connections was live for twice --timeout "
        f"({gone_s:g}s), every "
        "reconnect failing (what was measured until then is kept)"
    )


# Server <i> was down when the window ended, in this many workers, for this long summed
# over them (engine/worker.py).
_DOWN_AT_END = re.compile(r"server(\d+)_down_at_end")


def down_at_end(run: RunResult) -> str | None:
    """A run with a window that ended while a server was down (none of its connections
    live, every reconnect since failing), not yet gone (``lost_servers`` says those), in
    words naming each server and how long it had been down; None otherwise. What the run
    measured after the server went down was no load on it: failed. (Was: a 3 s run whose
    memcached was killed in its second second and stayed down ended ``ok``, 0.07% errors,
    its last two seconds sent nowhere: the gone rule takes twice ``--timeout``.)"""
    # (server, round) -> [workers that found it down, how long summed over them, workers
    # in the interval that says so]: each round's window has an end of its own
    found: dict[tuple[int, int], list[int]] = {}
    for snap in run.intervals:
        for name, n in snap.stats.items():
            if n and (match := _DOWN_AT_END.fullmatch(name)):
                counts = found.setdefault((int(match.group(1)), snap.round), [0, 0, 0])
                counts[0] += int(n)
                counts[1] += int(snap.stats.get(f"{name}_ns", 0))
                counts[2] = max(counts[2], snap.workers)
    lost = _lost_indices(run)
    urls = [str(t.get("url", "")) for t in run.config.get("targets") or []]
    several_rounds = len({snap.round for snap in run.intervals}) > 1
    said = []
    for (i, round_index), (down, down_ns, reporting) in sorted(found.items()):
        if i in lost:
            continue
        name = urls[i] if i < len(urls) else f"server {i}"
        when = f"round {round_index + 1}'s window" if several_rounds else "the window"
        # Down to some of the workers only (a load machine that lost its route): said so.
        seen = f", as {down} of the {reporting} workers saw it" if down < reporting else ""
        said.append(
            f"{name} was down when {when} ended{seen}: none of its connections live for "
            f"the last {down_ns / down / 1e9:.1f}s, every reconnect failing (what was "
            "measured until then is kept)"
        )
    return "; ".join(said) or None


def window_whole(run: RunResult) -> bool:
    """The run measured every second of the window it planned (``--duration`` times
    ``--rounds``): a run interrupted after that was cut in its drain, and its figures are
    whole (was: "the window was cut short" for a Ctrl-C in the drain). False for a run of
    a count of requests, which plans no window."""
    load = run.config.get("load") or {}
    duration_ns = load.get("duration_ns")
    if not duration_ns:
        return False
    planned_ns = int(duration_ns) * int(load.get("rounds") or 1)
    return run.window_s * 1e9 >= planned_ns - WHOLE_WINDOW_SLACK_NS


def run_status(run: RunResult, counts: Tally | None = None) -> Status:
    """The status of any run: a load run, a sweep's level, a compared target, a queue run
    (judged by its delivery, not by an error rate).

    Args:
        counts: ``tally(run.total())`` when the caller has it already.
    """
    counts = counts if counts is not None else tally(run.total(), set_then_get(run.config))
    if run.queue is not None:
        return judge(run.status, counts, None, delivery_problem(run.queue, run.errors))
    problems = [p for p in (lost_servers(run), down_at_end(run), connection_shortfall(run)) if p]
    return judge(
        run.status,
        counts,
        max_error_rate(run.config),
        connection_problem="; ".join(problems) or None,
        window_whole=run.status == INTERRUPTED and window_whole(run),
    )


def worst(statuses: Iterable[str]) -> str:
    """The status of several runs together (a sweep, a comparison): the first by precedence."""
    present = set(statuses)
    return next((s for s in PRECEDENCE if s in present), OK)
