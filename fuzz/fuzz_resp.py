"""atheris harness for RespCodec (RESP2 and RESP3); oracle: replies, NEED_DATA or
ProtocolError only.

Not run in CI. Run: ``pip install atheris && python fuzz/fuzz_resp.py``
(libFuzzer flags such as ``-max_total_time=60`` pass through).
"""

from __future__ import annotations

import sys

import oracle  # fuzz/oracle.py: this folder is on the path when a harness runs

from kvbench.protocols.base import CodecOptions, Op
from kvbench.protocols.resp import RespCodec

OPS = [Op.GET, Op.SET, Op.ADD, Op.DELETE, Op.INCR, Op.MGET, Op.TOUCH, Op.APPEND, Op.NOOP]
OPS += [Op.STATS, Op.COMMAND]


def test_one_input(data: bytes) -> None:
    """Announce requests chosen by the first bytes, then parse the rest in chunks."""
    if len(data) < 3:
        return
    protocol, count, chunk = 2 + (data[0] & 1), data[1] % 8, 1 + data[2] % 64
    codec = RespCodec(CodecOptions(max_reply_bytes=4096), protocol=protocol)
    out = bytearray()
    if data[0] & 2:
        codec.encode_hello(out)
    for selector in data[3 : 3 + count]:
        op = OPS[selector % len(OPS)]
        key: object = [b"a", b"b"] if op in (Op.MGET, Op.COMMAND) else b"k"
        codec.encode(op, key, b"v", out, 1 + selector)
    oracle.check(codec, data[3 + count :], chunk, exact_nbytes=False)


def main() -> None:
    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
