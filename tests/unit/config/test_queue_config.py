"""Queue URLs and ``kvbench queue`` flags: parsed once, every error naming what to fix."""

from __future__ import annotations

from typing import Any

import pytest

from kvbench.config.model import ReportConfig
from kvbench.config.queue import build_queue_config, parse_queue_target
from kvbench.errors import ConfigError


def build(url: str, **options: Any) -> Any:
    return build_queue_config(url, options, ReportConfig())


def test_memcacheq_url_names_the_queue_and_defaults_to_port_22201() -> None:
    target, backend, queue, block = parse_queue_target("memcacheq://127.0.0.1/jobs")
    assert (target.port, target.protocol, backend, queue, block) == (
        22201,
        "memcache-text",
        "memcacheq",
        "jobs",
        None,
    )


def test_redis_queue_url_names_the_list_not_a_database() -> None:
    target, backend, queue, block = parse_queue_target("redis-queue://127.0.0.1:6380/jobs")
    assert (target.port, target.db, backend, queue, block) == (6380, 0, "redis-list", "jobs", None)


def test_block_selects_brpop_and_db_selects_a_database() -> None:
    config = build("redis-queue://:secret@127.0.0.1/jobs?block=250ms&db=3")
    assert (config.block_ns, config.target.db, config.pop_command) == (250_000_000, 3, "brpop")
    assert config.target.password == "secret"
    assert "secret" not in str(config.to_dict())


def test_flags_are_parsed_with_units() -> None:
    config = build(
        "memcacheq://h/q",
        producers="2",
        consumers="3",
        messages="1M",
        message_size="1KiB",
        pipeline="16",
        consumers_start_after="100k",
        duration="2m",
        grace="500ms",
        poll_interval="2",
    )
    assert (config.producers, config.consumers, config.messages) == (2, 3, 1_000_000)
    assert (config.message_size_bytes, config.pipeline) == (1024, 16)
    assert config.consumers_start_after == 100_000
    assert (config.duration_ns, config.grace_ns, config.poll_interval_ns) == (
        120 * 10**9,
        500_000_000,
        2_000_000,
    )
    assert config.pop_command == "get"


@pytest.mark.parametrize(
    ("url", "options", "where"),
    [
        ("memcached://h/q", {}, "TARGET"),
        ("memcacheq://h", {}, "TARGET"),
        ("memcacheq://h/a b", {}, "TARGET"),
        ("memcacheq://h/" + "q" * 251, {}, "TARGET"),
        ("memcacheq://h/q?block=1s", {}, "TARGET"),
        ("redis-queue://h/q?blok=1s", {}, "TARGET"),
        ("redis-queue://h/q?block=0", {}, "TARGET ?block"),
        ("memcacheq://h/q", {"message_size": "27"}, "--message-size"),
        ("memcacheq://h/q", {"producers": "0", "consumers": "0"}, "--producers"),
        ("memcacheq://h/q", {"consumers": "-1"}, "--consumers"),
        ("memcacheq://h/q", {"data_dir": "/nonexistent/kvbench-data"}, "--data-dir"),
        ("memcacheq://h/q", {"producers": "1000"}, "--producers"),
        (
            "memcacheq://h/q",
            {"messages": "10", "consumers_start_after": "11"},
            "--consumers-start-after",
        ),
        ("redis-queue://h/q?block=5s", {}, "--timeout"),
    ],
)
def test_bad_settings_name_their_origin(url: str, options: dict[str, str], where: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(url, **options)
    assert info.value.path == where


def test_no_consumers_is_write_only_and_no_producers_a_drain(tmp_path: Any) -> None:
    """--consumers 0 and --producers 0 were refused; now one side alone is a run."""
    write = build("memcacheq://h/q", consumers="0", data_dir=str(tmp_path))
    drain = build("memcacheq://h/q", producers="0")
    assert (write.producers, write.consumers, write.data_dir) == (1, 0, str(tmp_path))
    assert (drain.producers, drain.consumers, drain.data_dir) == (0, 1, None)
