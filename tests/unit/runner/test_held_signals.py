"""``held_signals``: a signal that comes inside is delivered once on leaving, by a call."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType

import pytest

from kvbench.runner.held_signals import held_signals


@pytest.fixture
def recording_sigint() -> Iterator[list[FrameType | None]]:
    """SIGINT's handler records the frame it is given, the old handler restored after."""
    frames: list[FrameType | None] = []

    def record(signum: int, frame: FrameType | None) -> None:
        frames.append(frame)

    old = signal.signal(signal.SIGINT, record)
    yield frames
    signal.signal(signal.SIGINT, old)


def test_a_signal_inside_is_delivered_once_on_leaving_by_a_direct_call(
    recording_sigint: list[FrameType | None],
) -> None:
    """The handler runs before the ``with`` is left, called by held_signals itself (no
    frame: a signal's handler gets the frame it interrupted). Was: the signal raised again,
    its handler run wherever Python next checked, maybe in a ``__del__`` that drops what it
    raises."""
    with held_signals():
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)  # a second one is the same interrupt
        assert recording_sigint == []  # held
    assert recording_sigint == [None]
    signal.raise_signal(signal.SIGINT)  # the handler is back: a real delivery again
    assert len(recording_sigint) == 2 and recording_sigint[1] is not None


def test_the_handler_raises_out_of_the_with() -> None:
    # (Python's own handler installed here: test_queue_accounting's fixture says why)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    caught = stayed = False
    try:
        with held_signals():
            signal.raise_signal(signal.SIGINT)
            stayed = True  # the body ends whole
    except KeyboardInterrupt:
        caught = True
    finally:
        signal.signal(signal.SIGINT, old)
    assert caught and stayed


def test_an_ignored_signal_stays_ignored() -> None:
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with held_signals():
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
