"""The replication promise under faults: nothing acknowledged with acks=all is lost.

Seed 000 ("可用性和耐久性保证"): a committed message survives while one in-sync replica
lives. Three brokers on racks a, b, c hold a topic with replication factor 3 and
min.insync.replicas=2; a producer writes numbered messages with acks=all while the
partition leader is killed with SIGKILL again and again (and restarted). Afterwards,
every message the producer saw acknowledged must be in the log at the offset it was
acknowledged with.
"""

from __future__ import annotations

import threading
import time

import confluent_kafka
import confluent_kafka.admin

from .broker_helpers import create_topic, wait_for

TOPIC = "durable"


def _leader(bootstrap: str, topic: str, partition: int = 0) -> int:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


def _read_everything(bootstrap: str, topic: str, end: int) -> dict[int, bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         "fetch.queue.backoff.ms": 1}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    served: dict[int, bytes] = {}
    deadline = time.monotonic() + 90
    try:
        while (not served or max(served) < end - 1) and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    served[message.offset()] = message.value()
    finally:
        consumer.close()
    return served


def test_no_acknowledged_write_is_lost_while_leaders_are_killed(cluster_factory) -> None:
    cluster = cluster_factory(
        **{"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "5000"}
    )
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, TOPIC, partitions=1, replication_factor=3,
                 config={"min.insync.replicas": "2"})

    acknowledged: dict[bytes, int] = {}
    failures = 0
    sent = 0
    lock = threading.Lock()

    def delivered(error, message) -> None:
        nonlocal failures
        with lock:
            if error is None:
                acknowledged[message.value()] = message.offset()
            else:
                failures += 1

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
         "message.timeout.ms": 20000, "retry.backoff.ms": 100,
         "topic.metadata.refresh.interval.ms": 1000}
    )
    stop = threading.Event()

    def produce() -> None:
        nonlocal sent
        while not stop.is_set():
            try:
                producer.produce(TOPIC, f"message-{sent:09d}".encode(), on_delivery=delivered)
                sent += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
            if sent % 50 == 0:
                time.sleep(0.001)

    writer = threading.Thread(target=produce)
    writer.start()
    kills = 0
    try:
        for _round in range(3):
            before = len(acknowledged)
            assert wait_for(lambda b=before: len(acknowledged) > b + 500, 60), (
                f"no progress after {kills} kills: acked={len(acknowledged)}"
            )
            leader_id = _leader(bootstrap, TOPIC)
            victim = cluster.broker(leader_id)
            victim.kill()
            kills += 1
            # A new leader is elected from the ISR once the old one's session is gone.
            assert wait_for(lambda v=leader_id: _leader(bootstrap, TOPIC) not in (v, -1), 30)
            victim.start()
            victim.wait_registered(30)
        before = len(acknowledged)
        assert wait_for(lambda: len(acknowledged) > before + 500, 60)
    finally:
        stop.set()
        writer.join()
        producer.flush(60)

    end = max(acknowledged.values()) + 1
    served = _read_everything(bootstrap, TOPIC, end)
    lost = sorted(v for v, offset in acknowledged.items() if served.get(offset) != v)
    print(
        f"kills={kills} sent={sent} acknowledged={len(acknowledged)} failed={failures} "
        f"read={len(served)} lost={len(lost)}"
    )
    assert kills == 3
    assert lost == [], f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}"
