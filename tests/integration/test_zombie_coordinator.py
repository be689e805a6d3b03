"""A group coordinator that wakes after losing its ZooKeeper session never serves its
stale offsets.

The chaos campaign (seed 20261123) read committed offsets that went back: 4812 after a
commit of 5180 had been acknowledged, on every partition at once. The group's
coordinator had been SIGSTOPped past its session timeout; the controller made another
broker lead the group's ``__consumer_offsets`` partition, and that broker acknowledged
newer commits. When the old coordinator woke it answered the OffsetFetch waiting in its
socket from its cache before its watches told it that it no longer led. The broker now
answers for a group only while a recent ZooKeeper read confirmed its leadership (a lease
shorter than the session timeout); a woken zombie answers NOT_COORDINATOR and the client
finds the real coordinator.
"""

from __future__ import annotations

import json
import signal

import confluent_kafka
from kio.schema.errors import ErrorCode

from gregor_broker.cluster.local_cluster import zookeeper_client
from gregor_broker.protocol import entities

from .broker_helpers import create_topic, wait_for
from .raw_requests import RawClient, request

TOPIC, GROUP = "ledger", "auditors"
OFFSET_FETCH_V5 = 5


def _commit(bootstrap: str, offset: int) -> str:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[confluent_kafka.TopicPartition(TOPIC, 0, offset)], asynchronous=False
        )
        return "committed"
    except confluent_kafka.KafkaException as error:
        return error.args[0].name()
    finally:
        consumer.close()


def _offset_fetch():
    return request(
        9,
        OFFSET_FETCH_V5,
        group_id=GROUP,
        topics=[{"name": TOPIC, "partition_indexes": [0]}],
    )


def test_a_woken_zombie_coordinator_does_not_answer_with_stale_offsets(cluster_factory) -> None:
    cluster = cluster_factory(
        **{
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "1",
            "zookeeper.session.timeout.ms": "3000",
            "replica.lag.time.max.ms": "3000",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, TOPIC, partitions=1, replication_factor=3)
    assert _commit(bootstrap, 5) == "committed"

    zk = zookeeper_client(cluster.zookeeper_connect)
    try:

        def coordinator_now() -> int:
            data, _ = zk.get("/brokers/topics/__consumer_offsets/partitions/0/state")
            return json.loads(data)["leader"]

        old_id = coordinator_now()
        zombie = cluster.broker(old_id)
        others = ",".join(b.bootstrap for b in cluster.brokers if b is not zombie)
        with RawClient(zombie.bootstrap) as stale_reader:
            first = stale_reader.call(9, OFFSET_FETCH_V5, _offset_fetch())
            assert first.topics[0].partitions[0].committed_offset == 5
            zombie.signal(signal.SIGSTOP)
            try:
                assert wait_for(lambda: coordinator_now() not in (old_id, -1), 30)
                outcomes: list[str] = []

                def commit_elsewhere() -> bool:
                    outcomes.append(_commit(others, 9))
                    return outcomes[-1] == "committed"

                assert wait_for(commit_elsewhere, 60), outcomes
                # Queued in the frozen broker's socket: the first thing it reads on waking.
                correlation_id = stale_reader.send(
                    9, OFFSET_FETCH_V5, entities.encode(_offset_fetch())
                )
            finally:
                zombie.signal(signal.SIGCONT)
            answer = stale_reader.receive(9, OFFSET_FETCH_V5, correlation_id)
    finally:
        zk.stop()
        zk.close()

    offsets = [p.committed_offset for t in answer.topics for p in t.partitions]
    print(f"the woken coordinator answered {answer.error_code!r}, offsets {offsets}")
    assert offsets != [5], "the woken coordinator answered its stale cache: 5, after 9"
    assert answer.error_code is ErrorCode.not_coordinator or offsets == [9], (
        answer.error_code,
        offsets,
    )
    # The client that looks the coordinator up again reads the acknowledged commit.
    assert wait_for(lambda: _committed(bootstrap) == 9, 30)


def _committed(bootstrap: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        (found,) = consumer.committed([confluent_kafka.TopicPartition(TOPIC, 0)], timeout=10)
        return found.offset
    except confluent_kafka.KafkaException:
        return -1
    finally:
        consumer.close()
