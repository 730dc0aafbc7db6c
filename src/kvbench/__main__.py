"""``python -m kvbench`` and the ``kvbench`` command (``main``).

Kept light on purpose: every worker process re-imports the main module (multiprocessing
does, for a script), so it must not import the CLI at module level; ``main`` imports it.
"""

import os
import sys
from collections.abc import MutableMapping, Sequence

# The commands that run load from this machine's worker processes.
LOAD_COMMANDS = frozenset({"run", "sweep", "compare", "search", "replay", "queue"})


def quiet_blas(environ: MutableMapping[str, str]) -> None:
    """One BLAS thread, unless the user chose: numpy's OpenBLAS otherwise starts a thread
    for each core but one when numpy is imported (in the coordinator and the fork server,
    at every run), and each spins about 0.1 s of CPU before it sleeps, beside the load.
    kvbench does no linear algebra. Set before numpy is imported; the fork server inherits
    it."""
    environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def starts_workers(args: Sequence[str]) -> bool:
    """Whether the command line ``args`` (without the program) runs load from local
    workers: then their fork server is started before the CLI is imported
    (runner/forkserver.py, ``start_in_place``). A wrong guess costs no correctness: a
    command guessed not to gets its server when its workers start."""
    if not args or args[0] not in LOAD_COMMANDS:
        return False
    return not any(arg in ("-h", "--help", "--cluster") for arg in args[1:])


def main() -> None:
    """Entry point of the ``kvbench`` console script."""
    quiet_blas(os.environ)
    try:
        if starts_workers(sys.argv[1:]):
            from kvbench.runner import forkserver

            forkserver.start_in_place()
        from kvbench.cli import main as cli_main
    except KeyboardInterrupt:  # Ctrl-C while the CLI imports (a second or two when busy)
        sys.stderr.write("kvbench: interrupted before the measurement started; nothing to save\n")
        sys.exit(130)
    cli_main()


if __name__ == "__main__":
    main()
