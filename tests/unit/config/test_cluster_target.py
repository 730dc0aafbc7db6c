"""redis+cluster:// and rediss+cluster:// targets: seed nodes of one Redis Cluster."""

from __future__ import annotations

import pytest

from kvbench.config import load_config, parse_target
from kvbench.config.model import RunConfig
from kvbench.errors import ConfigError
from kvbench.workload.slots import shared_tag


def config(*urls: str, **flags: str) -> RunConfig:
    overrides: dict[str, tuple[object, str]] = {"target.urls": (list(urls), "TARGET")}
    for name, value in flags.items():
        overrides[name.replace("__", ".")] = (value, "--" + name.split("__")[1].replace("_", "-"))
    return load_config(None, overrides, 1)


def test_cluster_urls_parse() -> None:
    plain = parse_target("redis+cluster://10.0.0.1:7000")
    assert (plain.cluster, plain.tls, plain.protocol, plain.port) == (True, False, "resp2", 7000)
    assert plain.family == "redis"
    tls = parse_target("rediss+cluster://me:pw@h:7000?insecure=1&resp=3")
    assert (tls.cluster, tls.tls, tls.tls_insecure, tls.protocol) == (True, True, True, "resp3")
    assert (tls.username, tls.password, tls.url) == (
        "me",
        "pw",
        "rediss+cluster://me:***@h:7000?insecure=1&resp=3",
    )
    assert parse_target("redis+cluster://h").port == 6379
    assert not parse_target("redis://h").cluster


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+cluster://h:7000,h:7001", "give each seed node as a URL of its own"),
        ("redis+cluster://h:7000/1", "/1: a Redis Cluster has database 0 only"),
        ("redis+cluster://h?ca=/x", "need rediss+cluster://"),
        ("redis+cluster://h?db=2", "unknown option 'db' (redis+cluster:// takes resp)"),
    ],
)
def test_bad_cluster_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_target(url, "TARGET")
    assert message in caught.value.message


def test_several_seeds_are_one_cluster_and_keep_their_processes() -> None:
    run = config(
        "redis+cluster://a:7000",
        "redis+cluster://b:7000",
        load__processes="4",
        load__connections="8",
    )
    assert len(run.targets) == 2 and run.load.processes == 4


@pytest.mark.parametrize(
    ("urls", "message"),
    [
        (("redis+cluster://a:7000", "redis://b:6379"), "seed nodes of one cluster"),
        (("redis+cluster://a:7000", "rediss+cluster://b:7000"), "the same scheme"),
        (("redis+cluster://a:7000", "memcached://b"), "cannot share one run"),
    ],
)
def test_cluster_seeds_share_a_run_with_nothing_else(urls: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(*urls)
    assert message in caught.value.message


def test_mget_is_refused_unless_keys_share_a_hash_tag() -> None:
    with pytest.raises(ConfigError) as caught:
        config("redis+cluster://a:7000", workload__ratio="get=1,mget=1")
    assert caught.value.path == "--ratio" and "one hash slot" in caught.value.message
    tagged = config(
        "redis+cluster://a:7000", workload__ratio="get=1,mget=1", workload__key_prefix="{b}:"
    )
    assert dict(tagged.workload.ratio) == {"get": 1, "mget": 1}


@pytest.mark.parametrize("prefix", ["{b}:", "{{b}}:", "x}{b}:", "{}:", "{}{b}:", "b:", "{b:"])
def test_mget_is_taken_exactly_when_the_prefix_puts_every_key_in_one_slot(prefix: str) -> None:
    keys = [f"{prefix}{n}".encode() for n in range(50)]
    try:
        config("redis+cluster://a:7000", workload__ratio="mget=1", workload__key_prefix=prefix)
    except ConfigError:
        assert not shared_tag(keys)
    else:
        assert shared_tag(keys)
    for prefix in ("{}:", "b}{:", "{b:"):  # no whole tag: keys hash whole
        with pytest.raises(ConfigError):
            config("redis+cluster://a:7000", workload__ratio="mget=1", workload__key_prefix=prefix)
    assert config("redis://a:6379", workload__ratio="mget=1").targets[0].cluster is False


def test_set_then_get_is_refused_on_a_cluster() -> None:
    # Each connection gets keys of its own; a master may hold fewer keys than connections
    # (every key, with a hash tag, is on one), and a connection's keys cannot follow a MOVED.
    with pytest.raises(ConfigError) as caught:
        config("redis+cluster://a:7000", workload__ratio="set-then-get", workload__keys="100")
    assert caught.value.path == "--ratio" and "set-then-get" in caught.value.message
    assert config("redis://a:6379", workload__ratio="set-then-get").workload.set_then_get
