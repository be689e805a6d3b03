"""The controller can die at any time: its successor resumes its work.

Also a rolling restart: each broker in turn gets SIGTERM (controlled shutdown hands its
leaderships over first) and comes back, while a producer writes with acks=all; no write
fails for lack of a leader and none is lost.
"""

from __future__ import annotations

import json
import time

import confluent_kafka
import confluent_kafka.admin

from gregor_broker.cli.main import main as gregor
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import create_topic, wait_for
from .durability import NumberedProducer, lost_messages


def test_a_new_controller_finishes_a_reassignment_in_flight(cluster_factory, tmp_path) -> None:
    cluster = cluster_factory(brokers=4, racks=None, **{"zookeeper.session.timeout.ms": "4000"})
    bootstrap = cluster.bootstrap_servers
    client = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(client)
    try:
        controller_id = admin.get_controller().broker_id
        others = [b.broker_id for b in cluster.brokers if b.broker_id != controller_id]
        source, target = [others[0], others[1]], [others[1], others[2]]
        confluent_admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        topic = confluent_kafka.admin.NewTopic("resumed", 1, replica_assignment=[source])
        confluent_admin.create_topics([topic])["resumed"].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for _ in range(2000):
            producer.produce("resumed", b"r" * 1000)
        assert producer.flush(60) == 0
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [{"topic": "resumed", "partition": 0, "replicas": target}],
                }
            )
        )
        zk = ["--zookeeper", cluster.zookeeper_connect]
        # 2 MB at 400 kB/s: the move takes about 5 s, long enough to kill the controller.
        assert (
            gregor(["reassign", "execute", *zk, "--plan", str(plan), "--throttle", "400000"]) == 0
        )
        time.sleep(1)
        assert admin.get_topic("resumed").adding_replicas  # still in flight
        cluster.broker(controller_id).kill()
        assert wait_for(
            lambda: (c := admin.get_controller()) is not None and c.broker_id != controller_id, 30
        )

        def moved() -> bool:
            assignment = admin.get_topic("resumed")
            return (
                tuple(assignment.partitions[0]) == tuple(target)
                and not assignment.adding_replicas
                and not assignment.removing_replicas
            )

        assert wait_for(moved, 60), admin.get_topic("resumed")
        assert gregor(["reassign", "verify", *zk, "--plan", str(plan)]) == 0
    finally:
        client.stop()


def test_a_rolling_restart_keeps_every_partition_writable(cluster_factory) -> None:
    # Controlled shutdown does not wait for session expiry: a long session timeout keeps
    # a CPU-starved broker on a busy CI machine from being expired by mistake.
    cluster = cluster_factory(**{"zookeeper.session.timeout.ms": "15000"})
    bootstrap = cluster.bootstrap_servers
    create_topic(
        bootstrap,
        "rolling",
        partitions=6,
        replication_factor=3,
        config={"min.insync.replicas": "2"},
    )
    with NumberedProducer(
        bootstrap, "rolling", prefix="m", pause_every=1, message_timeout_ms=60000
    ) as producer:
        for broker in cluster.brokers:
            assert producer.wait_for_progress(300, 30)
            broker.stop()  # SIGTERM: controlled shutdown
            broker.start()
            broker.wait_registered(30)
            assert wait_for(lambda: _all_isrs_full(bootstrap), 60)
        assert producer.wait_for_progress(300, 30)
    lost = lost_messages(producer.acknowledged, bootstrap, "rolling")
    print(f"acked={producer.acked()} errors={producer.failures} lost={len(lost)}")
    assert producer.errors == []
    assert lost == []


def _all_isrs_full(bootstrap: str) -> bool:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = admin.list_topics("rolling", timeout=10).topics["rolling"]
    return all(len(p.isrs) == 3 for p in topic.partitions.values())
