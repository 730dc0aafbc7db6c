"""The result document (DESIGN.md §3): a stable, versioned JSON shape other tools read.

One builder for every kind of run: a queue run's document is a run's, with its ``queue``
section (the summary's queue figures) besides.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from kvbench.report.rows import NetworkFigures
from kvbench.report.summary import ReportModel
from kvbench.results.model import SCHEMA_VERSION

# Per-interval figures rounded as the document gives them (the queue's among them).
_RATES: tuple[Literal["per_s", "errors_per_s", "puts_per_s", "gets_per_s"], ...] = (
    "per_s", "errors_per_s", "puts_per_s", "gets_per_s",
)  # fmt: skip
_LATENCIES: tuple[Literal["e2e_p50_us", "e2e_p99_us"], ...] = ("e2e_p50_us", "e2e_p99_us")


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _rounded(values: dict[str, float | None]) -> dict[str, float | None]:
    return {k: _round(v) for k, v in values.items()}


def _spread(model: ReportModel) -> dict[str, float] | None:
    s = model.throughput_spread()
    if s is None:
        return None
    return {
        "n": s.n,
        "mean": round(s.mean, 1),
        "stddev": round(s.stddev, 1),
        "min": round(s.minimum, 1),
        "max": round(s.maximum, 1),
    }


def _ci95(model: ReportModel) -> list[float] | None:
    s = model.throughput_spread()
    if s is None or s.ci95 is None:
        return None
    return [round(s.ci95[0], 1), round(s.ci95[1], 1)]


def _network(net: NetworkFigures | None) -> dict[str, float] | None:
    """Bytes (whole) and bytes per second (to 0.1)."""
    if net is None:
        return None
    doc: dict[str, float] = {
        "bytes_in": net["bytes_in"],
        "bytes_out": net["bytes_out"],
        "in_per_s": round(net["in_per_s"], 1),
        "out_per_s": round(net["out_per_s"], 1),
    }
    if "bytes_in_other" in net:  # the bytes no op was given (summary.network_figures)
        doc["bytes_in_other"] = net["bytes_in_other"]
    if "bytes_out_other" in net:
        doc["bytes_out_other"] = net["bytes_out_other"]
    return doc


def document(model: ReportModel) -> dict[str, Any]:
    """The result document of a run (a queue run's has ``queue`` too, a replay's
    ``trace``)."""
    doc = _document(model)
    if model.queue is not None:
        doc["queue"] = model.queue
    if model.trace is not None:
        doc["trace"] = model.trace
    return doc


def _document(model: ReportModel) -> dict[str, Any]:
    run = model.run
    ops: dict[str, Any] = {}
    for row in model.ops:
        entry: dict[str, Any] = {
            "count": row.count,
            "completed": row.completed,
            "succeeded": row.succeeded,
            "throughput_per_s": _round(row.throughput_per_s, 1),
            "outcomes": row.outcomes,
            "errors": row.errors,
            "errors_per_s": _round(row.errors_per_s, 1),
            "error_rate": _round(row.error_rate, 6),
            "latency_us": _rounded(row.latency_us),
            "keys": row.keys,
            "keys_per_s": _round(row.keys_per_s, 1),
            "hit_ratio": row.hit_ratio,  # unrounded: every output formats this one figure
            "out_of_range": row.out_of_range,
            "network": _network(row.network),
        }
        if row.service_time_us is not None:
            entry["service_time_us"] = _rounded(row.service_time_us)
        ops[row.op] = entry
    return {
        "schema_version": SCHEMA_VERSION,
        "kvbench_version": run.kvbench_version,
        "run_id": run.run_id,
        "started_at": run.started_at,
        "status": model.status.name,
        "status_reasons": list(model.status.reasons),
        "process_status": run.status,
        "mode": run.mode,
        "targets": run.targets,
        "config": run.config,
        "window_s": round(run.window_s, 6),
        "totals": {
            "ops": model.total_ops,
            "completed": sum(r.completed for r in model.ops),
            "succeeded": model.tally.succeeded,
            "throughput_per_s": round(model.throughput_per_s, 1),
            "errors": model.total_errors,
            "errors_per_s": round(model.errors_per_s, 1),
            "error_rate": round(model.tally.error_rate, 6),
            "error_kinds": model.tally.kinds,
            "latency_us": _rounded(model.latency_us),
            "network": _network(model.network),
        },
        "ops": ops,
        "rounds": [
            {
                **r,
                "throughput_per_s": round(r["throughput_per_s"], 1),
                "window_s": round(r["window_s"], 6),
            }
            for r in model.rounds
        ],
        "throughput_per_s_spread": _spread(model),
        "throughput_ci95_per_s": _ci95(model),
        "intervals": [
            {
                **row,
                **{k: round(v, 1) for k in _RATES if (v := row.get(k)) is not None},
                **{k: round(v, 3) for k in _LATENCIES if (v := row.get(k)) is not None},
                "cpu_s": round(row["cpu_s"], 4),
                "ops": {
                    op: {k: _round(v, 3) if isinstance(v, float) else v for k, v in vals.items()}
                    for op, vals in row["ops"].items()
                },
            }
            for row in model.intervals
        ],
        "phases": model.phases,
        "connections": model.connections,
        "workers": run.workers,
        "servers": model.servers,
        **({"cluster": model.cluster} if model.cluster is not None else {}),
        "server": {
            **run.server,
            "reconciliation": [
                {
                    "name": r.name,
                    "client": r.client,
                    "server": r.server,
                    "ambiguous": r.ambiguous,
                    "matches": r.matches,
                }
                for r in model.reconciliation
            ],
            "restarts": [
                {"url": r.url, "after": r.after, "before": r.before, "evidence": r.evidence}
                for r in model.server_restarts
            ],
            "not_comparable": model.not_comparable,
            "cpu_cores": round(model.server_cpu.cores, 3) if model.server_cpu else None,
            "threads": model.server_cpu.threads if model.server_cpu else None,
        },
        "client": {"loop_lag_us": _rounded(model.loop_lag_us)},
        "verify": (
            {
                "checked": model.verification.checked,
                "mismatches": model.verification.mismatches,
                "example_keys": model.verification.example_keys,
            }
            if model.verification is not None
            else None
        ),
        "environment": run.environment,
        "errors": run.errors,
        "verdicts": [
            {"id": v.id, "level": v.level, "message": v.message, "evidence": v.evidence}
            for v in model.verdicts
        ],
    }


def dumps(model: ReportModel) -> str:
    """The document as indented JSON text."""
    return json.dumps(document(model), indent=2, sort_keys=False) + "\n"
