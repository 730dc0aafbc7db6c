"""How a run learns that the user wants it to end: SIGINT, SIGTERM and SIGHUP, as one event.

Ctrl-C (SIGINT), ``timeout``/systemd/a container runtime (SIGTERM) and a closed terminal
(SIGHUP) all mean "stop now, keep what was measured". The CLI installs one handler for
the three (``catching``); while a coordinator is measuring (``armed``) the first signal
raises ``Interrupted`` in the main thread, wherever it waits (a probe, a worker's start, the
window), and every phase's Ctrl-C path (``except KeyboardInterrupt``) ends the run from
there. Once the measurement is over (``disarm``) a signal is only recorded: the result is
built, printed, stored and written whole, and the exit code says which signal came
(128 + its number: 130, 143, 129). Standard library only.

Python runs a signal's handler in the main thread between two bytecodes, wherever that is:
inside a weakref callback or a ``__del__`` (importlib's module locks have one), the
``Interrupted`` it raises is one Python ignores, printing "Exception ignored in" with a
traceback. ``catching`` takes those (``sys.unraisablehook``): nothing is printed, and
``raise_lost`` raises the interrupt again where a coordinator next waits for its workers
(runner/pool.py's ``receive``).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

# The signals that end a run as Ctrl-C does.
SIGNALS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The user asked the run to end (a signal in ``SIGNALS``): a KeyboardInterrupt, so
    every phase's Ctrl-C handling serves SIGTERM and SIGHUP too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _State:
    """The process's one record of signals received (signal handlers are per process)."""

    received: int | None = None  # the first signal, until ``reset``
    armed = True  # raise on a signal (a measurement runs), or only record it
    # A signal whose Interrupted was raised where Python ignores exceptions (``raise_lost``).
    lost: int | None = None


_state = _State()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    first = _state.received is None
    if first:
        _state.received = signum
    if _state.armed or not first:
        # every signal while armed raises (a second one cuts a wait for workers short);
        # disarmed, a second one does too: the user insists (a stuck write, say)
        raise Interrupted(signum)


@contextlib.contextmanager
def catching() -> Iterator[None]:
    """Handle ``SIGNALS`` as one interrupt while inside (main thread only; elsewhere
    nothing changes), the previous handlers restored after.

    What was received inside is forgotten on leaving (take ``exit_code`` inside): a
    signal one command received must not stop the next run in the same process (a
    library caller's, a test's) at its ``arm``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reset()
    previous: dict[int, Any] = {}
    for signum in SIGNALS:
        previous[signum] = signal.signal(signum, _on_signal)
    hook = sys.unraisablehook

    def unraisable(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, Interrupted):
            _state.lost = unraisable.exc_value.signum
            return
        hook(unraisable)

    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        reset()


def raise_lost() -> None:
    """Raise again the ``Interrupted`` a signal raised where Python ignored it (see the
    module's docstring), if one was, and the run is still armed: the workers' pool calls it
    at every wait, so the run ends within a wait's poll (0.2 s) of the signal."""
    signum, _state.lost = _state.lost, None
    if signum is not None and _state.armed:
        raise Interrupted(signum)


def record(signum: int) -> None:
    """Note ``signum`` as received without raising (a handler of an event loop's own
    that stops its run another way: runner/batches.py)."""
    if _state.received is None:
        _state.received = signum


def received() -> int | None:
    """The first interrupting signal received (its number), or None."""
    return _state.received


def arm() -> None:
    """A measurement starts: a signal from now on raises ``Interrupted``.

    Raises:
        Interrupted: a signal came while disarmed (between two runs of a sweep, say): the
            next run does not start.
    """
    _state.armed = True
    if _state.received is not None:
        raise Interrupted(_state.received)


def disarm() -> None:
    """The measurement is over: a signal from now on is recorded, not raised, so the
    result is built, stored and written whole (``received`` tells the CLI after)."""
    _state.armed = False


def reset() -> None:
    """Forget what was received and raise again (a new command in the same process)."""
    _state.received = None
    _state.armed = True
    _state.lost = None


@contextlib.contextmanager
def disarmed() -> Iterator[None]:
    """``disarm`` while inside; armed again after (a signal received meanwhile stays
    recorded, and does not raise on leaving: ``arm`` raises for it)."""
    armed = _state.armed
    _state.armed = False
    try:
        yield
    finally:
        _state.armed = armed


def ignore_run_signals() -> None:
    """Ignore ``SIGNALS`` in this process (a worker, the fork server: the coordinator
    decides how a run ends), then unblock them: one pending is dropped."""
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def deliver_held() -> None:
    """Unblock ``SIGNALS`` in this thread: one held since the command started
    (``kvbench.__main__`` blocks them until the CLI's handlers are in place) is delivered
    now. Nothing changes where none were blocked (a library caller, a test)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def exit_code(code: int) -> int:
    """The process's exit code: 128 + the signal's number when one interrupted the run
    (130 SIGINT, 143 SIGTERM, 129 SIGHUP), else ``code``."""
    signum = _state.received
    return code if signum is None else 128 + signum
