"""Imported first by the fork server (runner/forkserver.py's PRELOAD), and by nothing
else: the server ignores the signals that end a run from then on, and so does every
worker it forks (they keep its dispositions).

Ctrl-C at a terminal reaches the whole process group, as ``kill`` on a group and a
systemd stop reach every process: only the coordinator decides how a run ends (it sends
Stop, and each worker reports what it measured). The server is started with these
signals blocked (``forkserver.signals_held``): ignored first and unblocked after, a
pending one is dropped, never delivered to a default action that would kill it.
"""

from __future__ import annotations

from kvbench.runner.interrupts import ignore_run_signals

ignore_run_signals()
