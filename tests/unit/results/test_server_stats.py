"""How stored server stats read as numbers (reconciliation and sharded sums share it)."""

from __future__ import annotations

import pytest

from kvbench.results.server_stats import stat_number


@pytest.mark.parametrize(
    ("name", "value", "number"),
    [
        ("cmd_get", "12345", 12345.0),
        ("rusage_user", "1.250000", 1.25),
        ("cmdstat_get", "calls=12,usec=34,usec_per_call=2.83", 12.0),
        ("cmdstat_set", "usec=34", 0.0),
        ("cmdstat_del", "calls=x", None),
        ("version", "1.6.18", None),
        ("redis_mode", "standalone", None),
    ],
)
def test_stat_number(name: str, value: str, number: float | None) -> None:
    assert stat_number(name, value) == number
