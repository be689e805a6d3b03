"""The controller can die at any time: its successor resumes its work.

Also a rolling restart: each broker in turn gets SIGTERM (controlled shutdown hands its
leaderships over first) and comes back, while a producer writes with acks=all; no write
fails for lack of a leader and none is lost.
"""

from __future__ import annotations

import json
import threading
import time

import confluent_kafka
import confluent_kafka.admin

from gregor_broker.cli.main import main as gregor
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.local_cluster import zookeeper_client

from .broker_helpers import create_topic, wait_for


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
    cluster = cluster_factory(**{"zookeeper.session.timeout.ms": "4000"})
    bootstrap = cluster.bootstrap_servers
    create_topic(
        bootstrap,
        "rolling",
        partitions=6,
        replication_factor=3,
        config={"min.insync.replicas": "2"},
    )
    acknowledged: dict[bytes, tuple[int, int]] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def delivered(error, message) -> None:
        with lock:
            if error is None:
                acknowledged[message.value()] = (message.partition(), message.offset())
            else:
                errors.append(str(error))

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 30000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    stop = threading.Event()

    def produce() -> None:
        number = 0
        while not stop.is_set():
            try:
                producer.produce("rolling", f"m-{number:08d}".encode(), on_delivery=delivered)
                number += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
            time.sleep(0.0005)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        for broker in cluster.brokers:
            before = len(acknowledged)
            assert wait_for(lambda b=before: len(acknowledged) > b + 300, 30)
            broker.stop()  # SIGTERM: controlled shutdown
            broker.start()
            broker.wait_registered(30)
            assert wait_for(lambda: _all_isrs_full(bootstrap), 60)
        before = len(acknowledged)
        assert wait_for(lambda: len(acknowledged) > before + 300, 30)
    finally:
        stop.set()
        writer.join()
        producer.flush(30)
    assert errors == []
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition("rolling", p, 0) for p in range(6)])
    served: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 60
    while len(served) < len(acknowledged) and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.5):
            if message.error() is None:
                served[(message.partition(), message.offset())] = message.value()
    consumer.close()
    lost = [v for v, where in acknowledged.items() if served.get(where) != v]
    print(f"acked={len(acknowledged)} errors={len(errors)} lost={len(lost)}")
    assert lost == []


def _all_isrs_full(bootstrap: str) -> bool:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = admin.list_topics("rolling", timeout=10).topics["rolling"]
    return all(len(p.isrs) == 3 for p in topic.partitions.values())
