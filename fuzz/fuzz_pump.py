"""atheris harness for the compiled pump (engine/_pump*.c) against the Python one.

Oracle (tests/support/pump_oracle.py, the one the differential test in
tests/unit/engine/test_pump_replies.py uses): for the same requests and the same reply
bytes read in the same pieces, called for call, the compiled ``Pump`` and the Python
driver's ``PyPump`` (engine/py_pump.py) write the same requests (binary opaques and meta
tokens included), account the same reply codes, return the same statuses, and both stop
on a protocol error or neither (save the documented exceptions); the pump never raises
and never crashes. Protocols: memcached text, binary and meta, RESP2 and RESP3, and
HTTP to a memc gateway (its announced closes returned as a status on both).

The first input byte chooses the mode: grammar-aware (even: replies drawn from each op
family's grammar, tests/support/reply_grammar.py, by the rest of the input, then mutated)
or raw (odd: the next bytes choose the protocol, up to 8 of the ops the pump sends on it
(a replay's too, read-modify-writes, and RESP's arbitrary commands, each a rendered
request), the read size, the reply
bound, closed or open loop, lists or a packed chunk (a replay's lane's form, when no
multi-get is among the ops), and whether both pumps check get hits (``--verify``, never
beside an rmw); the rest is the server's byte stream as it is).

With atheris, by hand, from the repository root:
``pip install atheris && python fuzz/fuzz_pump.py corpus/`` (libFuzzer flags such as
``-max_total_time=60`` pass through). Without atheris, ``python fuzz/fuzz_pump.py
--seeds 100000`` runs the oracle over that many seeded exchanges instead, and ``--inputs
100000`` feeds that many seeded random inputs to ``test_one_input`` (both modes, as a
fuzzer's first inputs would). ``make sanitize`` runs both, bounded, with the pump built
under AddressSanitizer and UBSan.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from kvbench.engine import fastpath
from kvbench.protocols.base import Op
from tests.support import pump_oracle

MAX_REPLY = (64, 200, 4096)


def test_one_input(data: bytes) -> None:
    """One exchange from ``data``: grammar-aware or raw (see the module docstring)."""
    if len(data) < 5:
        return
    if data[0] % 2 == 0:
        draw = ByteDraw(data[1:])
        pump_oracle.check(pump_oracle.exchange(draw))
        return
    protocol = pump_oracle.PROTOCOLS[data[1] % len(pump_oracle.PROTOCOLS)]
    count = 1 + data[2] % 8
    if len(data) < 5 + count:
        return
    sent = pump_oracle.sent_ops(protocol)
    ops = [int(sent[b % len(sent)]) for b in data[5 : 5 + count]]
    keys = [
        (b"a", b"b")
        if op == Op.MGET
        else pump_oracle.command_request(b"k", b"v", protocol)
        if op == Op.COMMAND
        else b"k"
        for op in ops
    ]
    wire = data[5 + count :]
    step = 1 + data[3] % 32
    cuts = list(range(step, len(wire), step))
    max_reply = MAX_REPLY[data[4] % len(MAX_REPLY)]
    open_loop = data[4] // len(MAX_REPLY) % 2 == 1
    packed = None
    if data[4] // (2 * len(MAX_REPLY)) % 2 == 1 and Op.MGET not in ops:
        kinds = pump_oracle.OFFSET_KINDS
        packed = (kinds[data[3] % len(kinds)], data[2])
    verify = data[4] // (4 * len(MAX_REPLY)) % 2 == 1 and not pump_oracle.unverified(ops)
    pump_oracle.check(
        pump_oracle.Exchange(protocol, ops, keys, wire, cuts, max_reply, open_loop, packed, verify)
    )


class ByteDraw:
    """A ``pump_oracle.Draw`` that takes its choices from fuzzer bytes (0 when they run out)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def __call__(self, lo: int, hi: int) -> int:
        span = hi - lo + 1
        value = 0
        for _ in range(max(1, (span.bit_length() + 7) // 8)):
            byte = self._data[self._pos] if self._pos < len(self._data) else 0
            self._pos += 1
            value = value << 8 | byte
        return lo + value % span


def main() -> None:
    if not fastpath.compiled():
        sys.exit("the compiled pump is not built (or KVBENCH_PURE_PYTHON is set)")
    if len(sys.argv) == 3 and sys.argv[1] == "--seeds":
        for seed in range(int(sys.argv[2])):
            pump_oracle.check(pump_oracle.exchange(pump_oracle.seeded(seed)))
        print(f"{sys.argv[2]} seeded exchanges: the two pumps agree")
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--inputs":
        for seed in range(int(sys.argv[2])):
            rng = random.Random(seed)
            test_one_input(rng.randbytes(rng.randrange(5, 400)))
        print(f"{sys.argv[2]} seeded inputs: the two pumps agree")
        return
    # Not a project dependency: only the harnesses need it, and it ships no types.
    import atheris  # type: ignore[import-untyped, import-not-found, unused-ignore]

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
