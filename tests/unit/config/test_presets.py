from __future__ import annotations

import pytest

from kvbench.config import load_config
from kvbench.config.presets import PRESETS, get_preset, with_scheme
from kvbench.errors import ConfigError

URLS = {
    1: ["memcached://127.0.0.1:11211"],
    2: ["memcached://127.0.0.1:1", "memcached://127.0.0.1:2"],
}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_a_valid_config(name: str) -> None:
    preset = PRESETS[name]
    if preset.shape == "queue":
        from kvbench.cli.queue import QUEUE_OPTIONS

        for step in preset.steps:
            assert set(preset.settings) | set(step.settings) <= set(QUEUE_OPTIONS)
        return
    steps = preset.steps or ()
    for extra in [{}] + [step.settings for step in steps]:
        settings = {k: (v, name) for k, v in {**preset.settings, **extra}.items()}
        settings["target.urls"] = (URLS[preset.targets][:1], "TARGET")
        assert load_config(None, settings, 1).targets


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_says_what_the_original_got_wrong_and_what_we_measure(name: str) -> None:
    preset = PRESETS[name]
    assert len(preset.original) > 80 and len(preset.measures) > 80
    assert preset.shape in ("steps", "sweep", "compare-sweep", "queue", "batches")


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="memcached-storm"):
        get_preset("nope")


def test_scheme_rewrite_only_touches_memcached_urls() -> None:
    storm = PRESETS["memcached-storm"]
    assert with_scheme("memcached://h:1", storm) == "memcached+binary://h:1"
    assert with_scheme("redis://h:1", storm) == "redis://h:1"


def test_put_get_batches_values_are_the_originals_1_kb() -> None:
    """The original stored ~1 KB values: 1,024 bytes, not 1,000."""
    assert PRESETS["put-get-batches"].settings["workload.value_size"] == 1024


def preset_config(name: str):  # type: ignore[no-untyped-def]
    preset = PRESETS[name]
    settings = {k: (v, name) for k, v in preset.settings.items()}
    settings["target.urls"] = (URLS[1], "TARGET")
    return load_config(None, settings, 1)


@pytest.mark.parametrize(
    ("name", "ratio", "pattern"),
    [
        ("ycsb-a", {"get": 50, "set": 50}, "zipf"),
        ("ycsb-b", {"get": 95, "set": 5}, "zipf"),
        ("ycsb-c", {"get": 1}, "zipf"),
        ("ycsb-d", {"get": 95, "set": 5}, "latest"),
        ("ycsb-f", {"get": 50, "rmw": 50}, "zipf"),
    ],
)
def test_ycsb_presets_are_yscbs_core_workloads(
    name: str, ratio: dict[str, int], pattern: str
) -> None:
    """recordcount -> the keys, preloaded; operationcount -> -n; zipfian constant 0.99;
    10 fields x 100 bytes -> 1,000-byte values; YCSB's figures printed."""
    config = preset_config(name)
    assert dict(config.workload.ratio) == ratio
    assert config.workload.key_pattern == pattern and config.workload.zipf_exponent == 0.99
    assert config.workload.preload and config.workload.keys == 100_000
    assert config.load.requests == 100_000 and config.load.duration_ns is None
    assert config.workload.value_size_max_bytes == 1000
    assert PRESETS[name].figures == "ycsb"
    if pattern == "latest":
        assert config.workload.insert_keys == 100_000


def test_fb_etc_preset_is_the_whole_model_at_its_own_rate() -> None:
    config = preset_config("fb-etc")
    workload, load = config.workload, config.load
    assert workload.key_size_model == workload.value_size_model == "fb-etc"
    assert load.arrival == "fb-etc" and dict(workload.ratio) == {"set": 1, "get": 30}
    # one over the model's mean gap: 16.0292 us / (1 - 0.154971)
    assert load.rate_per_s == pytest.approx(1e6 * (1 - 0.154971) / 16.0292, abs=1)
