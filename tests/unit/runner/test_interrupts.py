"""SIGINT, SIGTERM and SIGHUP are one interrupt: raised while a run measures, recorded
while its result is written, and the exit code says which signal came."""

from __future__ import annotations

import signal

import pytest

from kvbench.runner import interrupts


def test_a_signal_while_armed_raises_and_sets_the_exit_code() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.catching():
        with pytest.raises(KeyboardInterrupt) as caught:  # every Ctrl-C path serves it
            signal.raise_signal(signal.SIGTERM)
        assert isinstance(caught.value, interrupts.Interrupted)
        assert caught.value.signum == signal.SIGTERM
        assert interrupts.exit_code(130) == 143
    assert signal.getsignal(signal.SIGTERM) == before  # put back


def test_disarmed_a_first_signal_is_recorded_a_second_raises() -> None:
    with interrupts.catching():
        interrupts.disarm()  # the result is being written
        signal.raise_signal(signal.SIGHUP)
        assert interrupts.received() == signal.SIGHUP
        with pytest.raises(interrupts.Interrupted):  # the user insists
            signal.raise_signal(signal.SIGINT)
        assert interrupts.exit_code(0) == 129  # the first one's


def test_arming_after_a_recorded_signal_stops_the_next_run_at_once() -> None:
    with interrupts.catching():
        interrupts.disarm()
        signal.raise_signal(signal.SIGINT)  # between two levels of a sweep
        with pytest.raises(interrupts.Interrupted):
            interrupts.arm()


def test_without_a_signal_the_exit_code_is_the_runs() -> None:
    with interrupts.catching():
        assert interrupts.received() is None
        assert interrupts.exit_code(4) == 4


class _Collected:
    """An object whose weakref callback runs when it goes: where Python ignores exceptions."""


def test_a_signal_handled_where_python_ignores_exceptions_is_raised_again_unprinted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A signal whose handler ran inside a weakref callback (importlib's module locks have
    one, met in a run's start-up): its Interrupted is ignored there, so Python printed a
    traceback and the run went on to its end; now nothing is printed and ``raise_lost``
    raises it where the coordinator next waits."""
    import weakref

    with interrupts.catching():
        collected = _Collected()
        ref = weakref.ref(collected, lambda _: signal.raise_signal(signal.SIGHUP))
        del collected  # the callback runs now, the handler inside it
        assert ref() is None
        assert interrupts.received() == signal.SIGHUP
        with pytest.raises(interrupts.Interrupted) as caught:
            interrupts.raise_lost()
        assert caught.value.signum == signal.SIGHUP
        interrupts.raise_lost()  # raised once
        interrupts.disarm()
        other = _Collected()
        ref = weakref.ref(other, lambda _: signal.raise_signal(signal.SIGINT))  # insisting
        del other
        assert ref() is None
        interrupts.raise_lost()  # disarmed: the result is being written, nothing raised
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_signal_received_inside_does_not_outlive_the_command() -> None:
    """A command that got SIGTERM leaves nothing behind: the next run in the same process (a
    library caller's, the next test's) arms without raising. Before, a signal recorded by one
    test stopped a later test's Coordinator.run at its start."""
    with interrupts.catching():
        interrupts.disarm()
        signal.raise_signal(signal.SIGTERM)
        assert interrupts.exit_code(0) == 143
    assert interrupts.received() is None
    assert interrupts.exit_code(0) == 0
    interrupts.arm()  # raised Interrupted(SIGTERM) before
