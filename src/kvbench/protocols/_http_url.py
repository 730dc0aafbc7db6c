"""What may go into a memc gateway's URL: URL-safe keys and values, and the Host field.

Sans-IO and stateless. memc does not URL-decode (``$arg_key`` is the raw argument), so
nothing is percent-encoded: keys must already be URL-safe, and value bytes are mapped to
URL-safe bytes one for one.
"""

from __future__ import annotations

# RFC 3986 section 2.3: unreserved characters stand for themselves anywhere in a URL.
UNRESERVED = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
# What a key may hold: unreserved characters, and those a query may carry literally (RFC 3986
# section 3.4: pchar, "/") that mean nothing to nginx's ``$arg_`` split. "&", "=", "+", "%",
# "#" and "?" are left out: they split, encode or end arguments, and memc does not URL-decode.
KEY_SAFE = UNRESERVED + b":@!$'()*,;/"
# Value bytes -> URL-safe bytes, one for one (a value keeps its size): an unreserved byte
# stays, any other byte becomes the unreserved byte at (its value mod 66). One
# ``bytes.translate`` applies it in C; the gateway stores the translated bytes.
VALUE_TABLE = bytes(b if b in UNRESERVED else UNRESERVED[b % len(UNRESERVED)] for b in range(256))
# Key check in one C pass: a KEY_SAFE byte becomes "a", any other a space, and the result
# ``isalpha()`` only when every byte was safe (and the key not empty). Twice as fast as
# ``translate(None, KEY_SAFE)``, which builds its table on every call.
KEY_CHECK = bytes(ord("a") if b in KEY_SAFE else ord(" ") for b in range(256))


def check_key(key: bytes | bytearray | memoryview) -> bytes:
    """Return ``key`` as bytes if it can go into a memc query string unencoded.

    Raises:
        ValueError: the key is empty or holds a byte outside ``KEY_SAFE``.
    """
    if key.__class__ is not bytes:
        key = bytes(key)
    assert isinstance(key, bytes)
    if not key.translate(KEY_CHECK).isalpha():
        raise ValueError(
            f"key {key!r:.60} cannot go into a memc gateway URL: keys may hold only letters, "
            "digits and -._~:@!$'()*,;/ (the gateway does not URL-decode)"
        )
    return key


def url_safe_value(value: bytes | bytearray | memoryview) -> bytes:
    """The bytes a memc gateway is sent (and stores) for ``value``: ``VALUE_TABLE`` applied."""
    if value.__class__ is memoryview:
        value = value.tobytes()  # faster than bytes(view)
    elif value.__class__ is not bytes:
        value = bytes(value)
    assert isinstance(value, bytes)
    return value.translate(VALUE_TABLE)


def host_header(host: str, port: int) -> str:
    """The ``Host`` field value for ``host:port`` (RFC 9110 section 7.2; IPv6 in brackets)."""
    name = f"[{host}]" if ":" in host else host
    return name if port == 80 else f"{name}:{port}"
