"""What a person sees in a real terminal of 80, 100, 120 and 200 columns (a pseudo-terminal
of that size, as ``stty cols N`` gives), against a real memcached: the summary table
fits, every figure whole and equal to the result document's, the columns left out named;
the live view cuts nothing. And the conventions from other tools: ``--json -`` writes the
document to stdout (the summary to stderr), ``-q`` one line per op; ``compare`` names
each live line's round and labels its runs in the history."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.support.cli import kvbench_argv, read_json, run_kvbench
from tests.support.servers import Server
from tests.support.widths import check_summary

pytestmark = pytest.mark.integration

# The summary's columns (TX, RX: bytes per second, the last by priority).
EVERY_COLUMN = {"op", "ops", "ops/s", "hit %", "errors", "p50", "p90", "p99", "p99.9", "p99.99",
                "max", "mean", "TX", "RX"}  # fmt: skip
SHORT = ("--duration", "2s", "-c", "4", "--processes", "1", "--ratio", "1:4", "--no-save")
# Where no live view is read (stdout a pipe): one interval is enough.
QUICK = ("--duration", "1s", *SHORT[2:])
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")


def in_terminal(columns: int, *args: str, timeout_s: float = 120) -> tuple[int, str]:
    """Run kvbench on a pseudo-terminal ``columns`` wide (no COLUMNS in its environment:
    the terminal's own size decides); its exit code and what it printed, escapes out."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    proc = subprocess.Popen(
        kvbench_argv(*args), stdin=slave, stdout=slave, stderr=slave, env={**env, "TERM": "xterm"}
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side closed
                break
            if not data:
                break
            chunks.append(data)
        else:
            proc.kill()
            pytest.fail(f"kvbench did not end within {timeout_s}s")
    finally:
        os.close(master)
    code = proc.wait(timeout=30)
    text = _ESCAPES.sub("", b"".join(chunks).decode(errors="replace"))
    return code, text.replace("\r\n", "\n").replace("\r", "\n")


def summary_block(text: str) -> str:
    """The summary table and the line under it (after the live view)."""
    lines = text.splitlines()
    top = max(i for i, line in enumerate(lines) if line.startswith("┏"))
    bottom = next(i for i in range(top, len(lines)) if lines[i].startswith("└"))
    note = []
    if bottom + 1 < len(lines) and lines[bottom + 1].startswith("left out"):
        for line in lines[bottom + 1 :]:
            if re.match(r"^\w+: ", line):  # the outcome lines: the note ended
                break
            note.append(line)
    return "\n".join(lines[top : bottom + 1] + note)


@pytest.mark.parametrize("columns", [80, 100, 120, 200])
def test_a_real_terminal_of_each_width(
    memcached_server: Server, tmp_path: Path, columns: int
) -> None:
    out = tmp_path / "run.json"
    url = f"memcached://{memcached_server.address}"
    code, text = in_terminal(columns, "run", url, *SHORT, "--json", str(out))
    assert code == 0, text
    doc = read_json(out)
    assert "…" not in text  # nothing cut, the live view's table included
    block = summary_block(text)
    shown = check_summary(block, doc, columns)
    lines = text.splitlines()
    top = max(i for i, line in enumerate(lines) if line.startswith("┏"))
    end = next(i for i in range(top, len(lines)) if lines[i].startswith("status: "))
    for line in lines[top - 2 : end + 1]:  # the summary wraps between words itself
        assert len(line) <= columns, line
    if "left out" in text:
        note = " ".join(text[text.index("left out at") :].split())
        assert note.startswith(f"left out at {columns} columns:")
        assert f"kvbench show {doc['run_id']} --wide" in note
        # each column not shown is named (a narrower one after it by priority may fit)
        summary_note = " ".join(block[block.index("left out at") :].split())
        left_out = summary_note.split(":", 1)[1].split(";")[0]
        assert {name.strip() for name in left_out.split(",")} == EVERY_COLUMN - shown, block
    else:
        assert {"p99.99", "max", "mean", "hit %", "ops", "TX", "RX"} <= shown
    if columns == 80:  # --wide: every column, the terminal wraps
        code, text = in_terminal(columns, "run", url, *SHORT, "--wide", "--json", str(out))
        assert code == 0, text
        shown = check_summary(summary_block(text), read_json(out), None)
        assert {"p99.99", "max", "mean", "hit %", "ops", "TX", "RX"} <= shown
        assert "left out" not in text


def test_an_open_loops_header_and_live_table_fit_the_terminal(
    memcached_server: Server, tmp_path: Path
) -> None:
    """The run's first line (an open loop on 2 processes: 123 characters) breaks between
    words at 80 columns, its seed whole (it was left to the terminal, which cut it); the
    live table has the open loop's offered/s and late columns."""
    out = tmp_path / "run.json"
    url = f"memcached://{memcached_server.address}"
    args = ("--duration", "1s", "-c", "4", "--processes", "2", "--rate", "2000", "--no-save")
    code, text = in_terminal(80, "run", url, *args, "--json", str(out))
    assert code == 0, text
    seed = read_json(out)["config"]["workload"]["seed"]
    lines = text.splitlines()
    head = lines[: next(i for i, line in enumerate(lines) if line.startswith("measuring"))]
    assert head[0].startswith("kvbench: ") and all(len(line) <= 80 for line in head), head
    assert f"seed {seed}" in " ".join(head)  # whole, on one line
    assert any(line.split()[5:7] == ["offered/s", "late"] for line in lines), text


def test_json_dash_writes_the_document_to_stdout(memcached_server: Server) -> None:
    url = f"memcached://{memcached_server.address}"
    result = run_kvbench("run", url, *QUICK, "--no-live", "--json", "-")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)  # stdout is the document alone
    assert doc["status"] == "ok"
    assert "status: ok" in result.stderr and "written to stdout" in result.stderr
    assert not Path("-").exists()
    both = run_kvbench("run", url, *QUICK, "--json", "-", "--csv", "-")
    assert both.code == 2 and "--csv: only one file can go to stdout" in both.stderr


def test_csv_dash_writes_the_series_to_stdout(memcached_server: Server) -> None:
    url = f"memcached://{memcached_server.address}"
    result = run_kvbench("run", url, *QUICK, "--no-live", "--csv", "-")
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("run_id,") or "," in result.stdout
    assert "status: ok" in result.stderr and "status: ok" not in result.stdout


def test_quiet_prints_one_line_per_op(memcached_server: Server, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    url = f"memcached://{memcached_server.address}"
    result = run_kvbench("run", url, *QUICK, "-q", "--json", str(out))
    assert result.code == 0, result.stderr
    doc = read_json(out)
    lines = result.stdout.splitlines()
    for op in ("get", "set", "total"):
        entry = doc["totals"] if op == "total" else doc["ops"][op]
        (line,) = [line for line in lines if line.startswith(f"{op}: ")]
        assert line.startswith(f"{op}: {round(entry['throughput_per_s']):,} ops/s, p50 ")
    assert "status: ok" in lines
    assert "┃" not in result.stdout and "[" not in result.stdout  # no table, no live line


def test_compare_names_each_round_and_labels_its_runs(
    memcached_server: Server, tmp_path: Path
) -> None:
    url = f"memcached://{memcached_server.address}"
    db = str(tmp_path / "h.db")
    args = ("--duration", "1s", "-c", "2", "--processes", "1", "--rounds", "2", "--db", db)
    result = run_kvbench("compare", url, url + "/", *args)
    assert result.code == 0, result.stderr
    rounds = {line.split(" [")[0] for line in result.stdout.splitlines() if " [" in line}
    assert {"round 1", "round 2"} <= rounds, result.stdout
    listed = run_kvbench("history", "--db", db).stdout
    assert listed.count(f"compare: {url}") == 2, listed
    exported = run_kvbench("export", "last", "--db", db, "--json", "-")  # - is stdout here too
    assert json.loads(exported.stdout)["status"] == "ok"
    assert "written to stdout" in exported.stderr


def test_a_searchs_steps_and_answer_fold_between_words_at_80_columns(
    memcached_server: Server, tmp_path: Path
) -> None:
    """A step's line (about 100 characters) and the answer (about 190) were left to the
    terminal, which folds at its edge, inside a figure; they fold between words now, each
    figure whole, and say what the document says."""
    out = tmp_path / "search.json"
    code, text = in_terminal(
        80, "search", f"memcached://{memcached_server.address}", "--slo", "p99<1s",
        "--rate", "2000", "--max-steps", "2", "--duration", "1s", "--rounds", "1",
        "--processes", "1", "-c", "2", "--no-save", "--no-live", "--json", str(out),
    )  # fmt: skip
    assert code == 4, text  # --max-steps ended it: partial
    doc = read_json(out)
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("step 1 (ramp) 2,000/s:"))
    end = next(i for i, line in enumerate(lines) if line.startswith("search status: "))
    assert all(len(line) <= 80 for line in lines[first : end + 1]), text
    joined = " ".join(" ".join(lines[first : end + 1]).split())
    assert " ".join(doc["answer"]["sentence"].split()) in joined
    achieved = doc["steps"][0]["achieved_per_s"]
    assert f"achieved {achieved:,.0f}/s" in joined  # a figure whole, where it was folded
