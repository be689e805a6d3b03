"""Offset commits obey min.insync.replicas, like every acks=all write.

Kafka's group coordinator appends commits with ``offsets.commit.required.acks=-1``: with
fewer in-sync replicas of the group's ``__consumer_offsets`` partition than
``min.insync.replicas``, a commit fails (the client retries elsewhere) instead of being
acknowledged by the leader alone, a commit the next leader would not have. The chaos
campaign (seed 101) saw committed offsets go back after exactly that: a leader left alone
in the ISR acknowledged commits, then lost its leadership.
"""

from __future__ import annotations

import json
import threading

import confluent_kafka
from kio.schema.errors import ErrorCode

from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import create_topic, wait_for
from .coordinator_writes import TOPIC, commit
from .group_helpers import committed_offsets
from .raw_requests import RawClient

GROUP = "auditors"


def _commit(bootstrap: str, offset: int, outcome: list[object]) -> None:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[confluent_kafka.TopicPartition(TOPIC, 0, offset)], asynchronous=False
        )
        outcome.append("committed")
    except confluent_kafka.KafkaException as error:
        outcome.append(error.args[0].name())
    finally:
        consumer.close()


def test_a_commit_is_refused_while_the_offsets_partition_is_under_min_insync(
    cluster_factory,
) -> None:
    cluster = cluster_factory(
        **{
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "1",
            "zookeeper.session.timeout.ms": "4000",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, TOPIC, partitions=1, replication_factor=3)
    first: list[object] = []
    _commit(bootstrap, 5, first)
    assert first == ["committed"]

    zk = zookeeper_client(cluster.zookeeper_connect)
    try:

        def offsets_state():
            data, _ = zk.get("/brokers/topics/__consumer_offsets/partitions/0/state")
            return json.loads(data)

        coordinator = offsets_state()["leader"]
        for broker in cluster.brokers:
            if broker.broker_id != coordinator:
                broker.kill()
        assert wait_for(lambda: offsets_state()["isr"] == [coordinator], 30), offsets_state()
    finally:
        zk.stop()
        zk.close()

    # Kafka maps NOT_ENOUGH_REPLICAS of the coordinator's append to
    # COORDINATOR_NOT_AVAILABLE (GroupMetadataManager.storeOffsets): the client retries.
    with RawClient(cluster.broker(coordinator).bootstrap) as client:
        assert commit(client, GROUP, {0: 7}) is ErrorCode.coordinator_not_available

    second: list[object] = []
    committer = threading.Thread(
        target=_commit, args=(cluster.broker(coordinator).bootstrap, 9, second), daemon=True
    )
    committer.start()
    committer.join(20)
    # Refused (or still retrying after 20 s): never acknowledged by the leader alone.
    assert second != ["committed"], "a commit was acknowledged by one in-sync replica"
    assert committed_offsets(cluster.broker(coordinator).bootstrap, GROUP, TOPIC, 1) == {0: 5}
