"""Limits checked before the first byte (issue 19, C): a run that cannot be carried out
as asked is refused with one line and exit 2 before any connection is offered.

Each case points the command at a listening socket that counts the connections it was
offered (tests/unit/cli/test_refusals.py): a refusal must leave it untouched.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvbench.cli import main
from kvbench.workload.trace import KVBENCH_HEADER
from tests.unit.cli.test_refusals import offered_connections


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback socket that listens but never accepts: connections queue up in it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.setblocking(False)
        yield sock


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"", "nothing"),
        (KVBENCH_HEADER + b"\n", "kvbench's header line and no row"),
        (KVBENCH_HEADER, "kvbench's header line and no row"),
    ],
)
def test_a_trace_with_no_row_is_refused_before_any_connection(
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: bytes,
    what: str,
) -> None:
    trace = tmp_path / "empty.csv"
    trace.write_bytes(content)
    port = listener.getsockname()[1]
    code, out, err = cli(
        capsys, "replay", str(trace), f"memcached://127.0.0.1:{port}", "--db",
        str(tmp_path / "h.db"),
    )  # fmt: skip
    assert code == 2
    assert err == f"kvbench: error: {trace}: no rows to replay: the trace holds {what}\n"
    assert out == ""  # no header line, no live line
    assert offered_connections(listener) == 0
