"""http+memc:// targets: URL parsing, and what the config refuses before any socket opens."""

from __future__ import annotations

from typing import Any

import pytest

from kvbench.config import load_config, parse_target
from kvbench.errors import ConfigError

GATEWAY = "http+memc://127.0.0.1:8080/memc"


def config(url: str = GATEWAY, **settings: tuple[Any, str]) -> Any:
    overrides = {
        "target.urls": ([url], "TARGET"),
        **{k.replace("__", "."): v for k, v in settings.items()},
    }
    return load_config(None, overrides, default_processes=1)


def test_scheme_protocol_port_and_path() -> None:
    target = parse_target(GATEWAY)
    assert (target.protocol, target.family, target.host, target.port, target.path) == (
        "http-memc",
        "http",
        "127.0.0.1",
        8080,
        "memc",
    )
    assert parse_target("http+memc://gw/a/b").port == 80
    assert parse_target("http+memc://gw/a/b").path == "a/b"
    assert not target.pipelining and target.stats_url is None


def test_url_options() -> None:
    target = parse_target(GATEWAY + "?pipeline=1&stats=memcached://127.0.0.1:11211")
    assert target.pipelining
    assert target.stats_url == "memcached://127.0.0.1:11211"


@pytest.mark.parametrize(
    "url, message",
    [(GATEWAY + "?bogus=1", "unknown option 'bogus'"),
     (GATEWAY + "?stats=redis://127.0.0.1", "backing memcached"),
     (GATEWAY + "?stats=nope", "not a URL"),
     ("http+memc://gw/a b", "percent-encode")],
)  # fmt: skip
def test_bad_urls_are_config_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_target(url)


def test_pipeline_above_one_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="--pipeline") as caught:
        config(load__pipeline=("4", "--pipeline"))
    assert caught.value.path == "--pipeline"
    assert "?pipeline=1" in caught.value.message


def test_pipeline_is_allowed_when_the_url_asks() -> None:
    assert config(GATEWAY + "?pipeline=1", load__pipeline=("4", "--pipeline")).load.pipeline == 4
    assert config(load__pipeline=("1", "--pipeline")).load.pipeline == 1


def test_mget_is_refused() -> None:
    with pytest.raises(ConfigError, match="mget: a memc gateway has no such request"):
        config(workload__ratio=("get=1,mget=1", "--ratio"))


@pytest.mark.parametrize("prefix", ["kv bench:", "a&b", "a=b", "a%", "é"])
def test_key_prefix_that_is_not_url_safe_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigError, match="does not URL-decode") as caught:
        config(workload__key_prefix=(prefix, "--key-prefix"))
    assert caught.value.path == "--key-prefix"


def test_verify_is_refused_without_set_then_get() -> None:
    with pytest.raises(ConfigError, match="--verify checks them only with --ratio set-then-get"):
        config(workload__verify=(True, "--verify"))


def test_verify_works_with_set_then_get() -> None:
    """Each get is compared with the URL-safe form of the set before it (engine/verify.py)."""
    built = config(workload__verify=(True, "--verify"), workload__ratio=("set-then-get", "--ratio"))
    assert built.workload.verify and built.workload.set_then_get
    assert built.workload.ratio == (("set", 1), ("get", 1))


def test_gateway_and_memcached_cannot_share_a_run() -> None:
    with pytest.raises(ConfigError, match="http and memcache targets"):
        load_config(None, {"target.urls": ([GATEWAY, "memcached://127.0.0.1"], "TARGET")}, 1)


def test_other_schemes_are_untouched() -> None:
    assert config("memcached://127.0.0.1", load__pipeline=("8", "--pipeline")).load.pipeline == 8
    assert parse_target("memcached://127.0.0.1").family == "memcache"
