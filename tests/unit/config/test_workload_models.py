"""Config for the realistic workload models: fb-etc sizes and arrivals, ``latest`` with
its inserts, ``rmw`` in the ratio."""

from __future__ import annotations

import pytest

from kvbench.config import load_config
from kvbench.config.workload_fields import FB_ETC_MAX_KEY_BYTES, FB_ETC_MAX_VALUE_BYTES
from kvbench.engine.fastpath import python_reason
from kvbench.errors import ConfigError

URL = (["memcached://127.0.0.1:11211"], "TARGET")


def config(**flags: object):  # type: ignore[no-untyped-def]
    settings = {key.replace("__", "."): (value, key) for key, value in flags.items()}
    return load_config(None, {"target.urls": URL, **settings}, 1)


def test_fb_etc_sizes_and_arrivals_are_accepted() -> None:
    made = config(
        workload__key_size="fb-etc",
        workload__value_size="fb-etc",
        load__arrival="fb-etc",
        load__rate="1k",
    )
    assert made.workload.key_size is None and made.workload.key_size_model == "fb-etc"
    assert made.workload.value_size_model == "fb-etc"
    assert (made.workload.value_size_min_bytes, made.workload.value_size_max_bytes) == (
        0,
        FB_ETC_MAX_VALUE_BYTES,
    )
    assert made.load.arrival == "fb-etc"
    assert python_reason(made) is None or "extension" in python_reason(made)  # compiled


def test_fb_etc_keys_are_numbered_keys_within_memcacheds_limit() -> None:
    with pytest.raises(ConfigError, match="fb-etc key sizes pad numbered keys"):
        config(workload__key_size="fb-etc", workload__key_template="random:20")
    with pytest.raises(ConfigError, match="at most 250"):
        config(workload__key_size="fb-etc", workload__key_prefix="p" * FB_ETC_MAX_KEY_BYTES)


def test_fb_etc_values_cannot_be_verified() -> None:
    with pytest.raises(ConfigError, match="at least 12 bytes"):
        config(workload__value_size="fb-etc", workload__verify=True)


def test_latest_makes_room_for_inserts() -> None:
    counted = config(workload__key_pattern="latest", load__requests="5000", workload__keys="100")
    assert counted.workload.insert_keys == 5000
    timed = config(workload__key_pattern="latest:0.8", workload__keys="100")
    assert timed.workload.insert_keys == 100 and timed.workload.zipf_exponent == 0.8


def test_rmw_is_weighted_like_an_op_and_runs_on_the_compiled_driver() -> None:
    made = config(workload__ratio="get=1,rmw=1")
    assert dict(made.workload.ratio) == {"get": 1, "rmw": 1}
    assert python_reason(made) in (None, "extension not built")
    with pytest.raises(ConfigError, match="rmw is not sent beside --command"):
        config(workload__ratio="rmw=1", workload__commands=["touch __key__ 1"])
