"""atheris harness for MemcacheTextCodec. Oracle: replies or ProtocolError, nothing else.

Run by hand (not in CI): ``pip install atheris && python fuzz/fuzz_memcache_text.py corpus/``.
The first 3 input bytes choose options, announced requests and the feed chunk size; the
rest is fed to the codec as the server's reply stream.
"""

from __future__ import annotations

import sys

import oracle  # fuzz/oracle.py: this folder is on the path when a harness runs

from kvbench.protocols.base import DEFAULT_MAX_REPLY_BYTES, CodecOptions, Op
from kvbench.protocols.memcache_text import MemcacheTextCodec

OPS = [op for op in Op if op is not Op.NOOP]  # COMMAND: the line "k"
VALUE_OPS = {Op.SET, Op.ADD, Op.REPLACE, Op.APPEND, Op.PREPEND, Op.CAS}


def test_one_input(data: bytes) -> None:
    """Feed ``data`` after announcing requests; fail on anything but replies/ProtocolError."""
    if len(data) < 3:
        return
    mode, count, chunk = data[0], data[1], data[2]
    bound = 64 if mode & 4 else DEFAULT_MAX_REPLY_BYTES
    codec = MemcacheTextCodec(
        CodecOptions(keep_payload=bool(mode & 1), noreply=bool(mode & 2), max_reply_bytes=bound)
    )
    for i in range(count % 8):
        op = OPS[((mode >> 3) + i * 5) % len(OPS)]
        key: bytes | list[bytes] = [b"k", b"a"] if op is Op.MGET else b"k"
        codec.encode(op, key, b"v" if op in VALUE_OPS else None, bytearray(), 1)
    oracle.check(codec, data[3:], 1 + chunk % 32)


def main() -> None:
    # Not a project dependency: only the harnesses need it, and it ships no types.
    import atheris  # type: ignore[import-untyped, import-not-found, unused-ignore]

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
