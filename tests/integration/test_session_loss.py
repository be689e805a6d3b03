"""A leader that loses its ZooKeeper session cannot commit writes as a second leader.

SIGSTOP freezes the partition leader longer than its session timeout; the controller
elects another leader. When the old leader wakes up it still believes, for a moment,
that it leads. Writes it takes then must never be acknowledged with acks=all (its
followers have moved on, and its ISR changes are fenced by the znode version), and
every acknowledged write of the whole run must be in the final log.
"""

from __future__ import annotations

import signal
import threading
import time

import confluent_kafka
import confluent_kafka.admin

from .broker_helpers import create_topic, wait_for

TOPIC = "fenced"


def _leader(bootstrap: str) -> int:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].leader


class AckLog:
    def __init__(self) -> None:
        self.acknowledged: dict[bytes, int] = {}
        self.failed = 0
        self.lock = threading.Lock()

    def __call__(self, error, message) -> None:
        with self.lock:
            if error is None:
                self.acknowledged[message.value()] = message.offset()
            else:
                self.failed += 1


def test_a_frozen_leader_is_fenced_when_it_wakes(cluster_factory) -> None:
    cluster = cluster_factory(**{"zookeeper.session.timeout.ms": "3000"})
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, TOPIC, replication_factor=3, config={"min.insync.replicas": "2"})
    main_log = AckLog()
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
         "message.timeout.ms": 30000, "topic.metadata.refresh.interval.ms": 1000}
    )
    stop = threading.Event()

    def produce() -> None:
        number = 0
        while not stop.is_set():
            try:
                producer.produce(TOPIC, f"main-{number:08d}".encode(), on_delivery=main_log)
                number += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
            time.sleep(0.0005)

    writer = threading.Thread(target=produce)
    writer.start()
    stale_log = AckLog()
    try:
        assert wait_for(lambda: len(main_log.acknowledged) > 1000, 30)
        old_leader_id = _leader(bootstrap)
        old_leader = cluster.broker(old_leader_id)
        old_leader.signal(signal.SIGSTOP)
        others = ",".join(b.bootstrap for b in cluster.brokers if b is not old_leader)
        assert wait_for(lambda: _leader(others) not in (old_leader_id, -1), 30)
        # A producer that only knows the frozen leader, writing the moment it wakes.
        stale = confluent_kafka.Producer(
            {"bootstrap.servers": old_leader.bootstrap, "acks": "all",
             "message.timeout.ms": 8000, "topic.metadata.refresh.interval.ms": 100000}
        )
        old_leader.signal(signal.SIGCONT)
        for number in range(200):
            stale.produce(TOPIC, f"stale-{number:04d}".encode(), on_delivery=stale_log)
        stale.flush(20)
        before = len(main_log.acknowledged)
        assert wait_for(lambda: len(main_log.acknowledged) > before + 1000, 30)
    finally:
        stop.set()
        writer.join()
        producer.flush(30)

    acknowledged = {**main_log.acknowledged, **stale_log.acknowledged}
    end = max(acknowledged.values()) + 1
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         "fetch.queue.backoff.ms": 1}
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    served: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    while (not served or max(served) < end - 1) and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.5):
            if message.error() is None:
                served[message.offset()] = message.value()
    consumer.close()
    lost = [v for v, offset in acknowledged.items() if served.get(offset) != v]
    print(
        f"main acked={len(main_log.acknowledged)} stale acked={len(stale_log.acknowledged)} "
        f"stale failed={stale_log.failed} lost={len(lost)}"
    )
    assert lost == []
