"""What a replay sends for each trace operation on each protocol, and the key and value bytes.

Ops map one to one where the protocol has the command (memcached text, meta and binary
have all eleven). Where it has not, a stand-in with the same effect on the data is sent
(``gets`` is ``get`` plus a cas token: Redis and the HTTP gateway read with GET), else the
row is skipped and counted by reason (Redis has no cas and no prepend). A ``cas`` row
carries no token (the trace records none), so it is sent with cas unique 0: memcached
answers EXISTS when the key is there and NOT_FOUND when it is not, and does the work of a
cas either way. incr and decr step by 1.

Keys: the trace's anonymized key is sent at the trace's ``key_size``: a shorter one is
padded with characters derived from its hash, a longer one keeps its head (the namespaces)
and ends in its hash, so distinct keys stay distinct with high probability and the same
key is always the same bytes. Values: ``value_size`` bytes sliced from one random blob;
sizes up to 19 bytes are decimal digits, so a counter stored by a set can be incremented
(memcached refuses incr on a non-numeric value).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from operator import itemgetter
from typing import TypeVar

import numpy as np

from kvbench.config.targets import MAX_KEY_BYTES as KEY_LIMITS
from kvbench.protocols.base import Op
from kvbench.protocols.registry import CODECS
from kvbench.workload.trace import TRACE_OPS

# The op each trace operation is, where the protocol has it.
_DIRECT: dict[str, Op] = {
    "get": Op.GET,
    "gets": Op.GETS,
    "set": Op.SET,
    "add": Op.ADD,
    "replace": Op.REPLACE,
    "cas": Op.CAS,
    "append": Op.APPEND,
    "prepend": Op.PREPEND,
    "delete": Op.DELETE,
    "incr": Op.INCR,
    "decr": Op.DECR,
}
# Where the protocol has not the op itself: what does the same to the data.
_STAND_INS: dict[str, Op] = {"gets": Op.GET}
# Ops a protocol has but cannot send as a trace row asks: the binary protocol reads a CAS
# value of 0 as "no check" (protocol-binary.xml, "Set, Add, Replace"), so a tokenless cas
# would be a set, which stores where the text and meta protocols' cas 0 never does.
_UNSENDABLE: dict[tuple[str, str], str] = {
    (
        "memcache-binary",
        "cas",
    ): "cas has no memcache-binary form without a token (CAS 0 is no check)",
}
# The longest key memcached takes (protocol.txt, "Keys"); Redis keys are held to it too.
MAX_KEY_BYTES = KEY_LIMITS["memcache"]
# The largest value a replay sends: the codecs' reply bound (protocols.base).
MAX_VALUE_BYTES = 64 * 1024 * 1024
# Values this short are decimal digits (a uint64 has up to 20; 19 never overflow).
DIGIT_VALUE_BYTES = 19
# Key fitting results remembered before the cache starts over.
KEY_CACHE_SIZE = 1 << 20
SKIPPED = -1
# memcached reads an exptime over 30 days as an absolute Unix time (protocol.txt,
# "Expiration times"): a trace's longer relative TTL would expire at once. Protocols that
# end in memcached send at most this, counted (``ttls_clamped``).
MEMCACHED_MAX_RELATIVE_TTL_S = 30 * 24 * 3600
_MEMCACHED_PROTOCOLS = frozenset({"memcache-text", "memcache-binary", "memcache-meta", "http-memc"})
T = TypeVar("T")


class OpMapping:
    """The op sent for each trace operation on one protocol.

    Args:
        protocol: a codec registry name (``memcache-text``, ``resp2`` ...).

    Attributes:
        codes: per trace op index, the ``Op`` value sent, or ``SKIPPED``.
        reasons: per skipped trace op name, why.
        sent_as: per trace op name, the op name sent (stand-ins differ from the row's).
    """

    def __init__(self, protocol: str) -> None:
        ops = CODECS[protocol].ops
        self.protocol = protocol
        # The longest TTL the server takes as relative (None: any the trace may carry).
        self.max_ttl_s = MEMCACHED_MAX_RELATIVE_TTL_S if protocol in _MEMCACHED_PROTOCOLS else None
        self.codes: list[int] = []
        self.reasons: dict[str, str] = {}
        self.sent_as: dict[str, str] = {}
        for name in TRACE_OPS:
            op = _DIRECT[name]
            if op not in ops:
                op = _STAND_INS.get(name, op)
            unsendable = _UNSENDABLE.get((protocol, name))
            if unsendable is not None:
                self.codes.append(SKIPPED)
                self.reasons[name] = unsendable
            elif op in ops:
                self.codes.append(int(op))
                self.sent_as[name] = op.name.lower()
            else:
                self.codes.append(SKIPPED)
                self.reasons[name] = f"{name} has no {protocol} form"

    def map(self, ops: list[int]) -> list[int]:
        """The op value sent for each trace op index (``SKIPPED`` for none)."""
        return list(map(self.codes.__getitem__, ops))


def fit_key(key: bytes, size: int) -> bytes:
    """``key`` made exactly ``size`` bytes (1..250): padded or cut, its hash filling in.

    The hash is hex (URL- and protocol-safe); a cut key keeps its first bytes, where the
    trace's namespaces are.
    """
    size = min(size, MAX_KEY_BYTES)
    n = len(key)
    if n == size:
        return key
    digest = hashlib.blake2b(key, digest_size=32).hexdigest().encode()
    if n < size:
        fill = digest * (1 + (size - n) // len(digest))
        return key + fill[: size - n]
    tail = min(16, size - size // 3)
    return key[: size - tail] + digest[:tail]


class KeyFitter:
    """``fit_key`` over a block of keys, remembering the keys it fitted.

    Attributes:
        clamped: keys whose ``key_size`` was over 250 bytes (sent at 250).
    """

    def __init__(self) -> None:
        self._cache: dict[bytes, bytes] = {}
        self.clamped = 0

    def fit(self, keys: list[bytes], sizes: list[int]) -> list[bytes]:
        """Each key at its size (the list itself when every key already fits)."""
        lengths = list(map(len, keys))
        longest = max(sizes)
        if lengths == sizes and longest <= MAX_KEY_BYTES:
            return keys
        if longest > MAX_KEY_BYTES:  # per row, however often a key recurs
            self.clamped += sum(size > MAX_KEY_BYTES for size in sizes)
        out = list(keys)
        cache = self._cache
        if len(cache) > KEY_CACHE_SIZE:
            cache.clear()
        for i, (n, size) in enumerate(zip(lengths, sizes, strict=True)):
            if n == size <= MAX_KEY_BYTES:
                continue
            key = keys[i]
            fitted = cache.get(key)
            if fitted is None or len(fitted) != min(size, MAX_KEY_BYTES):
                fitted = cache[key] = fit_key(key, size)
            out[i] = fitted
        return out


class ValueBlob:
    """Values of given sizes as bounds in one blob: decimal digits, then random bytes.

    A value of a size is always the same bytes (its start is a function of its size and
    the blob's length when the size was first asked). The blob only grows at its end (a
    value larger than its random part appends random bytes), so every bound handed out
    stays valid: a replay's spool (workload/trace_spool.py) keeps bounds, not bytes.

    Args:
        rng: draws the random bytes.
        random_bytes: the random part's first size.
    """

    def __init__(self, rng: np.random.Generator, random_bytes: int = 1 << 20) -> None:
        self._rng = rng
        self._blob = bytearray((b"1234567890" * 2)[:DIGIT_VALUE_BYTES])
        self._random = 0  # bytes of the random part
        self._grow(random_bytes)
        self._starts: dict[int, int] = {}

    def _grow(self, size: int) -> None:
        self._blob += self._rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        self._random += size

    def starts(self, sizes: list[int]) -> list[int]:
        """Where the value of each size starts in ``blob`` (it ends ``size`` bytes on);
        sizes at most ``MAX_VALUE_BYTES``."""
        cache = self._starts
        try:
            return list(map(cache.__getitem__, sizes))
        except KeyError:
            largest = max(sizes)
            if largest > self._random:
                self._grow(max(largest, self._random))
            for size in set(sizes):
                if size not in cache:
                    cache[size] = self._start(size)
            return list(map(cache.__getitem__, sizes))

    def _start(self, size: int) -> int:
        if size <= DIGIT_VALUE_BYTES:
            return 0
        # Different sizes start at different places: no two values share a prefix.
        return DIGIT_VALUE_BYTES + size * 7919 % (self._random - size + 1)

    def blob(self) -> bytes:
        """The blob as it is now (every start handed out indexes it)."""
        return bytes(self._blob)


def gather(values: Sequence[T], indexes: list[int]) -> list[T]:
    """``[values[i] for i in indexes]``, gathered in C."""
    if not indexes:
        return []
    if len(indexes) == 1:
        return [values[indexes[0]]]
    return list(itemgetter(*indexes)(values))
