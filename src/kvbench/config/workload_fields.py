"""Parsers for the [workload] settings that have a small grammar of their own.

Key pattern (``zipf:1.1``, ``gaussian:0.5,0.1``), key template (``random:96``), value
size (``100``, ``100-1000``, ``100:70,1000:30``), value kind and ttl (``60``, ``60-120``).
Each takes the raw value and where it came from, and raises ConfigError naming it.
"""

from __future__ import annotations

from typing import Any

from kvbench.config.model import WorkloadConfig
from kvbench.errors import ConfigError
from kvbench.units import parse_count, parse_size_bytes

KEY_PATTERNS = ("uniform", "sequential", "zipf", "gaussian", "latest")
KEY_TEMPLATES = ("number", "random", "float-counter")
VALUE_KINDS = ("random", "compressible", "timestamp")
# How the mix's ops follow each other (workload/mix.py).
OP_ORDERS = ("random", "cycle")
# How keys are placed on several memcached servers (workload/placement.py).
PLACEMENTS = ("ketama", "modula-crc32")
# incr/decr work on keys of their own, prefix + COUNTER_INFIX + a number below MAX_COUNTERS
# (workload.plan builds them from these).
COUNTER_INFIX = "counter:"
MAX_COUNTERS = 10_000
# float-counter keys hold repr() of a float in [0, 1): at most 17 significant digits after
# "0.000" (1e-4 <= f < 1e-3), or "d." + 16 digits + "e-05" below 1e-4: 22 characters.
FLOAT_REPR_MAX_CHARS = 22
# YCSB's default Zipf constant, and the one most write-ups quote.
DEFAULT_ZIPF_EXPONENT = 0.99
# Verified values carry an 8-byte header (version, length) and at least 4 check bytes.
MIN_VERIFY_VALUE_BYTES = 12
TIMESTAMP_VALUE_BYTES = 8
# Facebook's ETC model (workload/models.py draws it): the name --key-size, --value-size,
# --arrival and --preset take, and the bounds its sizes are clipped to. Keys: memcached's
# longest (memcached.h KEY_MAX_LENGTH). Values: memcached's default item_size_max (1 MiB)
# less 48 KiB for the item header and the key, so every value stores on a default server.
FB_ETC = "fb-etc"
FB_ETC_MAX_KEY_BYTES = 250
FB_ETC_MAX_VALUE_BYTES = 1_000_000


def _number(text: str, where: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(where, f"{text!r} is not a number ({what})") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(where, f"{text!r} is not a finite number ({what})")
    return value


def parse_key_pattern(value: Any, where: str) -> tuple[str, tuple[float, ...]]:
    """``uniform``, ``sequential``, ``zipf[:S]``, ``gaussian[:MEAN,STDDEV]`` or
    ``latest[:S]`` (YCSB's: sets insert new keys, reads favour the newest, Zipf S over
    recency).

    Returns:
        (name, parameters): zipf and latest give ``(s,)``; gaussian gives ``()`` or
        ``(mean, stddev)`` as written (fractions of the keyspace below 1, else numbers of
        keys; ``resolve_gaussian`` turns them into keys).
    """
    text = str(value).strip().lower()
    name, _, params = text.partition(":")
    known = ", ".join(("uniform", "sequential", "zipf[:S]", "gaussian[:MEAN,STDDEV]", "latest[:S]"))
    if name not in KEY_PATTERNS:
        raise ConfigError(where, f"{value!r} is not a key pattern (known: {known})")
    if name in ("uniform", "sequential"):
        if params:
            raise ConfigError(where, f"{value!r}: {name} takes no parameters")
        return name, ()
    if name in ("zipf", "latest"):
        s = _number(params, where, "the Zipf exponent") if params else DEFAULT_ZIPF_EXPONENT
        if not s > 0:
            raise ConfigError(where, f"{value!r}: the Zipf exponent must be above 0")
        return name, (s,)
    if not params:
        return name, ()
    parts = params.split(",")
    if len(parts) != 2:
        raise ConfigError(where, f"{value!r}: expected gaussian:MEAN,STDDEV, e.g. gaussian:0.5,0.1")
    mean = _number(parts[0].strip(), where, "the mean")
    stddev = _number(parts[1].strip(), where, "the standard deviation")
    if mean < 0 or not stddev > 0:
        raise ConfigError(where, f"{value!r}: the mean must be >= 0 and the stddev above 0")
    return name, (mean, stddev)


def resolve_gaussian(params: tuple[float, ...], keys: int) -> tuple[float, float]:
    """(mean, stddev) in keys: defaults keys/2 and keys/6; values below 1 are fractions."""
    if not params:
        return keys / 2, keys / 6
    return tuple(v * keys if 0 < v < 1 else v for v in params)  # type: ignore[return-value]


def parse_key_template(value: Any, where: str) -> tuple[str, int | None]:
    """``number``, ``random:N`` (N-byte keys) or ``float-counter`` -> (template, size)."""
    text = str(value).strip().lower()
    name, _, size = text.partition(":")
    if name not in KEY_TEMPLATES:
        raise ConfigError(
            where, f"{value!r} is not a key template (known: number, random:N, float-counter)"
        )
    if not size:
        return name, None
    if name != "random":
        raise ConfigError(where, f"{value!r}: only random takes a length (random:96)")
    return name, parse_count(size, where, minimum=1)


def parse_key_size(value: Any, where: str) -> int | str:
    """``N`` bytes, or ``fb-etc`` (each key's size drawn from Facebook's ETC model)."""
    if str(value).strip().lower() == FB_ETC:
        return FB_ETC
    return parse_size_bytes(value, where, minimum=1)


def parse_value_size(value: Any, where: str) -> tuple[int, int, tuple[tuple[int, int], ...]]:
    """``100``, ``100-1000`` (uniform), ``100:70,1000:30`` (weighted) or ``fb-etc`` (sizes
    from Facebook's ETC model, 0 to ``FB_ETC_MAX_VALUE_BYTES``) -> (min, max, weights).
    ``fb-etc`` is recognised by ``is_fb_etc`` on the raw value."""
    text = str(value).strip()
    if text.lower() == FB_ETC:
        return 0, FB_ETC_MAX_VALUE_BYTES, ()
    if text.startswith("-"):
        raise ConfigError(where, f"{text!r}: a value size cannot be negative")
    if ":" in text:
        weights: list[tuple[int, int]] = []
        for part in text.split(","):
            size, sep, weight = part.partition(":")
            if not (sep and size.strip() and weight.strip()):
                raise ConfigError(where, f"{text!r}: expected SIZE:WEIGHT,... e.g. 100:70,1000:30")
            weights.append(
                (parse_size_bytes(size.strip(), where, minimum=1), parse_count(weight, where))
            )
        if sum(w for _, w in weights) == 0:
            raise ConfigError(where, f"{text!r}: the weights add up to 0")
        kept = tuple((s, w) for s, w in weights if w > 0)
        sizes = [s for s, _ in kept]
        return min(sizes), max(sizes), kept
    low, sep, high = text.partition("-")
    if sep and not high.strip():
        raise ConfigError(where, f"{text!r}: expected MIN-MAX, e.g. 100-1000")
    low_bytes = parse_size_bytes(low.strip(), where, minimum=1)
    high_bytes = parse_size_bytes(high.strip(), where, minimum=1) if high else low_bytes
    if high_bytes < low_bytes:
        raise ConfigError(where, f"{text!r}: the range's maximum is below its minimum")
    return low_bytes, high_bytes, ()


def parse_value_kind(value: Any, where: str) -> str:
    if value not in VALUE_KINDS:
        raise ConfigError(where, f"{value!r} is not a value kind (known: {', '.join(VALUE_KINDS)})")
    return str(value)


def parse_ttl(value: Any, where: str) -> tuple[int, int | None]:
    """``60`` (seconds) or a range ``60-120`` -> (low, high or None)."""
    text = str(value).strip()
    if text.startswith("-"):
        raise ConfigError(where, f"{text!r}: a ttl cannot be negative (0: no expiry)")
    low, sep, high = text.partition("-")
    if sep and not high.strip():
        raise ConfigError(where, f"{text!r}: expected LOW-HIGH seconds, e.g. 60-120")
    low_s = parse_count(low.strip(), where)
    if not sep:
        return low_s, None
    high_s = parse_count(high.strip(), where)
    if high_s < low_s:
        raise ConfigError(where, f"{text!r}: the range's maximum is below its minimum")
    return low_s, high_s


def is_fb_etc(value: Any) -> bool:
    """A raw setting names Facebook's ETC model."""
    return isinstance(value, str) and value.strip().lower() == FB_ETC


def check_keys(prefix: str, template: str, size: int | None, keys: int, where: str) -> None:
    """Refuse key settings that cannot give ``keys`` valid keys of ``size`` bytes.

    Args:
        where: the flag or file key to name (the template's or the size's origin).
    """
    head = len(prefix.encode())
    if template == "random" and size is None:
        raise ConfigError(where, "random keys need a length: random:96 or --key-size 96")
    if template == "float-counter" and size is not None:
        raise ConfigError(where, "float-counter keys have no fixed size; drop --key-size")
    if size is None:
        return
    digits = len(str(max(keys - 1, 0)))
    if template == "number" and size < head + digits:
        raise ConfigError(
            where, f"{size} bytes cannot hold the prefix ({head}) and {digits}-digit key numbers"
        )
    # Random keys: enough random characters that collisions are out of the question.
    if template == "random" and size < head + 8:
        raise ConfigError(where, f"random keys need at least {head + 8} bytes (prefix + 8)")


def longest_key(workload: WorkloadConfig) -> tuple[int, str, str]:
    """The longest key ``workload`` can send, computed from how keys are built.

    Returns:
        (bytes, the setting that decides it (``workload.key_size`` or
        ``workload.key_prefix``), what it is made of, for an error message).
    """
    head = len(workload.key_prefix.encode())
    digits = len(str(max(workload.keys + workload.insert_keys - 1, 0)))
    longest: tuple[int, str, str]
    if workload.key_size_model is not None:  # drawn per key, clipped to memcached's longest
        longest = (
            max(FB_ETC_MAX_KEY_BYTES, head + digits),
            "workload.key_size",
            f"{workload.key_size_model} key sizes (clipped to {FB_ETC_MAX_KEY_BYTES} bytes, "
            f"at least a {head}-byte prefix and {digits}-digit numbers)",
        )
    elif (
        workload.key_size is not None
    ):  # number keys are zero-padded to it, random keys drawn to it
        longest = (workload.key_size, "workload.key_size", f"a key size of {workload.key_size}")
    elif workload.key_template == "float-counter":
        longest = (
            head + FLOAT_REPR_MAX_CHARS + digits,
            "workload.key_prefix",
            f"a {head}-byte prefix, a float of up to {FLOAT_REPR_MAX_CHARS} characters and "
            f"{digits}-digit numbers",
        )
    else:
        longest = (
            head + digits,
            "workload.key_prefix",
            f"a {head}-byte prefix and {digits}-digit numbers",
        )
    if any(op == "incr" for op, _ in workload.ratio):
        counter_digits = len(str(min(workload.keys, MAX_COUNTERS) - 1))
        counters = head + len(COUNTER_INFIX) + counter_digits
        if counters > longest[0]:
            longest = (
                counters,
                "workload.key_prefix",
                f"incr's counter keys: a {head}-byte prefix, {COUNTER_INFIX!r} and "
                f"{counter_digits}-digit numbers",
            )
    return longest


def parse_time_window_ms(value: Any, where: str) -> tuple[int, int]:
    """Two times in ms since the epoch, low <= high: ``[low, high]`` or ``"low-high"``."""
    parts = value.split("-") if isinstance(value, str) else value
    try:
        low, high = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise ConfigError(
            where, f"{value!r}: expected [LOW_MS, HIGH_MS] or LOW_MS-HIGH_MS"
        ) from None
    if not 0 <= low <= high:
        raise ConfigError(where, f"{value!r}: expected 0 <= LOW_MS <= HIGH_MS")
    return low, high
