"""The replay's spool (workload/trace_spool.py): segments read back as they were written."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbench.errors import ConfigError
from kvbench.workload.trace_spool import Segment, Spool, SpoolUnreadable

rows = st.lists(
    st.tuples(
        st.integers(0, 12),
        st.binary(min_size=1, max_size=250),
        st.integers(0, 1 << 20),
        st.integers(0, 1 << 20),
        st.integers(0, 1 << 40),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(segments=st.lists(st.tuples(rows, st.booleans(), st.integers(0, 1 << 31)), max_size=6))
def test_segments_read_back_as_written_in_any_order(
    segments: list[tuple[list[tuple[int, bytes, int, int, int]], bool, int]],
) -> None:
    spool = Spool()
    written = []
    for columns, timed, ttl in segments:
        ops, keys, starts, sizes, offsets = (list(c) for c in zip(*columns, strict=True))
        offsets.sort()
        segment = spool.write(ops, keys, starts, sizes, ttl, offsets if timed else None)
        written.append((segment, ops, keys, starts, sizes, offsets if timed else None))
    assert spool.size == sum(s.length for s, *_ in written)
    for segment, ops, keys, starts, sizes, offsets in reversed(written):
        got = spool.read(segment)
        assert list(got.ops) == ops and got.key_list() == keys
        assert bytes(got.keys) == b"".join(keys)
        assert got.value_starts.tolist() == starts
        assert got.value_ends.tolist() == [a + n for a, n in zip(starts, sizes, strict=True)]
        if offsets is None:
            assert got.offsets_ns is None and segment.first_ns == segment.last_ns == 0
        else:
            assert got.offsets_ns is not None and got.offsets_ns.tolist() == offsets
            assert (segment.first_ns, segment.last_ns) == (offsets[0], offsets[-1])
        assert got.key_starts.tolist() == [0, *got.key_ends.tolist()[:-1]]
        for array in (
            got.key_starts,
            got.key_ends,
            got.value_starts,
            got.value_ends,
            got.offsets_ns,
        ):
            if array is not None:
                assert array.ctypes.data % array.itemsize == 0  # aligned for C
        assert segment.ttl_s >= 0 and segment.rows == len(ops)
    spool.close()


def test_a_segment_past_the_files_end_is_an_error_not_short_columns() -> None:
    spool = Spool()
    segment = spool.write([0], [b"k"], [0], [0], 0, None)
    beyond = Segment(segment.at + 1, segment.rows, segment.key_bytes, 0, False)
    with pytest.raises(
        SpoolUnreadable, match="was cut short while it ran: 24 of a segment's 25 bytes"
    ):
        spool.read(beyond)
    spool.close()


def test_a_spool_that_cannot_be_written_is_one_config_error_naming_tmpdir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No room (or no directory) for the spool: one line before anything is sent, not an
    OSError's traceback from a worker."""
    import errno
    import tempfile

    spool = Spool()

    class Full:
        def writelines(self, parts: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self) -> None:
            pass

    spool._file = Full()  # type: ignore[assignment]
    with pytest.raises(ConfigError, match=r"cannot write the replay's spool in .*No space left"):
        spool.write([0], [b"k"], [0], [0], 0, None)

    def refuse(**kw: object) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    with pytest.raises(ConfigError, match="Permission denied") as refused:
        Spool()
    assert refused.value.path == "TMPDIR"
