from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from kvbench.config import load as load_module
from kvbench.config import load_config, parse_ratio, parse_target
from kvbench.config.model import LoadConfig, ReportConfig, WorkloadConfig
from kvbench.errors import ConfigError

URL = (["memcached://127.0.0.1:11211"], "TARGET")


def test_defaults_follow_memtier_habits() -> None:
    config = load_config(None, {"target.urls": URL}, default_processes=2)
    assert config.load.connections == 50
    assert config.load.pipeline == 1
    assert config.load.duration_ns == 10 * 10**9
    assert config.load.processes == 2
    assert dict(config.workload.ratio) == {"set": 1, "get": 10}


@pytest.mark.parametrize(
    ("table", "config"),
    [
        (load_module._REPORT_AS_GIVEN, ReportConfig),
        (load_module._WORKLOAD_AS_GIVEN, WorkloadConfig),
        (load_module._LOAD_AS_GIVEN, LoadConfig),
    ],
)
def test_settings_taken_as_given_are_settings_and_fields(
    table: dict[str, str], config: type
) -> None:
    """A misspelt setting or field in these tables would be dropped without a word."""
    assert set(table) <= set(load_module._FIELDS)
    assert set(table.values()) <= {field.name for field in fields(config)}


def test_requests_replace_the_default_duration() -> None:
    config = load_config(None, {"target.urls": URL, "load.requests": ("1000", "--requests")}, 1)
    assert config.load.requests == 1000
    assert config.load.duration_ns is None


def test_requests_and_duration_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="--requests"):
        load_config(
            None,
            {
                "target.urls": URL,
                "load.requests": ("10", "--requests"),
                "load.duration": ("1s", "--duration"),
            },
            1,
        )


def test_processes_never_exceed_connections() -> None:
    config = load_config(None, {"target.urls": URL, "load.connections": ("1", "-c")}, 8)
    assert config.load.processes == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:10", {"set": 1, "get": 10}),
        ("set=1,get=9,delete=1", {"set": 1, "get": 9, "delete": 1}),
        ("0:1", {"get": 1}),
    ],
)
def test_ratio_forms(text: str, expected: dict[str, int]) -> None:
    assert dict(parse_ratio(text, "--ratio")) == expected


@pytest.mark.parametrize("text", ["1:2:3", "set=1,fly=2", "0:0", "abc"])
def test_bad_ratios_name_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--ratio: "):
        parse_ratio(text, "--ratio")


def test_toml_scenario_with_cli_override(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[target]\nurls = ["redis://127.0.0.1:6390/2"]\n[load]\npipeline = 8\nconnections = 10\n'
        '[workload]\nratio = { set = 1, get = 4 }\nvalue_size = "100-200"\n'
    )
    config = load_config(str(scenario), {"load.pipeline": ("16", "--pipeline")}, 1)
    assert config.load.pipeline == 16
    assert config.load.connections == 10
    assert config.targets[0].db == 2
    assert (config.workload.value_size_min_bytes, config.workload.value_size_max_bytes) == (
        100,
        200,
    )


def test_unknown_toml_key_names_file_and_key(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text("[load]\npipelines = 8\n")
    with pytest.raises(ConfigError, match=r"load\.pipelines in .*s\.toml: unknown setting"):
        load_config(str(scenario), {}, 1)


def test_bad_toml_value_names_its_key(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text("[load]\nconnections = 0\n")
    with pytest.raises(ConfigError, match=r"load\.connections in .*: must be at least 1"):
        load_config(str(scenario), {}, 1)


def test_missing_scenario_file() -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config("/nonexistent/scenario.toml", {}, 1)


def test_redis_url_credentials_are_masked_and_kept_apart() -> None:
    target = parse_target("redis://alice:s3cret@127.0.0.1:6380/3")
    assert target.url == "redis://alice:***@127.0.0.1:6380/3"
    assert (target.username, target.password, target.db, target.port) == (
        "alice",
        "s3cret",
        3,
        6380,
    )
    assert "s3cret" not in repr(target)


def test_password_only_redis_url() -> None:
    target = parse_target("redis://:pw@localhost")
    assert (target.username, target.password, target.port) == (None, "pw", 6379)


@pytest.mark.parametrize(
    ("url", "protocol"),
    [
        ("memcached://h", "memcache-text"),
        ("memcached+binary://h:1", "memcache-binary"),
        ("memcached+meta://h", "memcache-meta"),
        ("redis://h", "resp2"),
        ("redis://h?resp=3", "resp3"),
    ],
)
def test_scheme_picks_the_protocol(url: str, protocol: str) -> None:
    assert parse_target(url).protocol == protocol


@pytest.mark.parametrize(
    "url", ["127.0.0.1:11211", "mongodb://h", "memcached://h:99999", "redis://h/x"]
)
def test_bad_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        parse_target(url)


def test_config_dict_has_no_credentials() -> None:
    config = load_config(None, {"target.urls": (["redis://u:pw@h"], "TARGET")}, 1)
    assert "pw" not in str(config.to_dict())


@pytest.mark.parametrize(
    ("text", "share"), [("1%", 0.01), ("0.5%", 0.005), ("0.01", 0.01), ("0", 0.0), ("100%", 1.0)]
)
def test_max_error_rate_takes_a_percentage_or_a_fraction(text: str, share: float) -> None:
    settings = {"target.urls": URL, "load.max_error_rate": (text, "--max-error-rate")}
    assert load_config(None, settings, 1).load.max_error_rate == pytest.approx(share)


def test_max_error_rate_defaults_to_one_percent() -> None:
    assert load_config(None, {"target.urls": URL}, 1).load.max_error_rate == 0.01


@pytest.mark.parametrize("text", ["lots", "-1%", "150%", "2", "1 %%"])
def test_a_bad_max_error_rate_names_the_flag(text: str) -> None:
    settings = {"target.urls": URL, "load.max_error_rate": (text, "--max-error-rate")}
    with pytest.raises(ConfigError, match=r"^--max-error-rate: "):
        load_config(None, settings, 1)


def test_max_error_rate_in_a_scenario_names_its_key(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text('[target]\nurls = ["memcached://h"]\n[load]\nmax_error_rate = "5%"\n')
    assert load_config(str(scenario), {}, 1).load.max_error_rate == pytest.approx(0.05)
    scenario.write_text('[load]\nmax_error_rate = "many"\n')
    with pytest.raises(ConfigError, match=r"load\.max_error_rate in .*s\.toml: 'many' is not"):
        load_config(str(scenario), {}, 1)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[load]\nduration = 0\n", r"load\.duration in .*: must be above 0, got '0s'"),
        ('[load]\ntimeout = "0ms"\n', r"load\.timeout in .*: must be above 0"),
        ("[load]\nconnect_timeout = 0\n", r"load\.connect_timeout in .*: must be above 0"),
        ('[load]\ninterval = "1ms"\n', r"load\.interval in .*: must be at least 10ms"),
        ("[load]\nmax_lag = 0\n", r"load\.max_lag in .*: must be above 0"),
        ('[load]\nbusy_poll = "1s"\n', r"load\.busy_poll in .*: '1s' is more than 100ms"),
        ("[workload]\nttl_s = -5\n", r"workload\.ttl_s in .*: '-5': a ttl cannot be negative"),
        ("[workload]\nvalue_size = -3\n", r"workload\.value_size in .*: '-3': a value size"),
        ("[target]\nurls = []\n", r"target\.urls in .*: an empty list"),
        ("[target]\nurls = [1]\n", r"target\.urls in .*: expected a URL or a list of URLs"),
        ("[load]\nconections = 8\n", r"unknown setting; did you mean load\.connections\?"),
        ("[load]\nconcurrency = 8\n", r"unknown setting; did you mean load\.connections\?"),
        ("[load]\ntest_time = 8\n", r"unknown setting; did you mean load\.duration\?"),
        ("[workload]\ndata_size = 8\n", r"unknown setting; did you mean workload\.value_size\?"),
    ],
)
def test_scenario_values_that_cannot_run_are_refused(
    tmp_path: Path, toml: str, message: str
) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(toml)
    overrides = {} if "[target]" in toml else {"target.urls": URL}
    with pytest.raises(ConfigError, match=message):
        load_config(str(scenario), overrides, 1)


def test_a_warmup_of_zero_is_no_warmup() -> None:
    config = load_config(None, {"target.urls": URL, "load.warmup": ("0", "--warmup")}, 1)
    assert config.load.warmup_ns == 0


def test_op_order_is_random_unless_cycle_is_asked_for() -> None:
    assert load_config(None, {"target.urls": URL}, 1).workload.op_order == "random"
    cycle = {"target.urls": URL, "workload.op_order": ("cycle", "--op-order")}
    assert load_config(None, cycle, 1).workload.op_order == "cycle"
    bad = {"target.urls": URL, "workload.op_order": ("alternate", "--op-order")}
    with pytest.raises(ConfigError, match=r"^--op-order: 'alternate' is not one of random, cycle"):
        load_config(None, bad, 1)


def test_busy_poll_is_microseconds_and_off_by_default(tmp_path: Path) -> None:
    assert load_config(None, {"target.urls": URL}, 1).load.busy_poll_ns == 0
    flag = {"target.urls": URL, "load.busy_poll": ("50", "--busy-poll")}
    assert load_config(None, flag, 1).load.busy_poll_ns == 50_000  # a bare number: us
    scenario = tmp_path / "s.toml"
    scenario.write_text('[load]\nbusy_poll = "2ms"\n')
    assert load_config(str(scenario), {"target.urls": URL}, 1).load.busy_poll_ns == 2_000_000
