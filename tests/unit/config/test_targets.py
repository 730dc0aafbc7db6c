"""Target URLs: everything a URL says is checked before any connection."""

from __future__ import annotations

import pytest

from kvbench.config import load_config, parse_target
from kvbench.errors import ConfigError


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("memcached://h:0", "port 0"),
        ("memcached://h:", "an empty port"),
        ("redis://h:", "an empty port"),
        ("redis://h?rsp=3&pasword=x", "unknown option 'rsp' (redis:// takes resp); did you mean resp?"),
        ("redis://h?resp=4", "resp=4: the protocol version is 2 or 3"),
        ("redis://h?ca=/x", "TLS options (ca, insecure, cert, key) need rediss://"),
        ("rediss://h?insecure=maybe", "insecure=maybe: expected 1 or 0"),
        ("memcached://h?pipeline=1", "unknown option 'pipeline' (memcached:// takes no options)"),
        ("memcached+binary://h/0", "/0: memcached has no databases or paths"),
        ("memcached+meta://h/x", "/x: memcached has no databases or paths"),
        ("memcacheq://h/q?block=1s", "unknown option 'block' (memcacheq:// takes no options)"),
        ("redis-queue://h/q?blok=1s", "did you mean block?"),
        ("http+memc://h/memc?pipeline=2", "pipeline=2: expected 1 or 0"),
        ("memcached+unix://host/run/mc.sock", "names no host"),
        ("memcached+unix://", "absolute path"),
        ("memcached+unix:///", "absolute path"),
        ("memcached+unix:///run/mc.sock?db=1", "unknown option 'db' (memcached+unix:// takes no"),
        ("redis+unix:///run/r.sock?db=x", "database must be a number"),
        ("redis+unix:///run/r.sock?ca=/x", "unknown option 'ca' (redis+unix:// takes resp, db)"),
        ("rediss+unix:///run/r.sock", "Unix sockets are for memcached and redis targets only"),
        ("memcacheq+unix:///run/q.sock", "Unix sockets are for memcached and redis"),
        ("http+memc+unix:///run/n.sock", "Unix sockets are for memcached and redis"),
        ("unix+memcached:///run/mc.sock", "memcached and redis take +unix"),
        ("memcached://::1:11211", "an IPv6 address goes in brackets"),
        ("memcached://[::1", "Invalid IPv6 URL"),
    ],
)  # fmt: skip
def test_bad_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_target(url, "TARGET")
    assert caught.value.path == "TARGET"
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("memcached://h", ("memcache-text", 11211, "")),
        ("memcached://h/", ("memcache-text", 11211, "")),
        ("redis://h:6380?resp=3", ("resp3", 6380, "")),
        ("redis://h/2?resp=2", ("resp2", 6379, "2")),
        ("rediss://h?insecure=1&resp=3", ("resp3", 6379, "")),
        ("redis-queue://h/jobs?block=100ms&db=1&resp=3", ("resp3", 6379, "jobs")),
        ("http+memc://h:8080/memc?pipeline=yes", ("http-memc", 8080, "memc")),
    ],
)
def test_good_urls_still_parse(url: str, expected: tuple[str, int, str]) -> None:
    target = parse_target(url)
    assert (target.protocol, target.port, target.path) == expected


def test_a_masked_url_keeps_host_and_port_as_written() -> None:
    assert parse_target("redis://:pw@[::1]:6380").url == "redis://***@[::1]:6380"


def config(url: str, **settings: str) -> object:
    """``workload__key_prefix="x"`` is the setting workload.key_prefix given as --key-prefix."""
    overrides: dict[str, tuple[object, str]] = {"target.urls": ([url], "TARGET")}
    for name, value in settings.items():
        flag = "--" + name.split("__")[1].replace("_", "-")
        overrides[name.replace("__", ".")] = (value, flag)
    return load_config(None, overrides, 1)


# -- key length: the protocol's limit, from how keys are built ----------------------------

INCR = {"workload__keys": "100000", "workload__ratio": "incr=1"}  # counters 0..9999
FLOATS = {"workload__keys": "10", "workload__key_template": "float-counter"}


@pytest.mark.parametrize(
    ("url", "settings", "fits"),
    [
        # "k" * 245 + 5-digit numbers (keys 0..99999) = 250: memcached's limit, exactly
        ("memcached://h", {"workload__key_prefix": "k" * 245}, True),
        ("memcached://h", {"workload__key_prefix": "k" * 246}, False),
        ("memcached://h", {"workload__key_prefix": "k" * 246, "workload__keys": "10000"}, True),
        ("memcached+binary://h", {"workload__key_prefix": "k" * 246}, False),
        ("http+memc://h/memc", {"workload__key_prefix": "k" * 246}, False),
        ("redis://h", {"workload__key_prefix": "k" * 246}, True),  # Redis has no 250 limit
        ("redis://h", {"workload__key_size": "4096", "workload__key_template": "random"}, True),
        ("memcached://h", {"workload__key_size": "250"}, True),
        ("memcached://h", {"workload__key_size": "251"}, False),
        # counter keys: prefix + "counter:" + up to 4 digits, sent only when incr is in the mix
        ("memcached://h", {"workload__key_prefix": "k" * 239, "workload__keys": "100"}, True),
        ("memcached://h", {**INCR, "workload__key_prefix": "k" * 239}, False),
        ("memcached://h", {**INCR, "workload__key_prefix": "k" * 238}, True),
        # float-counter: prefix + up to 22 float characters + the number
        ("memcached://h", {**FLOATS, "workload__key_prefix": "k" * 227}, True),
        ("memcached://h", {**FLOATS, "workload__key_prefix": "k" * 228}, False),
    ],
)  # fmt: skip
def test_keys_longer_than_the_protocol_allows_are_refused(
    url: str, settings: dict[str, str], fits: bool
) -> None:
    if fits:
        config(url, **settings)
        return
    with pytest.raises(ConfigError, match=r"^--key-(prefix|size): keys would be up to \d+ bytes"):
        config(url, **settings)


def test_the_throwaway_memcached_has_memcached_limits() -> None:
    with pytest.raises(ConfigError, match="memcached takes keys of at most 250 bytes"):
        load_config(None, {"workload.key_prefix": ("k" * 246, "--key-prefix")}, 1)


@pytest.mark.parametrize("url", ["memcached://h", "memcached+meta://h"])
def test_memcached_keys_may_not_hold_spaces(url: str) -> None:
    with pytest.raises(ConfigError, match=r"^--key-prefix: 'a b': memcached keys may not hold"):
        config(url, workload__key_prefix="a b")


def test_redis_keys_may_hold_spaces() -> None:
    config("redis://h", workload__key_prefix="a b:")


# -- Unix sockets and IPv6 ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "protocol", "path", "db"),
    [
        ("memcached+unix:///run/mc.sock", "memcache-text", "/run/mc.sock", 0),
        ("memcached+binary+unix:///run/mc.sock", "memcache-binary", "/run/mc.sock", 0),
        ("memcached+unix+meta:///tmp/a%20b.sock", "memcache-meta", "/tmp/a b.sock", 0),
        ("redis+unix:///run/redis.sock", "resp2", "/run/redis.sock", 0),
        ("redis+unix:///run/redis.sock?db=3&resp=3", "resp3", "/run/redis.sock", 3),
    ],
)
def test_unix_socket_urls_name_the_socket(url: str, protocol: str, path: str, db: int) -> None:
    target = parse_target(url)
    assert (target.protocol, target.socket_path, target.db) == (protocol, path, db)
    assert (target.url, target.address) == (url, path)  # kept as given; printed as the path


def test_a_unix_redis_url_keeps_its_password_apart() -> None:
    target = parse_target("redis+unix://:s3cret@/run/redis.sock")
    assert (target.password, target.url) == ("s3cret", "redis+unix://***@/run/redis.sock")


@pytest.mark.parametrize(
    ("url", "host", "port", "address"),
    [
        ("memcached://[::1]:11311", "::1", 11311, "[::1]:11311"),
        ("redis://:pw@[::1]/2", "::1", 6379, "[::1]:6379"),
        ("memcached+meta://[fe80::1%25eth0]:11211", "fe80::1%eth0", 11211, "[fe80::1%eth0]:11211"),
        ("http+memc://[::1]:8080/memc", "::1", 8080, "[::1]:8080"),
    ],
)
def test_ipv6_literals_connect_without_brackets_and_print_with_them(
    url: str, host: str, port: int, address: str
) -> None:
    target = parse_target(url)
    assert (target.host, target.port, target.address) == (host, port, address)
    assert target.url == url.replace(":pw@", "***@")


def test_a_preset_scheme_keeps_a_unix_socket() -> None:
    from kvbench.config.presets import get_preset, with_scheme

    preset = get_preset("memcached-storm")
    assert with_scheme("memcached+unix:///run/mc.sock", preset) == (
        f"{preset.scheme}+unix:///run/mc.sock"
    )
