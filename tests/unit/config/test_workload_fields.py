"""Workload settings with a grammar: key pattern, key template/size, value size/kind, ttl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvbench.config import WorkloadConfig, load_config
from kvbench.errors import ConfigError

URL = (["memcached://127.0.0.1:11211"], "TARGET")


def workload(**flags: Any) -> WorkloadConfig:
    """Build the workload from flags given as ``key_pattern="zipf"`` -> ``--key-pattern``."""
    paths = {
        "verify": "workload.verify",
        "ttl": "workload.ttl_s",
        "keys": "workload.keys",
        "key_prefix": "workload.key_prefix",
    }
    settings = {"target.urls": URL}
    for name, value in flags.items():
        path = paths.get(name, f"workload.{name}")
        settings[path] = (value, "--" + name.replace("_", "-"))
    return load_config(None, settings, default_processes=1).workload


def test_defaults_are_unchanged() -> None:
    config = workload()
    assert (config.key_pattern, config.key_template, config.key_size) == ("uniform", "number", None)
    assert (config.value_kind, config.ttl_s, config.ttl_max_s, config.verify) == (
        "random",
        0,
        None,
        False,
    )


@pytest.mark.parametrize(
    ("text", "exponent"), [("zipf", 0.99), ("zipf:1.2", 1.2), ("ZIPF:0.5", 0.5)]
)
def test_zipf_exponent(text: str, exponent: float) -> None:
    config = workload(key_pattern=text)
    assert config.key_pattern == "zipf" and config.zipf_exponent == exponent


@pytest.mark.parametrize(
    ("text", "mean", "stddev"),
    [
        ("gaussian", 50_000, 100_000 / 6),
        ("gaussian:0.25,0.1", 25_000, 10_000),  # fractions of the keyspace
        ("gaussian:1000,50", 1000, 50),  # numbers of keys
    ],
)
def test_gaussian_parameters_resolve_to_keys(text: str, mean: float, stddev: float) -> None:
    config = workload(key_pattern=text, keys=100_000)
    assert config.gaussian_mean == pytest.approx(mean)
    assert config.gaussian_stddev == pytest.approx(stddev)


@pytest.mark.parametrize(
    "text", ["zipfian", "zipf:-1", "zipf:x", "gaussian:1", "gaussian:1,0", "uniform:3"]
)
def test_bad_key_patterns_name_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--key-pattern: "):
        workload(key_pattern=text)


def test_key_templates() -> None:
    assert (
        workload(key_template="random:96").key_template,
        workload(key_template="random:96").key_size,
    ) == (
        "random",
        96,
    )
    assert workload(key_template="float-counter").key_template == "float-counter"
    assert workload(key_size="24").key_size == 24


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        ({"key_template": "random"}, "--key-template"),
        ({"key_template": "random:300"}, "--key-template"),
        ({"key_template": "uuid"}, "--key-template"),
        ({"key_template": "number:5"}, "--key-template"),
        ({"key_size": "5"}, "--key-size"),  # "kvbench:" + 5 digits does not fit
        ({"key_size": "24", "key_template": "float-counter"}, "--key-size"),
    ],
)
def test_bad_key_settings_name_the_flag(flags: dict[str, str], flag: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{flag}: "):
        workload(**flags)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100", (100, 100, ())),
        ("100-1000", (100, 1000, ())),
        ("1KiB", (1024, 1024, ())),
        ("100:70,1000:30", (100, 1000, ((100, 70), (1000, 30)))),
        ("100:70,1000:0", (100, 100, ((100, 70),))),
    ],
)
def test_value_sizes(text: str, expected: tuple[Any, ...]) -> None:
    config = workload(value_size=text)
    got = (config.value_size_min_bytes, config.value_size_max_bytes, config.value_size_weights)
    assert got == expected


@pytest.mark.parametrize("text", ["0", "200-100", "100:70,1000", "100:0", "big"])
def test_bad_value_sizes_name_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--value-size: "):
        workload(value_size=text)


def test_value_kinds() -> None:
    assert workload(value_kind="compressible").value_kind == "compressible"
    stamp = workload(value_kind="timestamp")
    assert (stamp.value_size_min_bytes, stamp.value_size_max_bytes) == (8, 8)
    with pytest.raises(ConfigError, match=r"^--value-kind: "):
        workload(value_kind="zeros")
    with pytest.raises(ConfigError, match=r"^--value-size: timestamp values are 8 bytes"):
        workload(value_kind="timestamp", value_size="100")


@pytest.mark.parametrize(("text", "expected"), [("60", (60, None)), ("60-120", (60, 120))])
def test_ttl(text: str, expected: tuple[int, int | None]) -> None:
    config = workload(ttl=text)
    assert (config.ttl_s, config.ttl_max_s) == expected


@pytest.mark.parametrize("text", ["-5", "120-60", "soon"])
def test_bad_ttls_name_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--ttl: "):
        workload(ttl=text)


def test_verify_refuses_values_it_cannot_derive() -> None:
    assert workload(verify=True).verify
    with pytest.raises(ConfigError, match=r"^--verify: .*--value-kind compressible"):
        workload(verify=True, value_kind="compressible")
    # Timestamp values are checked as times (workload/verify.py), not derived.
    assert workload(verify=True, value_kind="timestamp").verify
    with pytest.raises(ConfigError, match=r"^--verify: .*at least 12 bytes"):
        workload(verify=True, value_size="8-100")


def test_toml_keys_are_named_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[target]\nurls = ["memcached://h"]\n[workload]\nkey_pattern = "zipf:0"\n')
    with pytest.raises(ConfigError, match=r"workload\.key_pattern in .*s\.toml"):
        load_config(str(path), {}, 1)
    path.write_text(
        '[target]\nurls = ["memcached://h"]\n[workload]\nkey_pattern = "gaussian:0.5,0.1"\n'
        'value_size = "100:70,1000:30"\nvalue_kind = "compressible"\nttl_s = "60-120"\n'
        'key_template = "random:64"\nverify = false\n'
    )
    config = load_config(str(path), {}, 1).workload
    assert config.gaussian_mean == 50_000 and config.key_size == 64 and config.ttl_max_s == 120
