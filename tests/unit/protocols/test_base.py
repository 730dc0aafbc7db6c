"""base.py: the NEED_DATA sentinel, for the code that pulls replies and for type checkers."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from mypy import api as mypy_api

import kvbench
from kvbench.protocols.base import NEED_DATA, NeedData

# The engine's loop, as connection.py and queue_link.py write it.
_DRIVER = """
from kvbench.protocols.base import NEED_DATA, ClientCodec

def codes(codec: ClientCodec) -> list[int]:
    out = []
    while (reply := codec.next_reply()) is not NEED_DATA:
        out.append(reply.kind | reply.keys << 8)
    return out
"""


def test_a_reply_that_is_not_need_data_is_a_reply_to_the_type_checker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    monkeypatch.setenv("MYPYPATH", str(Path(kvbench.__file__).parents[1]))
    stdout, _, status = mypy_api.run(
        [
            "--strict",
            "--no-incremental",
            "--follow-imports=silent",
            "--config-file",
            "",
            str(driver),
        ]
    )
    assert status == 0, stdout


def test_need_data_is_one_value_that_survives_pickling_and_names_itself() -> None:
    assert list(NeedData) == [NEED_DATA]
    assert pickle.loads(pickle.dumps(NEED_DATA)) is NEED_DATA
    assert repr(NEED_DATA) == "NEED_DATA"
