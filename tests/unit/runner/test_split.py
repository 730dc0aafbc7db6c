from __future__ import annotations

from kvbench.config import load_config
from kvbench.runner import worker_specs
from kvbench.units import share_out as split


def test_split_shares_evenly_and_exactly() -> None:
    assert split(10, 3) == [4, 3, 3]
    assert split(2, 2) == [1, 1]
    assert sum(split(1_000_003, 7)) == 1_000_003


def test_worker_specs_share_connections_and_requests() -> None:
    config = load_config(
        None,
        {
            "target.urls": (["memcached://127.0.0.1:1"], "T"),
            "load.connections": ("5", "-c"),
            "load.requests": ("1001", "-n"),
            "load.processes": ("2", "--processes"),
        },
        2,
    )
    specs = worker_specs(config)
    assert [s.connections for s in specs] == [3, 2]
    assert [s.requests for s in specs] == [501, 500]
    assert [s.worker_index for s in specs] == [0, 1]
