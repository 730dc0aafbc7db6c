"""Imported last by the fork server (runner/forkserver.py's PRELOAD), and by nothing else:
every object the server's imports made is frozen (``gc.freeze``), so the workers it forks
share those pages with it instead of copying them.

A forked worker shares the server's memory until it writes to a page. A full collection
writes to every object it walks (the collector's bookkeeping sits in each object's
header), and the worker runs one before its run (runner/process.py, ``_settle_gc``):
it walked every module the server had imported and copied the pages they sit on, ~20 MB
per worker. Frozen in the server, they are in the permanent generation the worker
inherits, and no collection walks them. (Python's documentation of ``gc.freeze``
advises exactly this before a fork.)
"""

from __future__ import annotations

import gc

gc.collect()
gc.freeze()
