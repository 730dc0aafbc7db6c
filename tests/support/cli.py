"""Run the ``kvbench`` command as a user would: a subprocess of the installed script."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def kvbench_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "kvbench", *args]


def run_kvbench(*args: str, timeout_s: float = 120, env: dict[str, str] | None = None) -> Result:
    proc = subprocess.run(
        kvbench_argv(*args),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def start_kvbench(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``kvbench`` in the background, its output piped (text); ``env`` adds to the
    environment."""
    return subprocess.Popen(
        kvbench_argv(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env} if env else None,
    )


def read_until(proc: subprocess.Popen[str], marker: str) -> list[str]:
    """The output lines of ``proc`` up to the first holding ``marker`` (a live line)."""
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if marker in line:
            break
    return lines


def read_json(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def outcomes_but_late(doc: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Each op's outcome counts without ``late``: how late an open loop's sends went is the
    machine's doing, not the driver's (tests that hold two drivers' runs to each other)."""
    return {
        op: {name: n for name, n in row["outcomes"].items() if name != "late"}
        for op, row in doc["ops"].items()
    }


def all_phase_counts(doc: dict[str, Any], op: str, outcome: str | None = None) -> int:
    """An op's count over the window and every phase outside it (what the server saw)."""

    def count(outcomes: dict[str, int]) -> int:
        if outcome is None:
            # late and mismatch are notes counted besides an op's real outcome
            return sum(n for name, n in outcomes.items() if name not in ("late", "mismatch"))
        return outcomes.get(outcome, 0)

    total = count(doc["ops"].get(op, {}).get("outcomes", {}))
    for phase in doc["phases"].values():
        total += count(phase["counts"].get(op, {}))
    return total


def offered_connections(sock: socket.socket) -> int:
    """How many connections were made to a listening socket (each accepted and closed)."""
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def start_in_session(*args: str) -> subprocess.Popen[str]:
    """``kvbench ARGS`` running in a session of its own (signal it alone, list what it
    started), output unbuffered and 200 columns wide, read as text."""
    return subprocess.Popen(
        kvbench_argv(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
    )
