"""read_committed consumers of every client against a confluent-kafka transactional
producer: commit and abort interleaved across 6 partitions of 2 topics, then a transaction
left open. confluent-kafka, kafka-python and aiokafka consumers in read_committed see
exactly the committed records, in order, and stop at the last stable offset while the
transaction is open (kafka-python's end offsets under read_committed are the LSO);
read_uncommitted consumers see every record; once it commits, its records show."""

from __future__ import annotations

import asyncio
import time

import aiokafka
import kafka

from .broker_helpers import create_topic
from .txn_client_helpers import SINGLE_BROKER_PROPERTIES, read_all, transactional_producer

TOPICS = ("eos-a", "eos-b")
PARTITIONS = 3
Values = dict[tuple[str, int], list[bytes]]


def _kafka_python(bootstrap: str, isolation: str, expected: int) -> tuple[Values, dict]:
    """Everything kafka-python reads from offset 0 (until ``expected`` values came and
    3 s more passed), and its end offsets under ``isolation``."""
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
    )
    partitions = [kafka.TopicPartition(t, p) for t in TOPICS for p in range(PARTITIONS)]
    consumer.assign(partitions)
    consumer.seek_to_beginning()
    values: Values = {(t, p): [] for t in TOPICS for p in range(PARTITIONS)}
    deadline = time.monotonic() + 90
    settle = None
    try:
        while time.monotonic() < deadline:
            count = sum(len(v) for v in values.values())
            if count >= expected and settle is None:
                settle = time.monotonic() + 3
            if settle is not None and time.monotonic() > settle:
                break
            for tp, records in consumer.poll(timeout_ms=300).items():
                values[(tp.topic, tp.partition)].extend(r.value for r in records)
        ends = {(tp.topic, tp.partition): o for tp, o in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()
    return values, ends


def _aiokafka(bootstrap: str, isolation: str, expected: int) -> Values:
    async def run() -> Values:
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
        )
        await consumer.start()
        values: Values = {(t, p): [] for t in TOPICS for p in range(PARTITIONS)}
        try:
            consumer.assign(
                [aiokafka.TopicPartition(t, p) for t in TOPICS for p in range(PARTITIONS)]
            )
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 90
            settle = None
            while time.monotonic() < deadline:
                count = sum(len(v) for v in values.values())
                if count >= expected and settle is None:
                    settle = time.monotonic() + 3
                if settle is not None and time.monotonic() > settle:
                    break
                batches = await consumer.getmany(timeout_ms=300)
                for tp, records in batches.items():
                    values[(tp.topic, tp.partition)].extend(r.value for r in records)
        finally:
            await consumer.stop()
        return values

    return asyncio.run(run())


def _confluent(bootstrap: str, isolation: str) -> Values:
    values: Values = {}
    for topic in TOPICS:
        for partition, read in read_all(bootstrap, topic, PARTITIONS, isolation=isolation).items():
            values[(topic, partition)] = read
    return values


def test_read_committed_consumers_of_every_client(broker_factory) -> None:
    broker = broker_factory(timeout=90, **SINGLE_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    for topic in TOPICS:
        create_topic(bootstrap, topic, partitions=PARTITIONS)
    producer = transactional_producer(bootstrap, "eos-consumers")
    producer.init_transactions(60)
    keys = [(t, p) for t in TOPICS for p in range(PARTITIONS)]
    committed: Values = {key: [] for key in keys}
    written: Values = {key: [] for key in keys}
    for number in range(6):
        commit = number % 2 == 0
        producer.begin_transaction()
        for topic, partition in keys:
            for i in range(3):
                value = f"{number}-{topic}-{partition}-{i}".encode()
                producer.produce(topic, value, partition=partition)
                written[(topic, partition)].append(value)
                if commit:
                    committed[(topic, partition)].append(value)
        if commit:
            producer.commit_transaction(60)
        else:
            assert producer.flush(60) == 0  # so that the aborted records are in the log
            producer.abort_transaction(60)
    # A transaction left open: its records are in the log, not yet decided.
    producer.begin_transaction()
    pending: Values = {key: [] for key in keys}
    for topic, partition in keys:
        value = f"open-{topic}-{partition}".encode()
        producer.produce(topic, value, partition=partition)
        pending[(topic, partition)].append(value)
    assert producer.flush(60) == 0
    total_committed = sum(len(v) for v in committed.values())
    everything = {key: written[key] + pending[key] for key in keys}

    assert _confluent(bootstrap, "read_committed") == committed
    kafka_python, lso = _kafka_python(bootstrap, "read_committed", total_committed)
    assert kafka_python == committed
    assert _aiokafka(bootstrap, "read_committed", total_committed) == committed
    # Each partition: 3 committed transactions of 3 records + 3 markers, 3 aborted of
    # 3 + 3 markers; the open transaction starts at 24 and holds the LSO there.
    assert set(lso.values()) == {24}
    assert _confluent(bootstrap, "read_uncommitted") == everything
    assert _kafka_python(bootstrap, "read_uncommitted", 25 * len(keys) - 6 * len(keys))[0] == (
        everything
    )

    producer.commit_transaction(60)
    after = {key: committed[key] + pending[key] for key in keys}
    assert _confluent(bootstrap, "read_committed") == after
    assert _aiokafka(bootstrap, "read_committed", total_committed + len(keys)) == after
    assert set(
        _kafka_python(bootstrap, "read_committed", total_committed + len(keys))[1].values()
    ) == {26}
