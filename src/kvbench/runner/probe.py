"""A blocking side connection to a target: reachability, version and server stats.

Used before a run (preflight: fail fast with one line, learn the server version) and to
sample the server's own counters before and after. Speaks through the same sans-IO codecs
as the load, over a plain socket; never on the load's connections. ``ask`` is the one
connect-and-ask routine (every failure one line saying which); ``exchange`` (through a
codec) and ``text_exchange`` (a memcached text stats request) are what is asked; a queue's
backlog is asked the same way (runner/queue_probe.py).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import hiredis

from kvbench.config.model import TargetConfig
from kvbench.config.targets import parse_target
from kvbench.engine.connect_errors import connect_error_text
from kvbench.engine.setup import codec_factory_for, setup_for, ssl_context_for
from kvbench.errors import ProtocolError, TargetUnreachable
from kvbench.protocols.base import NEED_DATA, CodecOptions, Op, Reply, ReplyKind, parse_stats_text
from kvbench.protocols.memcacheq import stats_queue_complete
from kvbench.results.server_stats import stat_number
from kvbench.units import plain_duration

T = TypeVar("T")
# How long the probe waits when the caller names no timeout (the run passes --timeout).
DEFAULT_TIMEOUT_S = 3.0
# A text stats reply larger than this is not what we asked for.
MAX_STATS_BYTES = 1 << 20
# Requests sent on side connections, by target URL: a run's own requests beside its load,
# recorded so a server's request counter (nginx's, memcached's cmd_*) reconciles exactly.
Ledger = dict[str, int]


class StatsUnavailable(TargetUnreachable):
    """The server took the connection and the setup but gives no stats: it closed the
    connection on the stats request, or answered it with an error. Proxies do either
    (twemproxy closes, others answer ``ERROR``); a run can go ahead without server stats."""


class Unanswered:
    """A side question asked again and again (each interval's server sample or backlog):
    none is asked within ``wait_ns`` of one that went unanswered. Each ask of a stalled
    server waits its timeout while the workers go on cutting intervals: asked at every
    one, the intervals piled up behind the asks (the live line fell behind), and a Ctrl-C
    then waited an ask for each (runner/coordinator.py, runner/queue.py)."""

    def __init__(self, wait_ns: int) -> None:
        self.wait_ns = wait_ns
        self._again_ns = 0

    def ask(self, question: Callable[[], T | None]) -> T | None:
        """``question()``'s answer, or None: unanswered now, or within ``wait_ns`` of an
        ask that was (then it is not asked).

        An ask cut short (a Ctrl-C while it waited: the exception goes on) went unanswered
        too: the question that follows the interrupt is not asked again at once. It was,
        and a Ctrl-C during a stalled server's sample then waited --timeout for the next
        one (60 s in a test that asks 15 at most)."""
        if time.monotonic_ns() < self._again_ns:
            return None
        answer = None
        try:
            answer = question()
        finally:
            if answer is None:
                self._again_ns = time.monotonic_ns() + self.wait_ns
        return answer


def exchange(sock: socket.socket, codec: Any, out: bytearray, expected: int) -> list[Reply]:
    """Send ``out``; read ``expected`` replies.

    Raises:
        EOFError: the server closed the connection before answering.
        TimeoutError, OSError: from the socket; ProtocolError: from the codec.
    """
    sock.sendall(out)
    replies: list[Reply] = []
    closed = False
    while len(replies) < expected:
        try:
            reply = codec.next_reply()
        except ProtocolError:
            if closed:  # the codec's view of the same EOF
                raise EOFError from None
            raise
        if reply is NEED_DATA:
            if closed:
                raise EOFError
            data = sock.recv(65536)
            if not data:
                closed = True
                codec.feed_eof()  # an HTTP body may end with the connection
            else:
                codec.feed(data)
            continue
        replies.append(reply)
    return replies


def text_exchange(sock: socket.socket, request: bytes) -> bytearray:
    """Send a memcached text stats request (``stats settings``, memcacheq's ``stats queue``);
    its whole reply: ``STAT`` lines up to ``END``, or one error line.

    Raises:
        EOFError: the server closed the connection first.
        ProtocolError: the reply grew beyond MAX_STATS_BYTES.
    """
    sock.sendall(request)
    data = bytearray()
    while not stats_queue_complete(data):  # the grammar of every text stats reply
        if len(data) > MAX_STATS_BYTES:
            raise ProtocolError(f"{request.strip().decode()} reply beyond {MAX_STATS_BYTES} bytes")
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError
        data += chunk
    return data


def ask(
    target: TargetConfig,
    timeout_s: float,
    request: str,
    talk: Callable[[socket.socket], T],
    ledger: Ledger | None = None,
    requests: int = 1,
) -> T:
    """Connect and run ``talk`` on the socket, every failure one line saying which.

    Args:
        timeout_s: the longest wait for the connection and then for each reply.
        request: what ``talk`` asks, for the messages (``stats``, ``INFO all``).
        ledger: counts the ``requests`` ``talk`` sends under the target's URL, once
            connected (sent, whether or not answered).

    Raises:
        TargetUnreachable: cannot connect ("cannot connect to ..."), no reply in time
            ("no reply to 'stats' within 3s"), an error during the exchange, or a reply
            that breaks the protocol.
        StatsUnavailable: the server closed the connection on the request.
    """
    try:
        sock = open_socket(target, timeout_s)
    except OSError as exc:  # TimeoutError and ssl.SSLError included
        raise TargetUnreachable(
            f"cannot connect to {target.url}: {connect_error_text(exc)}"
        ) from None
    if ledger is not None:
        ledger[target.url] = ledger.get(target.url, 0) + requests
    with sock:
        try:
            return talk(sock)
        except TimeoutError:
            raise TargetUnreachable(
                f"{target.url} accepted the connection but gave no reply to {request!r} "
                f"within {plain_duration(timeout_s * 1e9)}"
            ) from None
        except (EOFError, ConnectionResetError):
            raise StatsUnavailable(f"{target.url} closed the connection on {request!r}") from None
        except OSError as exc:
            raise TargetUnreachable(
                f"{target.url}: {connect_error_text(exc)} during {request!r}"
            ) from None
        except ProtocolError as exc:
            raise TargetUnreachable(
                f"{target.url} does not answer as {target.protocol} expects: {exc}"
            ) from None


def parse_redis_info(text: bytes) -> dict[str, str]:
    """``INFO`` output (``name:value`` lines, ``#`` section headers) as a dict."""
    stats: dict[str, str] = {}
    for line in text.decode("utf-8", "replace").splitlines():
        if line and not line.startswith("#") and ":" in line:
            name, _, value = line.partition(":")
            stats[name] = value
    return stats


def open_socket(target: TargetConfig, timeout_s: float) -> socket.socket:
    """A connected blocking socket to ``target``, TLS-wrapped for ``rediss://``, a Unix
    socket's for ``+unix`` URLs."""
    if target.socket_path is not None:
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.settimeout(timeout_s)
            sock.connect(target.socket_path)
        except BaseException:
            sock.close()
            raise
        return sock
    sock = socket.create_connection((target.host, target.port), timeout=timeout_s)
    context = ssl_context_for(target)
    if context is None:
        return sock
    try:
        return context.wrap_socket(sock, server_hostname=target.host)
    except BaseException:
        sock.close()
        raise


def fetch_stats(
    target: TargetConfig, timeout_s: float = DEFAULT_TIMEOUT_S, ledger: Ledger | None = None
) -> dict[str, str]:
    """Connect, set up, ask for the server's stats (memcached ``stats``, Redis ``INFO``).

    An HTTP gateway answers one ``?cmd=version`` (``gateway_version``: its ``Server`` field
    and its memcached's version); the stats are those of its backing memcached when the URL
    names one (``?stats=memcached://...``), else there are none.

    Args:
        timeout_s: the longest wait for the connection and then for each reply (the run's
            ``--timeout``).
        ledger: where the requests sent are counted (``ask``).

    Raises:
        TargetUnreachable: cannot connect, no reply within ``timeout_s``, setup refused
            (e.g. bad password), or the server does not speak the protocol.
        StatsUnavailable: the server closed the connection on the stats request or
            answered it with an error.
    """
    if target.family == "http":
        return _gateway_stats(target, timeout_s, ledger)
    codec = codec_factory_for(target, CodecOptions(keep_payload=True))()
    out = bytearray()
    setup = setup_for(target)
    count = setup(codec, out) if setup else 0
    if target.family == "redis":
        # Plain INFO leaves out commandstats, which reconciliation needs.
        request = "INFO all"
        count += codec.encode(Op.COMMAND, [b"INFO", b"all"], None, out)
    else:
        request = "stats"
        count += codec.encode(Op.STATS, b"", None, out)
    replies = ask(
        target, timeout_s, request, lambda sock: exchange(sock, codec, out, count), ledger, count
    )
    for reply in replies[:-1]:  # the setup's (AUTH, HELLO, SELECT)
        if reply.kind == ReplyKind.ERROR_REPLY:
            raise TargetUnreachable(f"{target.url} refused the request: {_text(reply)}")
    if replies[-1].kind == ReplyKind.ERROR_REPLY:
        raise StatsUnavailable(f"{target.url} answered {request!r} with {_text(replies[-1])}")
    payload = replies[-1].payload or b""
    if target.family == "redis":
        return parse_redis_info(payload)
    return parse_stats_text(payload)


def _text(reply: Reply) -> str:
    """An error reply's text, escaped (server bytes are never decoded strictly)."""
    return (reply.payload or b"").decode("utf-8", "backslashreplace").strip()


def _gateway_stats(target: TargetConfig, timeout_s: float, ledger: Ledger | None) -> dict[str, str]:
    """``?cmd=version`` through an HTTP gateway, and its backing memcached's stats if named."""
    codec: Any = codec_factory_for(target, CodecOptions(keep_payload=True))()  # HttpMemcCodec
    out = bytearray()
    count = codec.encode_version(out)
    try:
        reply = ask(
            target, timeout_s, "?cmd=version", lambda s: exchange(s, codec, out, count), ledger
        )[-1]
    except StatsUnavailable as exc:  # the version request is the gateway's whole check
        raise TargetUnreachable(str(exc)) from None
    text = _text(reply)
    if reply.kind == ReplyKind.ERROR_REPLY:
        raise TargetUnreachable(f"{target.url} answered ?cmd=version with {text}")
    memcached = text.removeprefix("VERSION ").strip() or "unknown"
    server = codec.server_software or "unknown server"
    backing = _stats_source(target)
    stats = fetch_stats(backing, timeout_s, ledger) if backing is not None else {}
    return {**stats, "gateway_version": f"{server}, memcached {memcached}"}


def _stats_source(target: TargetConfig) -> TargetConfig | None:
    """Where ``target``'s server stats come from: itself, an HTTP gateway's backing
    memcached (``?stats=``), or nowhere (a gateway without one)."""
    if target.family != "http":
        return target
    return parse_target(target.stats_url, "stats=") if target.stats_url else None


def server_version(stats: dict[str, str]) -> str:
    """The version string out of a stats dict (an HTTP gateway's ``gateway_version``,
    memcached ``version``, Redis ``redis_version``)."""
    return (
        stats.get("gateway_version")
        or stats.get("version")
        or stats.get("redis_version")
        or "unknown"
    )


# Redis settings worth recording next to a benchmark: memory limit and eviction, I/O
# threads, persistence, client limit, background task frequency (CONFIG GET patterns; one
# pattern per command, as Redis before 7.0 takes only one).
REDIS_CONFIG_PATTERNS = (
    "maxmemory*", "io-threads*", "appendonly", "appendfsync", "save", "maxclients", "hz",
    "proto-max-bulk-len",  # the largest value it stores (runner/limits.py)
)  # fmt: skip
# INFO server fields that change while the server runs: not settings.
_REDIS_VOLATILE = {"server_time_usec", "uptime_in_seconds", "uptime_in_days", "lru_clock"}


def fetch_settings(
    target: TargetConfig, timeout_s: float = DEFAULT_TIMEOUT_S, ledger: Ledger | None = None
) -> dict[str, str]:
    """The server's settings: memcached ``stats settings``; Redis CONFIG GET + INFO server.

    memcached text and meta targets are asked in the text protocol (the text codecs send
    plain ``stats`` only), binary targets through the binary codec (STAT with the key
    ``settings``). Redis is asked over RESP2 on its own connection, parsed by hiredis (the
    RESP codec keeps no array payloads): ``AUTH`` when the URL has a password, then
    ``CONFIG GET`` of ``REDIS_CONFIG_PATTERNS`` and the stable ``INFO server`` fields. A
    refused CONFIG (renamed, or not allowed by an ACL) is recorded as ``config_error``.

    An HTTP gateway's settings are those of its backing memcached (``?stats=``), or none.

    Raises:
        TargetUnreachable: cannot connect, no reply within ``timeout_s``, the server
            refused the request or the password, or it does not speak the protocol.
    """
    if target.family == "http":
        backing = _stats_source(target)
        return fetch_settings(backing, timeout_s, ledger) if backing is not None else {}
    if target.family == "redis":
        sent = len(redis_settings_commands(target))
        return ask(
            target,
            timeout_s,
            "CONFIG GET",
            lambda sock: _redis_settings(sock, target),
            ledger,
            sent,
        )
    if target.protocol != "memcache-binary":
        return ask(
            target,
            timeout_s,
            "stats settings",
            lambda s: _memcache_text_settings(s, target),
            ledger,
        )
    codec = codec_factory_for(target, CodecOptions(keep_payload=True))()
    out = bytearray()
    count = codec.encode(Op.STATS, b"settings", None, out)
    reply = ask(
        target, timeout_s, "stats settings", lambda s: exchange(s, codec, out, count), ledger, count
    )[-1]
    if reply.kind == ReplyKind.ERROR_REPLY:
        raise TargetUnreachable(f"{target.url} refused stats settings: {_text(reply)}")
    return parse_stats_text(reply.payload or b"")


def _memcache_text_settings(sock: socket.socket, target: TargetConfig) -> dict[str, str]:
    """``stats settings`` in the text protocol: ``STAT name value`` lines, then ``END``."""
    data = text_exchange(sock, b"stats settings\r\n")
    if data.startswith((b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR")):
        text = data.decode("utf-8", "replace").strip()
        raise TargetUnreachable(f"{target.url} refused stats settings: {text}")
    settings: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").split("\r\n"):
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            settings[parts[1]] = parts[2]
    return settings


def redis_settings_commands(target: TargetConfig) -> list[tuple[str, ...]]:
    """What ``fetch_settings`` sends a Redis server: AUTH if needed, CONFIG GETs, INFO."""
    commands: list[tuple[str, ...]] = []
    if target.password is not None:
        user = (target.username,) if target.username else ()
        commands.append(("AUTH", *user, target.password))
    commands += [("CONFIG", "GET", pattern) for pattern in REDIS_CONFIG_PATTERNS]
    commands.append(("INFO", "server"))
    return commands


def _redis_settings(sock: socket.socket, target: TargetConfig) -> dict[str, str]:
    commands = redis_settings_commands(target)
    # hiredis's stub types pack_command's argument as a 1-tuple; any length is accepted.
    packed = [hiredis.pack_command(command) for command in commands]  # type: ignore[arg-type]
    sock.sendall(b"".join(packed))
    reader = hiredis.Reader()
    replies: list[Any] = []
    while len(replies) < len(commands):
        reply = reader.gets()
        if reply is False:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError
            reader.feed(chunk)
            continue
        replies.append(reply)
    if target.password is not None:
        auth = replies.pop(0)
        if isinstance(auth, hiredis.ReplyError):
            raise TargetUnreachable(f"{target.url} refused the request: {auth}")
    settings: dict[str, str] = {}
    for reply in replies[:-1]:
        if isinstance(reply, hiredis.ReplyError):
            settings["config_error"] = str(reply)
        elif isinstance(reply, list):
            for name, value in zip(reply[::2], reply[1::2], strict=True):
                settings[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    info = replies[-1]
    if isinstance(info, hiredis.ReplyError):
        raise TargetUnreachable(f"{target.url} refused INFO server: {info}")
    for name, value in parse_redis_info(info).items():
        if name not in _REDIS_VOLATILE:
            settings[name] = value
    return settings


# The server figures kept for every interval (the full set is kept before and after).
INTERVAL_STATS = (
    # memcached "stats"
    "cmd_get", "cmd_set", "get_hits", "get_misses", "delete_hits", "delete_misses",
    "incr_hits", "incr_misses", "curr_connections", "curr_items", "evictions",
    "rusage_user", "rusage_system", "threads", "bytes",
    # Redis INFO
    "used_cpu_user", "used_cpu_sys", "connected_clients", "total_commands_processed",
    "keyspace_hits", "keyspace_misses", "evicted_keys", "instantaneous_ops_per_sec",
    "cmdstat_get", "cmdstat_set", "cmdstat_del", "cmdstat_incr", "cmdstat_incrby", "cmdstat_mget",
    # the server process, to tell a restart (report/reconcile.py server_restarts)
    "pid", "uptime", "process_id", "run_id", "uptime_in_seconds",
)  # fmt: skip


def sample(
    target: TargetConfig,
    keys: tuple[str, ...] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    ledger: Ledger | None = None,
) -> dict[str, Any]:
    """The server's stats and the monotonic time they were taken (for deltas and rates).

    Args:
        target: the server.
        keys: keep only these stats (None: all).
        timeout_s, ledger: as ``fetch_stats``.

    Raises:
        TargetUnreachable: as ``fetch_stats``.
    """
    taken_ns = time.monotonic_ns()
    source = _stats_source(target)  # an HTTP gateway: its backing memcached, if named
    stats = fetch_stats(source, timeout_s, ledger) if source is not None else {}
    if keys is not None:
        stats = {k: v for k, v in stats.items() if k in keys}
    return {"taken_ns": taken_ns, "stats": stats}


def sample_pool(
    targets: Sequence[TargetConfig],
    keys: tuple[str, ...] | None,
    timeout_s: float,
    ledger: Ledger | None = None,
) -> dict[str, Any]:
    """``sample`` of one target, or of several (sharded) servers with their counters summed,
    so the client's totals reconcile against the whole pool; each server's own sample is
    kept under ``targets``. ``ledger``: as ``fetch_stats``.

    Raises:
        TargetUnreachable: as ``fetch_stats``, for any of them.
    """
    samples = [{"url": t.url, **sample(t, keys, timeout_s, ledger)} for t in targets]
    if len(samples) == 1:
        return {k: v for k, v in samples[0].items() if k != "url"}
    return {
        "taken_ns": samples[0]["taken_ns"],
        "stats": sum_stats([s["stats"] for s in samples]),
        "targets": samples,
    }


def sum_stats(samples: list[dict[str, str]]) -> dict[str, str]:
    """Numeric stats added up across servers (counters, CPU, threads); others dropped.

    Redis ``cmdstat_*`` entries add their ``calls``.
    """
    total: dict[str, float] = {}
    for stats in samples:
        for name, value in stats.items():
            number = stat_number(name, value)
            if number is not None:
                total[name] = total.get(name, 0.0) + number
    return {
        name: (f"calls={value:.0f}" if name.startswith("cmdstat_") else _number_text(value))
        for name, value in total.items()
    }


def _number_text(value: float) -> str:
    """Whole numbers without a decimal point or exponent (counters stay exact)."""
    return str(int(value)) if value.is_integer() else repr(value)


def preflight(
    target: TargetConfig, timeout_s: float = DEFAULT_TIMEOUT_S, ledger: Ledger | None = None
) -> tuple[str, str | None]:
    """Check ``target`` answers before a run: (server version, a note or None).

    A memcached proxy may take connections but give no stats: twemproxy closes the
    connection on ``stats``, others answer it with ``ERROR``. Then the run goes ahead
    without server-side stats, and the note says so.

    Args:
        timeout_s: the longest wait for the connection and then for each reply (the run's
            ``--timeout``).
        ledger: as ``fetch_stats``.

    Raises:
        TargetUnreachable: it cannot be reached, does not answer within ``timeout_s``,
            refuses the setup, or speaks another protocol.
    """
    try:
        return server_version(fetch_stats(target, timeout_s, ledger)), None
    except StatsUnavailable as exc:
        if target.family != "memcache":  # Redis may close on a refused AUTH sent with INFO
            raise
        reason = str(exc)
    ask(target, timeout_s, "a connection", lambda sock: None)  # does it still take one?
    return "unknown", f"{reason} (a proxy?): no server-side stats for this run"
