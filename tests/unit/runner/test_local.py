"""Local workers: how one that ended without a word is described."""

from __future__ import annotations

from kvbench.runner.local import describe_exit


def test_an_exit_says_the_signal_that_ended_the_worker_and_where_an_oom_kill_shows() -> None:
    assert describe_exit(0) == "worker process exited with code 0"
    assert describe_exit(3) == "worker process exited with code 3"
    assert describe_exit(-15) == "worker process was killed by SIGTERM"
    assert describe_exit(-9) == (
        "worker process was killed by SIGKILL (the kernel's out-of-memory killer sends it: "
        "dmesg or journalctl -k says whether it did)"
    )
    assert describe_exit(-200) == "worker process was killed by signal 200"
