"""``kvbench run redis+cluster://``: a real 3-master cluster, counts checked against each
node's own INFO commandstats, and slots moved before and during the run, on both drivers
(the compiled pumps hand their redirects to the same router as the Python driver's)."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kvbench.engine.fastpath import PURE_PYTHON_ENV
from kvbench.engine.redirect import MAX_REDIRECTS
from kvbench.workload.keys import build_key_table
from kvbench.workload.slots import key_slot
from tests.support import fake_servers, redis_cluster, servers
from tests.support.cli import all_phase_counts, read_json, read_until, run_kvbench, start_kvbench
from tests.support.redis_cluster import Cluster, Node

pytestmark = pytest.mark.integration

COMMANDS = ("get", "set", "del", "incr", "incrby", "mget")

# Each driver's environment, and the name a run records it by.
DRIVERS = {
    "compiled": ({}, "compiled loop"),
    "python": ({PURE_PYTHON_ENV: "1"}, f"python ({PURE_PYTHON_ENV} is set)"),
}
by_driver = pytest.mark.parametrize("driver", list(DRIVERS))


def calls(node: Node) -> Counter[str]:
    """``calls`` and ``rejected_calls`` of the load's commands in the node's commandstats."""
    counts: Counter[str] = Counter()
    for name, value in node.info("commandstats").items():
        command = name.removeprefix("cmdstat_")
        if command in COMMANDS:
            fields = dict(part.split("=") for part in value.split(","))
            counts["calls"] += int(fields["calls"])
            counts["rejected"] += int(fields["rejected_calls"])
    return counts


def deltas(before: list[Counter[str]], cluster: Cluster) -> list[Counter[str]]:
    return [calls(node) - old for node, old in zip(cluster.nodes, before, strict=True)]


def await_refusal(
    node: Node, proc: subprocess.Popen[str], before: int | None = None, timeout_s: float = 10.0
) -> None:
    """Wait until ``node`` refuses one more of the load's requests (a redirect) than
    ``before`` (None: than now), while the run still runs."""
    if before is None:
        before = calls(node)["rejected"]
    deadline = time.monotonic() + timeout_s
    while calls(node)["rejected"] == before:
        assert proc.poll() is None, "the run ended before the slot's key was asked for"
        assert time.monotonic() < deadline, f"no redirect from {node.address} in {timeout_s} s"
        time.sleep(0.01)


def node_rows(doc: dict[str, Any], node: Node) -> dict[str, dict[str, Any]]:
    """The run's reconciliation rows of one node: ``calls`` and ``redirected``."""
    rows = {r["name"]: r for r in doc["server"]["reconciliation"]}
    found = {"calls": rows[node.address]}
    if f"{node.address} redirected" in rows:
        found["redirected"] = rows[f"{node.address} redirected"]
    return found


def hot_slot(keys: int, prefix: str = "kvbench:") -> tuple[int, int]:
    """The slot holding the most of the run's keys, and how many it holds."""
    slots = Counter(key_slot(k) for k in build_key_table(prefix, keys))
    return slots.most_common(1)[0]


def run(cluster: Cluster, out: Path, *args: str, driver: str = "compiled") -> dict[str, Any]:
    env, name = DRIVERS[driver]
    result = run_kvbench(
        "run", f"redis+cluster://{cluster.seed}", "--json", str(out), "--no-save", *args,
        env=env,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    doc = read_json(out)
    assert doc["environment"]["driver"] == name
    return doc


@by_driver
def test_keys_go_to_their_slots_master_and_each_nodes_counts_reconcile(
    tmp_path: Path, driver: str
) -> None:
    with redis_cluster.redis_cluster(3) as cluster:
        before = [calls(node) for node in cluster.nodes]
        doc = run(
            cluster, tmp_path / "run.json",
            "--preload", "--keys", "2000", "--ratio", "1:3", "--duration", "1s",
            "-c", "6", "--processes", "2", driver=driver,
        )  # fmt: skip
        served = deltas(before, cluster)
        stored = [int(node.call("DBSIZE")) for node in cluster.nodes]
    slots = [key_slot(k) for k in build_key_table("kvbench:", 2000)]
    assert stored == [sum(a <= s <= b for s in slots) for a, b in cluster.ranges]
    # No node refused a request: every key went to the master serving its slot.
    assert [d["rejected"] for d in served] == [0, 0, 0]
    assert doc["cluster"]["moved"] == doc["cluster"]["ask"] == 0
    assert doc["ops"]["get"]["hit_ratio"] == 1.0
    assert [t["url"] for t in doc["targets"]] == [
        f"redis+cluster://{n.address}" for n in cluster.nodes
    ]
    for node, delta in zip(cluster.nodes, served, strict=True):
        row = node_rows(doc, node)["calls"]
        assert row["client"] == row["server"] == delta["calls"] > 0
    assert sum(d["calls"] for d in served) == all_phase_counts(doc, "get") + all_phase_counts(
        doc, "set"
    )
    shares = [s["completed"] for s in doc["servers"]]
    assert sum(shares) == doc["totals"]["completed"] and min(shares) > 0
    assert {s["placement"] for s in doc["servers"]} == {"slots"}
    assert all(r["matches"] for r in doc["server"]["reconciliation"])


# Open loop: a request sent on keeps its intended time (latency from it) and its service
# time from its first send, and still completes where it was sent. (A long --max-lag: a
# loaded test machine falls behind the schedule, and a dropped request is an error.)
@by_driver
@pytest.mark.parametrize(
    "loop", [(), ("--rate", "3000", "--max-lag", "30s")], ids=["closed", "open"]
)
def test_a_slot_moved_mid_run_is_followed_with_ask_and_moved_and_no_errors(
    tmp_path: Path, loop: tuple[str, ...], driver: str
) -> None:
    moved_mid_run(tmp_path, driver, DRIVERS[driver][1], *loop)


def test_an_rmw_whose_slot_moves_is_sent_on_whole_and_each_master_reconciles(
    tmp_path: Path,
) -> None:
    """A read-modify-write is two commands of one key, answered as one op (on the Python
    driver, which runs it on a cluster): both halves go on together, each after ASKING
    for an ASK, and each master's count of the calls it executed is the client's, two
    per rmw (was: every master's row a MISMATCH, the client counting one per rmw; a
    redirected rmw ended the worker: no Op numbers an rmw)."""
    doc = moved_mid_run(
        tmp_path, "compiled", "python (an rmw on a Redis Cluster)", "--ratio", "rmw=1"
    )
    assert doc["ops"]["rmw"]["outcomes"].get("hit", 0) > 0


def moved_mid_run(tmp_path: Path, driver: str, recorded: str, *flags: str) -> dict[str, Any]:
    """A run (``flags``) on ``driver`` while one slot moves, a key at a time (ASK), then
    whole (MOVED); the run's figures held against each master's own counters. Its
    document."""
    out = tmp_path / "run.json"
    slot, held = hot_slot(300)  # 300 keys: each of them asked about 60 times a second
    with redis_cluster.redis_cluster(3) as cluster:
        source = cluster.owner(slot)
        target = next(n for n in cluster.nodes if n is not source)
        before = [calls(node) for node in cluster.nodes]
        proc = start_kvbench(
            "run", f"redis+cluster://{cluster.seed}", "--preload", "--keys", "300",
            "--duration", "4s", "-c", "6", "--processes", "2",
            "--json", str(out), "--no-save", *flags, env=DRIVERS[driver][0],
        )  # fmt: skip
        lines = read_until(proc, "ops/s")  # the first interval: the load is on
        # Live resharding as redis-cli does it, a key at a time, so that requests meet the
        # slot while its keys are on both sides (ASK), then MOVED. Each step waits until
        # the source has refused a request of the load (its own count), not for a fixed
        # time: the slot holds one key, and a busy machine may not ask for it in 0.5 s.
        cluster.begin_migration(slot, source, target)
        while cluster.move_keys(slot, source, target, batch=1):
            await_refusal(source, proc)  # an ASK
        # Counted before the slot is given away: the first MOVED may come at once, and
        # the client then asks the new master only (a late ASK may be counted too; the
        # MOVED follows, and the document's counts below show it).
        before_moved = calls(source)["rejected"]
        cluster.end_migration(slot, source, target)
        await_refusal(source, proc, before_moved)  # a MOVED
        stdout, stderr = proc.communicate(timeout=60)
        served = deltas(before, cluster)
        on_target = int(target.call("CLUSTER", "COUNTKEYSINSLOT", slot))
        on_source = int(source.call("CLUSTER", "COUNTKEYSINSLOT", slot))
    assert proc.returncode == 0, stdout + stderr
    doc = read_json(out)
    assert doc["environment"]["driver"] == recorded
    everything = doc["cluster"]["all_phases"]
    assert everything["ask"] > 0 and everything["moved"] > 0
    assert doc["totals"]["errors"] == 0 and doc["status"] == "ok"
    assert (on_source, on_target) == (0, held)
    # Each node's own counters: what it executed, and what it refused with a redirect.
    for node, delta in zip(cluster.nodes, served, strict=True):
        rows = node_rows(doc, node)
        assert rows["calls"]["client"] == rows["calls"]["server"] == delta["calls"]
        redirected = rows.get("redirected", {"client": 0, "server": 0})
        assert redirected["client"] == redirected["server"] == delta["rejected"]
    # One refusal per redirect; an rmw's pair is one redirect, of one refusal or two.
    refused, redirects = served[cluster.nodes.index(source)]["rejected"], sum(everything.values())
    pairs = "rmw" in " ".join(flags)
    assert redirects <= refused <= 2 * redirects if pairs else refused == redirects
    # The target refused nothing: ASKING went before every command sent on to it (each of
    # an rmw's two: else its set comes back MOVED, and the pair's get runs twice).
    assert served[cluster.nodes.index(target)]["rejected"] == 0
    assert all(r["matches"] for r in doc["server"]["reconciliation"])
    window = doc["cluster"]
    assert sum(r.get("redirects", {}).get("ask", 0) for r in doc["intervals"]) == window["ask"]
    assert sum(r.get("redirects", {}).get("moved", 0) for r in doc["intervals"]) == window["moved"]
    assert window["map_refreshes"] >= 1  # a MOVED asks for the whole map
    text = "".join(lines) + stdout
    assert "redirects: MOVED" in text and " redirects (as many as " in text
    assert " moved " in text or " ask " in text  # in the live line of the seconds it moved
    return doc


@by_driver
def test_a_run_that_starts_while_a_slot_is_migrating_ends(tmp_path: Path, driver: str) -> None:
    # The preload's SETs meet ASKs: its last requests may be guests on another
    # connection, and the phase must still end (it waited forever once).
    slot, held = hot_slot(100)
    with redis_cluster.redis_cluster(3) as cluster:
        source = cluster.owner(slot)
        target = next(n for n in cluster.nodes if n is not source)
        cluster.begin_migration(slot, source, target)
        doc = run(
            cluster, tmp_path / "run.json",
            "--preload", "--keys", "100", "--duration", "1s", "-c", "6", "--processes", "2",
            driver=driver,
        )  # fmt: skip
        on_target = int(target.call("CLUSTER", "COUNTKEYSINSLOT", slot))
    assert doc["cluster"]["all_phases"]["ask"] >= held  # the slot's keys were stored there
    assert doc["cluster"]["all_phases"]["moved"] == 0
    assert on_target == held
    assert doc["totals"]["errors"] == 0


@by_driver
def test_mget_needs_keys_of_one_hash_tag(tmp_path: Path, driver: str) -> None:
    refused = run_kvbench("run", "redis+cluster://127.0.0.1:1", "--ratio", "get=1,mget=1")
    assert refused.code == 2 and "one hash slot" in refused.stderr
    with redis_cluster.redis_cluster(3) as cluster:
        doc = run(
            cluster, tmp_path / "run.json",
            "--key-prefix", "{bench}:", "--ratio", "get=1,mget=1,set=1", "--keys", "50",
            "--duration", "1s", "-c", "6", "--processes", "2", driver=driver,
        )  # fmt: skip
        owner = cluster.owner(key_slot(b"bench"))
    assert doc["ops"]["mget"]["count"] > 0 and doc["totals"]["errors"] == 0
    shares = {s["url"]: s["completed"] for s in doc["servers"]}
    # Every key is in one slot: one master serves them all, the others stay idle.
    assert shares.pop(f"redis+cluster://{owner.address}") == doc["totals"]["completed"]
    assert set(shares.values()) == {0}
    assert all(r["matches"] for r in doc["server"]["reconciliation"])


def test_a_master_over_its_connection_limit_is_the_one_named(tmp_path: Path) -> None:
    """The second master takes 20 clients (CONFIG SET maxclients), the run asks 30 of
    each: the run fails naming that master and what it refused, not the seed's limit
    (was: 'the server refused 14 ... (its limit: maxclients 10000)', the seed's), and
    every refusal is that master's."""
    out = tmp_path / "run.json"
    with redis_cluster.redis_cluster(3) as cluster:
        capped = cluster.nodes[1]
        capped.call("CONFIG", "SET", "maxclients", "20")
        result = run_kvbench(
            "run", f"redis+cluster://{cluster.seed}", "--duration", "1s", "-c", "90",
            "--processes", "1", "--no-save", "--json", str(out),
        )  # fmt: skip
    assert result.code == 1 and "Traceback" not in result.stderr, result.stderr
    doc = read_json(out)
    connections = doc["connections"]
    refused = connections["connect_resets"] + connections["connect_resets_before"]
    assert refused >= 10 and connections["live_min"] <= 80
    [status] = [line for line in result.stdout.splitlines() if line.startswith("status:")]
    said = f"redis+cluster://{capped.address} refused {refused:,} right after accepting them"
    assert said in status and "maxclients 10000" not in status, status
    [verdict] = [v for v in doc["verdicts"] if v["id"] == "connections.live"]
    assert said in verdict["message"]


def test_set_then_get_is_refused_in_one_line() -> None:
    # It ran before and a worker died (exit 4): a master held fewer keys than connections.
    refused = run_kvbench(
        "run", "redis+cluster://127.0.0.1:1", "-c", "6", "--ratio", "set-then-get",
        "--key-prefix", "{t}:", "--keys", "100", "--requests", "2000",
    )  # fmt: skip
    assert refused.code == 2 and "Traceback" not in refused.stderr
    assert "--ratio" in refused.stderr and "set-then-get" in refused.stderr


def test_a_seed_that_is_no_cluster_node_is_one_line() -> None:
    with servers.redis() as plain:
        result = run_kvbench("run", f"redis+cluster://{plain.address}", "--duration", "1s")
    assert result.code == 3
    assert "cluster support disabled" in result.stderr and "Traceback" not in result.stderr


def run_redirected(
    tmp_path: Path, driver: str, requests: int, to_port: int | None = None
) -> dict[str, Any]:
    """``requests`` requests to a fake node that answers each with a MOVED (to itself, or
    to 127.0.0.1:``to_port``); the run fails (exit 1) and its document is returned."""
    out = tmp_path / "run.json"
    env, name = DRIVERS[driver]
    with fake_servers.redirecting(to_port) as port:
        result = run_kvbench(
            "run", f"redis+cluster://127.0.0.1:{port}", "--requests", str(requests), "-c", "1",
            "--json", str(out), "--no-save", env=env,
        )  # fmt: skip
    assert result.code == 1 and "Traceback" not in result.stderr
    doc = read_json(out)
    assert doc["environment"]["driver"] == name
    return doc


@by_driver
def test_a_redirect_loop_ends_each_request_as_an_error(tmp_path: Path, driver: str) -> None:
    doc = run_redirected(tmp_path, driver, 20)  # MOVED to itself, forever
    assert doc["totals"]["errors"] == doc["totals"]["ops"] == 20
    assert all(op["outcomes"] == {"error_reply": op["count"]} for op in doc["ops"].values())
    assert doc["cluster"]["moved"] == 20 * (MAX_REDIRECTS + 1)
    assert "redirected 17 times" in " ".join(doc["errors"])


@by_driver
def test_a_redirect_to_a_node_the_run_does_not_know_is_an_error(
    tmp_path: Path, driver: str
) -> None:
    elsewhere = servers.free_port()
    doc = run_redirected(tmp_path, driver, 10, to_port=elsewhere)
    assert doc["totals"]["errors"] == 10
    assert f"127.0.0.1:{elsewhere}: a node this run did not find at its start" in " ".join(
        doc["errors"]
    )


def test_a_tls_cluster(certificate: tuple[Path, Path], tmp_path: Path) -> None:
    cert, _ = certificate
    with redis_cluster.redis_cluster(3, tls=certificate) as cluster:
        tls_ports = [node.server.extra["tls_port"] for node in cluster.nodes]
        before = [calls(node) for node in cluster.nodes]
        result = run_kvbench(
            "run", f"rediss+cluster://127.0.0.1:{tls_ports[1]}?ca={cert}",
            "--preload", "--keys", "300", "--duration", "1s", "-c", "3", "--processes", "1",
            "--json", str(tmp_path / "run.json"), "--no-save",
        )  # fmt: skip
        served = deltas(before, cluster)
    assert result.code == 0, result.stderr
    doc = read_json(tmp_path / "run.json")
    # CLUSTER SHARDS over TLS names each master's TLS port, and the run used those.
    assert [t["url"] for t in doc["targets"]] == [
        f"rediss+cluster://127.0.0.1:{port}?ca={cert}" for port in tls_ports
    ]
    assert doc["totals"]["errors"] == 0 and doc["cluster"]["moved"] == 0
    rows = {r["name"]: r for r in doc["server"]["reconciliation"]}
    for port, delta in zip(tls_ports, served, strict=True):
        assert rows[f"127.0.0.1:{port}"]["client"] == delta["calls"] > 0
