"""Suggestions for mistyped names: flags, scenario-file keys and URL options.

``did_you_mean`` knows the names other load generators give our settings (memtier's
``--threads`` and ``--clients``, ab's concurrency, ...), so a flag or key carried over
from another tool is answered with ours. Pure: imports only the standard library.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class Equivalent:
    """What another tool's flag is called here.

    Attributes:
        tools: the tools that spell it so (memtier_benchmark, redis-benchmark).
        ours: our flag (``--rounds``), or where the setting lives when it is no flag
            (``the URL's /DB``).
        note: how the two differ, where they do (memtier counts per connection).
    """

    tools: str
    ours: str
    note: str = ""

    @property
    def flag(self) -> str | None:
        """Our flag's name when ``ours`` is one (its first word), else None."""
        word = self.ours.split()[0]
        return word if word.startswith("-") else None


_MEMTIER, _REDIS_BENCHMARK = "memtier_benchmark", "redis-benchmark"
_BOTH = f"{_MEMTIER} and {_REDIS_BENCHMARK}"
_TOTALS = "kvbench's -c and -n are totals over all processes, memtier's are per thread and client"
# Other tools' flags, matched exactly before any spelling guess: memtier_benchmark's and
# redis-benchmark's (`--help` of each). A guess by spelling alone misled here:
# --hdr-file-prefix got --key-prefix, --select-db --seed, --key-stddev --key-size.
OTHER_TOOLS_FLAGS: dict[str, Equivalent] = {
    "--run-count": Equivalent(_MEMTIER, "--rounds"),
    "-x": Equivalent(_MEMTIER, "--rounds"),
    "--json-out-file": Equivalent(_MEMTIER, "--json"),
    "--out-file": Equivalent(_MEMTIER, "--json (the result document)"),
    "-o": Equivalent(_MEMTIER, "--json (the result document)"),
    "--hdr-file-prefix": Equivalent(_MEMTIER, "--hdr-log"),
    "--expiry-range": Equivalent(_MEMTIER, "--ttl", "a range is written 60-120 here"),
    "--key-maximum": Equivalent(_MEMTIER, "--keys", "keys are numbered from 0 here"),
    "--key-minimum": Equivalent(_MEMTIER, "--keys", "keys are numbered from 0 here"),
    "--key-stddev": Equivalent(_MEMTIER, "--key-pattern gaussian:MEAN,STDDEV"),
    "--key-median": Equivalent(_MEMTIER, "--key-pattern gaussian:MEAN,STDDEV"),
    "--rate-limiting": Equivalent(
        _MEMTIER, "--rate", "memtier's rate is per connection, kvbench's the total"
    ),
    "--multi-key-get": Equivalent(_MEMTIER, "--multiget"),
    "--data-size-range": Equivalent(_MEMTIER, "--value-size", "a range is written 100-1000"),
    "--data-size-list": Equivalent(_MEMTIER, "--value-size", "weights are written 100:70,1000:30"),
    "--data-verify": Equivalent(_MEMTIER, "--verify"),
    "--command-ratio": Equivalent(_MEMTIER, "--command-weight"),
    "--clients": Equivalent(_MEMTIER, "--connections", _TOTALS),
    "--threads": Equivalent(_MEMTIER, "--processes", _TOTALS),
    "--test-time": Equivalent(_MEMTIER, "--duration", "with a unit: 60s"),
    "--data-size": Equivalent(_MEMTIER, "--value-size"),
    "-d": Equivalent(_BOTH, "--value-size"),
    "-t": Equivalent(
        _BOTH, "--processes or --command", "memtier's -t is threads, redis-benchmark's the tests"
    ),
    "-r": Equivalent(_REDIS_BENCHMARK, "--keys", "the keyspace size"),
    "--select-db": Equivalent(_MEMTIER, "the URL's /DB: redis://HOST:6379/DB"),
    "--dbnum": Equivalent(_REDIS_BENCHMARK, "the URL's /DB: redis://HOST:6379/DB"),
    "--authenticate": Equivalent(_MEMTIER, "the URL's USER:PASS@: redis://USER:PASS@HOST:6379"),
    "-a": Equivalent(_BOTH, "the URL's USER:PASS@: redis://USER:PASS@HOST:6379"),
    "--server": Equivalent(_MEMTIER, "the TARGET URL: memcached://HOST:PORT"),
    "-s": Equivalent(_BOTH, "the TARGET URL (memcached+unix:///PATH for a socket)"),
    "--port": Equivalent(_MEMTIER, "the TARGET URL: memcached://HOST:PORT"),
    "-p": Equivalent(_BOTH, "the TARGET URL: memcached://HOST:PORT"),
    "--unix-socket": Equivalent(_MEMTIER, "the TARGET URL: memcached+unix:///PATH"),
    "--protocol": Equivalent(_MEMTIER, "the TARGET URL's scheme: memcached+binary://, redis://"),
    "--tls": Equivalent(_BOTH, "the TARGET URL's scheme: rediss://HOST:PORT?ca=PATH"),
    "--cluster-mode": Equivalent(_MEMTIER, "the TARGET URL's scheme: redis+cluster://HOST:PORT"),
}


def other_tool_flag(typed: str, known: Iterable[str]) -> str | None:
    """``"--run-count is memtier_benchmark's name: use --rounds"`` for another tool's flag.

    None when ``typed`` is no flag of theirs that we know, or when ours is a flag this
    command does not take (``--threads`` of ``kvbench queue``, which has producers).
    """
    equivalent = OTHER_TOOLS_FLAGS.get(typed)
    if equivalent is None:
        return None
    flag = equivalent.flag
    if flag is not None and flag not in set(known):
        return None
    note = f" ({equivalent.note})" if equivalent.note else ""
    return f"{typed} is {equivalent.tools}'s name: use {equivalent.ours}{note}."


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
