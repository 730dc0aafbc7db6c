"""A wake-up at a precise instant for the open-loop dispatcher: a Linux timerfd.

The event loops' own timers are millisecond-grained: uvloop rounds ``call_later`` to whole
milliseconds against a clock it reads once per loop iteration, and the selector loop's
epoll timeout is whole milliseconds too. A dispatcher that sleeps on them either spins
(a wait under 1 ms rounds to 0: every loop iteration dispatches a request or two, and at
100k requests/s the dispatch alone took most of the client's core) or wakes 1-2 ms late
(a third of the sends over 2 ms behind their slot). A timerfd armed at an absolute
``CLOCK_MONOTONIC`` instant (the clock of ``time.monotonic_ns``) becomes readable at that
instant, to the microsecond, and the loop's poll returns for it like for a socket.

Linux only, through ctypes (no compiler needed); ``Timer.open`` returns None elsewhere,
and the dispatcher falls back to the loop's own timers.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
from collections.abc import Callable
from typing import Any

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = os.O_CLOEXEC
_TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class _Itimerspec(ctypes.Structure):
    _fields_ = (("it_interval", _Timespec), ("it_value", _Timespec))


def _libc() -> Any:
    """libc's timerfd calls, or None where there are none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes = (ctypes.c_int, ctypes.c_int)
    create.restype = ctypes.c_int
    settime.argtypes = (
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(_Itimerspec),
        ctypes.c_void_p,
    )
    settime.restype = ctypes.c_int
    return libc


_LIBC = _libc()


class Timer:
    """One timerfd watched by the running event loop: calls ``on_fire`` when it expires.

    ``at`` arms it once at an instant, ``every`` periodically; re-arming replaces the
    previous setting. Made with ``Timer.open``; ``close`` when done.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, on_fire: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._on_fire = on_fire
        self._spec = _Itimerspec()
        self._spec_ref = ctypes.byref(self._spec)
        self._period_ns = 0  # armed periodically with this period; 0: once, or not armed
        loop.add_reader(fd, self._fired)

    @classmethod
    def open(cls, on_fire: Callable[[], None]) -> Timer | None:
        """A timer on the running loop, or None where timerfds are not available."""
        if _LIBC is None:
            return None
        fd = _LIBC.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            return None
        return cls(asyncio.get_running_loop(), fd, on_fire)

    def at(self, when_ns: int) -> None:
        """Fire once at ``when_ns`` (``time.monotonic_ns``'s clock), or at once if past."""
        self._arm(_TFD_TIMER_ABSTIME, max(when_ns, 1), 0)  # an it_value of 0 disarms
        self._period_ns = 0

    def every(self, period_ns: int) -> None:
        """Fire every ``period_ns`` from now (left as it is if already so armed)."""
        if self._period_ns != period_ns:
            self._arm(0, period_ns, period_ns)
            self._period_ns = period_ns

    def _arm(self, flags: int, value_ns: int, interval_ns: int) -> None:
        spec = self._spec
        spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(value_ns, 1_000_000_000)
        spec.it_interval.tv_sec, spec.it_interval.tv_nsec = divmod(interval_ns, 1_000_000_000)
        if _LIBC.timerfd_settime(self._fd, flags, self._spec_ref, None) < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"timerfd_settime: {os.strerror(errno)}")

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)  # the expiry count; reading it makes the fd unreadable
        except BlockingIOError:  # re-armed after it became readable: not due yet
            return
        self._on_fire()

    def close(self) -> None:
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
