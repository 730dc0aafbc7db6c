"""The command's signals are never left to a default handler between its start and the
CLI's own handlers (runner/interrupts.py ``catching``).

Was: ``kvbench.__main__`` unblocked them and restored the inherited handlers before the
CLI installed its; a SIGTERM in that instant raised through the restoring (a traceback and
exit 1, once in CI), or ended the process by the default action. Now they stay blocked
until the CLI's handlers are in place, and the CLI delivers the one held. Asserted on the
mask and on what a held signal does, in fresh interpreters: not on an instant a test
cannot choose.
"""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
from pathlib import Path

from kvbench.runner.interrupts import SIGNALS


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_signals_are_blocked_when_the_cli_takes_over() -> None:
    probe = python(
        "import signal, sys\n"
        "import kvbench.cli\n"
        "def cli_main():\n"
        "    print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))\n"
        "kvbench.cli.main = cli_main\n"
        "sys.argv = ['kvbench', 'history']\n"
        "from kvbench.__main__ import main\n"
        "main()\n"
    )
    assert probe.returncode == 0, probe.stderr
    blocked = set(ast.literal_eval(probe.stdout))  # a list of ints, printed above
    assert {int(s) for s in SIGNALS} <= blocked


def test_a_signal_held_until_the_cli_is_delivered_to_its_handler(tmp_path: Path) -> None:
    """Blocked and pending when the CLI starts: one line and 128 + the signal, at once."""
    db = tmp_path / "h.db"
    held = python(
        "import os, signal\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "from kvbench.cli import main\n"
        f"main(['history', '--db', {str(db)!r}])\n"
    )
    assert held.returncode == 128 + signal.SIGTERM, (held.returncode, held.stderr)
    assert held.stderr == "kvbench: interrupted before the measurement started; nothing to save\n"
    assert held.stdout == ""


def test_a_signal_held_while_sigint_was_inherited_ignored_still_ends_the_command(
    tmp_path: Path,
) -> None:
    """Started with SIGINT ignored (a background job of a script), a Ctrl-C while the
    modules are imported is held, and ends the command once the CLI has its handler (was:
    the inherited SIG_IGN was put back while it was held, which discards a pending signal:
    the run went on to its end and exited 0, met in CI)."""
    db = tmp_path / "h.db"
    held = python(
        "import os, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "import kvbench.__main__ as entry\n"
        "def starts_workers(args):\n"
        "    os.kill(os.getpid(), signal.SIGINT)  # held: the imports have them blocked\n"
        "    return False\n"
        "entry.starts_workers = starts_workers\n"
        f"sys.argv = ['kvbench', 'history', '--db', {str(db)!r}]\n"
        "entry.main()\n"
    )
    assert held.returncode == 128 + signal.SIGINT, (held.returncode, held.stderr)
    assert held.stderr == "kvbench: interrupted before the measurement started; nothing to save\n"
    assert held.stdout == ""
