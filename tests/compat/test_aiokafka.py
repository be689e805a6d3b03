"""aiokafka against Gregor.

Topics come from ``AIOKafkaAdminClient`` and from auto-creation; consumers have
``group_id=None`` and are positioned with assign and seek, so nothing here depends on
consumer groups. API versions are negotiated (``api_version="auto"``, the default). Each
test drives its coroutine with ``asyncio.run`` (no asyncio pytest plugin needed).
"""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

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


async def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    # The client waits longer than the broker: a broker that times out answers why.
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000 + 5000
    )
    await admin.start()
    try:
        # Like Kafka, a broker registers before it wins the controller election, so a client
        # this early may see controller_id -1; aiokafka's admin client would then crash on
        # ``cluster.controller.nodeId`` instead of retrying, so wait for the election.
        deadline = time.monotonic() + TIMEOUT
        while (await admin.describe_cluster())["controller_id"] < 0:
            assert time.monotonic() < deadline, "no controller in metadata"
            await asyncio.sleep(0.1)
        response = await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            timeout_ms=TIMEOUT * 1000,
        )
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    assert [(t["topic"], t["error_code"]) for t in response.to_object()["topic_errors"]] == [
        (topic, 0)
    ]
    assert [
        (t["topic"], t["error_code"], sorted(p["partition"] for p in t["partitions"]))
        for t in described
    ] == [(topic, 0, list(range(partitions)))]


async def produce(bootstrap: str, topic: str, messages: list[Message]) -> list[tuple]:
    """One producer per codec; returns (partition, offset) of every acknowledged message."""
    acknowledged = []
    for codec in CODECS:
        batch = [message for message in messages if message.codec == codec]
        if not batch:
            continue
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
            request_timeout_ms=TIMEOUT * 1000,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    topic,
                    key=message.key,
                    value=message.value,
                    partition=message.partition,
                    headers=list(message.headers),
                    timestamp_ms=message.timestamp,
                )
                for message in batch
            ]
            for metadata in await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT):
                acknowledged.append((metadata.partition, metadata.offset))
        finally:
            await producer.stop()
    return acknowledged


def consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
        request_timeout_ms=TIMEOUT * 1000 + 5000,
    )


async def consume(
    client: AIOKafkaConsumer, starts: dict[TopicPartition, int], count: int
) -> list[Received]:
    """Assign, seek every partition to its start offset, fetch until ``count`` records."""
    client.assign(list(starts))
    for partition, offset in starts.items():
        client.seek(partition, offset)
    records: list[Received] = []
    deadline = time.monotonic() + TIMEOUT
    while len(records) < count and time.monotonic() < deadline:
        for batch in (await client.getmany(timeout_ms=500)).values():
            records += [to_received(record) for record in batch]
    for batch in (await client.getmany(timeout_ms=200)).values():
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
    topic = unique_topic("aio-codecs")
    messages = message_set()

    async def scenario():
        await create_topic(broker.bootstrap, topic)
        acknowledged = await produce(broker.bootstrap, topic, messages)
        client = consumer(broker.bootstrap)
        await client.start()
        try:
            records = await consume(
                client,
                {TopicPartition(topic, p): 0 for p in range(PARTITIONS)},
                PARTITIONS * MESSAGES_PER_PARTITION,
            )
        finally:
            await client.stop()
        return acknowledged, records

    acknowledged, records = asyncio.run(scenario())

    assert_partition_round_trip(by_partition(messages), records)
    for partition in range(PARTITIONS):
        offsets = [offset for p, offset in acknowledged if p == partition]
        assert offsets == list(range(MESSAGES_PER_PARTITION))


def test_seek_to_a_middle_offset_returns_the_rest_of_each_partition(broker):
    topic = unique_topic("aio-seek")
    messages = message_set()
    middle = MESSAGES_PER_PARTITION // 2

    async def scenario():
        await create_topic(broker.bootstrap, topic)
        await produce(broker.bootstrap, topic, messages)
        client = consumer(broker.bootstrap)
        await client.start()
        try:
            return await consume(
                client,
                {TopicPartition(topic, p): middle for p in range(PARTITIONS)},
                PARTITIONS * (MESSAGES_PER_PARTITION - middle),
            )
        finally:
            await client.stop()

    records = asyncio.run(scenario())

    assert_partition_round_trip(
        by_partition(messages), records, start_offsets=dict.fromkeys(range(PARTITIONS), middle)
    )


def test_offsets_for_times_and_beginning_and_end_offsets_match_the_log(broker):
    topic = unique_topic("aio-times")
    messages = message_set()
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    lookups = OffsetLookups(by_partition(messages), partitions, MESSAGES_PER_PARTITION // 2)

    async def scenario():
        await create_topic(broker.bootstrap, topic)
        await produce(broker.bootstrap, topic, messages)
        client = consumer(broker.bootstrap)
        await client.start()
        try:
            found = await client.offsets_for_times(lookups.between)
            exact = await client.offsets_for_times(lookups.exact)
            too_late = await client.offsets_for_times(lookups.too_late)
            beginning = await client.beginning_offsets(partitions)
            end = await client.end_offsets(partitions)
            records = await consume(
                client,
                {tp: found[tp].offset for tp in partitions},
                PARTITIONS * (MESSAGES_PER_PARTITION - lookups.middle),
            )
        finally:
            await client.stop()
        return found, exact, too_late, beginning, end, records

    lookups.check(*asyncio.run(scenario()))


def test_producing_to_a_new_topic_auto_creates_it(broker):
    topic = unique_topic("aio-auto")
    messages = [m for m in message_set() if m.partition == 0 and m.codec in ("snappy", "lz4")]

    async def scenario():
        acknowledged = await produce(broker.bootstrap, topic, messages)
        client = consumer(broker.bootstrap)
        await client.start()
        try:
            records = await consume(client, {TopicPartition(topic, 0): 0}, len(messages))
            # Cached metadata, complete once the assignment made the consumer fetch it.
            partitions = client.partitions_for_topic(topic)
        finally:
            await client.stop()
        return acknowledged, partitions, records

    acknowledged, partitions, records = asyncio.run(scenario())

    assert partitions == {0}  # num.partitions defaults to 1
    assert acknowledged == [(0, offset) for offset in range(len(messages))]
    assert_partition_round_trip({0: messages}, records)
