"""Fixtures of the engine's unit tests."""

from __future__ import annotations

import pytest

from kvbench.engine import fastpath


@pytest.fixture(params=["python", "compiled"])
def driver(request: pytest.FixtureRequest) -> str:
    """Each connection test runs on both drivers: Python and the compiled pump."""
    if request.param == "compiled" and not fastpath.compiled():
        pytest.skip("the compiled pump is not built (or KVBENCH_PURE_PYTHON is set)")
    return str(request.param)
