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
