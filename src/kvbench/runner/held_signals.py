"""Signals held while a coordinator folds a report in, delivered once it is folded.

Ctrl-C raises ``KeyboardInterrupt`` between any two bytecodes of the main thread. Raised
inside the fold of a consumer's receipts (the ledger counts them received, then marks
them seen), it left a report half counted: the receipts counted and not marked came out
as duplicates, the rest of the report and the messages still unread in the pipe as
missing (an interrupted queue run reported 4 duplicates against a server that cannot
duplicate). Held here, the signal is delivered right after the fold, to whatever handler
was in place, so the run still stops as it always did, with whole reports only.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

# The signals that end a run (Ctrl-C, and what CI runners and terminals send).
HELD = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP for the body; then raise each one that came, once.

    Only the main thread may set handlers (Python's rule); elsewhere nothing is held. An
    ignored signal stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        if signum not in caught:
            caught.append(signum)

    previous: dict[int, Callable[[int, FrameType | None], Any] | int] = {}
    for signum in HELD:
        handler = signal.getsignal(signum)
        if handler is None or handler == signal.SIG_IGN:  # not set from Python, or ignored
            continue
        signal.signal(signum, hold)
        previous[signum] = handler
    try:
        yield
    finally:
        # (``signal.signal`` runs a pending signal's handler first: ``hold`` still takes it)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in caught:
            handler = previous[signum]
            if callable(handler):
                # Called here, so that it raises here (KeyboardInterrupt, Interrupted). Was:
                # raise_signal, whose handler Python runs at a bytecode boundary of its own
                # choosing, which may be inside a __del__ that a collection runs, where the
                # exception is dropped.
                handler(signum, None)
            else:
                signal.raise_signal(signum)  # SIG_DFL: the default action
