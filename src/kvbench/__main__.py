"""``python -m kvbench``: the same as the ``kvbench`` command."""

from kvbench.cli import main

main()
