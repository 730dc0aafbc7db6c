"""The capacity search's judging, answer, document, lines and page, from fixed runs."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from kvbench.cli import main
from kvbench.errors import ConfigError
from kvbench.metrics import Histogram
from kvbench.report.search import (
    CLIENT,
    ERROR,
    FAIL,
    PASS,
    judge_step,
    parse_objective,
)
from kvbench.report.search_answer import answer, search_document, search_lines, step_line
from kvbench.report.search_page import render_search
from kvbench.results.model import RunResult
from kvbench.results.store import Store
from kvbench.units import format_us
from tests.support.runs import make_run
from tests.support.servers import free_port


@pytest.mark.parametrize(
    ("text", "name", "limit", "inclusive"),
    [
        ("p99<1ms", "p99", 1000.0, False),
        ("p99.9<=250us", "p99.9", 250.0, True),
        (" p50 < 80µs ", "p50", 80.0, False),
        ("p95<2ms", "p95", 2000.0, False),
        ("error_rate<0.1%", "error_rate", 0.001, False),
        ("error_rate<=0.02", "error_rate", 0.02, True),
    ],
)
def test_objective_forms(text: str, name: str, limit: float, inclusive: bool) -> None:
    objective = parse_objective(text)
    assert (objective.name, objective.limit, objective.inclusive) == (name, limit, inclusive)


@pytest.mark.parametrize(
    "text", ["p99", "p99>1ms", "p0<1ms", "p101<1ms", "p99<0ms", "latency<1ms", "error_rate<2"]
)
def test_bad_objectives_name_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--slo: "):
        parse_objective(text)


def test_a_bad_slo_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["search", "memcached://127.0.0.1:1", "--slo", "p99<1ms", "--slo", "p99 under 1ms"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kvbench: error: --slo: 'p99 under 1ms' is not an objective")
    assert "\n" not in err


def test_a_target_that_takes_no_connection_is_one_line_and_exit_3(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As ``kvbench run`` says it (was: a search of one errored step, exit 1)."""
    port = free_port()
    with pytest.raises(SystemExit) as exited:
        main(["search", f"memcached://127.0.0.1:{port}", "--slo", "p99<1ms", "--no-save"])
    assert exited.value.code == 3
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        f"kvbench: error: cannot connect to memcached://127.0.0.1:{port}: connection refused"
    )
    assert "step" not in captured.out


def open_run(
    p99_ns: int = 500_000,
    *,
    rounds: int = 3,
    rate: int = 10_000,
    lag_ns: int = 50_000,
    inflight: float = 3.0,
    offered: int | None = None,
    late: int = 0,
    workers: list[dict[str, Any]] | None = None,
) -> RunResult:
    """An open-loop run of ``rounds`` 1-second rounds at ``rate``: p99 ``p99_ns``, sends
    lagging ``lag_ns`` at p99, ``inflight`` in flight on average."""
    run = make_run("r1", [{"get": (rate, p99_ns)}] * rounds)
    intervals = []
    for snap in run.intervals:
        lag = Histogram()
        lag.record(10_000, rate - rate // 50)
        lag.record(lag_ns, rate // 50)
        counts = {"get": {"hit": rate - late, "late": late}}
        stats = {"offered": offered if offered is not None else rate, "inflight_mean": inflight}
        intervals.append(dataclasses.replace(snap, counts=counts, lag=lag, stats=stats))
    return dataclasses.replace(run, mode="open", intervals=intervals, workers=workers or [])


def test_a_step_within_the_objective_passes_with_its_figures() -> None:
    judged = judge_step(open_run(p99_ns=500_000), [parse_objective("p99<1ms")], slots=50)
    assert judged.verdict == PASS and judged.reason is None
    figures = judged.figures
    assert figures["achieved_per_s"] == pytest.approx(10_000)
    assert figures["rounds"] == 3 and figures["achieved_ci95_per_s"] is not None
    assert figures["latency_us"]["p99"] == pytest.approx(500, rel=0.01)
    assert len(figures["round_latency_us"]["p99"]) == 3


def test_a_missed_objective_fails_naming_it_with_the_figure() -> None:
    objectives = [parse_objective("p50<1ms"), parse_objective("p99<1ms")]
    judged = judge_step(open_run(p99_ns=1_840_000), objectives, slots=50)
    assert judged.verdict == FAIL
    assert judged.reason == "p99 1.84ms >= 1.00ms"  # (as the run's table writes them)


def test_the_error_rate_objective() -> None:
    run = open_run()
    intervals = [
        dataclasses.replace(s, counts={"get": {"hit": 9_900, "error_reply": 100}})
        for s in run.intervals
    ]
    run = dataclasses.replace(run, intervals=intervals)
    judged = judge_step(run, [parse_objective("error_rate<0.1%")], slots=50)
    assert judged.verdict == FAIL
    assert judged.reason is not None and judged.reason.startswith("error rate 1.000% >= 0.100%")


def test_late_sends_with_free_slots_are_the_client_not_the_server() -> None:
    run = open_run(p99_ns=40_000_000, lag_ns=30_000_000, inflight=2.0)
    judged = judge_step(run, [parse_objective("p99<1ms")], slots=50)
    assert judged.verdict == CLIENT
    assert (
        judged.reason is not None and "sends lagged their schedule 30.00ms at p99" in judged.reason
    )


def test_a_pass_stands_though_the_client_sent_late() -> None:
    """Intended-time latency counts the client's delays: the server did at least as well."""
    run = open_run(p99_ns=500_000, lag_ns=30_000_000, inflight=2.0)
    assert judge_step(run, [parse_objective("p99<50ms")], slots=50).verdict == PASS


def test_late_sends_with_the_slots_full_are_the_servers_queue() -> None:
    run = open_run(p99_ns=40_000_000, lag_ns=30_000_000, inflight=48.0)
    judged = judge_step(run, [parse_objective("p99<1ms")], slots=50)
    assert judged.verdict == FAIL and judged.reason == "p99 40.00ms >= 1.00ms"


def test_a_shortfall_of_replies_with_free_slots_is_the_client() -> None:
    run = open_run(offered=12_000)
    judged = judge_step(run, [parse_objective("p99<1ms")], slots=50)
    assert judged.verdict == CLIENT and "achieved" in str(judged.reason)


def test_a_shortfall_with_the_slots_full_is_the_server_falling_behind() -> None:
    run = open_run(p99_ns=500_000, offered=12_000, inflight=48.0)
    judged = judge_step(run, [parse_objective("p99<1ms")], slots=50)
    assert judged.verdict == FAIL
    assert judged.reason == (
        "achieved 30,000 of 36,000 offered requests (83.3%, limit 95%) with the connection "
        "slots full: the server did not keep up"
    )


def test_a_busy_client_core_is_the_client_whatever_the_latency() -> None:
    busy = [{"index": 0, "cpu_s": 2.9, "driver": "python"}]
    judged = judge_step(open_run(p99_ns=9_000_000, workers=busy), [parse_objective("p99<1ms")], 50)
    assert judged.verdict == CLIENT and "core" in str(judged.reason)


def test_too_few_requests_for_the_percentile_cannot_be_judged() -> None:
    judged = judge_step(open_run(rate=1000), [parse_objective("p99.9<1ms")], slots=50)
    assert judged.verdict == ERROR and "too few to judge p99.9" in str(judged.reason)


def test_a_step_that_did_not_run_is_an_error() -> None:
    judged = judge_step(None, [parse_objective("p99<1ms")], 50, "target unreachable")
    assert (judged.verdict, judged.reason) == (ERROR, "target unreachable")


SETTINGS = {"rounds": 3, "max_rate_per_s": 500_000, "connections": 50, "pipeline": 1}


def step(number: int, rate: float, verdict: str, **figures: Any) -> dict[str, Any]:
    base = {
        "number": number,
        "phase": "ramp",
        "rate_per_s": rate,
        "verdict": verdict,
        "reason": None if verdict == PASS else f"why {number}",
        "achieved_per_s": rate * 0.999,
        "achieved_ci95_per_s": [rate * 0.98, rate * 1.01],
        "latency_us": {"p50": 50.0, "p99": 400.0 if verdict == PASS else 2000.0},
        "error_rate": 0.0,
        "run_id": f"run{number}",
    }
    return {**base, **figures}


def test_the_answer_interval_runs_from_the_rounds_ci_to_the_lowest_failing_rate() -> None:
    steps = [
        step(1, 40_000, PASS),
        step(2, 80_000, PASS),
        step(3, 160_000, FAIL),
        step(4, 120_000, FAIL),
        step(5, 100_000, PASS),
        step(6, 110_000, FAIL),
    ]
    found = answer(steps, "bracketed", ["p99<1ms"], SETTINGS)
    assert found["rate_per_s"] == 100_000
    assert found["interval_per_s"] == [98_000, 110_000]
    assert found["first_failure"] == {"step": 3, "rate_per_s": 160_000, "reason": "why 3"}
    assert found["sentence"] == (
        "max 100,000 ops/s with p99<1ms; 95% interval 98,000\u2013110,000 over 3 rounds at "
        "each step"
    )


def test_a_client_limit_gives_at_least_and_says_whose_limit() -> None:
    steps = [step(1, 1000, PASS), step(2, 2000, CLIENT, reason="client limit: busy core")]
    found = answer(steps, "client_limit", ["p99<1ms"], SETTINGS)
    assert found["at_least"] and found["interval_per_s"] == [980, None]
    assert found["sentence"].startswith("at least 1,000 ops/s with p99<1ms")
    assert "the client is the limit at 2,000/s, not the server" in found["sentence"]


def test_a_client_limit_inside_the_bracket_leaves_the_servers_fail_as_its_top() -> None:
    steps = [step(1, 1000, PASS), step(2, 2000, FAIL), step(3, 1500, CLIENT, reason="late")]
    found = answer(steps, "client_limit", ["p99<1ms"], SETTINGS)
    assert found["interval_per_s"] == [980, 2000] and not found["at_least"]
    assert found["sentence"] == (
        "max 1,000 ops/s with p99<1ms; 95% interval 980\u20132,000 over 3 rounds at each "
        "step (wider than --precision: the client is the limit at 1,500/s, not the server: "
        "late)"
    )


def test_a_bound_that_ends_a_search_before_any_fail_is_named_not_the_rate_ceiling() -> None:
    """--max-steps ended a ramp whose every step passed: 'at least' the best, and the flag
    that stopped it (was: 'it passed at 500,000/s, the most 50 connection(s) x pipeline 1
    carry', a rate never offered)."""
    steps = [step(1, 1000, PASS), step(2, 2000, PASS), step(3, 4000, PASS)]
    found = answer(steps, "max_steps", ["p99<2ms"], SETTINGS)
    assert found["at_least"] and found["rate_per_s"] == 4000
    assert found["sentence"] == (
        "at least 4,000 ops/s with p99<2ms (95% interval from 3,920, over 3 rounds at each "
        "step): --max-steps ended the search before a step missed the objectives; raise it "
        "to search higher"
    )
    ceiling = [*steps, step(4, 500_000, PASS)]
    assert (
        "it passed at 500,000/s, the most 50 connection(s) x pipeline 1 carry"
        in (answer(ceiling, "max_rate", ["p99<2ms"], SETTINGS)["sentence"])
    )


def test_search_status_follows_why_it_stopped() -> None:
    def status(steps: list[dict[str, Any]], stop: str) -> str:
        return str(
            search_document("search-x", "t", "u", ["p99<1ms"], steps, stop, SETTINGS)["status"]
        )

    passed = [step(1, 1000, PASS), step(2, 2000, FAIL)]
    assert status(passed, "bracketed") == "ok"
    assert status(passed, "max_steps") == "partial"
    assert status([step(1, 1000, CLIENT)], "client_limit") == "failed"  # no answer
    assert status([step(1, 1000, FAIL)], "min_rate") == "failed"


def search_doc() -> dict[str, Any]:
    steps = [step(1, 1000, PASS), step(2, 2000, PASS, phase="bisect"), step(3, 4000, FAIL)]
    return search_document(
        "search-20261202-1", "2026-12-02T04:00:00+00:00", "memcached://h:1", ["p99<1ms"],
        steps, "bracketed", {**SETTINGS, "precision": 0.02, "duration_s": 2.0},
    )  # fmt: skip


def test_step_lines_and_the_curve_as_printed() -> None:
    doc = search_doc()
    assert step_line(doc["steps"][2]) == (
        "step 3 (ramp) 4,000/s: fail  achieved 3,996/s (95% CI 3,920\u20134,040)  p50 50.0us  "
        "p99 2.00ms  errors 0.000%  - why 3"
    )
    lines = search_lines(doc)
    assert [line.split()[0] for line in lines[3:6]] == ["1,000", "2,000", "4,000"]
    assert "first failing step: step 3 at 4,000/s: why 3" in lines
    assert lines[-1] == "search status: ok (bracketed)"


def test_the_page_draws_the_curve_with_the_objective_line() -> None:
    page = render_search(search_doc())
    assert page.count("<circle") == 6  # p50 and p99 at each of 3 steps
    assert 'class="slo"' in page and "p99&lt;1ms" in page
    assert "95% interval 1,960\u20134,000" in page
    embedded = page.split('id="kvbench-data">')[1].split("</script>")[0]
    assert json.loads(embedded)["search"]["answer"]["rate_per_s"] == 2000


def test_a_stored_search_is_shown_and_reported_again(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.sqlite")
    with Store(db) as store:
        store.save_search(search_doc())
    with pytest.raises(SystemExit) as exited:
        main(["show", "search-last", "--db", db])
    assert exited.value.code == 0
    assert "max 2,000 ops/s with p99<1ms" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["show", "search-2026", "--db", db, "--json"])
    assert json.loads(capsys.readouterr().out)["search_id"] == "search-20261202-1"
    out = tmp_path / "s.html"
    with pytest.raises(SystemExit) as exited:
        main(["report", "search-last", "--db", db, "-o", str(out)])
    assert exited.value.code == 0 and 'class="slo"' in out.read_text()
    with pytest.raises(SystemExit) as exited:
        main(["show", "search-nope", "--db", db])
    assert exited.value.code == 2
    with pytest.raises(SystemExit):
        main(["history", "--db", db])
    assert "search-20261202-1  ok  max 2,000 ops/s with p99<1ms" in capsys.readouterr().out


def test_the_status_line_names_why_it_stopped_only_where_that_says_more() -> None:
    """Was: ``search status: interrupted (interrupted)`` after a Ctrl-C."""
    from kvbench.report.search_answer import status_words

    assert status_words({"status": "ok", "stop": "bracketed"}) == "ok (bracketed)"
    assert status_words({"status": "failed", "stop": "step_error"}) == "failed (step error)"
    assert status_words({"status": "interrupted", "stop": "interrupted"}) == "interrupted"


def test_a_latency_is_written_as_the_runs_table_writes_it_never_in_exponent_form() -> None:
    assert [format_us(v) for v in (0.5, 85.4, 999.9, 1290, 2.1e6)] == [
        "500ns",
        "85.4us",
        "999.9us",
        "1.29ms",
        "2.10s",
    ]  # fmt: skip  (999.9 was '1e+03 µs')
