"""``--verify``: a codec wrapper that checks the payload of every get hit (the Python
driver's; the compiled pumps check theirs in C and ``Verifier.absorb`` counts them).

Selected once per connection, so the normal path stays as it is: the wrapper remembers
the key of every request it encodes (one reply per request, in order), parses replies
one at a time with ``next_reply`` (the codec keeps payloads) and checks each GET hit
against ``workload.verify.check_value``. A mismatch is counted as the outcome
``mismatch`` besides the op's ``hit`` (the server did answer with a value; it was not
ours), and the first few keys are kept as examples.

With ``--ratio set-then-get`` (``exact``) each get follows the set of its key on the same
connection, and no other connection sends that key: the get must return exactly the bytes
that set stored (as the server stores them: an HTTP gateway's URL-safe form, the codec's
``stored_value``), so a stale version of the key fails too.
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
_SET = int(Op.SET)
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

    def check(self, key: bytes, payload: bytes | None, expected: bytes | None = None) -> None:
        """Check one get hit's value (against ``expected`` when the set before it is
        known, else as a value derived from ``key``); count ``verified`` and, when wrong,
        ``mismatch``."""
        self.recorder.add_stat("verified", 1)
        if payload is not None and (
            payload == expected if expected is not None else self._check(key, payload)
        ):
            return
        self.recorder.counts[_GET][_MISMATCH] += 1
        self._name(key)

    def absorb(self, checked: int, mismatches: int, keys: Sequence[bytes]) -> None:
        """Count checks made elsewhere (the compiled pumps': fastpath.drain): ``checked``
        get hits, ``mismatches`` of them wrong, some of their ``keys``."""
        if checked:
            self.recorder.add_stat("verified", checked)
        self.recorder.counts[_GET][_MISMATCH] += mismatches
        for key in keys:
            self._name(key)

    def _name(self, key: bytes) -> None:
        """Keep ``key`` as an example of a mismatch, if it is new and there is room."""
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

    def __init__(self, inner: ClientCodec, verifier: Verifier, exact: bool = False) -> None:
        self._inner = inner
        self._verifier = verifier
        self._ops: deque[int] = deque()
        self._keys: deque[Any] = deque()
        # exact: per request, the value a get must return (the set before it sent it).
        self._exact = exact
        self._expected: deque[bytes | None] = deque()
        self._stored_form: Callable[[Any], bytes] = getattr(inner, "stored_value", bytes)
        self._last_set: tuple[Any, Any] | None = None  # (key, value) of the last set encoded

    def __getattr__(self, name: str) -> Any:
        # encode_hello / encode_auth / encode_select and any other codec extra.
        return getattr(self._inner, name)

    def encode(self, op: Op, key: Any, value: Value, out: bytearray, arg: int = 0) -> int:
        replies = self._inner.encode(op, key, value, out, arg)
        for _ in range(replies):
            self._ops.append(int(op))
            self._keys.append(key)
        if self._exact:
            self._expect([int(op)] * replies, [key] * replies, [value] * replies)
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
        if self._exact:
            self._expect(ops[start:stop], keys[start:stop], values[start:stop])
        return count

    def _expect(self, ops: Sequence[int], keys: Sequence[Any], values: Sequence[Value]) -> None:
        """Exact mode: what each request's reply must hold (a get right after the set of
        its key: that set's value as stored; anything else: None, checked by key)."""
        last = self._last_set
        for op, key, value in zip(ops, keys, values, strict=True):
            expected = None
            if op == _SET:
                last = (key, value)
            elif op == _GET and last is not None and last[0] == key:
                expected = self._stored_form(last[1])
            self._expected.append(expected)
        self._last_set = last

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._inner.feed(data)

    def feed_eof(self) -> None:
        self._inner.feed_eof()

    def next_reply(self) -> Reply | NeedData:
        return self._inner.next_reply()

    def pending(self) -> int:
        return self._inner.pending()

    def read_kinds(self, kinds: list[int], sizes: list[int] | None = None) -> int:
        """As ``ClientCodec.read_kinds``, checking each GET hit's payload on the way."""
        count = 0
        next_reply = self._inner.next_reply
        while (reply := next_reply()) is not NEED_DATA:
            assert isinstance(reply, Reply)
            op = self._ops.popleft()
            key = self._keys.popleft()
            expected = self._expected.popleft() if self._exact else None
            if op == _GET and reply.kind == _HIT:
                self._verifier.check(key, reply.payload, expected)
            kinds.append(reply.kind | reply.keys << KEYS_SHIFT)
            if sizes is not None:
                sizes.append(reply.nbytes)
            count += 1
        return count


def verifying(
    factory: Callable[[], ClientCodec], verifier: Verifier, exact: bool = False
) -> Callable[[], ClientCodec]:
    """Wrap a codec factory so each fresh codec checks get hits (``exact``: against the
    set before each get, for ``--ratio set-then-get``)."""
    return lambda: VerifyingCodec(factory(), verifier, exact)
