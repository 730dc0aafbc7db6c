"""Suggestions for mistyped names: flags, scenario-file keys and URL options.

``did_you_mean`` knows the names other load generators give our settings (memtier's
``--threads`` and ``--clients``, ab's concurrency, ...), so a flag or key carried over
from another tool is answered with ours. Pure: imports only the standard library.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# What other tools call our settings: memtier_benchmark (--threads, --clients, --test-time,
# --data-size), wrk (--threads), ab and hey (concurrency), locust (workers).
OTHER_TOOLS_NAMES: dict[str, str] = {
    "threads": "processes",
    "workers": "processes",
    "clients": "connections",
    "concurrency": "connections",
    "test_time": "duration",
    "data_size": "value_size",
}
# difflib's default: below this similarity a name is not offered.
CUTOFF = 0.6


def _split(name: str, separator: str) -> tuple[str, str]:
    """``("--", "value_size")`` for ``--value-size``; ``("load.", "duration")`` for a key."""
    if separator == "--":
        return "--", name.removeprefix("--").lower().replace("-", "_")
    head, dot, tail = name.rpartition(".")
    return head + dot, tail.lower().replace("-", "_")


def did_you_mean(typed: str, known: Iterable[str], separator: str = "") -> str | None:
    """The known name closest to ``typed``, or None when none is close.

    Args:
        typed: what was given: ``--wokers``, ``load.threads``, ``rsp``.
        known: the valid names, in the same form.
        separator: ``"--"`` for flags (the name follows ``--``, words joined by ``-``),
            ``"."`` for scenario-file keys (the name follows the section), ``""`` for
            plain names. The name part is compared, so a key in the wrong section still
            finds its section; ties go to the typed section.

    Returns:
        One name from ``known``; another tool's name for a setting gives ours
        (``--threads`` -> ``--processes``).
    """
    prefix, word = _split(typed, separator) if separator else ("", typed.lower())
    candidates: dict[str, str] = {}
    for name in sorted(known, key=lambda n: not n.startswith(prefix)):  # typed section first
        tail = _split(name, separator)[1] if separator else name.lower()
        candidates.setdefault(tail, name)
    for other, ours in OTHER_TOOLS_NAMES.items():
        if ours in candidates and other not in candidates:
            candidates[other] = candidates[ours]
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=CUTOFF)
    return candidates[match[0]] if match else None


def suggestion(typed: str, known: Iterable[str], separator: str = "") -> str:
    """``"; did you mean X?"`` for an error message, or ``""``."""
    best = did_you_mean(typed, known, separator)
    return f"; did you mean {best}?" if best else ""
