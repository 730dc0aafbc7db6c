"""The classic experiments as presets (DESIGN.md §1): settings, not code.

A preset names the command shape it needs (a run in steps, a sweep, a comparison at each
level, a queue run) and the settings it applies, keyed by config path like a scenario
file. Flags given on the command line override a preset's settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvbench.errors import ConfigError

# fb-etc's own request rate: one over the model's mean gap, sigma / (1 - xi) = 16.0292 /
# 0.845029 = 18.97 us (workload/models.py).
FB_ETC_RATE = "52718"


@dataclass(frozen=True, slots=True)
class Step:
    """One measurement of a preset run, with the settings that differ for it."""

    label: str
    settings: dict[str, Any]
    # Read exactly the keys the step before wrote (each worker its own, as far as the
    # slowest got), and under --verify accept only values written while it ran.
    reads_previous: bool = False


@dataclass(frozen=True, slots=True)
class Preset:
    """A classic experiment.

    Attributes:
        name: what ``--preset`` takes.
        title: one line.
        original: what the published benchmark did, and what it got wrong.
        measures: what kvbench measures instead.
        shape: ``steps`` (runs in order), ``sweep``, ``compare-sweep`` (a comparison at
            every level) or ``queue``.
        settings: config path -> value, applied before the command line's flags.
        steps: for ``steps``: the runs, in order.
        axis, levels: for sweeps: the swept option and its levels (``64:2048:64``).
        scheme: rewrite a memcached target's scheme to this one (the protocol it used).
        targets: how many targets the preset takes (at least, with ``more_targets``).
        more_targets: it takes ``targets`` or more (several memcached servers).
        unit_rates: the live lines give the interval's ops, the run's so far, and the
            rate per second, minute and hour, as the original's reports did.
        requests_per_round: (least, per connection): a sweep's rounds end after
            max(least, per connection x the level's connections) requests, as the
            original's did, unless the command line gives a duration or a request count.
        figures: ``ycsb``: each run's figures are printed and written as YCSB reports
            them too (report/ycsb.py), beside kvbench's; None: kvbench's only.
    """

    name: str
    title: str
    original: str
    measures: str
    shape: str
    settings: dict[str, Any] = field(default_factory=dict)
    steps: tuple[Step, ...] = ()
    axis: str | None = None
    levels: str | None = None
    scheme: str | None = None
    targets: int = 1
    more_targets: bool = False
    requests_per_round: tuple[int, int] | None = None
    unit_rates: bool = False
    figures: str | None = None

    def round_requests(self, connections: int) -> int | None:
        """Requests per round at ``connections`` (None: the preset runs by time)."""
        if self.requests_per_round is None:
            return None
        least, per_connection = self.requests_per_round
        return max(least, per_connection * connections)


# YCSB's core workloads (github.com/brianfrankcooper/YCSB workloads/workloada ...): every
# one reads records of 10 fields x 100 bytes (fieldcount, fieldlength: a 1,000-byte value
# here); recordcount is the records loaded before the run (--keys, preloaded),
# operationcount the requests of the run (-n). Their files say 1,000 of each; these say
# 100,000 (override both).
YCSB_RECORDS = 100_000
YCSB_OPERATIONS = 100_000
YCSB_ORIGINAL = (
    "YCSB's core workload {name} (workloads/workload{letter}): {what}; recordcount records "
    "loaded, then operationcount operations by closed-loop client threads, reported as "
    "[OVERALL] RunTime and Throughput and per operation its count, average, min, max, "
    "95th and 99th percentile latency (us) and return codes."
)
YCSB_MEASURES = (
    "the same mix on kvbench's connections: the records preloaded (--keys is "
    "recordcount), then -n operations (operationcount), {how}; kvbench's summary and "
    "checks, then YCSB's figures computed from the same window ([OVERALL], [READ], "
    '[UPDATE] ...), in the JSON too ("ycsb"). Latencies come from merged histograms; '
    "the server's counters are reconciled with the client's."
)


def _ycsb(letter: str, what: str, how: str, ratio: str, pattern: str = "zipf:0.99") -> Preset:
    """A YCSB core workload as a one-step preset."""
    name = f"ycsb-{letter}"
    return Preset(
        name=name,
        title=f"YCSB workload {letter.upper()}: {what}",
        original=YCSB_ORIGINAL.format(name=letter.upper(), letter=letter, what=what),
        measures=YCSB_MEASURES.format(how=how),
        shape="steps",
        figures="ycsb",
        settings={
            "workload.keys": YCSB_RECORDS,
            "workload.preload": True,
            "workload.value_size": 1000,
            "workload.key_pattern": pattern,
            "workload.ratio": ratio,
            "load.requests": YCSB_OPERATIONS,
        },
        steps=(Step("run", {}),),
    )


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="memcached-storm",
            title="memcached set/get storm: binary protocol, 128 workers, set-only then get-only",
            original=(
                "128 concurrent workers over the binary protocol, keys a random float plus a "
                "counter, values the current time in ms (8 bytes); set-only, then get-only; a "
                "line every second with the ops so far and the running average. Nothing "
                "separated client limits from server limits: '4 client machines reach "
                "500k/s' was found by hand."
            ),
            measures=(
                "the same load: every live line and CSV row has the interval's rate, the ops "
                "so far and the running average (ops so far / elapsed), each phase ends with "
                "its total, duration, average and errors; the get phase reads exactly the "
                "keys the set phase wrote (sequential per worker), and --verify checks every "
                "value is an 8-byte time from the set phase. Percentiles, client CPU, "
                "event-loop lag and the server's own CPU and counters say whether the client "
                "or the server was the limit (verdicts); --cluster spreads the load."
            ),
            shape="steps",
            scheme="memcached+binary",
            settings={
                "load.connections": 128,
                "workload.key_template": "float-counter",
                "workload.key_pattern": "sequential",
                "workload.value_kind": "timestamp",
                "workload.value_size": 8,
                "load.interval": "1s",
                "load.duration": "10s",
            },
            steps=(
                Step("set-only", {"workload.ratio": "1:0"}),
                Step("get-only", {"workload.ratio": "0:1"}, reads_previous=True),
            ),
        ),
        Preset(
            name="put-get-batches",
            title="per-client put/get batches: text protocol, 1..10 clients, ~1 KB values",
            original=(
                "1..10 threads, each with its own client connected to two memcached servers "
                "(client-side hashing), doing R = 1000 sets of test_key0..test_key999 (~1 KB "
                "values), then R gets of the same keys; throughput computed from summed "
                "per-thread times instead of wall-clock."
            ),
            measures=(
                "the same batches, exactly: at level N, N clients, each with a connection "
                "to every server and one request at a time, each doing its R sets then its R "
                "gets (a barrier per client); every get is checked against the value set; each batch timed "
                "from its first request sent to its last reply received across all clients, "
                "throughput = replies / that wall-clock (the original's formula beside it), "
                "each server's share, and the servers' cmd_set / get_hits deltas (N x R "
                "each). Keys placed by ketama, or --placement modula-crc32 as "
                "python-memcached did."
            ),
            shape="batches",
            axis="connections",
            levels="1:10:1",
            scheme="memcached",
            more_targets=True,
            settings={
                "workload.key_prefix": "test_key",
                "workload.keys": 1000,
                "workload.value_size": 1024,
            },
        ),
        Preset(
            name="gateway-vs-native",
            title="HTTP gateway (nginx memc) vs direct memcached, concurrency 64..2048",
            original=(
                "PHP through nginx memc against PHP straight to memcached, concurrency "
                "64..2048 step 64, 5 rounds per level averaged, each request a set of a "
                "96-char random key to a 400-char random value then a get of it, failed "
                "requests counted, the gateway as a % of native; rounds not interleaved, no "
                "variance."
            ),
            measures=(
                "the same set-then-get pairs (every get checked to return exactly the value "
                "set; a miss is an error) against both, rounds of max(5000, 20 x "
                "connections) requests interleaved A B A B; per level and target every "
                "round's ops/s, mean, min, max and failed requests; the first target as a % "
                "of the second from the printed means, and a 95% CI from paired rounds."
            ),
            shape="compare-sweep",
            axis="connections",
            levels="64:2048:64",
            targets=2,
            requests_per_round=(5000, 20),
            settings={
                "workload.key_template": "random",
                "workload.key_size": 96,
                "workload.value_size": 400,
                "workload.ratio": "set-then-get",
                "workload.verify": True,
                "load.rounds": 5,
            },
        ),
        Preset(
            name="single-key-readers",
            title="single-key readers: Redis, one 672-byte key, 2/4/6/8 readers",
            original=(
                "one 672-byte key read in a loop by 2, 4, 6 and 8 readers, 1 s warm-up "
                "excluded, a report every 15 s of per-second, per-minute and per-hour "
                "throughput: averages only, no latency."
            ),
            measures=(
                "a sweep over 2, 4, 6, 8 connections reading one preloaded 672-byte key, 1 s "
                "warm-up excluded (its op count printed); a line every 15 s with the time "
                "since the warm-up, the interval's and the cumulative ops and the rate per "
                "second, minute and hour; every reply checked to be the 672 bytes stored "
                "(bad ones counted per level); throughput with a CI and latency percentiles "
                "from merged histograms."
            ),
            shape="sweep",
            axis="connections",
            levels="2,4,6,8",
            unit_rates=True,
            settings={
                "workload.keys": 1,
                "workload.value_size": 672,
                "workload.preload": True,
                "workload.verify": True,
                "workload.ratio": "0:1",
                "load.warmup": "1s",
                "load.interval": "15s",
                "load.duration": "30s",
            },
        ),
        Preset(
            name="queue-producer-consumer",
            title="queue producer/consumer: 1,000,000 messages of 100 bytes, 2 producers",
            original=(
                "memcacheq: 1,000,000 messages of 100 bytes written by 2 producers; then "
                "drained by 2 consumers; then a mixed run with consumers starting after "
                "100,000 were produced; puts/s and gets/s per phase, with no check that no "
                "message was lost or duplicated."
            ),
            measures=(
                "the same three phases in one invocation (write with --consumers 0, drain "
                "with --producers 0 until the queue is empty, confirmed by a second empty "
                "read 1 s later, then mixed), each printing puts, puts/s, gets, gets/s and "
                "its duration; one delivery ledger across them (every message carries its "
                "producer, sequence number and send time: a message stored in the write "
                "and never read in the drain is lost), end-to-end latency, the backlog, "
                "the server's stats queue before and after each phase and, with "
                "--data-dir, the size of its data directory; a phase that lost or "
                "duplicated a message fails."
            ),
            shape="queue",
            settings={
                "producers": "2",
                "consumers": "2",
                "messages": "1000000",
                "message_size": "100",
                "pipeline": "16",
            },
            steps=(
                Step("write", {"consumers": "0"}),
                Step("drain", {"producers": "0"}),
                Step("mixed", {"consumers_start_after": "100000"}),
            ),
        ),
        Preset(
            name="fb-etc",
            title="Facebook ETC: key and value sizes and arrival gaps of Atikoglu et al. 2012",
            original=(
                "mutilate's recreation of Facebook's ETC pool (Atikoglu et al., SIGMETRICS "
                "2012): -K fb_key (GEV key sizes), -V fb_value (a discrete head of 0-14 "
                "byte values, then a generalized Pareto tail), -i fb_ia (generalized "
                "Pareto gaps scaled to --qps), keys uniform over --records, --update for "
                "the set share (ETC reads about 30 times as much as it writes); latency "
                "percentiles from the agents' samples."
            ),
            measures=(
                "the same three distributions (docs/presets.md: their parameters, and the "
                "clip bounds: keys to [prefix + digits, 250] bytes, values to 1,000,000; "
                "what was clipped is printed) at the model's own rate, 52,718/s (mean gap "
                "16.0292 / (1 - 0.154971) us), or --rate; the keys preloaded, then 1 set "
                "per 30 gets, open loop with intended-time latency, late and dropped sends "
                "counted; on the compiled driver."
            ),
            shape="steps",
            settings={
                "workload.keys": 100_000,
                "workload.preload": True,
                "workload.key_size": "fb-etc",
                "workload.value_size": "fb-etc",
                "workload.ratio": "1:30",
                "load.arrival": "fb-etc",
                "load.rate": FB_ETC_RATE,
                "load.duration": "10s",
            },
            steps=(Step("etc", {}),),
        ),
        _ycsb("a", "50% read, 50% update, zipfian", "gets and sets half and half", "get=50,set=50"),
        _ycsb("b", "95% read, 5% update, zipfian", "95 gets per 5 sets", "get=95,set=5"),
        _ycsb("c", "100% read, zipfian", "gets only", "get=1"),
        _ycsb(
            "d",
            "95% read, 5% insert, latest",
            "95 gets per 5 sets, every set inserting a new key and reads favouring the newest "
            "(key pattern latest)",
            "get=95,set=5",
            "latest:0.99",
        ),
        _ycsb(
            "f",
            "50% read, 50% read-modify-write, zipfian",
            "gets and read-modify-writes half and half, each rmw a get then a set of one key "
            "timed as one op",
            "get=50,rmw=50",
        ),
    )
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``.

    Raises:
        ConfigError: no such preset (the message lists them).
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            "--preset", f"no preset {name!r} (see kvbench presets: {', '.join(PRESETS)})"
        ) from None


def with_scheme(url: str, preset: Preset) -> str:
    """A memcached target's URL with the preset's scheme (memcached:// -> memcached+binary://)."""
    if preset.scheme is None or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    if scheme.startswith("memcached"):
        unix = "+unix" if "unix" in scheme.lower().split("+") else ""  # a socket stays one
        return f"{preset.scheme}{unix}://{rest}"
    return url
