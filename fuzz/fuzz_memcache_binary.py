"""atheris harness for MemcacheBinaryCodec; oracle: replies, NEED_DATA or ProtocolError only.

Not run in CI. Run: ``pip install atheris && python fuzz/fuzz_memcache_binary.py``
(libFuzzer flags such as ``-max_total_time=60`` pass through).
"""

from __future__ import annotations

import sys

import oracle  # fuzz/oracle.py: this folder is on the path when a harness runs

from kvbench.protocols.base import CodecOptions, Op
from kvbench.protocols.memcache_binary import MemcacheBinaryCodec

OPS = [Op.GET, Op.GETS, Op.SET, Op.ADD, Op.CAS, Op.APPEND, Op.DELETE, Op.INCR, Op.TOUCH]
OPS += [Op.NOOP, Op.STATS, Op.MGET]


def test_one_input(data: bytes) -> None:
    """Announce requests chosen by the first bytes, then parse the rest in chunks."""
    if len(data) < 3:
        return
    noreply, count, chunk = data[0] & 1, data[1] % 8, 1 + data[2] % 64
    codec = MemcacheBinaryCodec(CodecOptions(noreply=bool(noreply), max_reply_bytes=4096))
    out = bytearray()
    for selector in data[3 : 3 + count]:
        op = OPS[selector % len(OPS)]
        key: object = [b"a", b"b", b"c"] if op == Op.MGET else b"k"
        codec.encode(op, key, b"v", out, selector)
    oracle.check(codec, data[3 + count :], chunk)


def main() -> None:
    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
