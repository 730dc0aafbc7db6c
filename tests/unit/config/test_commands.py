"""``--command`` settings: splitting, placeholders, weights, and what targets refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbench.config import load_config
from kvbench.config.commands import command_words, pair_weights, parse_commands, split_command
from kvbench.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("HSET __key__ field __data__", [b"HSET", b"__key__", b"field", b"__data__"]),
        ("  set   a  ", [b"set", b"a"]),
        ('SET k "a b"', [b"SET", b"k", b"a b"]),
        ('SET k "tab\\there\\x41\\"q\\\\"', [b"SET", b"k", b'tab\there\x41"q\\']),
        ("SET k 'it\\'s \"raw\" \\n'", [b"SET", b"k", b'it\'s "raw" \\n']),
        ('ECHO ""', [b"ECHO", b""]),
        ("ECHO caf\u00e9", [b"ECHO", "caf\u00e9".encode()]),
    ],
)
def test_commands_split_as_redis_cli_splits_them(text: str, words: list[bytes]) -> None:
    assert list(split_command(text, "--command")) == words


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('SET k "open', 'unbalanced " quotes'),
        ("SET k 'open", "unbalanced ' quotes"),
        ('SET k "a"b', "a closing quote must end its word"),
        ("   ", "an empty command"),
        ("__key__ x", "the first word names the command"),
        ("caf\u00e9 x", "printable ASCII"),
        ("SET x:__data__", "__data__ must be a word of its own"),
        ("MSET __key__:__key__ v", "one __key__ per word"),
    ],
)
def test_bad_commands_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        command_words(text, "--command")
    assert caught.value.path == "--command"
    assert message in caught.value.message


def test_commands_come_as_strings_tables_or_pairs() -> None:
    given = ["PING", {"command": "HSET __key__ f __data__", "weight": 3}, ("LPUSH __key__ x", "2")]
    assert parse_commands(given, "w") == (
        ("PING", 1),
        ("HSET __key__ f __data__", 3),
        ("LPUSH __key__ x", 2),
    )
    assert parse_commands("PING", "w") == (("PING", 1),)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "expected a list of commands"),
        ([{"command": "PING", "wieght": 2}], "unknown key 'wieght'"),
        ([("PING", "0")], "'PING': weight must be at least 1"),
        ([42], "expected a command string"),
    ],
)
def test_bad_command_lists_are_refused(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_commands(value, "workload.commands in s.toml")


def test_a_weight_applies_to_the_command_before_it() -> None:
    items = [("command", "A"), ("command", "B"), ("weight", "2"), ("command", "C")]
    assert pair_weights(items, "--command-weight") == [("A", "1"), ("B", "2"), ("C", "1")]
    with pytest.raises(ConfigError, match="comes after the --command"):
        pair_weights([("weight", "2"), ("command", "A")], "--command-weight")
    with pytest.raises(ConfigError, match="two weights"):
        pair_weights([("command", "A"), ("weight", "2"), ("weight", "3")], "--command-weight")


def config(*commands: tuple[str, str], **settings: object) -> object:
    values = {"workload.commands": (list(commands), "--command")}
    values.update({k.replace("__", "."): (v, f"--{k}") for k, v in settings.items()})
    return load_config(None, values, 1)  # type: ignore[arg-type]


def test_commands_alone_make_the_mix_unless_a_ratio_is_given() -> None:
    alone = config(("HSET __key__ f __data__", "2"))
    assert alone.workload.ratio == ()  # type: ignore[attr-defined]
    assert alone.workload.commands == (("HSET __key__ f __data__", 2),)  # type: ignore[attr-defined]
    mixed = config(("HSET __key__ f __data__", "2"), workload__ratio="1:10")
    assert mixed.workload.ratio == (("set", 1), ("get", 10))  # type: ignore[attr-defined]
    assert mixed.to_dict()["workload"]["commands"] == [  # type: ignore[attr-defined]
        {"command": "HSET __key__ f __data__", "weight": 2}
    ]


@pytest.mark.parametrize(
    ("url", "command", "ratio", "message"),
    [
        ("memcached+binary://h", "touch __key__ 1", None, "memcached+binary://"),
        ("memcached+meta://h", "mg __key__ v", None, "not memcached+meta://"),
        ("http+memc://h/memc", "get __key__", None, "not http+memc://"),
        ("redis+cluster://h:7000", "HSET __key__ f x", None, "not sent to a Redis Cluster"),
        ("memcached://h", "get __key__", "1:1", "get is also sent by --ratio's get"),
        ("memcached://h", "get __key__", "mget=1", "get is also sent by --ratio's mget"),
        ("redis://h", "DEL __key__", "delete=1", "del is also sent by --ratio's delete"),
        ("memcached://h", "touch " + "x" * 240 + "__key__ 1", None, "memcached takes at most 250"),
    ],
)
def test_what_targets_cannot_take_is_refused_before_any_socket(
    url: str, command: str, ratio: str | None, message: str
) -> None:
    settings = {"target.urls": ([url], "TARGET"), "workload.commands": ([command], "--command")}
    if ratio:
        settings["workload.ratio"] = (ratio, "--ratio")
    with pytest.raises(ConfigError) as caught:
        load_config(None, settings, 1)
    assert caught.value.path == "--command"
    assert message in caught.value.message


def test_redis_keys_with_affixes_have_no_memcached_limit() -> None:
    settings = {
        "target.urls": (["redis://h"], "TARGET"),
        "workload.commands": (["SET " + "x" * 300 + "__key__ v"], "--command"),
    }
    assert load_config(None, settings, 1).workload.commands


def test_commands_in_a_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        '[workload]\ncommands = ["PING", {command = "LPUSH q:__key__ __data__", weight = 4}]\n'
    )
    assert load_config(str(path), {}, 1).workload.commands == (
        ("PING", 1),
        ("LPUSH q:__key__ __data__", 4),
    )
    path.write_text('[workload]\ncommands = ["SET \\"x"]\n')
    with pytest.raises(ConfigError, match=r"workload\.commands in .*unbalanced"):
        load_config(str(path), {}, 1)
