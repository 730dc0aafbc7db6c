"""The configuration of a queue run (``kvbench queue``): frozen, validated once.

Targets: ``memcacheq://HOST[:22201]/QUEUE`` (``set QUEUE`` enqueues, ``get QUEUE``
dequeues) and ``redis-queue://[USER:PASS@]HOST[:6379]/LIST[?block=100ms&db=N]`` (LPUSH,
then RPOP, or BRPOP with that timeout when ``block`` is given). Nothing here reads the
environment; every error names the flag or URL part to fix.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kvbench.config.model import MIN_INTERVAL_NS, ReportConfig, TargetConfig
from kvbench.config.targets import parse_target
from kvbench.errors import ConfigError
from kvbench.units import parse_count, parse_duration_ns, parse_size_bytes

QUEUE_SCHEMES = ("memcacheq", "redis-queue")
# The message header's size (workload.queue.HEADER_BYTES; config may not import workload).
MIN_MESSAGE_BYTES = 28
# memcached's key rules, which memcacheq inherits: at most 250 bytes, no spaces or controls.
MAX_QUEUE_NAME_BYTES = 250
# A BRPOP must come back before the request timeout counts it lost: leave this much room.
BLOCK_TIMEOUT_MARGIN_NS = 1_000_000_000
# Each producer and consumer is a process; beyond this the client host is the experiment.
MAX_AGENTS = 256


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Everything a queue run needs; ``to_dict()`` is stored with the result.

    Attributes:
        target: the server (its ``path`` is the queue or list name).
        backend: ``memcacheq`` or ``redis-list``.
        queue: the queue (memcacheq) or list (Redis) name.
        block_ns: Redis only: BRPOP with this timeout instead of RPOP; None: RPOP.
        producers, consumers: how many of each; one process and one connection each.
            No consumers: a write-only run (the messages stay in the queue); no
            producers: a drain (it ends when the queue is empty, confirmed by an empty
            read ``grace`` after the first).
        messages: messages sent in total, shared out across producers.
        message_size_bytes: every message's length, header included.
        pipeline: requests in flight per connection (closed loop).
        consumers_start_after: consumers start once producers have stored this many.
        duration_ns: a limit on the whole run; None: until the queue is drained.
        grace_ns: after the producers finish, the queue must look empty this long
            before the messages not yet received count as lost.
        poll_interval_ns: a consumer whose get found the queue empty asks again after
            this long (not with BRPOP, which waits on the server).
        timeout_ns: a request unanswered this long counts as ``timeout``.
        connect_timeout_ns: how long to wait for a connection to open.
        interval_ns: live-line and snapshot period.
        data_dir: a local server's data directory (memcacheq's Berkeley DB home, -H):
            its size is reported at the run's end; None: not asked.
        report: where the result goes (JSON, history).
    """

    target: TargetConfig
    backend: str
    queue: str
    block_ns: int | None = None
    producers: int = 1
    consumers: int = 1
    messages: int = 100_000
    message_size_bytes: int = 100
    pipeline: int = 1
    consumers_start_after: int = 0
    duration_ns: int | None = None
    grace_ns: int = 1_000_000_000
    poll_interval_ns: int = 1_000_000
    timeout_ns: int = 5_000_000_000
    connect_timeout_ns: int = 3_000_000_000
    interval_ns: int = 1_000_000_000
    data_dir: str | None = None
    report: ReportConfig = field(default_factory=ReportConfig)

    @property
    def pop_command(self) -> str:
        """How consumers dequeue: ``get`` (memcacheq), ``rpop`` or ``brpop`` (Redis)."""
        if self.backend == "memcacheq":
            return "get"
        return "brpop" if self.block_ns is not None else "rpop"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the config, credentials left out."""
        data = dataclasses.asdict(self)
        data["target"].pop("password", None)
        data["target"].pop("username", None)
        data["pop_command"] = self.pop_command
        return data


def parse_queue_target(
    url: str, where: str = "TARGET"
) -> tuple[TargetConfig, str, str, int | None]:
    """Parse a queue URL into (target, backend, queue name, BRPOP block time or None).

    Raises:
        ConfigError: not a queue scheme, no queue name, a bad name, block or db.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in QUEUE_SCHEMES:
        raise ConfigError(
            where,
            f"{url!r} is not a queue URL (examples: memcacheq://127.0.0.1:22201/q, "
            "redis-queue://127.0.0.1:6379/list)",
        )
    target = parse_target(url, where)
    queue = target.path
    if not queue:
        raise ConfigError(where, f"no queue name in {target.url!r} (add /NAME to the URL)")
    raw = queue.encode("utf-8")
    if len(raw) > MAX_QUEUE_NAME_BYTES or any(b <= 32 or b == 127 for b in raw):
        raise ConfigError(
            where, f"queue name {queue!r}: at most 250 bytes, no spaces or control characters"
        )
    if scheme == "memcacheq":
        return target, "memcacheq", queue, None
    query = parse_qs(urlsplit(url).query)  # parse_target checked the names
    block_ns: int | None = None
    if "block" in query:
        block_ns = parse_duration_ns(query["block"][-1], f"{where} ?block", default_unit="ms")
        if block_ns < 1_000_000:
            raise ConfigError(f"{where} ?block", "BRPOP needs a timeout of at least 1ms")
    if "db" in query:
        db = parse_count(query["db"][-1], f"{where} ?db")
        target = dataclasses.replace(target, db=db)
    return target, "redis-list", queue, block_ns


def build_queue_config(url: str, options: dict[str, Any], report: ReportConfig) -> QueueConfig:
    """Validate the ``kvbench queue`` flags and build the config.

    Args:
        url: the TARGET argument.
        options: flag name -> raw value (None: not given, use the default).
        report: where the result goes.

    Raises:
        ConfigError: naming the flag of the first bad value.
    """
    target, backend, queue, block_ns = parse_queue_target(url)
    defaults = QueueConfig(target, backend, queue)

    def count(name: str, default: int, minimum: int) -> int:
        raw = options.get(name)
        return default if raw is None else parse_count(raw, _flag(name), minimum)

    def duration(name: str, default: int, unit: str = "s", minimum_ns: int = 0) -> int:
        raw = options.get(name)
        return default if raw is None else parse_duration_ns(raw, _flag(name), unit, minimum_ns)

    size = options.get("message_size")
    config = QueueConfig(
        target=target,
        backend=backend,
        queue=queue,
        block_ns=block_ns,
        producers=count("producers", defaults.producers, 0),
        consumers=count("consumers", defaults.consumers, 0),
        messages=count("messages", defaults.messages, 1),
        message_size_bytes=defaults.message_size_bytes
        if size is None
        else parse_size_bytes(size, "--message-size", MIN_MESSAGE_BYTES),
        pipeline=count("pipeline", defaults.pipeline, 1),
        consumers_start_after=count("consumers_start_after", 0, 0),
        duration_ns=None
        if options.get("duration") is None
        else parse_duration_ns(options["duration"], "--duration", minimum_ns=1),
        grace_ns=duration("grace", defaults.grace_ns),
        poll_interval_ns=duration("poll_interval", defaults.poll_interval_ns, "ms"),
        timeout_ns=duration("timeout", defaults.timeout_ns, "ms", minimum_ns=1),
        interval_ns=duration("interval", defaults.interval_ns, minimum_ns=MIN_INTERVAL_NS),
        data_dir=_data_dir(options.get("data_dir")),
        report=report,
    )
    _check(config)
    return config


def _data_dir(raw: Any) -> str | None:
    """``--data-dir``: an existing directory (its size is read after the run)."""
    if raw is None:
        return None
    path = os.path.abspath(str(raw))
    if not os.path.isdir(path):
        raise ConfigError("--data-dir", f"{raw!r} is not a directory")
    return path


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check(config: QueueConfig) -> None:
    """Settings that contradict each other."""
    if config.producers == 0 and config.consumers == 0:
        raise ConfigError("--producers", "a run needs producers, consumers or both (both are 0)")
    if config.consumers_start_after > config.messages:
        raise ConfigError(
            "--consumers-start-after",
            f"{config.consumers_start_after:,} is more than the {config.messages:,} messages sent",
        )
    if (
        config.block_ns is not None
        and config.timeout_ns < config.block_ns + BLOCK_TIMEOUT_MARGIN_NS
    ):
        raise ConfigError(
            "--timeout",
            "must exceed the BRPOP ?block time by at least 1s (a blocked pop is no timeout)",
        )
    for name, value in (("--producers", config.producers), ("--consumers", config.consumers)):
        if value > MAX_AGENTS:
            raise ConfigError(name, f"at most {MAX_AGENTS}: each is a process of its own")
