"""``--command`` settings: command templates and their weights in the op mix.

A command is written as redis-cli and memtier_benchmark split their command lines: words
separated by spaces, ``"double quotes"`` with ``\\n \\r \\t \\b \\a \\\\ \\" \\xHH`` escapes,
``'single quotes'`` taken literally (``\\'`` for a quote). Two placeholders:
``__key__`` (a key from the key settings; other characters may surround it within its
word: ``user:__key__:name``) and ``__data__`` (a value of ``--value-size``; a word of its
own). The first word names the command; results are kept per name, lowercased.

What each protocol can carry is checked where the requests are built
(``protocols.commands`` through ``workload.commands``); this module checks the text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kvbench.config.model import TargetConfig, WorkloadConfig
from kvbench.config.targets import MAX_KEY_BYTES
from kvbench.config.workload_fields import longest_key
from kvbench.errors import ConfigError
from kvbench.units import parse_count

KEY_PLACEHOLDER = b"__key__"
DATA_PLACEHOLDER = b"__data__"
# The protocols whose codecs send arbitrary commands: memcached text and RESP.
COMMAND_PROTOCOLS = ("memcache-text", "resp2", "resp3")
# The ops a --ratio may weight, by the name a command of the same name would have on each
# server family: a command may not share its name with one of them in the same mix.
_RATIO_NAMES = {
    "memcache": {"get": "get", "set": "set", "delete": "delete", "incr": "incr", "mget": "get"},
    "redis": {"get": "get", "set": "set", "delete": "del", "incr": "incr", "mget": "mget"},
}
# Key bytes memcached takes (protocol.txt "Keys"); config/targets.py MAX_KEY_BYTES agrees.
_MEMCACHED_KEY_BYTES = MAX_KEY_BYTES["memcache"]
_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "b": b"\b", "a": b"\a"}
_HEX = "0123456789abcdefABCDEF"


def split_command(text: str, where: str) -> tuple[bytes, ...]:
    """Split a command line into words (redis-cli's rules; see the module docstring).

    A loop over characters with the quoting state in locals: the one long function here,
    as a table-driven tokenizer is.

    Raises:
        ConfigError: unbalanced quotes, a closing quote not followed by a space, or no words.
    """
    words: list[bytes] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            break
        word = bytearray()
        quote = ""
        while True:
            if i == n:
                if quote:
                    raise ConfigError(where, f"{text!r}: unbalanced {quote} quotes")
                break
            char = text[i]
            if quote == '"' and char == "\\" and i + 1 < n:
                following = text[i + 1]
                if following == "x" and i + 3 < n and text[i + 2] in _HEX and text[i + 3] in _HEX:
                    word.append(int(text[i + 2 : i + 4], 16))
                    i += 4
                    continue
                word += _ESCAPES.get(following, following.encode())
                i += 2
                continue
            if quote == "'" and char == "\\" and text[i + 1 : i + 2] == "'":
                word += b"'"
                i += 2
                continue
            if quote and char == quote:
                i += 1
                if i < n and not text[i].isspace():
                    raise ConfigError(where, f"{text!r}: a closing quote must end its word")
                break
            if not quote and char in "\"'":
                quote = char
            elif not quote and char.isspace():
                break
            else:
                word += char.encode()
            i += 1
        words.append(bytes(word))
    if not words:
        raise ConfigError(where, "an empty command")
    return tuple(words)


def command_words(text: str, where: str) -> tuple[bytes, ...]:
    """Split ``text`` and check its name and placeholders.

    Raises:
        ConfigError: a name that is a placeholder or not printable ASCII, ``__data__``
            inside a longer word, or ``__key__`` twice in one word.
    """
    words = split_command(text, where)
    name = words[0]
    if KEY_PLACEHOLDER in name or DATA_PLACEHOLDER in name:
        raise ConfigError(where, f"{text!r}: the first word names the command")
    if not name.isascii() or any(byte <= 0x20 or byte == 0x7F for byte in name):
        raise ConfigError(where, f"{text!r}: a command name is printable ASCII")
    for word in words[1:]:
        if DATA_PLACEHOLDER in word and word != DATA_PLACEHOLDER:
            raise ConfigError(where, f"{text!r}: __data__ must be a word of its own")
        if word.count(KEY_PLACEHOLDER) > 1:
            raise ConfigError(where, f"{text!r}: one __key__ per word")
    return words


def command_name(words: Sequence[bytes]) -> str:
    """The name a command's results are kept under: its first word, lowercased (``words``
    from ``command_words``, which checked the name is printable ASCII).

    The recorder's names (``workload.commands.CommandSet``) and the check against
    ``--ratio``'s names below both take it from here; ``protocols.commands.command_name``
    is the same rule for template words, which config may not import.
    """
    return words[0].decode("ascii").lower()


def parse_commands(value: Any, where: str) -> tuple[tuple[str, int], ...]:
    """``workload.commands``: a list of commands, each a string (weight 1), a
    ``{command = "...", weight = N}`` table or a (command, weight) pair (the CLI's
    ``--command``/``--command-weight``).

    Raises:
        ConfigError: not a list, a bad entry, a bad command or a weight below 1.
    """
    entries = [value] if isinstance(value, str | Mapping) else value
    if not isinstance(entries, list | tuple) or not entries:
        raise ConfigError(where, f"expected a list of commands, got {value!r}")
    commands: list[tuple[str, int]] = []
    for entry in entries:
        text, weight = _entry(entry, where)
        command_words(text, where)
        try:
            commands.append((text, parse_count(weight, where, minimum=1)))
        except ConfigError as exc:
            raise ConfigError(where, f"{text!r}: weight {exc.message}") from None
    return tuple(commands)


def _entry(entry: Any, where: str) -> tuple[str, Any]:
    if isinstance(entry, str):
        return entry, 1
    if isinstance(entry, Mapping) and isinstance(entry.get("command"), str):
        unknown = sorted(set(entry) - {"command", "weight"})
        if unknown:
            raise ConfigError(
                where, f"unknown key {unknown[0]!r} (a command takes command, weight)"
            )
        return entry["command"], entry.get("weight", 1)
    if isinstance(entry, list | tuple) and len(entry) == 2 and isinstance(entry[0], str):
        return entry[0], entry[1]
    raise ConfigError(
        where, f"{entry!r}: expected a command string or {{command = ..., weight = N}}"
    )


def pair_weights(items: list[tuple[str, str]], where: str) -> list[tuple[str, str]]:
    """``--command`` and ``--command-weight`` flags, in command-line order, as
    (command, weight) pairs: a weight applies to the command before it (memtier's rule for
    ``--command-ratio``); a command without one weighs 1.

    Args:
        items: ("command", text) and ("weight", text) in the order they were given.

    Raises:
        ConfigError: a weight before any command, or two for one command.
    """
    pairs: list[list[str]] = []
    for kind, text in items:
        if kind == "command":
            pairs.append([text, ""])
        elif not pairs:
            raise ConfigError(where, "--command-weight comes after the --command it weighs")
        elif pairs[-1][1]:
            raise ConfigError(where, f"two weights for --command {pairs[-1][0]!r}")
        else:
            pairs[-1][1] = text
    return [(text, weight or "1") for text, weight in pairs]


def check_commands(
    targets: tuple[TargetConfig, ...], workload: WorkloadConfig, origin: Callable[[str], str]
) -> None:
    """What the targets cannot take from ``workload.commands``, refused before any socket.

    Commands go to memcached over its text protocol or to Redis (not a Redis Cluster); a
    command may not share its name with a ``--ratio`` op of the same mix (results are kept
    per name); memcached keys with the characters around ``__key__`` must stay within 250
    bytes.

    Raises:
        ConfigError: naming ``--command`` (or the scenario key) and what is wrong.
    """
    if not workload.commands:
        return
    where = origin("workload.commands")
    for target in targets:
        if target.protocol not in COMMAND_PROTOCOLS:
            raise ConfigError(
                where,
                f"{target.url}: commands go to memcached:// (text protocol) or redis:// "
                f"targets, not {target.scheme}://",
            )
        if target.cluster:
            # Requests go to the master of the drawn key's slot; a command's keys
            # (h:__key__, several keys) may hash to other slots.
            raise ConfigError(
                where, f"{target.url}: commands are not sent to a Redis Cluster (yet)"
            )
    family = "redis" if targets and targets[0].family == "redis" else "memcache"
    taken = {_RATIO_NAMES[family][op]: op for op, _ in workload.ratio}
    longest = longest_key(workload)[0]
    for text, _ in workload.commands:
        name = command_name(split_command(text, where))
        if name in taken:
            raise ConfigError(
                where,
                f"{text!r}: {name} is also sent by --ratio's {taken[name]} (results are kept "
                "per command name): drop one of them",
            )
        if family == "memcache":
            _check_memcached_keys(text, longest, where)


def _check_memcached_keys(text: str, longest: int, where: str) -> None:
    for word in split_command(text, where):
        if KEY_PLACEHOLDER in word:
            size = longest + len(word) - len(KEY_PLACEHOLDER)
            if size > _MEMCACHED_KEY_BYTES:
                raise ConfigError(
                    where,
                    f"{text!r}: {word!r} makes keys of up to {size} bytes; memcached takes "
                    f"at most {_MEMCACHED_KEY_BYTES}",
                )
