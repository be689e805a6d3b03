"""Failover time with thousands of partitions: how long until every partition leads again.

Starts ZooKeeper and a 3-broker Gregor cluster, creates topics with 2,000 partitions in
all (replication factor 3), kills the broker leading about a third of them with SIGKILL,
and measures, by watching the partition state znodes in ZooKeeper:

- detection: from the kill until ZooKeeper expires the broker's session (its
  ``/brokers/ids/<id>`` vanishes) -- set by ``zookeeper.session.timeout.ms``;
- election: from then until every partition has a live leader again.

Run: ``.venv/bin/python -m bench.failover [--partitions 2000] [--repeat 3]``. Writes
``bench/results/failover-<timestamp>.json`` and prints a table with medians. The harness
(``python -m bench``, group ``failover``) calls ``run_once`` too and puts the figures in
its own results.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.local_cluster import LocalCluster, zookeeper_client

RESULTS = Path(__file__).parent / "results"
SESSION_TIMEOUT_MS = 6000
PARTITIONS_PER_TOPIC = 100


def _leaders(admin: ZkAdmin, topics: list[str]) -> dict[tuple[str, int], int]:
    leaders = {}
    for topic in topics:
        for child in admin.client.get_children(zk_paths.topic_partitions_path(topic)):
            data, _ = admin.client.get(zk_paths.partition_state_path(topic, int(child)))
            leaders[(topic, int(child))] = PartitionState.from_json(data).leader
    return leaders


class FailoverTimedOut(RuntimeError):
    pass


def run_once(
    partitions: int,
    work_dir: Path,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    timeout: float = 300,
) -> dict[str, float]:
    """One cluster, one kill. Every wait gives up after ``timeout`` seconds
    (``FailoverTimedOut``); the cluster is stopped whatever happens."""
    setup_started = time.monotonic()
    cluster = LocalCluster(
        work_dir,
        3,
        racks="a,b,c",
        properties={
            "zookeeper.session.timeout.ms": str(session_timeout_ms),
            "auto.leader.rebalance.enable": "false",
        },
    )
    cluster.start(120)
    client = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(client)
    try:
        from gregor_broker.cluster.placement import assign_replicas

        sizes = [PARTITIONS_PER_TOPIC] * (partitions // PARTITIONS_PER_TOPIC)
        if partitions % PARTITIONS_PER_TOPIC:
            sizes.append(partitions % PARTITIONS_PER_TOPIC)
        topics = [f"failover-{i}" for i in range(len(sizes))]
        brokers = {b.broker_id: b.rack for b in cluster.brokers}
        for topic, size in zip(topics, sizes, strict=True):
            plan = assign_replicas(brokers, size, 3)
            admin.create_topic(topic, {p: list(r) for p, r in plan.items()}, {})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                leaders = _leaders(admin, topics)
            except Exception:  # state znodes still being created
                leaders = {}
            if len(leaders) == partitions and all(v > 0 for v in leaders.values()):
                break
            time.sleep(0.5)
        else:
            raise FailoverTimedOut(
                f"{partitions} partitions did not all get leaders within {timeout:.0f} s"
            )
        counts: dict[int, int] = {}
        for leader in leaders.values():
            counts[leader] = counts.get(leader, 0) + 1
        victim_id = max(counts, key=counts.get)
        victim = cluster.broker(victim_id)
        setup_s = time.monotonic() - setup_started
        killed_at = time.monotonic()
        victim.kill()
        deadline = killed_at + timeout
        while client.exists(zk_paths.broker_path(victim_id)) is not None:
            if time.monotonic() > deadline:
                raise FailoverTimedOut(
                    f"broker {victim_id}'s session did not expire within {timeout:.0f} s"
                )
            time.sleep(0.01)
        expired_at = time.monotonic()
        live = {b.broker_id for b in cluster.brokers} - {victim_id}
        deadline = expired_at + timeout
        while True:
            leaders = _leaders(admin, topics)
            if all(leader in live for leader in leaders.values()):
                break
            if time.monotonic() > deadline:
                raise FailoverTimedOut(
                    f"partitions of broker {victim_id} had no live leader {timeout:.0f} s "
                    "after its session expired"
                )
            time.sleep(0.05)
        done_at = time.monotonic()
        return {
            "partitions": partitions,
            "session_timeout_ms": session_timeout_ms,
            "setup_s": setup_s,
            "led_by_victim": counts[victim_id],
            "detection_s": expired_at - killed_at,
            "election_s": done_at - expired_at,
            "total_s": done_at - killed_at,
        }
    finally:
        client.stop()
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for index in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="gregor-failover-") as work_dir:
            result = run_once(args.partitions, Path(work_dir))
        runs.append(result)
        print(f"run {index + 1}: {json.dumps(result)}", flush=True)
    summary = {
        key: {
            "median": statistics.median(r[key] for r in runs),
            "min": min(r[key] for r in runs),
            "max": max(r[key] for r in runs),
        }
        for key in ("detection_s", "election_s", "total_s")
    }
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out = RESULTS / f"failover-{stamp}.json"
    out.write_text(
        json.dumps(
            {"session_timeout_ms": SESSION_TIMEOUT_MS, "runs": runs, "summary": summary}, indent=2
        )
    )
    print(f"\n| {args.partitions} partitions, 3 brokers, RF 3 | median | min | max |")
    print("| --- | --- | --- | --- |")
    for key, label in (
        ("detection_s", "session expiry (detection)"),
        ("election_s", "all leaders re-elected after expiry"),
        ("total_s", "kill to every partition led"),
    ):
        s = summary[key]
        print(f"| {label} | {s['median']:.2f} s | {s['min']:.2f} s | {s['max']:.2f} s |")
    print(f"\nsaved {out}")


if __name__ == "__main__":
    main()
