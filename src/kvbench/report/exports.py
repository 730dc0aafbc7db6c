"""Exports of stored runs: the HdrHistogram interval log and the per-interval CSV series.

Pure functions of ``RunResult``s (text out; the CLI writes the files). A sweep or a
comparison exports all its runs into one file, each row or tag carrying the run's label
(its level, or its target). The CSV's figures
come from ``summary`` (nothing is recomputed here); the log carries the stored histograms
themselves, in the V2 encoding, so HdrHistogram tools read and merge them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from datetime import datetime

from kvbench.report.summary import ReportModel, summarize
from kvbench.results.model import RunResult

# The log format of HdrHistogram's HistogramLogWriter (Java, 1.3 adds "Tag=" lines).
LOG_FORMAT_VERSION = "1.3"
LOG_LEGEND = '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'
# Interval_Max is the interval's max value divided by this, as the reference writer does by
# default (1,000,000: its histograms hold nanoseconds and the column is in milliseconds).
MAX_VALUE_UNIT_RATIO = 1_000_000
# Open loop: the service-time histogram of op X is logged with the tag "X.service".
SERVICE_TAG_SUFFIX = ".service"
# A queue run: each interval's end-to-end latency histogram has this tag.
E2E_TAG = "e2e"

CSV_COLUMNS = (
    "round",
    "t_s",
    "length_s",
    "op",
    "count",
    "succeeded",
    "per_s",
    "total",
    "avg_per_s",
    "p50_us",
    "p99_us",
    "errors",
    "offered_per_s",
    "cpu_s",
    "late",
)
# Decimal places per CSV column, the same as the result document's intervals.
_CSV_DIGITS = {"per_s": 1, "avg_per_s": 1, "p50_us": 3, "p99_us": 3, "offered_per_s": 1, "cpu_s": 4}


def _epoch_s(started_at: str) -> float:
    """Seconds since the epoch of an ISO 8601 time (0.0 when it cannot be read)."""
    try:
        return datetime.fromisoformat(started_at).timestamp()
    except ValueError:
        return 0.0


def hdr_log(run: RunResult) -> str:
    """The run's measured intervals as an HdrHistogram log (HistogramLogReader reads it).

    One line per interval per op, ``Tag=<op>,<start>,<length>,<max>,<histogram>``: start is
    seconds since the first round's window began (on the monotonic clock, so rounds follow
    each other in order), length is the interval's in seconds, max is the interval's max
    latency in milliseconds, the histogram is its V2 compressed encoding in base64 (values
    in nanoseconds). In open loop the service-time histograms follow with tag
    ``<op>.service``; a queue run's end-to-end latencies with tag ``e2e``. ``StartTime`` and ``BaseTime`` are the run's recorded start (to the
    second); the window began a little later (after preflight and worker start), so
    absolute times read from the log are approximate.
    """
    title = f"run {run.run_id}: " + " ".join(t["url"] for t in run.targets)
    return "\n".join([*_log_header(run, title, "one tag per op"), *_log_lines(run)]) + "\n"


def runs_hdr_log(labelled: Sequence[tuple[str, RunResult]]) -> str:
    """Several runs (a sweep's levels, a comparison's targets) in one HdrHistogram log.

    As ``hdr_log``, with tags ``<label>/<op>`` (commas and spaces in a label become ``_``);
    each run's start times are offset by when it started after the first, to the second.
    """
    first = labelled[0][1]
    lines = _log_header(first, f"{len(labelled)} runs", "one tag per run label and op")
    origin_s = _epoch_s(first.started_at)
    for label, run in labelled:
        prefix = "".join("_" if c in ", \t" else c for c in label) + "/"
        lines += _log_lines(run, prefix, max(0.0, _epoch_s(run.started_at) - origin_s))
    return "\n".join(lines) + "\n"


def _log_header(run: RunResult, title: str, tags: str) -> list[str]:
    start_s = _epoch_s(run.started_at)
    return [
        f"#kvbench {run.kvbench_version} {title}",
        "#Latency histograms in nanoseconds; Interval_Max in milliseconds "
        f"(max / {MAX_VALUE_UNIT_RATIO:,}); {tags}",
        "#Timestamps: seconds since the measured window began; StartTime and BaseTime are "
        "the run's recorded start (to the second)",
        f"#[Histogram log format version {LOG_FORMAT_VERSION}]",
        f"#[StartTime: {start_s:.3f} (seconds since epoch), {run.started_at}]",
        f"#[BaseTime: {start_s:.3f} (seconds since epoch)]",
        LOG_LEGEND,
    ]


def _log_lines(run: RunResult, prefix: str = "", shift_s: float = 0.0) -> Iterator[str]:
    base_ns = run.window_start_ns
    records = run.queue.intervals if run.queue is not None else []
    e2e = {r.index: r.e2e for r in records if r.e2e is not None}
    for snap in sorted(run.intervals, key=lambda s: s.start_ns):
        offset_s = shift_s + max(0, snap.start_ns - base_ns) / 1e9
        length_s = max(0, snap.end_ns - snap.start_ns) / 1e9
        tagged = [(op, snap.latency[op]) for op in sorted(snap.latency)]
        tagged += [(op + SERVICE_TAG_SUFFIX, snap.service[op]) for op in sorted(snap.service)]
        if snap.index in e2e:  # a queue run's end-to-end latency of the interval
            tagged.append((E2E_TAG, e2e[snap.index]))
        for tag, hist in tagged:
            yield (
                f"Tag={prefix}{tag},{offset_s:.3f},{length_s:.3f},"
                f"{hist.max_ns / MAX_VALUE_UNIT_RATIO:.3f},{hist.encode_base64()}"
            )


def _cell(column: str, value: object) -> object:
    if value is None:
        return ""
    digits = _CSV_DIGITS.get(column)
    if digits is not None and isinstance(value, float):
        return round(value, digits)
    return value


def interval_csv(run: RunResult, model: ReportModel | None = None) -> str:
    """The per-interval series as CSV: a header row, then one row per interval per op.

    ``count``, ``per_s``, ``p50_us`` and ``p99_us`` are the op's, ``total`` its count so
    far in the round and ``avg_per_s`` that total over ``t_s`` (the running average); ``errors``,
    ``offered_per_s``, ``cpu_s`` and ``late`` are the whole interval's (all ops), repeated
    on each of its rows. ``round`` is 0-based and ``t_s`` is the interval's end from its round's
    window start, as in the result document's ``intervals``. A figure with too few
    samples (or none) is an empty cell.

    Args:
        run: the run.
        model: its summary, when the caller has it already (else it is computed).
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(_csv_rows(run, model))
    return out.getvalue()


def runs_csv(labelled: Sequence[tuple[str, RunResult]], label_column: str) -> str:
    """Several runs' series in one CSV: ``interval_csv``'s columns after two of their own,
    ``label_column`` (the run's level or target) and ``run_id``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow((label_column, "run_id", *CSV_COLUMNS))
    for label, run in labelled:
        writer.writerows([label, run.run_id, *row] for row in _csv_rows(run, None))
    return out.getvalue()


def _csv_rows(run: RunResult, model: ReportModel | None) -> Iterator[list[object]]:
    model = model if model is not None else summarize(run)
    for row in model.intervals:
        for op, vals in sorted(row["ops"].items()):
            record = {**row, **vals, "op": op}
            yield [_cell(column, record.get(column)) for column in CSV_COLUMNS]
