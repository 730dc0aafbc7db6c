"""The throwaway memcached's share of the machine."""

from __future__ import annotations

import pytest

from kvbench.runner.embedded import split_cpus


@pytest.mark.parametrize(
    ("cpus", "server", "client"),
    [
        ({0, 1}, {0}, {1}),
        ({0, 1, 2, 3}, {0, 1}, {2, 3}),
        ({1, 2, 5}, {1}, {2, 5}),
        ({3}, {3}, {3}),  # one CPU: shared
    ],
)
def test_the_server_gets_the_lower_half_and_the_client_the_rest(
    cpus: set[int], server: set[int], client: set[int]
) -> None:
    assert split_cpus(cpus) == (server, client)
