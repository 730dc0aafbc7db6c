"""Read-modify-write (``rmw`` in the ratio): a get then a set of one key, timed as one op.

The Python driver's: a codec wrapper, selected per connection only when the mix has
read-modify-writes, so the normal path stays as it is. The compiled pump does the same
in C (engine/_pump.c's ``OP_RMW``: the same bytes, the same folded reply; the pump
oracle, tests/support/pump_oracle.py, holds the two together). The request source draws an rmw as ``RMW_CODE``; the
wrapper writes it as a get of the key followed by a set of it in the same write, takes
one pipeline slot for the pair, and folds the two replies into one: the driver then
times the op from the get's send to the set's reply, as YCSB times its
READ-MODIFY-WRITE. The set goes out behind the get, not after its reply (the driver
sends when slots free, not when a particular reply arrives): the op measures one round
trip carrying both commands, where YCSB's client waits for the read before it writes.

The folded outcome is the get's (``hit`` or ``miss``: memcached's get_hits and
get_misses count it), or ``error_reply`` when either half was refused; the set's
``stored`` is implied by a non-error reply. The server counts a get and a set per rmw
(report/reconcile.py knows).

On a Redis Cluster (engine/redirect.py) a pair either half of which a node redirected
(``MOVED``, ``ASK``) is answered with that redirect, one for the pair: the driver sends
both halves on together (``encode_pair``, ``ASKING`` before each for an ASK: it lets the
node take the one command after it). A get served where its set was redirected is
counted in ``served_halves`` (so is a set served where its get was redirected): its node
executed it, and the pair runs again elsewhere; a pair both of whose halves were
redirected in ``refused_halves``: its node refused two commands for one redirect.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from kvbench.protocols.base import KEYS_SHIFT, ClientCodec, Op, ReplyKind
from kvbench.workload.mix import RMW_CODE

_GET = int(Op.GET)
_SET = int(Op.SET)
_ERROR = int(ReplyKind.ERROR_REPLY)
_REDIRECTS = (int(ReplyKind.MOVED), int(ReplyKind.ASK))
_KIND_MASK = (1 << KEYS_SHIFT) - 1
# A group in the reply FIFO: a positive n is n replies passed through one for one; PAIR is
# an rmw's two replies, folded into one.
PAIR = -1


def fold(get_code: int, set_code: int) -> int:
    """An rmw's reply code from its halves': the get's, or ``error_reply`` when either is
    an error reply."""
    if (get_code & _KIND_MASK) == _ERROR or (set_code & _KIND_MASK) == _ERROR:
        return _ERROR | (get_code & ~_KIND_MASK)
    return get_code


class RmwCodec:
    """A ``ClientCodec`` that sends ``RMW_CODE`` requests as a get and a set and answers
    them with one reply; everything else is the wrapped codec's.

    Args:
        inner: the connection's real codec.
    """

    def __init__(self, inner: ClientCodec) -> None:
        self._inner = inner
        self._groups: deque[int] = deque()
        self._half: int | None = None  # the get's reply of the rmw at the head
        self._half_nbytes = 0  # its bytes
        self._unread_pairs = 0  # rmw requests whose get reply is not read yet
        # Redis Cluster, since the driver last took them: halves served whose pair was
        # redirected (sent on), and pairs both of whose halves were redirected (two
        # refusals, one redirect).
        self.served_halves = 0
        self.refused_halves = 0

    def __getattr__(self, name: str) -> Any:
        # set_ttl, closing, last_error, encode_hello / encode_auth / encode_select ...
        return getattr(self._inner, name)

    def _singles(self, n: int) -> None:
        groups = self._groups
        if n <= 0:
            return
        if groups and groups[-1] > 0:
            groups[-1] += n
        else:
            groups.append(n)

    def _pair(self, key: Any, value: Any, out: bytearray, asking: bool = False) -> int:
        inner: Any = self._inner
        if asking:
            inner.encode_asking(out)
        parts: int = inner.encode(_GET, key, None, out, 0)
        if asking:
            inner.encode_asking(out)
        parts += inner.encode(_SET, key, value, out, 0)
        if parts == 2:
            self._groups.append(PAIR)
            self._unread_pairs += 1
            return 1
        self._singles(parts)  # a noreply set: the get's reply is the op's
        return parts

    def encode_pair(self, key: Any, value: Any, out: bytearray, asking: bool) -> int:
        """Append an rmw's get and set of ``key`` (a pair a node redirected, sent on),
        ``ASKING`` before each when ``asking``; the replies the driver waits for (1)."""
        return self._pair(key, value, out, asking)

    def encode(self, op: Op, key: Any, value: Any, out: bytearray, arg: int = 0) -> int:
        if op == RMW_CODE:
            return self._pair(key, value, out)
        replies = self._inner.encode(op, key, value, out, arg)
        self._singles(replies)
        return replies

    def encode_many(
        self,
        ops: Sequence[int],
        keys: Sequence[Any],
        values: Sequence[Any],
        start: int,
        stop: int,
        out: bytearray,
    ) -> int:
        """Runs of other ops go to the wrapped codec whole; each rmw as its pair."""
        replies = 0
        run = start
        for i in range(start, stop):
            if ops[i] == RMW_CODE:
                if run < i:
                    count = self._inner.encode_many(ops, keys, values, run, i, out)
                    self._singles(count)
                    replies += count
                replies += self._pair(keys[i], values[i], out)
                run = i + 1
        if run < stop:
            count = self._inner.encode_many(ops, keys, values, run, stop, out)
            self._singles(count)
            replies += count
        return replies

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._inner.feed(data)

    def feed_eof(self) -> None:
        self._inner.feed_eof()

    def next_reply(self) -> Any:
        return self._inner.next_reply()

    def pending(self) -> int:
        """Replies the driver still waits for: the wrapped codec's, one per rmw pair."""
        return self._inner.pending() - self._unread_pairs

    def read_kinds(self, kinds: list[int], sizes: list[int] | None = None) -> int:
        """As ``ClientCodec.read_kinds``, each rmw's two replies as one (of their bytes
        together)."""
        parts: list[int] = []
        part_sizes: list[int] = []
        self._inner.read_kinds(parts, part_sizes)
        sized = (sizes if sizes is not None else []).append
        groups = self._groups
        count = 0
        # A cluster codec's redirects, one per redirect part in the order read: the ones
        # of this read are its last; a pair's second is dropped (the pair has one). With
        # none held (any codec but a cluster's, most reads of one) no part is a redirect.
        redirects: list[Any] | None = getattr(self._inner, "redirects", None) or None
        at = 0
        if redirects is not None:
            at = len(redirects) - sum((code & _KIND_MASK) in _REDIRECTS for code in parts)
        for code, nbytes in zip(parts, part_sizes, strict=True):
            redirect = redirects is not None and (code & _KIND_MASK) in _REDIRECTS
            at += redirect
            head = groups[0]
            if head != PAIR:
                kinds.append(code)
                sized(nbytes)
                count += 1
                if head == 1:
                    groups.popleft()
                else:
                    groups[0] = head - 1
            elif self._half is None:
                self._half = code
                self._half_nbytes = nbytes
                self._unread_pairs -= 1
            else:
                half = self._half
                if (half & _KIND_MASK) in _REDIRECTS:
                    if redirect:  # both halves redirected: the pair goes on once
                        assert redirects is not None
                        at -= 1
                        del redirects[at]
                        self.refused_halves += 1
                    elif (code & _KIND_MASK) != _ERROR:
                        self.served_halves += 1
                    kinds.append(half)
                elif redirect:
                    if (half & _KIND_MASK) != _ERROR:
                        self.served_halves += 1
                    kinds.append(code)
                else:
                    kinds.append(fold(half, code))
                sized(self._half_nbytes + nbytes)
                count += 1
                self._half = None
                groups.popleft()
        return count


def rmw_codecs(factory: Callable[[], ClientCodec]) -> Callable[[], ClientCodec]:
    """Wrap a codec factory so each fresh codec sends read-modify-writes."""
    return lambda: RmwCodec(factory())
