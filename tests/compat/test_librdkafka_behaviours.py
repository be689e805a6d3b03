"""Behaviours librdkafka's own integration tests expect of a Kafka broker.

Each test drives, through confluent-kafka (librdkafka 2.16), the same client calls as one of
librdkafka's tests (named in the test's docstring), and asserts what Apache Kafka answers.
They were found by running librdkafka's suite against Gregor; see ``FINDINGS.md`` here.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclOperation,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kazoo.client import KazooClient

from gregor_broker.cluster.models import EntityConfig
from gregor_broker.replication.client import BrokerClient

from .expectations import unique_topic
from .test_confluent_kafka import TIMEOUT, Deliveries, admin, consumer, create_topic, producer

pytestmark = pytest.mark.timeout(120)


def produce_values(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    client = producer(bootstrap)
    deliveries = Deliveries()
    for value in values:
        client.produce(topic, value=value, partition=partition, on_delivery=deliveries)
    assert client.flush(TIMEOUT) == 0
    assert deliveries.errors == []


def poll_values(client: Consumer, count: int, timeout: float = TIMEOUT) -> list[tuple[int, bytes]]:
    received: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(received) < count and time.monotonic() < deadline:
        message = client.poll(0.2)
        if message is None or message.error() is not None:
            continue
        received.append((message.offset(), message.value()))
    return received


def test_an_out_of_range_offset_is_reset_to_earliest(broker):
    """0034 offset_reset: OFFSET_OUT_OF_RANGE must reach librdkafka with an empty record
    set (Kafka's MemoryRecords.EMPTY); a null one made it drop the whole response and
    never apply ``auto.offset.reset``."""
    topic = unique_topic("rk-reset")
    create_topic(broker.bootstrap, topic, partitions=1)
    values = [f"v{i}".encode() for i in range(10)]
    produce_values(broker.bootstrap, topic, values)

    reader = consumer(broker.bootstrap, **{"auto.offset.reset": "earliest"})
    try:
        reader.assign([TopicPartition(topic, 0, 1000)])
        received = poll_values(reader, len(values))
    finally:
        reader.close()

    assert received == list(enumerate(values))


def test_an_out_of_range_offset_is_reset_to_latest(broker):
    """0034 offset_reset with ``latest``: the consumer moves to the log end and reads only
    what is produced after the reset, never the five records before it."""
    topic = unique_topic("rk-reset-latest")
    create_topic(broker.bootstrap, topic, partitions=1)
    produce_values(broker.bootstrap, topic, [b"old"] * 5)

    reader = consumer(broker.bootstrap, **{"auto.offset.reset": "latest"})
    received: list[tuple[int, bytes]] = []
    try:
        reader.assign([TopicPartition(topic, 0, 1000)])
        deadline = time.monotonic() + TIMEOUT
        # The reset lands at whatever the log end is then, so keep producing until the
        # consumer reads one: without a reset it reads nothing at all.
        while not received and time.monotonic() < deadline:
            produce_values(broker.bootstrap, topic, [b"new"])
            received = poll_values(reader, 1, timeout=1.0)
    finally:
        reader.close()

    assert received, "the consumer never reset its out-of-range offset"
    offset, value = received[0]
    assert value == b"new"
    assert offset >= 5


def test_metadata_for_a_missing_topic_is_unknown_when_the_client_forbids_creation(broker):
    """0109 auto_create_topics: the broker allows auto-creation, the consumer does not
    (``allow.auto.create.topics=false``, librdkafka's consumer default). Kafka answers
    UNKNOWN_TOPIC_OR_PARTITION and creates nothing; LEADER_NOT_AVAILABLE made librdkafka
    retry about 640 times a second."""
    topic = unique_topic("rk-missing")
    reader = consumer(broker.bootstrap, **{"allow.auto.create.topics": False})
    try:
        metadata = reader.list_topics(topic, timeout=TIMEOUT)
    finally:
        reader.close()

    assert metadata.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    time.sleep(1)
    assert topic not in admin(broker.bootstrap).list_topics(timeout=TIMEOUT).topics


def test_a_group_subscribed_to_a_missing_and_an_existing_topic_still_consumes(broker):
    """0109 auto_create_topics: a subscription naming a topic that does not exist (and may
    not be created) reports it and still joins the group for the topics that do."""
    existing = unique_topic("rk-exists")
    missing = unique_topic("rk-never")
    create_topic(broker.bootstrap, existing, partitions=1)
    produce_values(broker.bootstrap, existing, [b"hello"])
    errors: list[int] = []
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_topic("rk-group"),
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": lambda error: errors.append(error.code()),
        }
    )
    try:
        reader.subscribe([existing, missing])
        received = []
        deadline = time.monotonic() + 45
        while not received and time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(message.error().code())
                continue
            received.append(message.value())
    finally:
        reader.close()

    assert received == [b"hello"]
    assert KafkaError.UNKNOWN_TOPIC_OR_PART in errors, errors
    assert missing not in admin(broker.bootstrap).list_topics(timeout=TIMEOUT).topics


def test_offsets_for_times_on_a_missing_topic_fails(broker):
    """0054 offset_time: a lookup on a topic that does not exist fails with
    UNKNOWN_TOPIC_OR_PART instead of waiting for a leader that never comes."""
    topic = unique_topic("rk-times-missing")
    reader = consumer(broker.bootstrap, **{"allow.auto.create.topics": False})
    try:
        started = time.monotonic()
        with pytest.raises(KafkaException) as failure:
            reader.offsets_for_times([TopicPartition(topic, 0, int(time.time() * 1000))], 10)
        elapsed = time.monotonic() - started
    finally:
        reader.close()

    assert failure.value.args[0].code() in (
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
    ), failure.value
    assert elapsed < 10, f"the lookup waited {elapsed:.1f} s instead of failing"


def test_message_format_version_is_accepted_as_a_topic_config(broker):
    """0092 mixed_msgver: Kafka 3.x accepts the deprecated ``message.format.version`` (and
    ignores it); a topic created with it takes messages as any other."""
    topic = unique_topic("rk-msgver")
    create_topic(broker.bootstrap, topic, partitions=1, **{"message.format.version": "0.10.0"})
    produce_values(broker.bootstrap, topic, [b"a", b"b"])

    client = admin(broker.bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    described = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert described["message.format.version"].value == "0.10.0"

    bad = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "message.format.version",
                "not-a-version",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    with pytest.raises(KafkaException) as failure:
        client.incremental_alter_configs([bad])[bad].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.INVALID_CONFIG


INCREMENTAL_ALTER_CONFIGS = 44


async def _raw_request(bootstrap: str, api_key: int, version: int, data: dict) -> Any:
    """One request as Kafka's Java admin sends it (librdkafka, kafka-python and aiokafka
    refuse the empty broker resource name that means "every broker")."""
    host, port = bootstrap.rsplit(":", 1)
    client = BrokerClient(host, int(port), "compat-raw")
    try:
        return await client.request(api_key, version, data)
    finally:
        await client.close()


def _broker_config(zk_connect: str, entity: str) -> dict[str, str]:
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        data, _ = client.get(f"/config/brokers/{entity}")
        return dict(EntityConfig.from_json(data).config)
    finally:
        client.stop()
        client.close()


def test_dynamic_broker_configs_are_altered_per_broker_and_cluster_wide(broker, zk_connect):
    """0081 admin (broker configs): IncrementalAlterConfigs on a broker resource writes
    ``/config/brokers/<id>``, AlterConfigs on the resource named "" (kafka-python; librdkafka
    refuses an empty name) writes ``<default>``; DescribeConfigs shows each value with its
    dynamic source, and a static key is refused with INVALID_CONFIG naming it."""
    client = admin(broker.bootstrap)
    this_broker = ConfigResource(
        ResourceType.BROKER,
        str(broker.broker_id),
        incremental_configs=[
            ConfigEntry(
                "leader.replication.throttled.rate",
                "1048576",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    assert client.incremental_alter_configs([this_broker])[this_broker].result(TIMEOUT) is None
    reply = asyncio.run(
        _raw_request(
            broker.bootstrap,
            INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": "",
                        "configs": [
                            {
                                "name": "follower.replication.throttled.rate",
                                "config_operation": 0,
                                "value": "2097152",
                            }
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
    )
    assert [result.error_code for result in reply.responses] == [0], reply

    assert _broker_config(zk_connect, str(broker.broker_id)) == {
        "leader.replication.throttled.rate": "1048576"
    }
    assert _broker_config(zk_connect, "<default>") == {
        "follower.replication.throttled.rate": "2097152"
    }
    resource = ConfigResource(ResourceType.BROKER, str(broker.broker_id))
    described = client.describe_configs([resource])[resource].result(TIMEOUT)
    leader = described["leader.replication.throttled.rate"]
    follower = described["follower.replication.throttled.rate"]
    assert (leader.value, leader.source) == ("1048576", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (follower.value, follower.source) == (
        "2097152",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert not leader.is_read_only
    assert described["log.retention.hours"].is_read_only

    static = ConfigResource(
        ResourceType.BROKER,
        str(broker.broker_id),
        incremental_configs=[
            ConfigEntry("log.retention.hours", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as failure:
        client.incremental_alter_configs([static])[static].result(TIMEOUT)
    assert failure.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "log.retention.hours" in failure.value.args[0].str()

    removal = ConfigResource(
        ResourceType.BROKER,
        str(broker.broker_id),
        incremental_configs=[
            ConfigEntry(
                "leader.replication.throttled.rate",
                None,
                incremental_operation=AlterConfigOpType.DELETE,
            )
        ],
    )
    assert client.incremental_alter_configs([removal])[removal].result(TIMEOUT) is None
    described = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert described["leader.replication.throttled.rate"].source == (
        ConfigSource.DEFAULT_CONFIG.value
    )


ALL_TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
ALL_CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}


def test_authorized_operations_are_reported_when_asked(broker):
    """0081 admin (DescribeCluster, DescribeTopics): with no authorizer Kafka reports every
    operation the resource type supports when the client asks, and none when it does not."""
    topic = unique_topic("rk-ops")
    create_topic(broker.bootstrap, topic, partitions=1)
    client = admin(broker.bootstrap)

    cluster = client.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    topics = client.describe_topics(
        confluent_kafka.TopicCollection([topic]), include_authorized_operations=True
    )
    described = topics[topic].result(TIMEOUT)
    plain = client.describe_cluster().result(TIMEOUT)

    assert set(cluster.authorized_operations) == ALL_CLUSTER_OPERATIONS
    assert set(described.authorized_operations) == ALL_TOPIC_OPERATIONS
    assert not plain.authorized_operations


def test_keyless_records_in_a_batch_to_a_compacted_topic_are_named(broker):
    """0011 produce_batch: a compacted topic refuses records without a key. Kafka fails the
    batch with INVALID_RECORD and names the bad records in ``record_errors`` (KIP-467), so
    librdkafka reports INVALID_RECORD for exactly those and _INVALID_DIFFERENT_RECORD for
    their batch mates (without ``record_errors`` all 100 got INVALID_RECORD)."""
    topic = unique_topic("rk-keyless")
    create_topic(broker.bootstrap, topic, partitions=1, **{"cleanup.policy": "compact"})
    client = producer(broker.bootstrap, **{"linger.ms": 500, "batch.num.messages": 1000})
    reports: dict[int, int | None] = {}

    def on_delivery(error, message) -> None:
        reports[int(message.value().split(b"-")[1])] = None if error is None else error.code()

    keyless = {i for i in range(100) if i % 10 == 3}
    for i in range(100):
        key = None if i in keyless else f"key-{i}".encode()
        client.produce(
            topic, key=key, value=f"value-{i}".encode(), partition=0, on_delivery=on_delivery
        )
    assert client.flush(TIMEOUT) == 0

    assert len(reports) == 100
    assert {i for i, code in reports.items() if code == KafkaError.INVALID_RECORD} == keyless
    assert {i for i, code in reports.items() if code == KafkaError._INVALID_DIFFERENT_RECORD} == (
        set(range(100)) - keyless
    )
    low, high = consumer(broker.bootstrap).get_watermark_offsets(TopicPartition(topic, 0), 10)
    assert (low, high) == (0, 0), "nothing of the refused batch may be stored"
