"""GregorRebalance: the plan shows in status with the bytes it moves (the brokers'
DescribeLogDirs, checked against kafka-python's), nothing moves before approval, the
approved plan completes and clears its throttles; ``gregor-operator plan`` prints the same
plan; a stopped rebalance is a KIP-455 cancel (partitions back on their original replicas)
with progress in bytes until then."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
from kafka.admin import KafkaAdminClient
from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_operator.cli import main as operator_cli

API = "gregor.dev/v1alpha1"
THROTTLE = 100_000  # bytes/s of the stopped rebalance
FIRST_FETCH = 1048576  # replica.fetch.max.bytes: what one fetch may carry per partition
# Kafka's replication quota is a rate over replication.quota.window.num (11) samples of
# replication.quota.window.size.seconds (1): a leader under it may send a whole fetch, so
# up to one window's worth of the rate goes out ahead of the average.
QUOTA_WINDOW_S = 11


def test_rebalance_plan_waits_for_approval_then_balances(kube, run_operator, cluster, capsys):
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        # Six single-replica partitions, all on broker 1, with data.
        admin.create_topic("skewed", {p: [1] for p in range(6)}, {})
        fill(cluster.bootstrap_servers, "skewed", 6, 200)
        sizes = log_dir_sizes(cluster.bootstrap_servers, "skewed")
        assert all(size > 0 for size in sizes.values()), sizes
        before = dict(admin.get_topic("skewed").partitions)
        assert operator_cli(["plan", "--zookeeper-connect", cluster.zookeeper_connect,
                             "--mode", "full", "--json"]) == 0  # fmt: skip
        cli_plan = json.loads(capsys.readouterr().out)
        assert cli_plan["replicaMoves"] == 4
        moving = [(m["topic"], m["partition"]) for m in cli_plan["moves"]]
        assert cli_plan["bytesToMove"] == sum(sizes[k] for k in moving) > 0
        assert cli_plan["replicasPerBroker"] == {"1": 2, "2": 2, "3": 2}

        run_operator()
        client = kube.client
        create_cluster(client, cluster.zookeeper_connect)
        client.create(
            {"apiVersion": API, "kind": "GregorRebalance",
             "metadata": {"name": "balance", "namespace": "default"},
             "spec": {"cluster": "gregor", "mode": "full", "throttleBytesPerSecond": 1048576}},
            "gregorrebalances",
        )  # fmt: skip

        def status():
            return client.get(API, "gregorrebalances", "default", "balance").get("status") or {}

        pending = client.wait_for(
            "the plan", lambda: status().get("phase") == "PendingApproval" and status(), 120
        )
        assert pending["plan"]["replicaMoves"] == 4
        assert pending["plan"]["bytesToMove"] == cli_plan["bytesToMove"]
        assert pending["plan"]["replicasPerBroker"] == cli_plan["replicasPerBroker"]
        assert len(pending["plan"]["moves"]) == 4
        time.sleep(3)
        assert dict(admin.get_topic("skewed").partitions) == before  # nothing moved

        client.patch(API, "gregorrebalances", "default", "balance",
                     {"metadata": {"annotations": {"gregor.dev/approve": "true"}}})  # fmt: skip
        client.wait_for("completion", lambda: status().get("phase") == "Completed", 180)
        after = admin.get_topic("skewed").partitions
        counts = {b: sum(1 for r in after.values() if r == (b,)) for b in (1, 2, 3)}
        assert counts == {1: 2, 2: 2, 3: 2}
        progress = status()["progress"]
        assert (progress["partitionsMoved"], progress["partitionsTotal"]) == (4, 4)
        assert progress["bytesMoved"] == progress["bytesTotal"] == cli_plan["bytesToMove"]
        assert "leader.replication.throttled.replicas" not in admin.get_topic_config("skewed")
        assert admin.get_entity_config("brokers/1") == {}
    finally:
        zk.stop()
        zk.close()


def start_approved_rebalance(
    kube: Any,
    run_operator: Any,
    cluster: Any,
    admin: ZkAdmin,
    topic: str,
    name: str,
    throttle: int,
) -> Callable[[], dict[str, Any]]:
    """``topic`` with 3 partitions on broker 1 (about 3 MB each), the operator running and
    an approved full GregorRebalance ``name`` throttled to ``throttle`` B/s: its status."""
    admin.create_topic(topic, {p: [1] for p in range(3)}, {})
    fill(cluster.bootstrap_servers, topic, 3, 2000, 1500)
    run_operator()
    client = kube.client
    create_cluster(client, cluster.zookeeper_connect)
    client.create(
        {"apiVersion": API, "kind": "GregorRebalance",
         "metadata": {"name": name, "namespace": "default",
                      "annotations": {"gregor.dev/approve": "true"}},
         "spec": {"cluster": "gregor", "mode": "full", "throttleBytesPerSecond": throttle}},
        "gregorrebalances",
    )  # fmt: skip
    return lambda: client.get(API, "gregorrebalances", "default", name).get("status") or {}


def reassignment_started(client: Any, zk: Any) -> float:
    """When the moves started: the reassignment node's creation (ZooKeeper's clock, this
    machine's)."""
    node = client.wait_for(
        "the reassignment", lambda: zk.exists("/admin/reassign_partitions"), 120, 0.02
    )
    return node.ctime / 1000


def throttled_bound(moving: int, throttle: int, elapsed: float) -> float:
    """The most a throttled copy may have moved after ``elapsed`` s, as Kafka's quota
    bounds it: one fetch of each of the ``moving`` partitions, and 1.5 times the throttle
    over the time so far plus one quota window."""
    return moving * FIRST_FETCH + 1.5 * throttle * (elapsed + QUOTA_WINDOW_S)


def create_cluster(client: Any, zk_connect: str) -> None:
    """The GregorCluster the rebalances name (its brokers run outside Kubernetes here)."""
    client.create(
        {"apiVersion": API, "kind": "GregorCluster",
         "metadata": {"name": "gregor", "namespace": "default"},
         "spec": {"replicas": 3, "zookeeper": {"connect": zk_connect},
                  "rebalancing": {"preferredLeaderCheckIntervalSeconds": 0}}},
        "gregorclusters",
    )  # fmt: skip


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int, size: int = 1000):
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, b"x" * size, key=str(i).encode(), partition=partition)
        producer.poll(0)
    assert producer.flush(60) == 0


def log_dir_sizes(bootstrap: str, topic: str) -> dict[tuple[str, int], int]:
    """Partition sizes as kafka-python's DescribeLogDirs reads them (largest replica)."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found: dict[tuple[str, int], int] = {}
        for response in client.describe_log_dirs():
            for result in response["log_dirs"]:
                for entry in result["topics"]:
                    if entry["name"] != topic:
                        continue
                    for p in entry["partitions"]:
                        key = (topic, p["partition_index"])
                        found[key] = max(found.get(key, 0), p["partition_size"])
        return found
    finally:
        client.close()


def test_a_stopped_rebalance_goes_back_to_the_original_replicas(kube, run_operator, cluster):
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        # Two partitions move onto brokers 2 and 3 at 100 KB/s: about a minute in all.
        status = start_approved_rebalance(
            kube, run_operator, cluster, admin, "heavy", "slow", THROTTLE
        )
        before = dict(admin.get_topic("heavy").partitions)
        client = kube.client
        started = reassignment_started(client, zk)
        partial = client.wait_for(
            "2.5 MB moved",
            lambda: (
                (p := status().get("progress") or {}).get("bytesMoved", 0) > 2_500_000
                and p["bytesMoved"] < p["bytesTotal"]
                and status()
            ),
            120,
        )
        # The throttle holds, as Kafka's quota bounds it (the completed rebalance's test
        # below measures the rate over a whole copy): beyond one fetch per moving
        # partition, no more than 1.5 times the rate over the time so far plus one window.
        elapsed = time.time() - started
        moved = partial["progress"]["bytesMoved"]
        print(f"moved {moved} B in {elapsed:.1f} s, throttle {THROTTLE} B/s")
        assert moved <= throttled_bound(2, THROTTLE, elapsed), (moved, elapsed)
        assert partial["phase"] == "Executing"
        moving = {k for k, r in admin.get_topic("heavy").adding_replicas.items() if r}
        assert moving, "nothing is moving"

        client.patch(API, "gregorrebalances", "default", "slow", {"spec": {"stop": True}})
        stopped = client.wait_for(
            "Stopped", lambda: status().get("phase") == "Stopped" and status(), 120
        )
        after = admin.get_topic("heavy")
        for partition in moving:
            assert tuple(after.partitions[partition]) == tuple(before[partition]), after
        assert not any(after.adding_replicas.values()) and not any(after.removing_replicas.values())
        assert admin.get_reassignment() is None
        assert sorted(stopped["cancelled"]) >= sorted(f"heavy-{p}" for p in moving)
        assert "leader.replication.throttled.replicas" not in admin.get_topic_config("heavy")
        events = [e["message"] for e in client.list("v1", "events", "default")]
        assert any("back on their original replicas" in m for m in events), events
        print(f"progress before the stop: {partial['progress']}; cancelled {stopped['cancelled']}")
    finally:
        zk.stop()
        zk.close()


PACED_THROTTLE = 100_000  # bytes/s of the completed rebalance


def bytes_on_disk(cluster: Any, topic: str, replicas: list[tuple[int, int]]) -> int:
    """Bytes of the log segments of the given (broker, partition) replicas, read from the
    brokers' log directories (not from any of Gregor's own accounts)."""
    total = 0
    for broker, partition in replicas:
        directory = cluster.broker(broker).log_dir / f"{topic}-{partition}"
        for segment in directory.glob("*.log"):
            with contextlib.suppress(FileNotFoundError):
                total += segment.stat().st_size
    return total


def test_a_completed_rebalance_is_throttled_while_it_runs_and_clears_its_throttles(
    kube, run_operator, cluster
):
    """kafka-reassign-partitions --throttle, then --verify: while the approved plan moves
    data, Kafka's throttle configs are in place (both rates on every broker involved, the
    leader and follower throttled-replica lists on the topic) and the copy runs no faster
    than the throttle allows (sampled from the new replicas' log segments on disk); once it
    completes, every one of those configs is gone."""
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        status = start_approved_rebalance(
            kube, run_operator, cluster, admin, "paced", "paced", PACED_THROTTLE
        )
        client = kube.client
        started = reassignment_started(client, zk)
        moves = client.wait_for("the plan in status", lambda: status().get("moves"), 30)
        current = {p: set(r) for _, p, r in moves["current"]}
        adding = [(b, p) for _, p, r in moves["target"] for b in r if b not in current[p]]
        assert len(adding) == 2, moves  # two partitions move off broker 1, one copy each
        brokers = sorted({b for _, _, r in moves["target"] + moves["current"] for b in r})
        samples: list[tuple[float, int]] = []
        throttles_seen: list[dict[str, Any]] = []
        while True:
            assert time.time() - started < 180, f"still moving after 180 s: {samples[-3:]}"
            try:  # a loaded ZooKeeper may drop the test's connection: sample again
                if zk.exists("/admin/reassign_partitions") is None:
                    break
                seen = {
                    "topic": admin.get_topic_config("paced"),
                    "brokers": {b: admin.get_entity_config(f"brokers/{b}") for b in brokers},
                }
            except (ConnectionLoss, SessionExpiredError):
                time.sleep(0.25)
                continue
            samples.append((time.time() - started, bytes_on_disk(cluster, "paced", adding)))
            throttles_seen.append(seen)
            time.sleep(0.25)
        finished = time.time() - started
        completed = client.wait_for(
            "Completed", lambda: status().get("phase") == "Completed" and status(), 60
        )
        total = completed["progress"]["bytesTotal"]
        moved_on_disk = bytes_on_disk(cluster, "paced", adding)
        print(
            f"moved {moved_on_disk} B (plan: {total} B) in {finished:.1f} s at a throttle of "
            f"{PACED_THROTTLE} B/s; {len(samples)} samples, last {samples[-3:]}"
        )
        assert len(samples) >= 10, samples

        # While it ran: Kafka's four throttle configs, as --throttle writes them.
        running = throttles_seen[len(throttles_seen) // 2]
        leader_side = {f"{p}:1" for _, p in adding}
        follower_side = {f"{p}:{b}" for b, p in adding}
        assert set(running["topic"]["leader.replication.throttled.replicas"].split(",")) == (
            leader_side
        ), running
        assert set(running["topic"]["follower.replication.throttled.replicas"].split(",")) == (
            follower_side
        ), running
        for broker in brokers:
            config = running["brokers"][broker]
            assert config.get("leader.replication.throttled.rate") == str(PACED_THROTTLE)
            assert config.get("follower.replication.throttled.rate") == str(PACED_THROTTLE)

        # The rate, as Kafka's quota bounds it: beyond one fetch of each moving partition,
        # no more than 1.5 times the throttle over the time so far plus one quota window,
        # at every sample; and the whole copy no sooner than that allows. Unthrottled, the
        # 6 MB would be across in a second or two, past either bound.
        for elapsed, moved in samples:
            assert moved <= throttled_bound(len(adding), PACED_THROTTLE, elapsed), (
                elapsed,
                moved,
                samples,
            )
        ahead = throttled_bound(len(adding), PACED_THROTTLE, 0)
        assert moved_on_disk >= total > ahead + 1_000_000, (moved_on_disk, total, ahead)
        assert finished >= (total - ahead) / (1.5 * PACED_THROTTLE), (finished, total)

        # Completed: every throttle config gone (--verify), on the topic and every broker.
        topic_config = admin.get_topic_config("paced")
        assert "leader.replication.throttled.replicas" not in topic_config, topic_config
        assert "follower.replication.throttled.replicas" not in topic_config, topic_config
        for broker in sorted(set(admin.list_brokers()) | admin.list_broker_config_entities()):
            config = admin.get_entity_config(f"brokers/{broker}")
            assert "leader.replication.throttled.rate" not in config, (broker, config)
            assert "follower.replication.throttled.rate" not in config, (broker, config)
        after = admin.get_topic("paced").partitions
        assert sorted(len(r) for r in after.values()) == [1, 1, 1]
        assert {r[0] for r in after.values()} == {1, 2, 3}, after
    finally:
        zk.stop()
        zk.close()


def test_an_approved_rebalance_survives_an_operator_restart(kube, run_operator, cluster):
    """The plan lives in the GregorRebalance's status: an operator stopped while the moves
    run (they go on without it) and started again picks the rebalance up where it was,
    reports it Completed and clears its throttles."""
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        status = start_approved_rebalance(
            kube, run_operator, cluster, admin, "resumed", "resumed", THROTTLE
        )
        client = kube.client

        partial = client.wait_for(
            "moves under way",
            lambda: (
                status().get("phase") == "Executing"
                and (p := status().get("progress") or {}).get("bytesMoved", 0) > 0
                and p["bytesMoved"] < p["bytesTotal"]
                and status()
            ),
            120,
        )
        run_operator.stop()
        in_flight = client.read("the reassignment", admin.get_reassignment)
        assert in_flight is not None, "the moves finished before the restart"
        assert status()["phase"] == "Executing"
        run_operator()
        done = client.wait_for(
            "Completed", lambda: status().get("phase") == "Completed" and status(), 180
        )
        print(f"progress before the restart {partial['progress']}, after {done['progress']}")
        assert done["progress"]["bytesMoved"] == done["progress"]["bytesTotal"] > 0
        assert done["plan"] == partial["plan"]  # the same plan, not a new one
        after = admin.get_topic("resumed").partitions
        assert {r[0] for r in after.values()} == {1, 2, 3}, after
        config = admin.get_topic_config("resumed")
        assert "leader.replication.throttled.replicas" not in config, config
        for broker in sorted(admin.list_brokers()):
            assert "leader.replication.throttled.rate" not in admin.get_entity_config(
                f"brokers/{broker}"
            )
        events = [e["message"] for e in client.list("v1", "events", "default")]
        assert any("moved 2 partitions" in m for m in events), events
    finally:
        zk.stop()
        zk.close()
