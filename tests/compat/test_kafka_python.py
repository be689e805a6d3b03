"""kafka-python against Gregor.

Topics come from ``KafkaAdminClient`` and from auto-creation; consumers have
``group_id=None`` and are positioned with assign and seek, so nothing here depends on
consumer groups. API versions are negotiated (no ``api_version`` given). Producers keep
kafka-python 3's defaults, so they are idempotent (KIP-679: InitProducerId first, then
acks=all with sequence numbers).
"""

from __future__ import annotations

import time
import warnings

with warnings.catch_warnings():
    # kafka-python loads its protocol schemas through importlib.resources' legacy API at
    # import time; those hundreds of DeprecationWarnings say nothing about Gregor.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

from .expectations import (
    CODECS,
    MESSAGES_PER_PARTITION,
    PARTITIONS,
    Message,
    OffsetLookups,
    Received,
    assert_partition_round_trip,
    by_partition,
    message_set,
    unique_topic,
)

TIMEOUT = 20


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    # The client waits longer than the broker: a broker that times out answers why.
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000 + 5000)
    try:
        admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            timeout_ms=TIMEOUT * 1000,
        )
        described = admin.describe_topics([topic])
    finally:
        admin.close()
    assert [
        (t["name"], t["error_code"], sorted(p["partition_index"] for p in t["partitions"]))
        for t in described
    ] == [(topic, 0, list(range(partitions)))]


def produce(bootstrap: str, topic: str, messages: list[Message], **config) -> list[tuple]:
    """One producer per codec; returns (partition, offset) of every acknowledged message."""
    acknowledged = []
    for codec in CODECS:
        batch = [message for message in messages if message.codec == codec]
        if not batch:
            continue
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
            **config,
        )
        try:
            futures = [
                producer.send(
                    topic,
                    key=message.key,
                    value=message.value,
                    partition=message.partition,
                    headers=list(message.headers),
                    timestamp_ms=message.timestamp,
                )
                for message in batch
            ]
            producer.flush(TIMEOUT)
            for future in futures:
                metadata = future.get(TIMEOUT)
                acknowledged.append((metadata.partition, metadata.offset))
        finally:
            producer.close(TIMEOUT)
    return acknowledged


def consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
        request_timeout_ms=TIMEOUT * 1000 + 5000,
    )


def consume(client: KafkaConsumer, starts: dict[TopicPartition, int], count: int) -> list:
    """Assign, seek every partition to its start offset, poll until ``count`` records."""
    client.assign(list(starts))
    for partition, offset in starts.items():
        client.seek(partition, offset)
    records: list[Received] = []
    deadline = time.monotonic() + TIMEOUT
    while len(records) < count and time.monotonic() < deadline:
        for batch in client.poll(timeout_ms=500).values():
            records += [to_received(record) for record in batch]
    for batch in client.poll(timeout_ms=200).values():
        records += [to_received(record) for record in batch]
    return records


def to_received(record) -> Received:
    return Received(
        partition=record.partition,
        offset=record.offset,
        key=record.key,
        value=record.value,
        headers=tuple(record.headers),
        timestamp=record.timestamp,
    )


def test_keyed_messages_with_headers_round_trip_under_every_codec(broker):
    topic = unique_topic("kp-codecs")
    create_topic(broker.bootstrap, topic)
    messages = message_set()

    acknowledged = produce(broker.bootstrap, topic, messages)
    client = consumer(broker.bootstrap)
    try:
        records = consume(
            client,
            {TopicPartition(topic, p): 0 for p in range(PARTITIONS)},
            PARTITIONS * MESSAGES_PER_PARTITION,
        )
    finally:
        client.close()

    assert_partition_round_trip(by_partition(messages), records)
    for partition in range(PARTITIONS):
        offsets = [offset for p, offset in acknowledged if p == partition]
        assert offsets == list(range(MESSAGES_PER_PARTITION))


def test_seek_to_a_middle_offset_returns_the_rest_of_each_partition(broker):
    topic = unique_topic("kp-seek")
    create_topic(broker.bootstrap, topic)
    messages = message_set()
    produce(broker.bootstrap, topic, messages)
    middle = MESSAGES_PER_PARTITION // 2

    client = consumer(broker.bootstrap)
    try:
        records = consume(
            client,
            {TopicPartition(topic, p): middle for p in range(PARTITIONS)},
            PARTITIONS * (MESSAGES_PER_PARTITION - middle),
        )
    finally:
        client.close()

    assert_partition_round_trip(
        by_partition(messages), records, start_offsets=dict.fromkeys(range(PARTITIONS), middle)
    )


def test_offsets_for_times_and_beginning_and_end_offsets_match_the_log(broker):
    topic = unique_topic("kp-times")
    create_topic(broker.bootstrap, topic)
    messages = message_set()
    produce(broker.bootstrap, topic, messages)
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    lookups = OffsetLookups(by_partition(messages), partitions, MESSAGES_PER_PARTITION // 2)

    client = consumer(broker.bootstrap)
    try:
        found = client.offsets_for_times(lookups.between)
        exact = client.offsets_for_times(lookups.exact)
        too_late = client.offsets_for_times(lookups.too_late)
        beginning = client.beginning_offsets(partitions)
        end = client.end_offsets(partitions)
        records = consume(
            client,
            {tp: found[tp].offset for tp in partitions},
            PARTITIONS * (MESSAGES_PER_PARTITION - lookups.middle),
        )
    finally:
        client.close()

    lookups.check(found, exact, too_late, beginning, end, records)


def test_producing_to_a_new_topic_auto_creates_it(broker):
    topic = unique_topic("kp-auto")
    messages = [m for m in message_set() if m.partition == 0 and m.codec in ("gzip", "zstd")]

    acknowledged = produce(broker.bootstrap, topic, messages)
    client = consumer(broker.bootstrap)
    try:
        partitions = client.partitions_for_topic(topic)
        records = consume(client, {TopicPartition(topic, 0): 0}, len(messages))
    finally:
        client.close()

    assert partitions == {0}  # num.partitions defaults to 1
    assert acknowledged == [(0, offset) for offset in range(len(messages))]
    assert_partition_round_trip({0: messages}, records)
