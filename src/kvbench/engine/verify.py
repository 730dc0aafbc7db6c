"""``--verify``: a codec wrapper that checks the payload of every get hit.

Selected once per connection, so the normal path stays as it is: the wrapper remembers
the key of every request it encodes (one reply per request, in order), parses replies
one at a time with ``next_reply`` (the codec keeps payloads) and checks each GET hit
against ``workload.verify.check_value``. A mismatch is counted as the outcome
``mismatch`` besides the op's ``hit`` (the server did answer with a value; it was not
ours), and the first few keys are kept as examples.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import (
    KEYS_SHIFT,
    NEED_DATA,
    ClientCodec,
    NeedData,
    Op,
    Reply,
    ReplyKind,
)
from kvbench.workload.verify import Payload, check_value

# Example keys kept per worker (distinct keys, first seen first).
EXAMPLE_KEYS = 10
_GET = int(Op.GET)
_HIT = int(ReplyKind.HIT)
_MISMATCH = int(Outcome.MISMATCH)

Value = bytes | bytearray | memoryview | None


class Verifier:
    """One worker's verification tally: checks into the recorder, example keys here.

    Args:
        recorder: the worker's recorder (``counts`` and stats are reset in place at cuts).
        check: whether a key's value is good (workload/verify.py's ``value_check``: derived
            from the key, or a timestamp inside the set phase).
    """

    def __init__(
        self, recorder: Recorder, check: Callable[[bytes, Payload], bool] = check_value
    ) -> None:
        self.recorder = recorder
        self.examples: list[str] = []
        self._check = check

    def check(self, key: bytes, payload: bytes | None) -> None:
        """Check one get hit's value; count ``verified`` and, when wrong, ``mismatch``."""
        self.recorder.add_stat("verified", 1)
        if payload is not None and self._check(key, payload):
            return
        self.recorder.counts[_GET][_MISMATCH] += 1
        text = key.decode("utf-8", "backslashreplace")
        if len(self.examples) < EXAMPLE_KEYS and text not in self.examples:
            self.examples.append(text)


class VerifyingCodec:
    """A ``ClientCodec`` that checks get hits; everything else is the wrapped codec's.

    The wrapped codec must be built with ``CodecOptions(keep_payload=True)``. Setup
    requests (AUTH, SELECT, HELLO) go straight to it and their replies are read with
    ``next_reply``, so they never enter this wrapper's FIFO.

    Args:
        inner: the connection's real codec.
        verifier: where checks are counted.
    """

    def __init__(self, inner: ClientCodec, verifier: Verifier) -> None:
        self._inner = inner
        self._verifier = verifier
        self._ops: deque[int] = deque()
        self._keys: deque[Any] = deque()

    def __getattr__(self, name: str) -> Any:
        # encode_hello / encode_auth / encode_select and any other codec extra.
        return getattr(self._inner, name)

    def encode(self, op: Op, key: Any, value: Value, out: bytearray, arg: int = 0) -> int:
        replies = self._inner.encode(op, key, value, out, arg)
        for _ in range(replies):
            self._ops.append(int(op))
            self._keys.append(key)
        return replies

    def encode_many(
        self,
        ops: Sequence[int],
        keys: Sequence[bytes | Sequence[bytes]],
        values: Sequence[Value],
        start: int,
        stop: int,
        out: bytearray,
    ) -> int:
        count = self._inner.encode_many(ops, keys, values, start, stop, out)
        self._ops.extend(ops[start:stop])
        self._keys.extend(keys[start:stop])
        return count

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._inner.feed(data)

    def feed_eof(self) -> None:
        self._inner.feed_eof()

    def next_reply(self) -> Reply | NeedData:
        return self._inner.next_reply()

    def pending(self) -> int:
        return self._inner.pending()

    def read_kinds(self, kinds: list[int]) -> int:
        """As ``ClientCodec.read_kinds``, checking each GET hit's payload on the way."""
        count = 0
        next_reply = self._inner.next_reply
        while (reply := next_reply()) is not NEED_DATA:
            assert isinstance(reply, Reply)
            op = self._ops.popleft()
            key = self._keys.popleft()
            if op == _GET and reply.kind == _HIT:
                self._verifier.check(key, reply.payload)
            kinds.append(reply.kind | reply.keys << KEYS_SHIFT)
            count += 1
        return count


def verifying(factory: Callable[[], ClientCodec], verifier: Verifier) -> Callable[[], ClientCodec]:
    """Wrap a codec factory so each fresh codec checks get hits."""
    return lambda: VerifyingCodec(factory(), verifier)
