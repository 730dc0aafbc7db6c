"""The tables of figures (gateway-vs-native, the run summary, a sweep, put-get batches):
every figure whole at 80 columns, both targets named."""

from __future__ import annotations

from io import StringIO
from typing import Any

from rich.console import Console

from kvbench.config.presets import get_preset
from kvbench.report.tables import compared_rounds_table, share_table


def side(url: str, rounds: list[int]) -> dict[str, Any]:
    return {
        "url": url,
        "rounds_per_s": rounds,
        "rounds_ok": [True] * len(rounds),
        "mean_per_s": round(sum(rounds) / len(rounds)),
        "min_per_s": min(rounds),
        "max_per_s": max(rounds),
        "failed_requests": 1234,
        "p99_us": 4321.0,
        "status": "ok",
    }


ROW = {
    "first": side("http+memc://127.0.0.1:8080/memc", [309_512, 311_204, 298_777, 305_001, 301_999]),
    "second": side(
        "memcached://127.0.0.1:11211", [1_009_512, 1_011_204, 998_777, 1_005_001, 999_999]
    ),
    "first_pct_of_second": 30.4,
    "rounds_paired": 5,
    "paired_ratio": 0.3041,
    "paired_ratio_ci95": [0.301, 0.307],
    "status": "ok",
}


def render(table: Any, width: int = 80) -> str:
    out = StringIO()
    Console(file=out, width=width, color_system=None).print(table)
    return out.getvalue()


def columns(text: str) -> list[str]:
    """Each column's cells read top to bottom, joined: a figure folded over lines is whole."""
    rows = [line.split("│")[1:-1] for line in text.splitlines() if line.startswith("│")]
    return ["".join(cell.strip() for cell in column) for column in zip(*rows, strict=True)]


def test_no_figure_is_cut_at_80_columns_and_both_targets_are_named() -> None:
    levels = [(2048.0, ROW), (64.0, ROW)]
    rounds = render(compared_rounds_table("connections", levels))
    shares = render(share_table("connections", levels))
    for text in (rounds, shares):
        assert "…" not in text
        assert max(len(line) for line in text.splitlines()) <= 80
    joined = " ".join(columns(rounds))  # a folded figure reads whole again
    for figure in ("309,512", "1,011,204", "998,777", "1,234", "1,005,001"):
        assert figure in joined
    assert "A = http+memc://127.0.0.1:8080/memc" in rounds
    assert "B = memcached://127.0.0.1:11211" in rounds
    assert "30.4%" in shares and "30.1%..30.7%" in shares and "paired-ratio CI" in shares


def test_gateway_rounds_default_to_max_5000_or_20_per_connection() -> None:
    preset = get_preset("gateway-vs-native")
    assert [preset.round_requests(c) for c in (1, 64, 250, 2048)] == [5000, 5000, 5000, 40960]
    assert get_preset("memcached-storm").round_requests(64) is None


def test_the_run_summary_keeps_every_figure_whole_at_80_columns() -> None:
    from kvbench.report import summarize
    from kvbench.report.terminal import summary_table
    from tests.support.runs import make_run

    run = make_run("r", [{"get": (309_512_345, 1000), "set": (30_951_234, 100)}])
    text = render(summary_table(summarize(run)))
    assert "…" not in text
    assert "309,512,345" in columns(text)[1] and "30,951,234" in columns(text)[1]


def test_a_sweep_table_shows_bad_values_when_replies_were_checked() -> None:
    from kvbench.report.levels import LevelRow
    from kvbench.report.tables import level_table

    row = LevelRow(2, "ok", None, None, {}, 0, None, None, bad_values=17)
    assert "bad values" in render(level_table([row], "connections"))
    assert columns(render(level_table([row], "connections")))[-1] == "17"
    plain = LevelRow(2, "ok", None, None, {}, 0, None)
    assert "bad values" not in render(level_table([plain], "connections"))


def test_a_sweep_says_why_a_level_failed_under_its_table_not_in_a_cell() -> None:
    """A reason in the status cell folded into seven lines at 100 columns (2026-12-05)."""
    from kvbench.report.levels import LevelRow
    from kvbench.report.tables import level_reasons, level_table

    reason = "memcached://127.0.0.1:11211 was down when the window ended: none of its connections"
    rows = [
        LevelRow(2, "ok", None, None, {}, 0, None),
        LevelRow(4, "failed", reason, None, {}, 20, None),
    ]
    text = render(level_table(rows, "connections"))
    assert "was down" not in text
    assert len([line for line in text.splitlines() if line.startswith("│")]) == 2  # one each
    assert columns(text)[:2] == ["24", "okfailed"]
    assert level_reasons(rows, "connections") == [f"connections 4: failed - {reason}"]


def test_the_batches_table_keeps_every_figure_whole_at_80_columns() -> None:
    from kvbench.report.batches import batches_table

    def batch() -> dict[str, Any]:
        return {"per_s": 27_345.2, "seconds": 0.07326, "original_per_s": 13_000.1, "misses": 0,
                "mismatches": 0, "errors": 0, "servers": [1_012, 988]}  # fmt: skip

    row = {"clients": 4, "status": "ok", "set": batch(), "get": batch(),
           "whole": {"per_s": 27_000.0, "seconds": 0.15, "ok": 4_000}}  # fmt: skip
    urls = ["memcached://127.0.0.1:1", "memcached://127.0.0.1:2"]
    text = render(batches_table([row], urls))
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    shown = columns(text)[2:]  # the columns that fit, whole; the rest named under it
    assert shown == ["27.3k", "0.07326", "27.3k", "0.07326", "27.0k", "0.1500"][: len(shown)]
    assert "left out at 80 columns:" in text
    text = render(batches_table([row], urls), width=200)
    assert columns(text)[2:] == ["27.3k", "0.07326", "27.3k", "0.07326", "27.0k", "0.1500",
                                 "13.0k", "13.0k", "0", "0", "0", "2,024 / 1,976"]  # fmt: skip


def test_a_target_without_counters_is_said_once_under_the_table_not_on_every_line() -> None:
    """Through nutcracker every level ended 'servers: cmd_set ?, get_hits ?'."""
    from kvbench.report.batches import SERVER_COUNTERS, batch_line, batches_table

    def level(clients: int, deltas: dict[str, int | None]) -> dict[str, Any]:
        batch = {"per_s": 1000.0, "seconds": 1.0, "ok": 1000, "original_per_s": 900.0,
                 "misses": 0, "mismatches": 0, "errors": 0, "servers": [1000]}  # fmt: skip
        return {"clients": clients, "keys": 1000, "status": "ok", "set": batch, "get": batch,
                "whole": batch, "server_deltas": deltas}  # fmt: skip

    blind = [level(n, dict.fromkeys(SERVER_COUNTERS)) for n in (1, 2)]
    text = render(batches_table(blind, ["memcached://127.0.0.1:22121"]))
    assert text.count("no server counters to compare") == 1
    assert all("servers:" not in batch_line(row) for row in blind)
    seen = level(1, {"cmd_set": 1000, "get_hits": 1000, "get_misses": 0})
    assert batch_line(seen).endswith("servers: cmd_set +1000, get_hits +1000, get_misses +0")
    assert "no server counters" not in render(batches_table([seen], ["memcached://h:1"]))


def test_the_history_keeps_every_run_id_whole_at_80_columns() -> None:
    """The run id is what ``kvbench show`` is given: at 80 columns it read
    "20261205-01…". Columns that do not fit are left out, by priority, and named."""
    from kvbench.report.tables import history_table
    from kvbench.results.store import HistoryRow

    row = HistoryRow(
        run_id="20261205-010545-9c7adf",
        started_at="2026-12-05T01:05:42+00:00",
        status="failed",
        mode="closed",
        target="memcached://127.0.0.1:23464",
        window_s=3.0,
        throughput_per_s=25_797.4,
        label="connections 64",
    )
    narrow = render(history_table([row]), 80)
    assert "…" not in narrow
    assert columns(narrow)[:2] == ["20261205-010545-9c7adf", "failed"]
    assert "25,797" in narrow and "left out at 80 columns: " in narrow
    assert "left out" not in render(history_table([row], wide=True), 80)  # (it wraps)
    assert "left out" not in render(history_table([row]), 160)
