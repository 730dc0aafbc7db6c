"""Build a RunConfig from a TOML scenario file plus CLI overrides, validating every value.

Settings are gathered as ``{"section.key": (value, origin)}``; the origin names where a
value came from (``--pipeline`` or ``load.pipeline in scenario.toml``) so every error
says which key to fix. CLI overrides win over the file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kvbench.config.cluster import parse_listen_address, parse_scheduler_url
from kvbench.config.commands import check_commands, parse_commands
from kvbench.config.limits import check_rate, check_value_protocol
from kvbench.config.model import (
    MIN_INTERVAL_NS,
    RMW,
    WORKLOAD_OPS,
    LoadConfig,
    ReportConfig,
    RunConfig,
    TargetConfig,
    WorkloadConfig,
)
from kvbench.config.names import suggestion
from kvbench.config.prometheus import parse_prometheus_address
from kvbench.config.queue import QUEUE_SCHEMES
from kvbench.config.targets import (
    check_cluster_targets,
    check_http_targets,
    check_key_limits,
    mask_url,
    parse_target,
)
from kvbench.config.workload_fields import (
    FB_ETC,
    MIN_VERIFY_VALUE_BYTES,
    OP_ORDERS,
    PLACEMENTS,
    TIMESTAMP_VALUE_BYTES,
    check_keys,
    is_fb_etc,
    parse_key_pattern,
    parse_key_size,
    parse_key_template,
    parse_time_window_ms,
    parse_ttl,
    parse_value_kind,
    parse_value_size,
    resolve_gaussian,
)
from kvbench.errors import ConfigError
from kvbench.units import parse_count, parse_duration_ns, parse_fraction

Settings = dict[str, tuple[Any, str]]

ARRIVALS = ("uniform", "poisson", FB_ETC)
# ``--ratio set-then-get``: each op a set of a key, then a get of the same key.
SET_THEN_GET = "set-then-get"

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


def _duration(default_unit: str = "s", minimum_ns: int = 1) -> Callable[[Any, str], int]:
    """A duration field; by default it must be above 0 (a zero timeout or period is a typo)."""
    return lambda value, where: parse_duration_ns(value, where, default_unit, minimum_ns)


# Polling longer than this before sleeping is a typo: it would spin through idle periods.
MAX_BUSY_POLL_NS = 100_000_000


def _busy_poll(value: Any, where: str) -> int:
    """``load.busy_poll``: 0 (sleep at once) up to ``MAX_BUSY_POLL_NS``; a bare number is
    microseconds."""
    ns = parse_duration_ns(value, where, "us", 0)
    if ns > MAX_BUSY_POLL_NS:
        raise ConfigError(where, f"{value!r} is more than 100ms: the loop would spin while idle")
    return ns


def _urls(value: Any, where: str) -> list[str]:
    """``target.urls``: one URL or a list of them; an empty list is refused, not ignored
    (no target at all means a throwaway memcached: that must be asked for by omission)."""
    urls = [value] if isinstance(value, str) else value
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        raise ConfigError(where, f"expected a URL or a list of URLs, got {value!r}")
    if not urls:
        raise ConfigError(
            where, "an empty list: name a target, or leave the key out for a throwaway memcached"
        )
    return urls


def parse_ratio(value: Any, where: str) -> tuple[tuple[str, int], ...]:
    """``"1:10"`` (set:get) or ``"set=1,get=10,delete=1"`` or a TOML table of weights, or
    ``set-then-get`` (a set and a get of the same key: 1:1, paired; ``is_set_then_get``)."""
    if is_set_then_get(value):
        return (("set", 1), ("get", 1))
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
        if op not in (*WORKLOAD_OPS, RMW):
            known = ", ".join((*WORKLOAD_OPS, RMW))
            raise ConfigError(where, f"unknown op {op!r} (known: {known})")
        weights.append((op, parse_count(str(weight).strip(), where)))
    if sum(w for _, w in weights) == 0:
        raise ConfigError(where, "the weights add up to 0: nothing would be sent")
    return tuple((op, w) for op, w in weights if w > 0)


def is_set_then_get(value: Any) -> bool:
    """The ratio asks for set-then-get pairs (WorkloadConfig.set_then_get)."""
    return isinstance(value, str) and value.strip().lower() == SET_THEN_GET


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


_field("workload.keys")(_positive(1))
_field("workload.key_prefix")(_text)
_field("workload.key_pattern")(parse_key_pattern)
_field("workload.key_template")(parse_key_template)
_field("workload.key_size")(parse_key_size)
_field("workload.value_size")(parse_value_size)
_field("workload.value_kind")(parse_value_kind)
_field("workload.verify")(_boolean)
_field("workload.allow_oversize")(_boolean)
_field("workload.ratio")(parse_ratio)
_field("workload.commands")(parse_commands)
_field("workload.op_order")(lambda v, w: _choice(v, w, OP_ORDERS))
_field("workload.multiget_keys")(_positive(1))
_field("workload.ttl_s")(parse_ttl)
_field("workload.preload")(_boolean)
_field("workload.seed")(_positive(0))
_field("workload.placement")(lambda v, w: _choice(v, w, PLACEMENTS))
_field("workload.key_span")(_positive(1))
_field("workload.verify_window_ms")(parse_time_window_ms)
_field("load.connections")(_positive(1))
_field("load.processes")(_positive(1))
_field("load.pipeline")(_positive(1))
_field("load.duration")(_duration())
_field("load.requests")(_positive(1))
_field("load.warmup")(_duration(minimum_ns=0))
_field("load.timeout")(_duration("ms"))
_field("load.connect_timeout")(_duration("ms"))
_field("load.rounds")(_positive(1))
_field("load.interval")(_duration(minimum_ns=MIN_INTERVAL_NS))
_field("load.rate")(lambda v, w: _rate(v, w))
_field("load.arrival")(lambda v, w: _choice(v, w, ARRIVALS))
_field("load.max_lag")(_duration("ms"))
_field("load.busy_poll")(lambda v, w: _busy_poll(v, w))
_field("load.max_error_rate")(parse_fraction)
_field("load.cluster")(parse_scheduler_url)
_field("load.cluster_listen")(parse_listen_address)
_field("report.json")(_text)
_field("report.db")(_text)
_field("report.save")(_boolean)
_field("report.live")(_boolean)
_field("report.wide")(_boolean)
_field("report.quiet")(_boolean)
_field("report.prometheus")(parse_prometheus_address)
_field("target.urls")(_urls)


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
            raise ConfigError(
                f"{section} in {path}",
                "expected a [section] table" + suggestion(section, _FIELDS, "."),
            )
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
            raise ConfigError(origin, "unknown setting" + suggestion(key, _FIELDS, "."))
        values[key] = parse(raw, origin)
    targets = _targets(values.get("target.urls", []))
    workload = _build_workload(values, settings)
    check_cluster_targets(targets, workload, lambda key: _origin(settings, key))
    load = _build_load(values, default_processes, settings)
    load = _check_shards(targets, load, settings)
    check_http_targets(targets, workload, load.pipeline, lambda key: _origin(settings, key))
    workload = _with_inserts(workload, load)
    if workload.key_pattern == "latest" and (len(targets) > 1 or any(t.cluster for t in targets)):
        raise ConfigError(
            _origin(settings, "workload.key_pattern"),
            "latest reads by recency over each worker's own inserts: one server only "
            "(not sharded, not a Redis Cluster)",
        )
    _check_rmw(workload, settings)
    if workload.set_then_get and workload.commands:
        raise ConfigError(
            _origin(settings, "workload.ratio"),
            "set-then-get sends its own set and get: it takes no --command",
        )
    if workload.set_then_get and workload.keys < load.connections:
        raise ConfigError(
            _origin(settings, "workload.keys"),
            f"--ratio set-then-get gives each connection keys of its own: {workload.keys:,} "
            f"keys cannot serve {load.connections:,} connections",
        )
    check_key_limits(targets, workload, lambda key: _origin(settings, _key_setting(key, values)))
    check_commands(targets, workload, lambda key: _origin(settings, key))
    check_value_protocol(targets, workload.value_size_max_bytes, lambda key: _origin(settings, key))
    report = ReportConfig(
        db_path=values.get("report.db") or default_db_path(),
        **_as_given(values, _REPORT_AS_GIVEN),
    )
    config = RunConfig(targets=targets, workload=workload, load=load, report=report)
    check_rate(config, lambda key: _origin(settings, key))
    return config


def _with_inserts(workload: WorkloadConfig, load: LoadConfig) -> WorkloadConfig:
    """``latest``: room in the key table for the keys sets insert past the records (with
    ``-n N`` no run inserts more than N; a timed run gets as many again as the records,
    and a worker that fills its share wraps to its oldest inserted key), and how far
    behind its inserts a worker reads: the most requests it has in flight
    (workload/keys.py ``LatestPicker``)."""
    if workload.key_pattern != "latest":
        return workload
    per_worker = -(-load.connections // load.processes) * load.pipeline
    return replace(workload, insert_keys=load.requests or workload.keys, insert_lag=per_worker)


def _check_rmw(workload: WorkloadConfig, settings: Settings) -> None:
    """A read-modify-write is recorded as an op of its own after the fixed ones: not
    beside commands (whose op numbers start there too) nor set-then-get pairs."""
    if not workload.rmw:
        return
    where = _origin(settings, "workload.ratio")
    if workload.commands:
        raise ConfigError(where, "rmw is not sent beside --command: drop one of them")
    if workload.verify:
        raise ConfigError(where, "rmw is not verified (--verify): drop one of them")


def _targets(urls: list[str]) -> tuple[TargetConfig, ...]:
    """Parse the run's targets: one server family, no queue URLs (``kvbench queue``'s)."""
    targets = tuple(parse_target(url, f"target {mask_url(url)!r}") for url in urls)
    for target in targets:
        if target.scheme in QUEUE_SCHEMES:
            raise ConfigError(
                f"target {target.url!r}",
                f"a queue URL: use kvbench queue {target.url} (kvbench run loads a cache)",
            )
    families = {t.family for t in targets}
    if len(families) > 1:
        kinds = " and ".join(sorted(families))
        raise ConfigError("target", f"{kinds} targets cannot share one run")
    return targets


def _check_shards(targets: tuple[Any, ...], load: LoadConfig, settings: Settings) -> LoadConfig:
    """Several targets are memcached servers sharded by ketama (or --placement): every
    worker needs a connection to each, so processes are capped at connections / servers.
    (Several ``redis+cluster://`` targets are seeds of one cluster, capped once its masters
    are known: runner/redis_cluster.py.)"""
    if len(targets) < 2 or all(t.cluster for t in targets):
        return load
    if any(t.family != "memcache" for t in targets):
        raise ConfigError(
            "target", "several targets are sharded (ketama or --placement): memcached targets only"
        )
    if load.connections < len(targets):
        where = settings.get("load.connections", (None, "--connections"))[1]
        raise ConfigError(where, f"need at least one connection per server ({len(targets)})")
    processes = max(1, min(load.processes, load.connections // len(targets)))
    return replace(load, processes=processes)


# Settings a config takes as they were given (setting -> the config's field); one not given
# keeps the field's default.
_REPORT_AS_GIVEN = {
    "report.json": "json_path",
    "report.save": "save",
    "report.live": "live",
    "report.wide": "wide",
    "report.quiet": "quiet",
    "report.prometheus": "prometheus",
}
_WORKLOAD_AS_GIVEN = {
    "workload.commands": "commands",
    "workload.op_order": "op_order",
    "workload.multiget_keys": "multiget_keys",
    "workload.preload": "preload",
    "workload.verify": "verify",
    "workload.allow_oversize": "allow_oversize",
    "workload.placement": "placement",
    "workload.key_span": "key_span",
    "workload.verify_window_ms": "verify_window_ms",
}
_LOAD_AS_GIVEN = {
    "load.pipeline": "pipeline",
    "load.warmup": "warmup_ns",
    "load.timeout": "timeout_ns",
    "load.connect_timeout": "connect_timeout_ns",
    "load.interval": "interval_ns",
    "load.rate": "rate_per_s",
    "load.arrival": "arrival",
    "load.max_lag": "max_lag_ns",
    "load.busy_poll": "busy_poll_ns",
    "load.rounds": "rounds",
    "load.max_error_rate": "max_error_rate",
    "load.cluster_listen": "cluster_listen",
}


def _as_given(values: dict[str, Any], fields: Mapping[str, str]) -> dict[str, Any]:
    """The config fields ``fields`` names (setting -> field) of the settings given."""
    return {field: values[key] for key, field in fields.items() if key in values}


def _origin(settings: Settings, key: str) -> str:
    return settings[key][1] if key in settings else key


def _key_setting(key: str, values: dict[str, Any]) -> str:
    """The key size is given by --key-size, or else by its template (``random:96``)."""
    if key == "workload.key_size" and key not in values:
        return "workload.key_template"
    return key


def _build_workload(values: dict[str, Any], settings: Settings) -> WorkloadConfig:
    defaults = WorkloadConfig()
    keys = values.get("workload.keys", defaults.keys)
    size_min, size_max, size_weights = values.get(
        "workload.value_size", (defaults.value_size_min_bytes, defaults.value_size_max_bytes, ())
    )
    pattern, pattern_params = values.get("workload.key_pattern", (defaults.key_pattern, ()))
    mean, stddev = resolve_gaussian(pattern_params, keys) if pattern == "gaussian" else (None, None)
    template, template_size = values.get("workload.key_template", ("number", None))
    key_size = values.get("workload.key_size", template_size)
    key_size_model = None
    if key_size == FB_ETC:  # a size per key, drawn when the key table is built
        key_size, key_size_model = None, FB_ETC
        if template != "number":
            raise ConfigError(
                _origin(settings, "workload.key_size"),
                f"fb-etc key sizes pad numbered keys; drop --key-template {template}",
            )
    prefix = values.get("workload.key_prefix", defaults.key_prefix)
    check_keys(
        prefix,
        template,
        key_size,
        keys,
        _origin(settings, _key_setting("workload.key_size", values)),
    )
    ttl_s, ttl_max_s = values.get("workload.ttl_s", (defaults.ttl_s, None))
    value_kind = values.get("workload.value_kind", defaults.value_kind)
    if value_kind == "timestamp":
        size_min = size_max = TIMESTAMP_VALUE_BYTES
        size_weights = ()
    workload = WorkloadConfig(
        keys=keys,
        key_prefix=prefix,
        key_pattern=pattern,
        zipf_exponent=(
            pattern_params[0] if pattern in ("zipf", "latest") else defaults.zipf_exponent
        ),
        gaussian_mean=mean,
        gaussian_stddev=stddev,
        key_template=template,
        key_size=key_size,
        key_size_model=key_size_model,
        value_size_min_bytes=size_min,
        value_size_max_bytes=size_max,
        value_size_weights=size_weights,
        value_size_model=FB_ETC
        if is_fb_etc(settings.get("workload.value_size", ("",))[0])
        else None,
        value_kind=value_kind,
        # Commands alone make the mix unless a ratio is given too.
        ratio=values.get("workload.ratio", () if "workload.commands" in values else defaults.ratio),
        ttl_s=ttl_s,
        ttl_max_s=ttl_max_s,
        set_then_get=is_set_then_get(settings.get("workload.ratio", (None, ""))[0]),
        seed=values.get("workload.seed", int.from_bytes(os.urandom(4), "big")),
        **_as_given(values, _WORKLOAD_AS_GIVEN),
    )
    _check_values(workload, values, settings)
    return workload


def _check_values(workload: WorkloadConfig, values: dict[str, Any], settings: Settings) -> None:
    """Value settings that contradict each other, named by the flag that asked for them."""
    given_size = values.get("workload.value_size", (TIMESTAMP_VALUE_BYTES,) * 2)[:2]
    if workload.value_kind == "timestamp" and given_size != (TIMESTAMP_VALUE_BYTES,) * 2:
        raise ConfigError(
            _origin(settings, "workload.value_size"),
            f"timestamp values are {TIMESTAMP_VALUE_BYTES} bytes; drop the value size",
        )
    if not workload.verify:
        return
    where = _origin(settings, "workload.verify")
    if workload.value_kind == "timestamp":  # checked as a time: 8 bytes, inside the window
        return
    if workload.value_kind != "random":
        raise ConfigError(
            where,
            f"verified values are derived from their key; drop --value-kind {workload.value_kind}",
        )
    if workload.value_size_min_bytes < MIN_VERIFY_VALUE_BYTES:
        raise ConfigError(
            where,
            f"verified values need at least {MIN_VERIFY_VALUE_BYTES} bytes "
            f"(an 8-byte header and check bytes), got {workload.value_size_min_bytes}",
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
    cluster = values.get("load.cluster")
    if "load.cluster_listen" in values and cluster is None:
        raise ConfigError(
            settings["load.cluster_listen"][1], "only used with a cluster (--cluster)"
        )
    # On a cluster the load workers are the Dask workers: all of them unless capped.
    local_default = connections if cluster is not None else default_processes
    processes = min(values.get("load.processes", local_default), connections)
    return LoadConfig(
        connections=connections,
        processes=processes,
        duration_ns=duration,
        requests=requests,
        cluster=cluster,
        **_as_given(values, _LOAD_AS_GIVEN),
    )


def load_config(path: str | None, overrides: Settings, default_processes: int) -> RunConfig:
    """Read the scenario file (if any), apply CLI overrides, validate, freeze."""
    settings = read_toml(path) if path else {}
    settings.update({k: v for k, v in overrides.items() if v[0] is not None})
    return build_config(settings, default_processes)
