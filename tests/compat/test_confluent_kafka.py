"""confluent-kafka (the wheel's bundled librdkafka 2.16) against Gregor.

Covers the data path (every codec, keyed messages with headers and explicit timestamps,
consumption from the beginning, an offset and a timestamp), ListOffsets through watermarks,
and the admin API: topic creation, configs, partitions, deletion of topics and records, the
cluster description. Consumers use ``assign()`` with auto-commit off, so nothing here depends
on consumer groups. librdkafka insists on a ``group.id``; note that with one set its group
handle still looks up the coordinator (FindCoordinator v2) whenever the broker advertises
that API, even though nothing is ever committed.
"""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from .expectations import (
    CODECS,
    MESSAGES_PER_PARTITION,
    PARTITIONS,
    Message,
    Received,
    assert_partition_round_trip,
    by_partition,
    first_offset_at_or_after,
    message_set,
    unique_topic,
    wait_until,
)

TIMEOUT = 20


def admin(bootstrap: str) -> AdminClient:
    """An AdminClient whose metadata already names the controller.

    Gregor (like Kafka) registers ``/brokers/ids/<id>`` a moment before it wins the
    controller election, so its first Metadata answer can carry controller_id -1. librdkafka
    then waits for a controller without asking again and fails CreateTopics after its
    timeout ("Failed while waiting for controller"), so wait for the election first.
    """
    client = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(
        lambda: client.list_topics(timeout=TIMEOUT).controller_id >= 0,
        TIMEOUT,
        "a controller in the broker's metadata",
    )
    return client


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS, **configs) -> None:
    # Keep the client referenced until its futures resolve: a collected AdminClient fails
    # them with _DESTROY.
    client = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs)],
        operation_timeout=TIMEOUT,
        # Longer than the broker's wait: a broker that times out answers why.
        request_timeout=TIMEOUT + 5,
    )
    assert futures[topic].result(TIMEOUT + 10) is None


def producer(bootstrap: str, **config) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            # Fail within the test's time, not after librdkafka's 5-minute default.
            "message.timeout.ms": 15000,
            **config,
        }
    )


class Deliveries:
    """Delivery reports of one producer: (error, partition, offset) per message."""

    def __init__(self) -> None:
        self.reports: list[tuple[KafkaError | None, int, int]] = []

    def __call__(self, error, message) -> None:
        self.reports.append((error, message.partition(), message.offset()))

    @property
    def errors(self) -> list[KafkaError]:
        return [error for error, _, _ in self.reports if error is not None]


def produce(bootstrap: str, topic: str, messages: list[Message], **config) -> Deliveries:
    """One producer per codec, so every codec's messages go out as their own batches."""
    deliveries = Deliveries()
    for codec in CODECS:
        batch = [message for message in messages if message.codec == codec]
        if not batch:
            continue
        client = producer(bootstrap, **{"compression.type": codec, **config})
        for message in batch:
            client.produce(
                topic,
                key=message.key,
                value=message.value,
                partition=message.partition,
                headers=list(message.headers),
                timestamp=message.timestamp,
                on_delivery=deliveries,
            )
        assert client.flush(TIMEOUT) == 0, f"{codec}: messages still undelivered"
    assert deliveries.errors == [], f"delivery failed: {deliveries.errors}"
    return deliveries


def consumer(bootstrap: str, **config) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            # Required by librdkafka; unused: no subscribe(), no commits.
            "group.id": "compat-assign-only",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 50,
            "fetch.queue.backoff.ms": 1,
            **config,
        }
    )


def to_received(message) -> Received:
    _kind, timestamp = message.timestamp()
    return Received(
        partition=message.partition(),
        offset=message.offset(),
        key=message.key(),
        value=message.value(),
        headers=tuple(message.headers() or ()),
        timestamp=timestamp,
    )


def consume(client: Consumer, assignment: list[TopicPartition], count: int) -> list[Received]:
    """Assign, poll until ``count`` records arrived, then briefly more to catch extras."""
    client.assign(assignment)
    records: list[Received] = []
    deadline = time.monotonic() + TIMEOUT
    while len(records) < count and time.monotonic() < deadline:
        for message in client.consume(num_messages=count - len(records), timeout=0.5):
            assert message.error() is None, f"consumer error: {message.error()}"
            records.append(to_received(message))
    for message in client.consume(num_messages=10, timeout=0.2):
        records.append(to_received(message))
    return records


def test_keyed_messages_with_headers_round_trip_under_every_codec(broker):
    topic = unique_topic("ck-codecs")
    create_topic(broker.bootstrap, topic)
    messages = message_set()

    deliveries = produce(broker.bootstrap, topic, messages)
    client = consumer(broker.bootstrap)
    try:
        records = consume(
            client,
            [TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)],
            PARTITIONS * MESSAGES_PER_PARTITION,
        )
    finally:
        client.close()

    assert_partition_round_trip(by_partition(messages), records)
    # Each delivery report carries the offset the broker assigned: dense per partition.
    for partition in range(PARTITIONS):
        offsets = [offset for _, p, offset in deliveries.reports if p == partition]
        assert offsets == list(range(MESSAGES_PER_PARTITION))


def test_consuming_from_a_middle_offset_returns_the_rest_of_each_partition(broker):
    topic = unique_topic("ck-offset")
    create_topic(broker.bootstrap, topic)
    messages = message_set()
    produce(broker.bootstrap, topic, messages)
    middle = MESSAGES_PER_PARTITION // 2

    client = consumer(broker.bootstrap)
    try:
        records = consume(
            client,
            [TopicPartition(topic, p, middle) for p in range(PARTITIONS)],
            PARTITIONS * (MESSAGES_PER_PARTITION - middle),
        )
    finally:
        client.close()

    assert_partition_round_trip(
        by_partition(messages), records, start_offsets=dict.fromkeys(range(PARTITIONS), middle)
    )


def test_offsets_for_times_finds_the_first_offset_at_or_after_a_timestamp(broker):
    topic = unique_topic("ck-times")
    create_topic(broker.bootstrap, topic)
    messages = message_set()
    produce(broker.bootstrap, topic, messages)
    expected = by_partition(messages)
    middle = MESSAGES_PER_PARTITION // 2
    # Between two messages: the answer is the later one.
    targets = {p: expected[p][middle].timestamp - 1 for p in range(PARTITIONS)}

    client = consumer(broker.bootstrap)
    try:
        found = client.offsets_for_times(
            [TopicPartition(topic, p, ts) for p, ts in targets.items()], timeout=TIMEOUT
        )
        exact = client.offsets_for_times(
            [TopicPartition(topic, 0, expected[0][3].timestamp)], timeout=TIMEOUT
        )
        too_late = client.offsets_for_times(
            [TopicPartition(topic, 0, expected[0][-1].timestamp + 1)], timeout=TIMEOUT
        )
        records = consume(client, found, PARTITIONS * (MESSAGES_PER_PARTITION - middle))
    finally:
        client.close()

    assert {tp.partition: (tp.offset, tp.error) for tp in found} == {
        p: (first_offset_at_or_after(expected[p], ts), None) for p, ts in targets.items()
    }
    assert [tp.offset for tp in found] == [middle] * PARTITIONS
    assert exact[0].offset == 3
    assert too_late[0].offset == confluent_kafka.OFFSET_END  # -1: nothing at or after it
    assert_partition_round_trip(
        expected, records, start_offsets=dict.fromkeys(range(PARTITIONS), middle)
    )


def test_watermarks_are_log_start_offset_and_last_offset_plus_one(broker):
    topic = unique_topic("ck-watermarks")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, [m for m in message_set() if m.partition == 0])

    client = consumer(broker.bootstrap)
    try:
        written = client.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT, cached=False)
        empty = client.get_watermark_offsets(TopicPartition(topic, 1), TIMEOUT, cached=False)
    finally:
        client.close()

    assert written == (0, MESSAGES_PER_PARTITION)
    assert empty == (0, 0)


def test_topic_config_is_described_altered_incrementally_and_invalid_values_rejected(broker):
    topic = unique_topic("ck-configs")
    create_topic(broker.bootstrap, topic, partitions=1, **{"max.message.bytes": "200000"})
    client = admin(broker.bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, topic)

    def describe() -> dict:
        return client.describe_configs([resource], request_timeout=TIMEOUT)[resource].result()

    before = describe()
    altered = client.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.TOPIC,
                topic,
                incremental_configs=[
                    ConfigEntry(
                        "retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET
                    ),
                    ConfigEntry(
                        "max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE
                    ),
                ],
            )
        ],
        request_timeout=TIMEOUT,
    )
    for future in altered.values():
        assert future.result(TIMEOUT) is None
    after = describe()
    rejected = client.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.TOPIC,
                topic,
                incremental_configs=[
                    ConfigEntry(
                        "cleanup.policy", "shred", incremental_operation=AlterConfigOpType.SET
                    )
                ],
            )
        ],
        request_timeout=TIMEOUT,
    )
    with pytest.raises(KafkaException) as invalid:
        for future in rejected.values():
            future.result(TIMEOUT)
    unchanged = describe()

    assert before["max.message.bytes"].value == "200000"
    assert ConfigSource(before["max.message.bytes"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert before["retention.ms"].value == "604800000"
    assert before["retention.ms"].is_default
    assert after["retention.ms"].value == "3600000"
    assert ConfigSource(after["retention.ms"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert after["max.message.bytes"].value == "1048588"  # back to Kafka's default
    assert invalid.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert unchanged["cleanup.policy"].value == "delete"


def partition_count(bootstrap: str, topic: str) -> int:
    metadata = admin(bootstrap).list_topics(topic, timeout=TIMEOUT)
    return len(metadata.topics[topic].partitions)


def test_create_partitions_grows_a_topic_and_new_partitions_take_messages(broker):
    topic = unique_topic("ck-grow")
    create_topic(broker.bootstrap, topic, partitions=1)

    admin_client = admin(broker.bootstrap)
    futures = admin_client.create_partitions(
        [NewPartitions(topic, 3)], operation_timeout=TIMEOUT, request_timeout=TIMEOUT
    )
    assert futures[topic].result(TIMEOUT) is None
    wait_until(lambda: partition_count(broker.bootstrap, topic) == 3, TIMEOUT, "3 partitions")
    messages = [m for m in message_set() if m.partition == 2 and m.codec == "lz4"]
    deliveries = produce(broker.bootstrap, topic, messages)

    client = consumer(broker.bootstrap)
    try:
        records = consume(
            client, [TopicPartition(topic, 2, confluent_kafka.OFFSET_BEGINNING)], len(messages)
        )
    finally:
        client.close()

    assert [(p, offset) for _, p, offset in deliveries.reports] == [(2, 0), (2, 1)]
    assert_partition_round_trip({2: messages}, records)


def test_delete_topics_removes_the_topic_from_metadata(broker):
    topic = unique_topic("ck-delete")
    create_topic(broker.bootstrap, topic, partitions=2)
    client = admin(broker.bootstrap)
    assert topic in client.list_topics(timeout=TIMEOUT).topics

    futures = client.delete_topics([topic], operation_timeout=TIMEOUT, request_timeout=TIMEOUT)

    assert futures[topic].result(TIMEOUT) is None
    wait_until(
        lambda: topic not in client.list_topics(timeout=TIMEOUT).topics,
        TIMEOUT,
        f"{topic} to disappear from metadata",
    )


def test_delete_records_advances_the_log_start_offset(broker):
    topic = unique_topic("ck-delete-records")
    create_topic(broker.bootstrap, topic, partitions=1)
    messages = [m for m in message_set() if m.partition == 0]
    produce(broker.bootstrap, topic, messages)

    admin_client = admin(broker.bootstrap)
    futures = admin_client.delete_records(
        [TopicPartition(topic, 0, 4)], request_timeout=TIMEOUT, operation_timeout=TIMEOUT
    )
    deleted = next(iter(futures.values())).result(TIMEOUT)
    client = consumer(broker.bootstrap)
    try:
        watermarks = client.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT, cached=False)
        records = consume(
            client,
            [TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)],
            len(messages) - 4,
        )
    finally:
        client.close()

    assert deleted.low_watermark == 4
    assert watermarks == (4, len(messages))
    assert_partition_round_trip({0: messages}, records, start_offsets={0: 4})


def test_describe_cluster_reports_the_broker_and_controller(broker):
    client = admin(broker.bootstrap)
    result = client.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)

    host, port = broker.bootstrap.rsplit(":", 1)
    assert [(node.id, node.host, node.port) for node in result.nodes] == [
        (broker.broker_id, host, int(port))
    ]
    assert result.controller.id == broker.broker_id
    assert result.cluster_id


def test_producing_to_an_unknown_topic_fails_when_auto_creation_is_disabled(broker_factory):
    strict = broker_factory(**{"auto.create.topics.enable": "false"})
    topic = unique_topic("ck-unknown")
    client = producer(strict.bootstrap, **{"topic.metadata.propagation.max.ms": 1000})
    deliveries = Deliveries()

    client.produce(topic, key=b"k", value=b"v", on_delivery=deliveries)
    client.flush(TIMEOUT)
    metadata = client.list_topics(topic, timeout=TIMEOUT)

    assert [error.code() for error in deliveries.errors] in (
        [KafkaError.UNKNOWN_TOPIC_OR_PART],
        # librdkafka reports the broker's UNKNOWN_TOPIC_OR_PART as its local twin.
        [KafkaError._UNKNOWN_TOPIC],
    ), deliveries.reports
    assert metadata.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic not in admin(strict.bootstrap).list_topics(timeout=TIMEOUT).topics


def test_compacted_topic_rejects_a_record_without_a_key(broker):
    topic = unique_topic("ck-compact")
    create_topic(broker.bootstrap, topic, partitions=1, **{"cleanup.policy": "compact"})
    client = producer(broker.bootstrap, retries=0)
    keyless, keyed = Deliveries(), Deliveries()

    client.produce(topic, value=b"no key", partition=0, on_delivery=keyless)
    client.flush(TIMEOUT)
    client.produce(topic, key=b"k", value=b"keyed", partition=0, on_delivery=keyed)
    client.flush(TIMEOUT)

    assert [error.code() for error in keyless.errors] == [KafkaError.INVALID_RECORD]
    assert keyed.reports == [(None, 0, 0)]


def test_acks_zero_one_and_all_each_deliver(broker):
    topic = unique_topic("ck-acks")
    create_topic(broker.bootstrap, topic, partitions=1)
    produced = []
    reports = {}
    for acks in ("0", "1", "all"):
        deliveries = Deliveries()
        client = producer(broker.bootstrap, acks=acks)
        for index in range(3):
            key, value = f"acks-{acks}-{index}".encode(), f"value {index}".encode()
            client.produce(topic, key=key, value=value, partition=0, on_delivery=deliveries)
            produced.append((key, value))
        assert client.flush(TIMEOUT) == 0
        reports[acks] = deliveries.reports

    reader = consumer(broker.bootstrap)
    try:
        records = consume(
            reader, [TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)], len(produced)
        )
    finally:
        reader.close()

    # acks=0: the producer learns nothing back, so it reports no offset.
    assert [(error, p) for error, p, _ in reports["0"]] == [(None, 0)] * 3
    assert reports["1"] == [(None, 0, offset) for offset in (3, 4, 5)]
    assert reports["all"] == [(None, 0, offset) for offset in (6, 7, 8)]
    assert [(r.offset, r.key, r.value) for r in records] == [
        (offset, key, value) for offset, (key, value) in enumerate(produced)
    ]
