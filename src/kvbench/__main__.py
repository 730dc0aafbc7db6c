"""``python -m kvbench`` and the ``kvbench`` command (``main``).

Kept light on purpose: a worker process re-imports the main module (multiprocessing), so
it must not import the CLI. ``main`` starts the fork server the load commands' workers
are forked from (runner/forkserver.py) before importing the CLI, so the server's imports
(the engine's) run beside the CLI's own instead of after them.
"""

import sys

# The commands that start local worker processes.
LOAD_COMMANDS = ("run", "sweep", "compare", "queue")


def main() -> None:
    """Entry point of the ``kvbench`` console script."""
    if sys.argv[1:2] and sys.argv[1] in LOAD_COMMANDS:
        from kvbench.runner import forkserver

        forkserver.start()
    from kvbench.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
