"""atheris harness for HttpMemcCodec (memc HTTP gateways); oracle: replies, NEED_DATA or
ProtocolError only, through next_reply and read_kinds alike.

Not run in CI. Run: ``pip install atheris && python fuzz/fuzz_http1.py``
(libFuzzer flags such as ``-max_total_time=60`` pass through).
"""

from __future__ import annotations

import sys

import oracle  # fuzz/oracle.py: this folder is on the path when a harness runs

from kvbench.protocols.base import CodecOptions, Op
from kvbench.protocols.http1 import HttpMemcCodec

OPS = [Op.GET, Op.SET, Op.ADD, Op.DELETE, Op.INCR, Op.DECR, Op.STATS]


def test_one_input(data: bytes) -> None:
    """Announce requests chosen by the first bytes, then parse the rest in chunks."""
    if len(data) < 3:
        return
    batch, count, chunk = data[0] & 1, data[1] % 8, 1 + data[2] % 64
    codec = HttpMemcCodec(CodecOptions(max_reply_bytes=4096, keep_payload=bool(data[0] & 2)))
    out = bytearray()
    if data[0] & 4:
        codec.encode_version(out)
    for selector in data[3 : 3 + count]:
        codec.encode(OPS[selector % len(OPS)], b"k", b"v", out, selector)
    oracle.check(codec, data[3 + count :], chunk, batch=bool(batch))


def main() -> None:
    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
