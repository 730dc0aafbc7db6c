"""The worker pool both coordinators use: one stream of messages, deaths included."""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing import Pipe as make_pipe
from multiprocessing.connection import Connection
from typing import Any

from kvbench.runner import messages as m
from kvbench.runner.pool import EXITED, WorkerPool


class FakeLauncher:
    """Hands out pipe pairs; the test holds the workers' ends."""

    start_delay_ns = 0

    def __init__(self) -> None:
        self.children: list[Connection] = []
        self.ended: dict[int, str] = {}
        self.stopped = False

    def open(self, wanted: int) -> int:
        return wanted

    def start(self, specs: Sequence[Any]) -> list[Connection]:
        parents = []
        for _ in specs:
            parent, child = make_pipe(duplex=True)
            parents.append(parent)
            self.children.append(child)
        return parents

    def exited(self) -> dict[int, str]:
        return dict(self.ended)

    def stop(self) -> None:
        self.stopped = True

    def close(self) -> None:
        pass


def test_every_waiting_message_comes_out_with_its_worker() -> None:
    launcher = FakeLauncher()
    pool = WorkerPool(launcher)
    pool.start([object(), object()])
    launcher.children[1].send(m.Ready(1, "h", 2))
    launcher.children[1].send(m.Stop())
    launcher.children[0].send(m.Ready(0, "h", 1))
    got = sorted(pool.receive(1.0), key=lambda item: item[0])
    assert [(i, type(msg).__name__) for i, msg in got] == [(0, "Ready"), (1, "Ready"), (1, "Stop")]


def test_a_worker_gone_without_a_word_is_one_failed_message() -> None:
    launcher = FakeLauncher()
    pool = WorkerPool(launcher)
    pool.start([object(), object()])
    launcher.children[0].close()  # its pipe closed: the process is gone
    launcher.ended[1] = "worker process exited with code -9"  # ended, nothing sent
    got = pool.receive(1.0)
    assert sorted((i, msg.kind, msg.message) for i, msg in got if isinstance(msg, m.Failed)) == [
        (0, EXITED, "worker process exited"),
        (1, EXITED, "worker process exited with code -9"),
    ]
    assert pool.receive(0.05) == []  # said once


def test_a_worker_that_said_done_is_not_counted_dead_when_it_ends() -> None:
    launcher = FakeLauncher()
    pool = WorkerPool(launcher)
    pool.start([object()])
    launcher.children[0].send(m.Stop())  # any message, then Done
    launcher.children[0].send(m.Done(0, summary=None))  # type: ignore[arg-type]
    launcher.children[0].close()
    launcher.ended[0] = "the worker ended without reporting"
    got = pool.receive(1.0)
    assert [type(msg).__name__ for _, msg in got] == ["Stop", "Done"]
    assert pool.receive(0.05) == []
    pool.stop()
    assert launcher.stopped


class SlowToReap(FakeLauncher):
    """Says worker 0 ended only at the third look: its pipe closes as its process exits,
    a moment before its exit status can be read."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def exited(self) -> dict[int, str]:
        self.looks += 1
        return {0: "worker process was killed by SIGKILL (...)"} if self.looks >= 3 else {}


def test_a_closed_pipe_waits_for_the_exit_status_to_say_how_the_worker_ended() -> None:
    """Was: "worker process exited", whatever had ended it (the kernel's OOM killer
    included), as the pipe's end came before the process could be waited for."""
    launcher = SlowToReap()
    pool = WorkerPool(launcher)
    pool.start([object()])
    launcher.children[0].close()
    [(index, msg)] = pool.receive(1.0)
    assert isinstance(msg, m.Failed) and (index, msg.kind) == (0, EXITED)
    assert msg.message == "worker process was killed by SIGKILL (...)"
