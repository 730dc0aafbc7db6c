"""The recorder grows and clears its buffers while a sampling profiler holds its frames.

A Dask worker samples the frames of the task threads it runs every 10 ms (its profiler:
``sys._current_frames()``), and a frame held past its return keeps its locals. A numpy
view of a recorder buffer in such a frame (a histogram's ``record_many`` read the buffer
in place) kept the buffer exported: its next append (``fastpath.drain``) or clear raised
``BufferError``, found beside a busy loop in a Dask sweep (``worker 1 (10.77.0.12):
BufferError: cannot resize an array that is exporting buffers``), the worker's counts cut
short with it. The sampler here holds every ``record_many`` frame, deterministically.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest

from kvbench.metrics import histogram
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder

STORED, TIMEOUT = int(Outcome.STORED), int(Outcome.TIMEOUT)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> list[FrameType]:
    """Every ``Histogram.record_many`` frame, held past its return as a sampler would."""
    frames: list[FrameType] = []
    real = histogram.counts_indexes

    def sampled(block: Any) -> Any:
        frames.append(sys._getframe(1))
        return real(block)

    monkeypatch.setattr(histogram, "counts_indexes", sampled)
    return frames


def test_folds_and_cuts_with_their_frames_held_count_every_reply(held: list[FrameType]) -> None:
    recorder = Recorder(["get", "set"])
    snapshots = []
    for index in range(3):
        for _ in range(2):  # sets only: a fold hands the latencies to one histogram whole
            recorder.reply_ops.extend([1] * 5)
            recorder.reply_codes.extend([STORED] * 5)
            recorder.reply_latency_ns.extend([1_000] * 5)
            recorder.fold()
        recorder.counts[1][TIMEOUT] += 1  # a timed-out set, its latency at the timeout
        recorder.latency_ns[1].append(5_000_000)
        recorder.hiccup_ns.extend([10, 20])
        snapshots.append(recorder.cut("measure", index, index, index + 1))
    assert held  # the frames were held all along
    assert [s.counts for s in snapshots] == [{"set": {"stored": 10, "timeout": 1}}] * 3
    assert [s.latency["set"].total_count for s in snapshots] == [11] * 3
    assert all(s.hiccup is not None and s.hiccup.total_count == 2 for s in snapshots)
