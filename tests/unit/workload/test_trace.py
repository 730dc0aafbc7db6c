from __future__ import annotations

from pathlib import Path

import pytest

from kvbench.errors import ConfigError
from kvbench.workload.trace import TRACE_OPS, TraceReader
from tests.support.traces import mixed_rows, write_trace


def read_all(reader: TraceReader) -> list[tuple[object, ...]]:
    rows = []
    for block in reader:
        rows += list(
            zip(
                block.times_s,
                block.keys,
                block.key_sizes,
                block.value_sizes,
                block.clients,
                [TRACE_OPS[o] for o in block.ops],
                block.ttls_s,
                strict=True,
            )
        )
    return rows


def expected(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return [
        (t, k.encode(), ks, vs, str(c).encode(), op, ttl)  # type: ignore[attr-defined]
        for t, k, ks, vs, c, op, ttl in rows
    ]


@pytest.mark.parametrize("compress", [False, True])
def test_rows_come_back_as_written_plain_and_zstd(tmp_path: Path, compress: bool) -> None:
    rows = mixed_rows(3000, ops=TRACE_OPS)
    path = write_trace(tmp_path / "t.csv", rows, compress=compress)
    reader = TraceReader(path, block_bytes=4096)
    assert read_all(reader) == expected(rows)  # type: ignore[arg-type]
    assert reader.lines_read == 3000
    assert not reader.kvbench_format


def test_kvbench_csv_has_a_header_and_fractional_seconds(tmp_path: Path) -> None:
    rows = [(0.25, "a", 1, 0, 1, "get", 0), (1.5, "bb", 2, 10, 2, "set", 60)]
    reader = TraceReader(write_trace(tmp_path / "k.csv", rows, header=True))
    assert read_all(reader) == [
        (0.25, b"a", 1, 0, b"1", "get", 0),
        (1.5, b"bb", 2, 10, b"2", "set", 60),
    ]
    assert reader.kvbench_format and reader.lines_read == 3


def test_crlf_and_a_missing_final_newline_are_read(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"0,a,1,0,1,get,0\r\n1,b,1,5,1,set,9")
    assert read_all(TraceReader(path)) == [
        (0, b"a", 1, 0, b"1", "get", 0),
        (1, b"b", 1, 5, b"1", "set", 9),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"7,k,1,0,1,get", "expected 7 comma-separated columns, found 6"),
        (b"7,k,1,0,1,get,0,9", "expected 7 comma-separated columns, found 8"),
        (b"7,k,1,0,1,fetch,0", "unknown operation 'fetch'"),
        (b"7,k,x,0,1,get,0", "key_size 'x' is not a whole number >= 1"),
        (b"7,k,0,0,1,get,0", "key_size '0' is not a whole number >= 1"),
        (b"7,k,1,-5,1,get,0", "value_size '-5' is not a whole number >= 0"),
        (b"7.5,k,1,0,1,get,0", "timestamp '7.5' is not a whole number of seconds"),
        (b"7,a key,5,0,1,get,0", "a space or control character"),
        (b"7,,1,0,1,get,0", "empty key"),
        (b"3,k,1,0,1,get,0", "timestamp '3' is earlier than the row before's"),
        (b"7,k,1,9,1,set,99999999999999999999", "ttl '99999999999999999999' is over 2,147,483,647"),
        (b"7,k,1,9,1,set,2147483648", "ttl '2147483648' is over 2,147,483,647 seconds"),
    ],
)
def test_a_bad_row_is_one_error_naming_file_and_line(
    tmp_path: Path, line: bytes, message: str
) -> None:
    good = b"".join(b"%d,key%d,4,0,1,get,0\n" % (5 + i // 500, i) for i in range(1000))
    path = tmp_path / "bad.csv"
    path.write_bytes(good + line + b"\n" + good.replace(b"5,", b"9,"))
    with pytest.raises(ConfigError) as caught:
        read_all(TraceReader(path, block_bytes=1000))
    assert str(caught.value).startswith(f"{path}:1001: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_bad_row_in_a_zstd_trace_names_its_line(tmp_path: Path) -> None:
    rows = mixed_rows(500)
    path = write_trace(tmp_path / "t.zst", [*rows, (99, "k", 1, 0, 1, "nope", 0)], compress=True)
    with pytest.raises(ConfigError, match=r"t\.zst:501: unknown operation 'nope'"):
        read_all(TraceReader(path))


def test_a_truncated_zstd_file_is_a_config_error(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.zst", mixed_rows(5000), compress=True)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ConfigError, match=r"t\.zst: cannot decompress"):
        read_all(TraceReader(path))


def test_a_zstd_trace_of_several_frames_is_read_whole(tmp_path: Path) -> None:
    first, second = mixed_rows(100, seed=1), mixed_rows(100, seed=2)
    second = [(t + 10, *rest) for t, *rest in second]  # type: ignore[misc]
    a = write_trace(tmp_path / "a.zst", first, compress=True).read_bytes()
    b = write_trace(tmp_path / "b.zst", second, compress=True).read_bytes()
    (tmp_path / "ab.zst").write_bytes(a + b)
    assert len(read_all(TraceReader(tmp_path / "ab.zst"))) == 200


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot open the trace"):
        read_all(TraceReader(tmp_path / "nope.csv"))


@pytest.mark.parametrize("compress", [False, True])
def test_a_file_of_several_mb_streams_through_a_bounded_buffer(
    tmp_path: Path, compress: bool
) -> None:
    rows = mixed_rows(150_000, seconds=100, keys=100_000)
    path = write_trace(tmp_path / "big.csv", rows, compress=compress)
    reader = TraceReader(path, block_bytes=64 * 1024)
    count = sum(len(block) for block in reader)
    assert count == 150_000
    size = len(write_trace(tmp_path / "plain.csv", rows).read_bytes())
    assert size > 4_000_000
    if compress:  # what 32 KiB of zstd input decompresses to: never the file
        assert reader.max_buffered_bytes < size // 8
    else:  # a block and the cut-off line before it
        assert reader.max_buffered_bytes <= 64 * 1024 + 4096
