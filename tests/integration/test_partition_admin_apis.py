"""Kafka's admin APIs for leaders and reassignments, driven by real clients.

kafka-python's AlterPartitionReassignments / ListPartitionReassignments and
confluent-kafka's ElectLeaders reach the controller through the brokers.
"""

from __future__ import annotations

import confluent_kafka
import confluent_kafka.admin
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import NoReassignmentInProgressError

from .broker_helpers import wait_for


def _partition(bootstrap: str, topic: str):
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[0]


def test_kafka_python_reassigns_and_lists_reassignments(cluster_factory) -> None:
    cluster = cluster_factory(brokers=3, racks=None)
    bootstrap = cluster.bootstrap_servers
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic("api-moves", 1, replica_assignment=[[1, 2]])
    admin.create_topics([topic])["api-moves"].result(30)
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = client.alter_partition_reassignments({TopicPartition("api-moves", 0): [2, 3]})
        assert result.get(TopicPartition("api-moves", 0)) is None
        assert wait_for(lambda: list(_partition(bootstrap, "api-moves").replicas) == [2, 3], 30)
        assert wait_for(lambda: not client.list_partition_reassignments(), 30)
        cancel = client.alter_partition_reassignments({TopicPartition("api-moves", 0): None})
        assert cancel[TopicPartition("api-moves", 0)] is NoReassignmentInProgressError
    finally:
        client.close()


def test_confluent_kafka_elects_preferred_leaders(cluster_factory) -> None:
    cluster = cluster_factory(brokers=2, racks=None, **{"auto.leader.rebalance.enable": "false"})
    bootstrap = cluster.bootstrap_servers
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic("api-elect", 1, replica_assignment=[[1, 2]])
    admin.create_topics([topic])["api-elect"].result(30)
    assert wait_for(lambda: sorted(_partition(bootstrap, "api-elect").isrs) == [1, 2], 30)
    cluster.broker(1).stop()
    cluster.broker(1).start()
    cluster.broker(1).wait_registered(30)
    assert wait_for(lambda: sorted(_partition(bootstrap, "api-elect").isrs) == [1, 2], 30)
    assert _partition(bootstrap, "api-elect").leader == 2
    future = admin.elect_leaders(
        confluent_kafka.ElectionType.PREFERRED,
        [confluent_kafka.TopicPartition("api-elect", 0)],
    )
    results = future.result(30)
    assert all(error is None for error in results.values()), results
    # Kafka answers once the controller has elected; brokers' metadata follows moments later
    # (a full run once read the old leader right after the answer).
    assert wait_for(lambda: _partition(bootstrap, "api-elect").leader == 1, 10)


def test_auto_leader_rebalance_returns_leadership_to_the_preferred_replica(
    cluster_factory,
) -> None:
    cluster = cluster_factory(
        brokers=2,
        racks=None,
        **{"auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "2"},
    )
    bootstrap = cluster.bootstrap_servers
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic("auto-balance", 1, replica_assignment=[[1, 2]])
    admin.create_topics([topic])["auto-balance"].result(30)
    assert wait_for(lambda: sorted(_partition(bootstrap, "auto-balance").isrs) == [1, 2], 30)
    cluster.broker(1).stop()
    assert wait_for(lambda: _partition(cluster.broker(2).bootstrap, "auto-balance").leader == 2, 30)
    cluster.broker(1).start()
    cluster.broker(1).wait_registered(30)
    # Broker 1 leads none of the partitions it is preferred for (100% > 10%): the
    # controller hands it back without anyone asking.
    assert wait_for(lambda: _partition(bootstrap, "auto-balance").leader == 1, 30)
