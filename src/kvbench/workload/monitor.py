"""Redis MONITOR captures: ``redis-cli monitor`` output read as commands.

Each line of a capture is one command as the server ran it (Redis server.c
``replicationFeedMonitors``)::

    1701234567.123456 [0 10.0.0.5:51234] "SET" "user:1" "x\\n\\"y\\""

the Unix time, ``[db client]`` (the database the command ran in, after it ran: a
``SELECT 1`` line says ``[1 ...]``; the client is ``ip:port``, ``[ipv6]:port``,
``unix:/path`` for every Unix-socket client, or ``lua`` for a command a script ran), then
every argument quoted as ``sdscatrepr`` writes it: printable ASCII as it is, ``\\\\ \\"
\\n \\r \\t \\a \\b`` escaped, any other byte as ``\\xHH``. redis-cli prints ``OK`` (MONITOR's
own reply) before the first line. A capture therefore holds ASCII only.

A line that is none of these stops the replay before anything is sent, with one line
naming the file and the line (exit 2), as a bad row of a cache trace does: a capture that
does not parse is not the traffic it claims to be. One exception: a last line without its
newline that does not parse is a capture cut off mid-line (redis-cli killed while
writing); it is counted (``truncated``) and left out. Blank lines are skipped.

What a replay does with each command (sent, or skipped and why) is ``skip_reason``'s.
No sockets, no clock: file reading only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kvbench.errors import ConfigError
from kvbench.protocols.commands import RESP_REFUSED

# A command line: time, [db client], then the quoted arguments. The client is matched
# lazily up to the "] \"" that begins the arguments, so an IPv6 peer's brackets stay in it.
_HEAD = rb"(\d+(?:\.\d+)?) \[(\d+) (.+?)\] "
_QUOTED = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_LINE = re.compile(_HEAD + rb'(".*)')
# A whole well-formed line in one match (the usual case: then the arguments are found
# with one ``findall``; a line that fails it is diagnosed argument by argument).
_WELL_FORMED = re.compile(_HEAD + rb"((?:" + _QUOTED + rb" )*" + _QUOTED + rb")")
# One quoted argument (escapes kept for ``_unescape``) and what follows it.
_ARG = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"(?: |$)')
_ARGS = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"')
_ESCAPE = re.compile(rb"\\(x[0-9a-fA-F]{2}|.)")
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b"}
# Lines at most this long are parsed (a capture of 512 MB values has longer ones: raise
# it then); a longer one is a bad line, not a reason to hold a file in memory.
MAX_LINE_BYTES = 64 << 20
# What a capture may begin with: redis-cli's "OK" (MONITOR's reply), or a command line.
_FIRST = re.compile(rb'(?:\xef\xbb\xbf)?(?:OK\r?\n|\d+(?:\.\d+)? \[\d+ [^\]\r\n]*\] ")')

# Commands that wait for data or for replicas: replayed, they would hold their client's
# connection (and every later command of that client) for up to their timeout, waiting
# for traffic that does not come at the captured moment, so they are skipped and counted
# (redis.io command reference, "blocking" commands; XREAD/XREADGROUP only with BLOCK).
BLOCKING = frozenset(
    {
        b"blpop",
        b"brpop",
        b"brpoplpush",
        b"blmove",
        b"blmpop",
        b"bzpopmin",
        b"bzpopmax",
        b"bzmpop",
        b"wait",
        b"waitaof",
    }
)
# Unsubscribing is only meaningful on a subscribed connection, which a replay never has.
_SUBSCRIPTION = frozenset({b"unsubscribe", b"punsubscribe", b"sunsubscribe"})


class MonitorCommand(NamedTuple):
    """One command of a capture.

    Attributes:
        line: its line number in the file (1-based).
        time_s: when the server ran it (Unix time).
        db: the database it ran in.
        client: who sent it (``ip:port``, ``unix:/path``, ``lua``), as the capture writes it.
        argv: the command and its arguments, unescaped.
    """

    line: int
    time_s: float
    db: int
    client: bytes
    argv: tuple[bytes, ...]

    @property
    def name(self) -> str:
        """The command's name as results keep it: lowercased (``set``, ``hset``)."""
        return self.argv[0].decode("ascii", "backslashreplace").lower()


def parse_line(line: bytes) -> tuple[float, int, bytes, tuple[bytes, ...]]:
    """One capture line (without its line end): (time, db, client, argv).

    Raises:
        ValueError: the line is not a MONITOR line (saying what is wrong).
    """
    match = _WELL_FORMED.fullmatch(line)
    if match is not None:
        time_text, db_text, client, args = match.groups()
        words = [_ESCAPE.sub(_unescape, a) if b"\\" in a else a for a in _ARGS.findall(args)]
        if words[0]:
            return float(time_text), int(db_text), client, tuple(words)
    match = _LINE.fullmatch(line)
    if match is None:
        raise ValueError(f'not a MONITOR line (time [db client] "arg" ...): {_show(line)}')
    time_text, db_text, client, args = match.groups()
    argv: list[bytes] = []
    at = 0
    while at < len(args):
        arg = _ARG.match(args, at)
        if arg is None:
            raise ValueError(f"argument {len(argv) + 1} is not a quoted string: {_show(args[at:])}")
        text = arg.group(1)
        argv.append(_ESCAPE.sub(_unescape, text) if b"\\" in text else text)
        at = arg.end()
    if not argv[0]:
        raise ValueError("an empty command name")
    return float(time_text), int(db_text), client, tuple(argv)


def _unescape(match: re.Match[bytes]) -> bytes:
    code = match.group(1)
    if len(code) == 3:
        return bytes([int(code[1:], 16)])
    return _ESCAPES.get(code, code)


def _show(text: bytes) -> str:
    """A piece of a line for an error message: quoted, cut at 60 bytes."""
    return repr(text[:60].decode("ascii", "backslashreplace")) + ("..." if len(text) > 60 else "")


def looks_like_monitor(head: bytes) -> bool:
    """Whether a file's first bytes are a MONITOR capture's (format detection)."""
    return _FIRST.match(head.lstrip(b"\r\n")) is not None


@dataclass(slots=True)
class MonitorReader:
    """Reads a capture's commands in file order (``commands``).

    Attributes:
        path: the capture.
        lines_read: lines consumed so far.
        truncated: 1 when the last line was cut off mid-line and left out.
    """

    path: Path
    lines_read: int = 0
    truncated: int = 0
    _first: bool = field(default=True, repr=False)

    def commands(self) -> Iterator[MonitorCommand]:
        """Every command line, parsed.

        Raises:
            ConfigError: the file cannot be opened, or a bad line (file and line number).
        """
        try:
            stream = self.path.open("rb")
        except OSError as exc:
            raise ConfigError(str(self.path), f"cannot open the capture: {exc.strerror}") from None
        with stream:
            for number, raw in enumerate(stream, 1):
                self.lines_read = number
                line = raw.rstrip(b"\r\n")
                if number == 1:
                    line = line.removeprefix(b"\xef\xbb\xbf")
                if not line or (self._first and line == b"OK"):
                    continue
                self._first = False
                try:
                    if len(line) > MAX_LINE_BYTES:
                        raise ValueError(f"a line over {MAX_LINE_BYTES:,} bytes")
                    time_s, db, client, argv = parse_line(line)
                except ValueError as exc:
                    if not raw.endswith(b"\n") and stream.read(1) == b"":
                        self.truncated = 1  # the capture was cut off inside this line
                        return
                    raise ConfigError(f"{self.path}:{number}", str(exc)) from None
                yield MonitorCommand(number, time_s, db, client, argv)


def skip_reason(command: MonitorCommand) -> str | None:
    """Why a replay does not send ``command`` (None: it sends it).

    - a script's commands (``lua``): the script's EVAL/EVALSHA/FCALL is replayed, and runs
      them again;
    - AUTH and HELLO: the target's own URL credentials (and protocol) are used;
    - blocking commands (``BLOCKING``; XREAD/XREADGROUP with BLOCK): see ``BLOCKING``;
    - commands after which replies no longer answer requests one for one (subscribe,
      MONITOR, SYNC, QUIT, RESET, CLIENT REPLY: ``protocols.commands.RESP_REFUSED``), and
      the unsubscribes that only a subscribed connection sends.
    """
    if command.client == b"lua":
        return "run by a script (its EVAL is replayed)"
    name = command.argv[0].lower()
    if name in (b"auth", b"hello"):
        return f"{name.decode()}: the target URL's credentials are used"
    if name in BLOCKING:
        return f"{name.decode()}: blocking"
    if name in (b"xread", b"xreadgroup") and b"block" in (a.lower() for a in command.argv[1:]):
        return f"{name.decode()} block: blocking"
    if name in RESP_REFUSED or name in _SUBSCRIPTION:
        return f"{name.decode()}: no reply per request"
    if name == b"client" and len(command.argv) > 1 and command.argv[1].lower() == b"reply":
        return "client reply: no reply per request"
    return None


def detect_format(path: str) -> str:
    """``redis-monitor`` when ``path`` begins as a MONITOR capture does, else
    ``cache-trace`` (whose reader tells Twitter's CSV, kvbench's and zstd apart).

    Raises:
        ConfigError: the file cannot be opened.
    """
    try:
        with open(path, "rb") as stream:
            head = stream.read(4096)
    except OSError as exc:
        raise ConfigError(path, f"cannot open the trace: {exc.strerror or exc}") from None
    return "redis-monitor" if looks_like_monitor(head) else "cache-trace"
