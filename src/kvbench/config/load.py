"""Build a RunConfig from a TOML scenario file plus CLI overrides, validating every value.

Settings are gathered as ``{"section.key": (value, origin)}``; the origin names where a
value came from (``--pipeline`` or ``load.pipeline in scenario.toml``) so every error
says which key to fix. CLI overrides win over the file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kvbench.config.model import (
    WORKLOAD_OPS,
    LoadConfig,
    ReportConfig,
    RunConfig,
    WorkloadConfig,
)
from kvbench.config.targets import parse_target
from kvbench.errors import ConfigError
from kvbench.units import parse_count, parse_duration_ns, parse_size_bytes

Settings = dict[str, tuple[Any, str]]

KEY_PATTERNS = ("uniform", "sequential")
ARRIVALS = ("uniform", "poisson")

# (section.key) -> parser(value, origin) -> typed value. Unknown keys are errors.
_FIELDS: dict[str, Callable[[Any, str], Any]] = {}


def _field(name: str) -> Callable[[Callable[[Any, str], Any]], Callable[[Any, str], Any]]:
    def register(parse: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
        _FIELDS[name] = parse
        return parse

    return register


def _positive(minimum: int) -> Callable[[Any, str], int]:
    return lambda value, where: parse_count(value, where, minimum)


def _boolean(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ConfigError(where, f"expected true or false, got {value!r}")


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    raise ConfigError(where, f"expected a string, got {value!r}")


def _optional_duration(value: Any, where: str) -> int | None:
    if value is None or value == 0 or value == "0":
        return None
    return parse_duration_ns(value, where)


def parse_ratio(value: Any, where: str) -> tuple[tuple[str, int], ...]:
    """``"1:10"`` (set:get) or ``"set=1,get=10,delete=1"`` or a TOML table of weights."""
    if isinstance(value, Mapping):
        pairs = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, str) and "=" in value:
        pairs = [tuple(part.split("=", 1)) for part in value.split(",") if part.strip()]  # type: ignore[misc]
    elif isinstance(value, str) and ":" in value:
        sides = value.split(":")
        if len(sides) != 2:
            raise ConfigError(where, f"{value!r}: expected SET:GET, e.g. 1:10")
        pairs = [("set", sides[0]), ("get", sides[1])]
    else:
        raise ConfigError(
            where, f"{value!r}: expected SET:GET (1:10) or op=weight,... (set=1,get=9)"
        )
    weights: list[tuple[str, int]] = []
    for op, weight in pairs:
        op = op.strip().lower()
        if op not in WORKLOAD_OPS:
            raise ConfigError(where, f"unknown op {op!r} (known: {', '.join(WORKLOAD_OPS)})")
        weights.append((op, parse_count(str(weight).strip(), where)))
    if sum(w for _, w in weights) == 0:
        raise ConfigError(where, "the weights add up to 0: nothing would be sent")
    return tuple((op, w) for op, w in weights if w > 0)


def _rate(value: Any, where: str) -> float:
    """An open-loop rate: ``1000``, ``10k``, ``2.5k`` requests per second, > 0."""
    text = str(value).strip().lower().removesuffix("/s")
    scale = {"k": 1e3, "m": 1e6}.get(text[-1:], 1.0)
    try:
        rate = float(text[:-1] if scale != 1.0 else text) * scale
    except ValueError:
        raise ConfigError(where, f"{value!r} is not a rate (examples: 1000, 10k, 2.5k)") from None
    if not rate > 0:
        raise ConfigError(where, f"must be above 0, got {value!r}")
    return rate


def _choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(where, f"{value!r} is not one of {', '.join(choices)}")
    return str(value)


def _key_pattern(value: Any, where: str) -> str:
    if value not in KEY_PATTERNS:
        raise ConfigError(
            where, f"{value!r} is not a key pattern (known: {', '.join(KEY_PATTERNS)})"
        )
    return str(value)


def _value_size(value: Any, where: str) -> tuple[int, int]:
    """``100`` or ``100-1000`` (uniform in the range) -> (min, max) bytes."""
    text = str(value)
    low, _, high = text.partition("-")
    low_bytes = parse_size_bytes(low.strip(), where, minimum=1)
    high_bytes = parse_size_bytes(high.strip(), where, minimum=1) if high else low_bytes
    if high_bytes < low_bytes:
        raise ConfigError(where, f"{text!r}: the range's maximum is below its minimum")
    return low_bytes, high_bytes


_field("workload.keys")(_positive(1))
_field("workload.key_prefix")(_text)
_field("workload.key_pattern")(_key_pattern)
_field("workload.value_size")(_value_size)
_field("workload.ratio")(parse_ratio)
_field("workload.multiget_keys")(_positive(1))
_field("workload.ttl_s")(_positive(0))
_field("workload.preload")(_boolean)
_field("workload.seed")(_positive(0))
_field("load.connections")(_positive(1))
_field("load.processes")(_positive(1))
_field("load.pipeline")(_positive(1))
_field("load.duration")(_optional_duration)
_field("load.requests")(_positive(1))
_field("load.warmup")(lambda v, w: parse_duration_ns(v, w))
_field("load.timeout")(lambda v, w: parse_duration_ns(v, w, default_unit="ms"))
_field("load.connect_timeout")(lambda v, w: parse_duration_ns(v, w, default_unit="ms"))
_field("load.rounds")(_positive(1))
_field("load.interval")(lambda v, w: parse_duration_ns(v, w))
_field("load.rate")(lambda v, w: _rate(v, w))
_field("load.arrival")(lambda v, w: _choice(v, w, ARRIVALS))
_field("load.max_lag")(lambda v, w: parse_duration_ns(v, w, default_unit="ms"))
_field("report.json")(_text)
_field("report.db")(_text)
_field("report.save")(_boolean)
_field("report.live")(_boolean)
_field("target.urls")(lambda v, w: [v] if isinstance(v, str) else list(v))


def read_toml(path: str | Path) -> Settings:
    """Flatten a scenario file into ``{"section.key": (value, origin)}``."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(str(path), "no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"not valid TOML: {exc}") from None
    settings: Settings = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{section} in {path}", "expected a [section] table")
        for key, value in table.items():
            settings[f"{section}.{key}"] = (value, f"{section}.{key} in {path}")
    return settings


def default_db_path() -> str:
    """The history database under the user's data directory (XDG_DATA_HOME or ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return os.path.join(base, "kvbench", "history.db")


def build_config(settings: Settings, default_processes: int) -> RunConfig:
    """Validate settings and build the frozen RunConfig.

    Raises:
        ConfigError: naming the origin (flag or file key) of the first bad value.
    """
    values: dict[str, Any] = {}
    for key, (raw, origin) in settings.items():
        if raw is None:
            continue
        parse = _FIELDS.get(key)
        if parse is None:
            raise ConfigError(origin, "unknown setting")
        values[key] = parse(raw, origin)
    urls = values.get("target.urls", [])
    targets = tuple(parse_target(url, f"target {url!r}") for url in urls)
    families = {t.family for t in targets}
    if len(families) > 1:
        raise ConfigError("target", "memcached and redis targets cannot share one run")
    workload = _build_workload(values)
    load = _build_load(values, default_processes, settings)
    report = ReportConfig(
        json_path=values.get("report.json"),
        db_path=values.get("report.db") or default_db_path(),
        save=values.get("report.save", True),
        live=values.get("report.live", True),
    )
    return RunConfig(targets=targets, workload=workload, load=load, report=report)


def _build_workload(values: dict[str, Any]) -> WorkloadConfig:
    defaults = WorkloadConfig()
    size_min, size_max = values.get(
        "workload.value_size", (defaults.value_size_min_bytes, defaults.value_size_max_bytes)
    )
    return WorkloadConfig(
        keys=values.get("workload.keys", defaults.keys),
        key_prefix=values.get("workload.key_prefix", defaults.key_prefix),
        key_pattern=values.get("workload.key_pattern", defaults.key_pattern),
        value_size_min_bytes=size_min,
        value_size_max_bytes=size_max,
        ratio=values.get("workload.ratio", defaults.ratio),
        multiget_keys=values.get("workload.multiget_keys", defaults.multiget_keys),
        ttl_s=values.get("workload.ttl_s", defaults.ttl_s),
        preload=values.get("workload.preload", defaults.preload),
        seed=values.get("workload.seed", int.from_bytes(os.urandom(4), "big")),
    )


def _build_load(values: dict[str, Any], default_processes: int, settings: Settings) -> LoadConfig:
    defaults = LoadConfig()
    requests = values.get("load.requests")
    duration = values.get("load.duration", defaults.duration_ns)
    if requests is not None and "load.duration" not in values:
        duration = None
    if requests is not None and duration is not None:
        raise ConfigError(
            settings["load.requests"][1], "give a duration or a request count, not both"
        )
    connections = values.get("load.connections", defaults.connections)
    processes = min(values.get("load.processes", default_processes), connections)
    return LoadConfig(
        connections=connections,
        processes=processes,
        pipeline=values.get("load.pipeline", defaults.pipeline),
        duration_ns=duration,
        requests=requests,
        warmup_ns=values.get("load.warmup", defaults.warmup_ns),
        timeout_ns=values.get("load.timeout", defaults.timeout_ns),
        connect_timeout_ns=values.get("load.connect_timeout", defaults.connect_timeout_ns),
        interval_ns=values.get("load.interval", defaults.interval_ns),
        rate_per_s=values.get("load.rate"),
        arrival=values.get("load.arrival", defaults.arrival),
        max_lag_ns=values.get("load.max_lag", defaults.max_lag_ns),
        rounds=values.get("load.rounds", defaults.rounds),
    )


def load_config(path: str | None, overrides: Settings, default_processes: int) -> RunConfig:
    """Read the scenario file (if any), apply CLI overrides, validate, freeze."""
    settings = read_toml(path) if path else {}
    settings.update({k: v for k, v in overrides.items() if v[0] is not None})
    return build_config(settings, default_processes)
