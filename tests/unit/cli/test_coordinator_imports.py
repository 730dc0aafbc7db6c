"""What a run's coordinator imports to run: not what only the workers, the other kinds of
run or the HTML report need.

Asserted on what is imported, not on memory: in a fresh interpreter, the modules a
``kvbench run`` coordinator runs (cli/run.py's body: the session, the console, the
outputs; the local launcher) leave none of the modules below in ``sys.modules``. Each was
in the coordinator during every run and held its memory there (the engine and the
compiled pumps with asyncio and ssl, numpy.random with the workload plan, jinja2, the
queue, sweep, Dask and replay modules): about 20 MB of its resident set (bench/rss.py).
A ``WorkerSummary`` arriving in a message imports engine/spec.py, not the engine.
"""

from __future__ import annotations

import json
import subprocess
import sys

# Modules the coordinator of a run must not import to run it.
NOT_IN_A_RUN = (
    "asyncio",
    "ssl",
    "uvloop",
    "jinja2",
    "dask",
    "numpy.random",
    "kvbench.engine.worker",
    "kvbench.engine._pump",
    "kvbench.engine.queue_worker",
    "kvbench.runner.process",
    "kvbench.runner.queue",
    "kvbench.runner.cluster",
    "kvbench.runner.levels",
    "kvbench.report.html",
    "kvbench.workload.plan",
    "kvbench.workload.trace",
    "kvbench.workload.monitor_feed",
)

_PROBE = """
import json, pickle, sys
from kvbench.cli import console, outputs, session
from kvbench.runner import local
from kvbench.runner.coordinator import Coordinator
from kvbench.engine.spec import WorkerSummary
from kvbench.runner import messages as m
pickle.loads(pickle.dumps(m.Done(0, WorkerSummary("ok", 1, 2))))
print(json.dumps(sorted(sys.modules)))
"""


def test_a_runs_coordinator_imports_none_of_the_workers_modules() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    modules = set(json.loads(done.stdout))
    assert "kvbench.runner.coordinator" in modules and "numpy" in modules  # it ran
    assert sorted(modules & set(NOT_IN_A_RUN)) == []


def test_what_the_fork_server_shares_with_the_coordinator_is_the_coordinators_anyway() -> None:
    """The kvbench command imports ``forkserver.SHARED`` before it forks its fork server
    (runner/forkserver.py): modules the server needs and a run's coordinator imports
    anyway. None may be one the coordinator would not import: it would hold it for
    nothing (the memory this file keeps out)."""
    code = (
        "import json, sys, importlib\n"
        "from kvbench.runner import forkserver\n"
        "for name in forkserver.SHARED: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    shared, coordinator = (
        set(json.loads(done.stdout))
        for done in (
            subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                           timeout=120, check=True)
            for source in (code, _PROBE)
        )
    )  # fmt: skip
    assert "kvbench.protocols.registry" in shared  # it ran
    assert sorted(shared - coordinator) == []
