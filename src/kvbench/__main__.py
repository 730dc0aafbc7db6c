"""``python -m kvbench`` and the ``kvbench`` command (``main``).

Kept light on purpose: every worker process re-imports the main module (multiprocessing
does, for a script), so it must not import the CLI at module level; ``main`` imports it.
"""

import os
import signal
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
    if any(arg in ("-h", "--help", "--cluster") for arg in args[1:]):
        return False
    preset = option_value(args[1:], "--preset")
    if preset is not None:
        from kvbench.config.presets import PRESETS  # (config only: no numpy, no CLI)

        # put-get-batches times its clients in this process (runner/batches.py)
        found = PRESETS.get(preset)
        return found is None or found.shape != "batches"
    return True


def option_value(args: Sequence[str], name: str) -> str | None:
    """The value of option ``name`` in ``args`` (``NAME VALUE`` or ``NAME=VALUE``; the
    last one given), or None."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
    return value


def main() -> None:
    """Entry point of the ``kvbench`` console script.

    The signals that end a run are blocked while the modules are imported, and stay
    blocked until the CLI has its handlers in place (runner/interrupts.py ``catching``;
    ``kvbench.cli`` unblocks them first thing): one that comes meanwhile is held, then
    delivered to the CLI's handler, and ends the command in its one line with 128 + the
    signal. Held, a Ctrl-C cannot land inside an import (numpy raised ImportError,
    "PyCapsule_Import could not import module", and the import machinery could end the
    process by the signal after its message). multiprocessing unblocks them for a moment
    while it starts its resource tracker (beside the fork server): there this function's
    own handler takes one.

    The handlers the command inherited are never put back before the CLI's: restored
    after the signals were unblocked, a SIGTERM in that instant raised through the
    restoring (a traceback and exit 1, met in CI); restored while one was held, an
    inherited SIG_IGN (a background job of a script ignores SIGINT) discarded it, and the
    run went on to its end (exit 0, met in CI). The CLI's ``catching`` replaces this
    function's handler, and puts it back when the command is done: a signal then, as the
    process exits, ends it with 128 + the signal and nothing more.
    """
    quiet_blas(os.environ)
    from kvbench.runner import interrupts  # (standard library only: no CLI, no numpy)

    def end(signum: int, frame: object) -> None:
        raise interrupts.Interrupted(signum)

    def code(stop: KeyboardInterrupt) -> int:
        return 128 + stop.signum if isinstance(stop, interrupts.Interrupted) else 130

    for signum in interrupts.SIGNALS:
        signal.signal(signum, end)
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.SIGNALS)
        if starts_workers(sys.argv[1:]):
            from kvbench.runner import forkserver

            forkserver.start_in_place()
        from kvbench.cli import main as cli_main

        signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.SIGNALS)  # (see above)
    except KeyboardInterrupt as stop:  # a signal while multiprocessing had them unblocked
        signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.SIGNALS)  # (no second one now)
        sys.stderr.write("kvbench: interrupted before the measurement started; nothing to save\n")
        sys.exit(code(stop))
    try:
        cli_main()
    except KeyboardInterrupt as stop:  # one after the CLI was done, as the process exits
        sys.exit(code(stop))


if __name__ == "__main__":
    main()
