"""Commands in the op mix (``--command``): their names, codes and request templates.

The op mix draws one code per request: a fixed op's ``int(Op)``, or ``COMMAND_BASE + i``
for the i-th ``workload.commands`` entry. The codec sends every command as
``Op.COMMAND``; results are recorded under ``COMMAND_BASE + j`` for the j-th distinct
command *name* (``Recorder`` names it ``command_names[j]``), so two templates of one
command add up. Templates are compiled once per protocol (``compile_commands``) and
rendered per chunk by ``RequestSource``, never per request on the send path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvbench.config.commands import (
    DATA_PLACEHOLDER,
    KEY_PLACEHOLDER,
    command_name,
    command_words,
)
from kvbench.config.model import RunConfig
from kvbench.errors import ConfigError
from kvbench.protocols.base import Op
from kvbench.protocols.commands import DATA, KeySlot, RequestTemplate, Word
from kvbench.protocols.registry import CODECS

# The first code (in the mix and in the recorder) that is a command, not an ``Op``.
COMMAND_BASE = len(Op)
# Checked after the config is loaded, where it is no longer known whether the commands
# came from flags or a scenario file: both names.
WHERE = "--command (workload.commands)"


@dataclass(frozen=True, slots=True)
class CommandSet:
    """The commands of a workload, protocol-free.

    Attributes:
        entries: the command texts, in ``workload.commands`` order.
        names: the distinct command names (first word, lowercased), first seen first.
        name_of: per entry, the index of its name in ``names``.
        keys: per name, how many keys one of its requests carries (its ``__key__`` words).
    """

    entries: tuple[str, ...]
    names: tuple[str, ...]
    name_of: tuple[int, ...]
    keys: tuple[int, ...]

    @classmethod
    def of(cls, commands: Sequence[tuple[str, int]]) -> CommandSet:
        """Build from ``workload.commands``.

        Raises:
            ConfigError: two commands of one name carry different numbers of keys (their
                results add up per name, and so must their keys).
        """
        names: list[str] = []
        keys: list[int] = []
        name_of: list[int] = []
        for text, _ in commands:
            words = command_words(text, WHERE)
            name = command_name(words)
            count = sum(KEY_PLACEHOLDER in word for word in words[1:])
            if name not in names:
                names.append(name)
                keys.append(count)
            elif keys[names.index(name)] != count:
                raise ConfigError(
                    WHERE,
                    f"{text!r}: every {name} command must carry the same number of keys "
                    "(results are kept per command name)",
                )
            name_of.append(names.index(name))
        return cls(tuple(text for text, _ in commands), tuple(names), tuple(name_of), tuple(keys))


def template_words(words: Sequence[bytes]) -> list[Word]:
    """The placeholders of a split command as ``KeySlot``/``DATA`` words."""
    out: list[Word] = [words[0]]
    for word in words[1:]:
        if word == DATA_PLACEHOLDER:
            out.append(DATA)
        elif KEY_PLACEHOLDER in word:
            prefix, _, suffix = word.partition(KEY_PLACEHOLDER)
            out.append(KeySlot(prefix, suffix))
        else:
            out.append(word)
    return out


def compile_commands(commands: Sequence[tuple[str, int]], protocol: str) -> list[RequestTemplate]:
    """One template per command for ``protocol`` (a codec registry name).

    Raises:
        ConfigError: the protocol sends no commands, or refuses one (saying why).
    """
    if not commands:
        return []
    compile_template = CODECS[protocol].command_template
    if compile_template is None:
        raise ConfigError(WHERE, f"{protocol} sends no arbitrary commands (memcached text, RESP)")
    templates = []
    for text, _ in commands:
        try:
            templates.append(compile_template(template_words(command_words(text, WHERE))))
        except ValueError as exc:
            raise ConfigError(WHERE, f"{text!r}: {exc}") from None
    return templates


def check_commands(config: RunConfig) -> None:
    """Compile the run's commands for each of its targets (the throwaway memcached when
    there are none), so a command a protocol cannot carry is refused before any socket.

    Raises:
        ConfigError: as ``compile_commands`` and ``CommandSet.of``.
    """
    commands = config.workload.commands
    CommandSet.of(commands)
    for protocol in {t.protocol for t in config.targets} or {"memcache-text"}:
        compile_commands(commands, protocol)
