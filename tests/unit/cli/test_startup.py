"""``kvbench --help`` and a mistyped flag answer without importing what a run needs.

Asserted on what is imported, not on how long it takes: in a fresh interpreter, importing
the CLI, building every command's parser and answering ``--help`` and a bad flag leave
none of the heavy modules below in ``sys.modules`` (they cost about a second of CPU
together: numpy for the histograms, jinja2 for the HTML report, the engine, dask).
"""

from __future__ import annotations

import json
import subprocess
import sys

# Modules a run needs and the parser must not: each is imported by the command's body.
HEAVY = (
    "numpy",
    "jinja2",
    "hdrh",
    "dask",
    "distributed",
    "uvloop",
    "rich",
    "psutil",
    "prometheus_client",
    "asyncio",
    "kvbench.cli.session",
    "kvbench.cli.outputs",
    "kvbench.runner.coordinator",
    "kvbench.engine",
    "kvbench.engine.worker",
    "kvbench.metrics",
    "kvbench.results",
    "kvbench.report",
    "kvbench.report.summary",
    "kvbench.config.load",
)

# Run in a fresh interpreter: every command's --help, and a flag no command knows.
_PROBE = """
import contextlib, io, json, sys
import kvbench.cli as cli
argvs = [["--help"], ["--version"], ["run", "--bogus"], ["run", "--wokers", "4"]]
argvs += [[name, "--help"] for name in cli.cli.commands]
codes = []
for argv in argvs:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        codes.append(cli._run(argv))
print(json.dumps({"codes": codes, "modules": sorted(sys.modules)}))
"""


def _probe() -> tuple[list[int], set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    found = json.loads(done.stdout)
    return found["codes"], set(found["modules"])


def test_help_and_a_bad_flag_import_none_of_what_a_run_needs() -> None:
    codes, modules = _probe()
    assert codes[:4] == [0, 0, 2, 2]  # the probe did answer: help, version, two bad flags
    assert set(codes[4:]) == {0}
    assert "kvbench.cli.run" in modules  # and did build the commands
    assert sorted(set(HEAVY) & modules) == []


def test_the_package_names_imported_on_use_resolve() -> None:
    """config and runner export their names lazily (module ``__getattr__``): each listed
    name must resolve, and an unknown one must still fail as an attribute."""
    import kvbench.config
    import kvbench.runner

    for package in (kvbench.config, kvbench.runner):
        for name in package.__all__:
            assert getattr(package, name) is not None, name
    assert kvbench.runner.Coordinator.__module__ == "kvbench.runner.coordinator"
    try:
        kvbench.config.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
