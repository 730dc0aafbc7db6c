"""``python -m kvbench`` and the ``kvbench`` command (``main``).

Kept light on purpose: every worker process re-imports the main module (multiprocessing
does, for a script), so it must not import the CLI at module level; ``main`` imports it.
"""


def main() -> None:
    """Entry point of the ``kvbench`` console script."""
    try:
        from kvbench.cli import main as cli_main
    except KeyboardInterrupt:  # Ctrl-C while the CLI imports (a second or two when busy)
        import sys

        sys.stderr.write("kvbench: interrupted before the measurement started; nothing to save\n")
        sys.exit(130)
    cli_main()


if __name__ == "__main__":
    main()
