"""Loads the sanitized build of the compiled pump in place of the normal one (make sanitize).

``make sanitize`` builds engine/_pump*.c with AddressSanitizer and UBSan into
build/sanitize/ and puts this directory first on PYTHONPATH, with the path of that build in
``KVBENCH_SANITIZED_PUMP``. Python imports this module as it starts (``site``), in every
process of the run (tests start children too), and ``kvbench.engine._pump`` is then loaded
from that file: the editable install and its normal build stay as they are, and are what
``make test`` loads.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

MODULE = "kvbench.engine._pump"


class SanitizedPump(importlib.abc.MetaPathFinder):
    """Finds ``kvbench.engine._pump`` at ``path``, and nothing else."""

    def __init__(self, path: str) -> None:
        self.path = path

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != MODULE:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, self.path)
        return importlib.util.spec_from_file_location(fullname, self.path, loader=loader)


def install() -> None:
    path = os.environ.get("KVBENCH_SANITIZED_PUMP")
    if not path:
        return
    if not os.path.isfile(path):  # a run meant to be sanitized must not quietly be less
        sys.exit(f"KVBENCH_SANITIZED_PUMP: no such file {path} (make sanitize builds it)")
    sys.meta_path.insert(0, SanitizedPump(path))


install()
