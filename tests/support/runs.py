"""Fixed RunResults for report tests: rounds of one interval with chosen counts and p99."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from kvbench.metrics import Histogram, IntervalSnapshot
from kvbench.report.summary import summarize
from kvbench.report.terminal import print_summary
from kvbench.results.model import RunResult

S = 1_000_000_000


def round_snap(round_: int, ops: dict[str, tuple[int, int]], start_ns: int = 0) -> IntervalSnapshot:
    """One 1-second round: op -> (completed, p99 latency in ns); the rest at 100 us.

    Round r starts 10 s after round r - 1, the first at ``start_ns``.
    """
    start = start_ns + round_ * 10 * S
    counts = {op: {"hit" if op == "get" else "stored": n} for op, (n, _) in ops.items()}
    latency = {}
    for op, (n, p99_ns) in ops.items():
        h = Histogram()
        h.record(100_000, n - n // 50)
        h.record(p99_ns, n // 50)  # 2% of samples: the p99 lands on them
        latency[op] = h
    return IntervalSnapshot("measure", 0, start, start + S, counts, latency, round=round_)


def make_run(
    run_id: str,
    rounds: list[dict[str, tuple[int, int]]],
    *,
    config: dict[str, Any] | None = None,
    settings: dict[str, str] | None = None,
    server: dict[str, Any] | None = None,
    start_ns: int = 0,
) -> RunResult:
    """A run of ``rounds`` (one 1-second round each, 10 s apart from ``start_ns``);
    ``server`` replaces its server samples (default: ``settings`` only)."""
    return RunResult(
        run_id=run_id,
        started_at="2026-11-29T20:30:00+00:00",
        status="ok",
        mode="closed",
        kvbench_version="0.1.0",
        config=config or {"load": {"connections": 50}, "workload": {"seed": 1}},
        targets=[{"url": "memcached://h:11211", "protocol": "memcache-text"}],
        window_start_ns=start_ns,
        window_end_ns=start_ns + (len(rounds) - 1) * 10 * S + S,
        intervals=[round_snap(i, ops, start_ns) for i, ops in enumerate(rounds)],
        rounds=[
            {
                "round": i,
                "window_start_ns": start_ns + i * 10 * S,
                "window_end_ns": start_ns + i * 10 * S + S,
                "status": "ok",
            }
            for i in range(len(rounds))
        ],
        environment={"host": "h", "python": "3.11.9"},
        server=server or {"settings": settings or {"maxbytes": "67108864", "tcpport": "11211"}},
    )


def summary_text(run: RunResult) -> str:
    """The terminal summary of ``run`` as plain text, 200 columns wide."""
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_summary(console, summarize(run))
    return str(console.file.getvalue())  # type: ignore[attr-defined]
