"""A compared target's rounds are separate runs: its server samples and reconciliation stay
per round (``combine_rounds``), so charts, reconciliation, server CPU and ``diff`` see
each target's own rounds, never the other target's traffic between them."""

from __future__ import annotations

from typing import Any

from kvbench.report import summarize
from kvbench.report.diff import diff_runs
from kvbench.report.reconcile import server_cpu
from kvbench.report.series import server_series
from kvbench.results.model import RunResult, combine_rounds
from tests.support.runs import make_run

S = 1_000_000_000
SETTINGS = {"maxbytes": "67108864", "threads": "2", "tcpport": "11211"}


def sample(taken_ns: int, cmd_get: int, cpu_s: float) -> dict[str, Any]:
    stats = {"cmd_get": str(cmd_get), "cmd_set": "0", "get_hits": "0", "threads": "2"}
    stats |= {"rusage_user": str(cpu_s), "rusage_system": "0", "curr_connections": "3"}
    return {"taken_ns": taken_ns, "stats": stats}


def one_round(run_id: str, start_ns: int, gets: int, server_gets_before: int) -> RunResult:
    """One compared round: ``gets`` hits in 1 s; the shared server had counted
    ``server_gets_before`` (the other target's rounds included) when it began."""
    before, after = server_gets_before, server_gets_before + gets
    server = {
        "before": sample(start_ns - S, before, 10.0),
        "settings": SETTINGS,
        "intervals": [
            {"round": 0, "index": i, **sample(start_ns + (i + 1) * S, after, 10 + i / 2)}
            for i in range(2)
        ],
        "after": sample(start_ns + 3 * S, after, 11.0),
    }
    run = make_run(run_id, [{"get": (gets, 100_000)}], server=server, start_ns=start_ns)
    run.config = {"load": {"rounds": 1}}
    return run


def target_a() -> RunResult:
    """A's rounds at t = 0 s and 20 s; B's 5,000 gets fell between them on the same server."""
    return combine_rounds([one_round("a1", 2 * S, 1_000, 0), one_round("a2", 22 * S, 1_000, 6_000)])


def test_server_samples_are_tagged_with_their_round() -> None:
    run = target_a()
    assert [s["round"] for s in run.server["intervals"]] == [0, 0, 1, 1]
    rows = server_series(run)
    assert [(r["round"], r["t_s"]) for r in rows] == [(0, 1.0), (0, 2.0), (1, 1.0), (1, 2.0)]
    assert rows[2]["ops_per_s"] is None  # a round's first sample: no rate across the gap


def test_a_target_is_reconciled_over_its_own_rounds() -> None:
    run = target_a()
    assert [r["round"] for r in run.server["rounds"]] == [0, 1]
    rows = {r.name: r for r in summarize(run).reconciliation}
    # 2,000 gets of A against the two rounds' deltas (1,000 + 1,000): B's 5,000 excluded
    assert (rows["get (keys)"].client, rows["get (keys)"].server) == (2_000, 2_000)
    assert rows["get (keys)"].matches


def test_server_cpu_is_measured_within_rounds() -> None:
    cpu = server_cpu("memcache", target_a().server)
    assert cpu is not None and cpu.threads == 2
    # 0.5 s of CPU between each round's two interval samples, 1 s apart; the 19 s between
    # A's rounds (B's turn) count neither as A's wall time nor as A's CPU
    assert cpu.cores == 0.5


def test_combined_targets_keep_their_server_settings_for_diff() -> None:
    """Seen: ~75 spurious ``server.*: X -> -`` lines in ``diff`` of two compared targets."""
    a = target_a()
    b = combine_rounds([one_round("b1", 12 * S, 5_000, 1_000)])
    assert a.server["settings"] == SETTINGS
    assert not [what for what, _, _ in diff_runs(a, b).differences if what.startswith("server.")]
