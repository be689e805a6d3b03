"""Fetch from follower (KIP-392) with a real librdkafka consumer on three racks.

librdkafka's 0101 fetch_from_follower only warns when every byte still comes from the
leader; this test asserts it: with Kafka's ``RackAwareReplicaSelector`` the leader (rack a)
sends a consumer with ``client.rack=b`` to the replica in rack b, which serves every record,
and the leader sends none of them.
"""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from gregor_broker.devtools.zookeeper_server import free_port

from ..integration.broker_helpers import every_broker_knows_the_others, scrape, wait_for
from .expectations import unique_topic
from .test_confluent_kafka import TIMEOUT, Deliveries, producer

pytestmark = pytest.mark.timeout(180)

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def start_racked_brokers(broker_factory, **properties):
    """Brokers 1, 2, 3 on racks a, b, c, each with its metrics port."""
    brokers = {}
    for broker_id, rack in ((1, "a"), (2, "b"), (3, "c")):
        metrics_port = free_port()
        process = broker_factory(
            broker_id, rack=rack, **{"metrics.port": str(metrics_port), **properties}
        )
        brokers[broker_id] = (process, metrics_port)
    return brokers


def racked_topic(brokers, prefix: str) -> tuple[str, str]:
    """The brokers' bootstrap and a new one-partition topic led by broker 1 (rack a),
    followed by 2 (rack b) and 3 (rack c)."""
    bootstrap = ",".join(process.bootstrap for process, _ in brokers.values())
    # The assignment names all three: each broker must know the others first.
    assert every_broker_knows_the_others([process for process, _ in brokers.values()])
    topic = unique_topic(prefix)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])])
    futures[topic].result(TIMEOUT)
    return bootstrap, topic


def follower_served_bytes(metrics_port: int) -> float:
    return scrape(metrics_port).get("gregor_fetch_from_follower_bytes_total", 0.0)


def topic_bytes_out(metrics_port: int, topic: str) -> float:
    return scrape(metrics_port).get(f'gregor_topic_bytes_out_total{{topic="{topic}"}}', 0.0)


def consume_all(bootstrap: str, topic: str, count: int, rack: str) -> list[bytes]:
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("ff-group"),
            "client.rack": rack,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    values: list[bytes] = []
    try:
        reader.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])

        def read_more() -> bool:
            for message in reader.consume(100, timeout=0.5):
                if message.error() is None:
                    values.append(message.value())
            return len(values) >= count

        assert wait_for(read_more, TIMEOUT * 3), f"read {len(values)} of {count}"
    finally:
        reader.close()
    return values


def test_a_consumer_reads_from_the_replica_in_its_own_rack(broker_factory):
    brokers = start_racked_brokers(broker_factory, **{"replica.selector.class": RACK_AWARE})
    bootstrap, topic = racked_topic(brokers, "ff")
    values = [f"value-{i}".encode() for i in range(200)]
    client = producer(bootstrap, acks="all")
    deliveries = Deliveries()
    for value in values:
        client.produce(topic, value=value, partition=0, on_delivery=deliveries)
    assert client.flush(TIMEOUT) == 0 and deliveries.errors == []

    received = consume_all(bootstrap, topic, len(values), rack="b")

    assert received == values
    served = {broker_id: follower_served_bytes(port) for broker_id, (_, port) in brokers.items()}
    assert served[2] > 0, served
    assert served[1] == 0 and served[3] == 0, served
    assert topic_bytes_out(brokers[1][1], topic) == 0, "the leader sent the consumer records"


def test_without_a_selector_a_racked_consumer_reads_from_the_leader(broker_factory):
    brokers = start_racked_brokers(broker_factory)
    bootstrap, topic = racked_topic(brokers, "ff-leader")
    client = producer(bootstrap, acks="all")
    for i in range(20):
        client.produce(topic, value=str(i).encode(), partition=0)
    assert client.flush(TIMEOUT) == 0

    assert len(consume_all(bootstrap, topic, 20, rack="b")) == 20

    assert all(follower_served_bytes(port) == 0 for _, port in brokers.values())
    assert topic_bytes_out(brokers[1][1], topic) > 0


def test_a_consumer_waiting_at_a_follower_gets_a_record_once_the_follower_knows_it_committed(
    broker_factory,
):
    """A consumer parked at the follower with a long ``fetch.wait.max.ms`` (10 s): a new
    record reaches the follower before the leader's high watermark passes it, so the
    consumer can only be answered when a later fetch answer brings the higher high
    watermark and no records. That must wake it: without, it waited its whole 10 s."""
    brokers = start_racked_brokers(
        broker_factory,
        **{"replica.selector.class": RACK_AWARE, "replica.fetch.wait.max.ms": "200"},
    )
    bootstrap, topic = racked_topic(brokers, "ff-wait")
    client = producer(bootstrap, acks="all")
    client.produce(topic, value=b"first", partition=0)
    assert client.flush(TIMEOUT) == 0
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("ff-wait-group"),
            "client.rack": "b",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10_000,
        }
    )
    try:
        reader.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        first = reader.consume(1, timeout=TIMEOUT)
        assert [m.value() for m in first if m.error() is None] == [b"first"]
        served_before = follower_served_bytes(brokers[2][1])
        assert served_before > 0  # the follower in rack b serves this consumer
        time.sleep(1)  # the consumer's next fetch is parked at the follower
        latencies = []
        for value in (b"second", b"third", b"fourth"):
            sent = time.monotonic()
            client.produce(topic, value=value, partition=0)
            assert client.flush(TIMEOUT) == 0
            got = reader.consume(1, timeout=TIMEOUT)
            latencies.append(time.monotonic() - sent)
            assert [m.value() for m in got if m.error() is None] == [value]
            time.sleep(0.5)
        print("record to consumer at the follower, s:", [round(s, 3) for s in latencies])
        # Each within a few of the followers' 200 ms fetch waits, far below the 10 s.
        assert max(latencies) < 3.0, latencies
        assert follower_served_bytes(brokers[2][1]) > served_before
    finally:
        reader.close()
