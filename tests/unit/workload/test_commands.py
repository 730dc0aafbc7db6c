"""Commands in the op mix: drawn by weight, rendered per chunk, recorded per name."""

from __future__ import annotations

from collections import Counter

import pytest

from kvbench.config.model import WorkloadConfig
from kvbench.errors import ConfigError
from kvbench.protocols.base import OP_NAMES, Op
from kvbench.protocols.commands import Request
from kvbench.protocols.resp import _array
from kvbench.workload import CHUNK, RequestSource, compile_plan
from kvbench.workload.commands import COMMAND_BASE, CommandSet, compile_commands

COMMANDS = (
    ("HSET __key__ f __data__", 2),
    ("LPUSH q:__key__ __data__", 1),
    ("hset __key__ g x", 1),  # the same name as the first: recorded with it
    ("MSET __key__ a __key__ b", 1),
)


def source_for(
    commands: tuple[tuple[str, int], ...], protocol: str = "resp2", **settings: object
) -> RequestSource:
    config = WorkloadConfig(keys=20, commands=commands, seed=7, **settings)  # type: ignore[arg-type]
    plan = compile_plan(config, 0, 1)
    return RequestSource(plan, templates=compile_commands(commands, protocol))


def test_commands_are_recorded_per_name_after_the_fixed_ops() -> None:
    plan = compile_plan(WorkloadConfig(commands=COMMANDS, ratio=()), 0, 1)
    assert plan.op_names() == (*OP_NAMES, "hset", "lpush", "mset")
    assert plan.keys_per_op()[COMMAND_BASE:] == (1, 1, 2)
    assert len(Op) == COMMAND_BASE


@pytest.mark.parametrize(
    ("protocol", "commands"),
    [
        ("resp2", (*COMMANDS, ("Get __key__", 1))),
        ("memcache-text", (("Get __key__", 1), ("touch __key__ 10", 1), ("gat 10 __key__", 1))),
    ],
)
def test_the_recorder_and_the_templates_name_a_command_alike(
    protocol: str, commands: tuple[tuple[str, int], ...]
) -> None:
    # Results are kept under config.commands.command_name, templates named by
    # protocols.commands.command_name (config may not import protocols): they must agree.
    names = CommandSet.of(commands)
    templates = compile_commands(commands, protocol)
    assert [t.name for t in templates] == [names.names[i] for i in names.name_of]


def test_command_positions_carry_their_whole_request() -> None:
    source = source_for(
        COMMANDS, ratio=(("get", 1),), value_size_min_bytes=3, value_size_max_bytes=3
    )
    names = ("hset", "lpush", "mset")
    seen = Counter()
    chunk = source.next_chunk()
    for op, recorded, key, value in zip(
        chunk.ops, chunk.record_ops, chunk.keys, chunk.values, strict=True
    ):
        if op == Op.GET:
            assert recorded == op and isinstance(key, bytes) and not isinstance(key, Request)
            continue
        assert op == Op.COMMAND and isinstance(key, Request)
        name = names[recorded - COMMAND_BASE]
        seen[name] += 1
        parts = bytes(key).split(b"\r\n")
        assert parts[2].lower() == name.encode()
        if name == "lpush":
            assert bytes(key) == _array(b"LPUSH", parts[4], bytes(value))
            assert parts[4].startswith(b"q:kvbench:")
        if name == "mset":
            assert parts[4].startswith(b"kvbench:") and parts[8].startswith(b"kvbench:")
    # weights 2+1 (hset) : 1 (lpush) : 1 (mset) : 1 (get), over one chunk of draws
    assert seen["hset"] / CHUNK == pytest.approx(3 / 6, abs=0.05)
    assert seen["lpush"] / CHUNK == pytest.approx(1 / 6, abs=0.04)


def test_memcached_text_commands_render_lines_and_blocks() -> None:
    source = source_for(
        (("touch __key__ 60", 1), ("set __key__ 0 0 __data__", 1)),
        "memcache-text",
        value_size_min_bytes=4,
        value_size_max_bytes=4,
    )
    requests = {bytes(k).split(b" ")[0]: bytes(k) for k in source.next_chunk().keys}
    assert requests[b"touch"].endswith(b" 60\r\n")
    line, block, end = requests[b"set"].split(b"\r\n")
    assert line.endswith(b" 0 0 4") and len(block) == 4 and end == b""


def test_without_commands_the_draws_are_unchanged() -> None:
    # The seeded sequence of a run without --command must not move.
    plain = RequestSource(compile_plan(WorkloadConfig(seed=3), 0, 1)).next_chunk()
    assert plain.record_ops is plain.ops
    again = RequestSource(compile_plan(WorkloadConfig(seed=3), 0, 1), templates=()).next_chunk()
    assert (again.ops, again.keys) == (plain.ops, plain.keys)


def test_one_template_per_command_is_required() -> None:
    with pytest.raises(ValueError, match="one template per command"):
        RequestSource(compile_plan(WorkloadConfig(commands=COMMANDS), 0, 1))


def test_a_protocol_that_refuses_a_command_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError, match=r"--command \(workload.commands\): 'SUBSCRIBE c': subscribe: "
    ):
        compile_commands((("SUBSCRIBE c", 1),), "resp2")
    with pytest.raises(ConfigError, match="memcache-binary sends no arbitrary commands"):
        compile_commands((("touch __key__ 1", 1),), "memcache-binary")
    with pytest.raises(ConfigError, match="byte count"):
        compile_commands((("set __key__ 0 0 5", 1),), "memcache-text")


def test_commands_of_one_name_carry_the_same_keys() -> None:
    with pytest.raises(ConfigError, match="every set command must carry the same number of keys"):
        CommandSet.of((("SET __key__ v", 1), ("SET fixed v", 1)))
