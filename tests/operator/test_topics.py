"""Topic resources against kmock's emulator with a real ZooKeeper and real brokers."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.placement import assign_replicas
from gregor_broker.devtools.local_cluster import BrokerProcess, zookeeper_client
from gregor_broker.devtools.zookeeper_server import ZooKeeperServer

API = "gregor.dev/v1alpha1"


def topic(name: str, partitions: int = 3, replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Topic",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"partitions": partitions, "replicas": replicas, **spec},
    }


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for entry in (obj.get("status") or {}).get("conditions") or ():
        if entry["type"] == kind:
            return entry
    return {}


def test_topic_resource_lifecycle_create_grow_refuse_shrink_config_delete(
    kube, run_operator, cluster
):
    run_operator(zookeeper_connect=cluster.zookeeper_connect)
    client = kube.client
    client.create(topic("orders", 3, 3, config={"retention.ms": 3600000}), "topics")
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        assignment = client.wait_for("the topic in ZooKeeper", lambda: admin.get_topic("orders"))
        racks = {b.broker_id: b.rack for b in cluster.brokers}
        for replicas in assignment.partitions.values():
            assert sorted(racks[r] for r in replicas) == ["a", "b", "c"]
        assert admin.get_topic_config("orders") == {"retention.ms": "3600000"}

        def ready():
            obj = client.get(API, "topics", "default", "orders")
            return obj if condition(obj, "Ready").get("status") == "True" else None

        obj = client.wait_for("Ready", ready)
        status = obj["status"]
        assert status["topicId"] == assignment.topic_id
        assert len(status["partitions"]) == 3
        for row in status["partitions"]:
            assert row["leader"] in row["replicas"]
            assert sorted(row["isr"]) == sorted(row["replicas"])
        assert status["underReplicatedPartitions"] == 0

        bootstrap = cluster.bootstrap_servers
        messages = "\n".join(f"message-{i}" for i in range(30)) + "\n"
        subprocess.run(
            ["kcat", "-b", bootstrap, "-P", "-t", "orders", "-X", "acks=all"],
            input=messages.encode(), check=True, timeout=30,
        )  # fmt: skip
        consumed = subprocess.run(
            ["kcat", "-b", bootstrap, "-C", "-t", "orders", "-o", "beginning", "-e", "-q"],
            capture_output=True, check=True, timeout=30,
        )  # fmt: skip
        assert sorted(consumed.stdout.decode().split()) == sorted(messages.split())

        # Partitions grow: 3 -> 6 adds partitions 3..5, rack-aware too.
        client.patch(API, "topics", "default", "orders", {"spec": {"partitions": 6}})
        grown = client.wait_for(
            "6 partitions",
            lambda: (t := admin.get_topic("orders")) and len(t.partitions) == 6 and t,
        )
        assert {p: grown.partitions[p] for p in range(3)} == assignment.partitions
        for replicas in grown.partitions.values():
            assert sorted(racks[r] for r in replicas) == ["a", "b", "c"]
        client.wait_for(
            "status with 6 partitions",
            lambda: (
                len(client.get(API, "topics", "default", "orders")["status"]["partitions"]) == 6
            ),
        )

        # Shrinking is refused with a readable condition; nothing changes.
        client.patch(API, "topics", "default", "orders", {"spec": {"partitions": 3}})
        refused = client.wait_for(
            "the Error condition",
            lambda: (
                condition(client.get(API, "topics", "default", "orders"), "Error").get("status")
                == "True"
                and client.get(API, "topics", "default", "orders")
            ),
        )
        message = condition(refused, "Error")["message"]
        assert "default/orders" in message and "cannot shrink partitions from 6 to 3" in message
        assert "Set spec.partitions back to 6" in message
        assert len(admin.get_topic("orders").partitions) == 6
        client.patch(API, "topics", "default", "orders", {"spec": {"partitions": 6}})

        # A config change reaches /config/topics/<t> and the brokers (DescribeConfigs).
        client.patch(
            API, "topics", "default", "orders", {"spec": {"config": {"retention.ms": 7200000}}}
        )
        client.wait_for(
            "the new config in ZooKeeper",
            lambda: admin.get_topic_config("orders") == {"retention.ms": "7200000"},
        )
        broker_admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "orders")

        def described() -> bool:
            configs = broker_admin.describe_configs([resource])[resource].result(10)
            return configs["retention.ms"].value == "7200000"

        client.wait_for("the broker to see retention.ms=7200000", described)
        # The change handled for good: a retry of its handler (after a ZooKeeper timeout
        # on a loaded machine) writes the spec's configs again, over a change made
        # outside the resource meanwhile.
        client.wait_for(
            "observedGeneration to reach the config change's generation",
            lambda: (
                (topic := client.get(API, "topics", "default", "orders"))
                .get("status", {})
                .get("observedGeneration")
                == topic["metadata"]["generation"]
            ),
        )

        # A config changed outside the resource (kafka-configs through the brokers) is
        # reported as drift, not silently kept or reverted.
        outside = ConfigResource(
            ConfigResource.Type.TOPIC,
            "orders",
            incremental_configs=[
                ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        broker_admin.incremental_alter_configs([outside])[outside].result(30)
        client.wait_for(
            "status.drift",
            lambda: (
                (client.get(API, "topics", "default", "orders").get("status") or {}).get("drift")
                == {"segment.ms": "3600000"}
            ),
            show=lambda: (
                client.get(API, "topics", "default", "orders").get("status"),
                admin.get_topic_config("orders"),
            ),
        )
        # Undone outside, the drift goes from the status (kopf's status patch merges maps,
        # so a key no longer drifting must be deleted, not left out).
        undone = ConfigResource(
            ConfigResource.Type.TOPIC,
            "orders",
            incremental_configs=[
                ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE)
            ],
        )
        broker_admin.incremental_alter_configs([undone])[undone].result(30)
        client.wait_for(
            "status.drift to empty",
            lambda: (
                (client.get(API, "topics", "default", "orders").get("status") or {}).get("drift")
                == {}
            ),
            show=lambda: (
                client.get(API, "topics", "default", "orders").get("status"),
                admin.get_topic_config("orders"),
            ),
        )

        # An invalid config is refused with the key named.
        client.patch(
            API, "topics", "default", "orders", {"spec": {"config": {"retention.ms": "soon"}}}
        )
        refused = client.wait_for(
            "the Error condition for a bad config",
            lambda: (
                "retention.ms"
                in condition(client.get(API, "topics", "default", "orders"), "Error").get(
                    "message", ""
                )
                and client.get(API, "topics", "default", "orders")
            ),
        )
        assert admin.get_topic_config("orders") == {"retention.ms": "7200000"}

        # Deleting the resource deletes the topic (through /admin/delete_topics).
        client.delete(API, "topics", "default", "orders")
        client.wait_for(
            "the topic to be deleted", lambda: admin.get_topic("orders") is None, timeout=60
        )
        client.wait_for(
            "the resource to go",
            lambda: client.find(API, "topics", "default", "orders") is None,
        )
    finally:
        zk.stop()
        zk.close()


def events(client: Any, reason: str) -> list[dict[str, Any]]:
    return [e for e in client.list("v1", "events", "default") if e.get("reason") == reason]


def test_existing_topic_is_adopted_and_two_resources_naming_one_topic_conflict(
    kube, run_operator, cluster
):
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        racks = {b.broker_id: b.rack for b in cluster.brokers}
        legacy = admin.create_topic("legacy", assign_replicas(racks, 2, 3), {})
        admin.create_topic("wide", assign_replicas(racks, 5, 3), {})
        run_operator(zookeeper_connect=cluster.zookeeper_connect)
        client = kube.client
        # Compatible: same replication factor, spec has at least as many partitions.
        client.create(topic("legacy", 4, 3), "topics")
        adopted = client.wait_for(
            "adoption",
            lambda: (t := admin.get_topic("legacy")) and len(t.partitions) == 4 and t,
        )
        assert adopted.topic_id == legacy.topic_id
        assert {p: adopted.partitions[p] for p in range(2)} == legacy.partitions
        client.wait_for("an Adopted event", lambda: [
            e for e in events(client, "PlanApplied") if "adopted" in e.get("message", "")
        ])  # fmt: skip
        # Not compatible: the topic has more partitions than the spec asks for.
        client.create(topic("wide-resource", 3, 3, topicName="wide"), "topics")
        wide = client.wait_for(
            "the adoption refusal",
            lambda: condition(client.get(API, "topics", "default", "wide-resource"), "Error").get(
                "message"
            ),
        )
        assert "already exists with 5 partitions" in wide and "at least 5" in wide
        assert len(admin.get_topic("wide").partitions) == 5

        # Two resources naming one Kafka topic: the younger is refused, both report it.
        client.create(topic("shared-a", 2, 3, topicName="shared"), "topics")
        client.wait_for("shared", lambda: admin.get_topic("shared"))
        client.create(topic("shared-b", 2, 3, topicName="shared"), "topics")
        message_b = client.wait_for(
            "the conflict on shared-b",
            lambda: condition(client.get(API, "topics", "default", "shared-b"), "Error").get(
                "message"
            ),
        )
        assert "already managed by Topic default/shared-a" in message_b
        message_a = client.wait_for(
            "the conflict on shared-a",
            lambda: condition(client.get(API, "topics", "default", "shared-a"), "Error").get(
                "message"
            ),
        )
        assert "also named by default/shared-b" in message_a
        # Deleting the younger resource leaves the topic alone.
        client.delete(API, "topics", "default", "shared-b")
        client.wait_for(
            "shared-b to go", lambda: client.find(API, "topics", "default", "shared-b") is None
        )
        assert admin.get_topic("shared") is not None
        assert admin.topics_marked_for_deletion() == []
    finally:
        zk.stop()
        zk.close()


def test_deleting_a_topic_completes_when_zookeeper_is_gone(kube, run_operator, tmp_path):
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper")
    zookeeper.start()
    broker = BrokerProcess(1, tmp_path / "broker", zookeeper.connect_string, rack="a")
    try:
        broker.start()
        broker.wait_registered(90)  # a new interpreter: 10-20 s of imports under CI load
        run_operator(
            zookeeper_connect=zookeeper.connect_string, finalizer_retries=3, zookeeper_timeout=2.0
        )
        client = kube.client
        client.create(topic("doomed", 1, 1), "topics")
        client.wait_for(
            "Ready",
            lambda: (
                condition(client.get(API, "topics", "default", "doomed"), "Ready").get("status")
                == "True"
            ),
        )
        broker.kill()
        zookeeper.stop()
        started = time.monotonic()
        client.delete(API, "topics", "default", "doomed")
        client.wait_for(
            "the finalizer to be released",
            lambda: client.find(API, "topics", "default", "doomed") is None,
            timeout=60,
        )
        elapsed = time.monotonic() - started
        released = client.wait_for(
            "the FinalizerReleased event", lambda: events(client, "FinalizerReleased")
        )
        assert "gregor topics delete doomed" in released[0]["message"]
        # Three attempts, each a 2 s connect timeout plus 0.5 s between: bounded, not stuck.
        assert elapsed < 30, elapsed
    finally:
        broker.stop()
        zookeeper.stop()


def test_deleting_topics_while_their_status_refresh_runs_is_prompt(kube, run_operator, cluster):
    """A Topic deleted while its status timer is mid-run is released within seconds.

    kopf keeps the finalizer until the timer has exited; a timer caught running in its
    thread was looked at again only after kopf's default 60 s polling. A status refresh
    every 20 ms keeps the timers running nearly all the time, so most deletions land mid-run.
    """
    run_operator(zookeeper_connect=cluster.zookeeper_connect, status_interval=0.02)
    client = kube.client
    names = [f"brief-{i}" for i in range(6)]
    for name in names:
        client.create(topic(name, 1, 1), "topics")
    for name in names:
        client.wait_for(
            f"{name} Ready",
            lambda name=name: (
                condition(client.get(API, "topics", "default", name), "Ready").get("status")
                == "True"
            ),
            timeout=60,
        )
    started = time.monotonic()
    for name in names:
        client.delete(API, "topics", "default", name)
    for name in names:
        client.wait_for(
            f"{name} to go",
            lambda name=name: client.find(API, "topics", "default", name) is None,
            timeout=90,
        )
    elapsed = time.monotonic() - started
    assert elapsed < 30, f"deleting {len(names)} topics took {elapsed:.1f} s"
