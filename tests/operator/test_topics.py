"""Topic resources against kmock's emulator with a real ZooKeeper and real brokers."""

from __future__ import annotations

import subprocess
from typing import Any

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.local_cluster import zookeeper_client

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


def test_topic_resource_creates_a_rack_aware_topic_kcat_can_use(kube, run_operator, cluster):
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
    finally:
        zk.stop()
        zk.close()
